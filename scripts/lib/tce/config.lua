-- The tce machine's settings: [agent.tce] in config, over the original agent's shipped
-- defaults (think_log 4 entries, evaluation_log 1, command_log 1, all on; paging off at
-- 1024 estimated tokens).
--
--   [agent.tce]
--   storage = "tce"                        # moss.store name: .moss/agent/store/tce.json
--   think_log = { enable = true, max_entries = 4, key_prefix = "think_log_" }
--   evaluation_log = { enable = true, max_entries = 1, key_prefix = "evaluation_log_" }
--   command_log = { enable = true, max_entries = 1, key_prefix = "command_log_" }
--   paging_limit = { enable = false, max_tokens = 1024 }
local M = {}

M.DEFAULTS = {
  storage = "tce",
  think_log = { enable = true, max_entries = 4, key_prefix = "think_log_" },
  evaluation_log = { enable = true, max_entries = 1, key_prefix = "evaluation_log_" },
  command_log = { enable = true, max_entries = 1, key_prefix = "command_log_" },
  paging_limit = { enable = false, max_tokens = 1024 },
}

--- The original's `enable` rule: true, "true" or a non-zero number is on; unset keeps the default.
function M.enabled(v, default)
  if v == nil then return default end
  if type(v) == "boolean" then return v end
  if type(v) == "number" then return v ~= 0 end
  if type(v) == "string" then
    if v:lower() == "true" then return true end
    local n = tonumber(v)
    return n ~= nil and n ~= 0
  end
  return default
end

local function int(v, default, lo, hi)
  v = tonumber(v)
  if not v then return default end
  v = math.floor(v)
  if v < lo then return lo end
  if v > hi then return hi end
  return v
end

local function log_cfg(name, t)
  local d = M.DEFAULTS[name]
  t = type(t) == "table" and t or {}
  local prefix = type(t.key_prefix) == "string" and t.key_prefix ~= "" and t.key_prefix or d.key_prefix
  return {
    name = name,
    enable = M.enabled(t.enable, d.enable),
    max_entries = int(t.max_entries, d.max_entries, 1, 999), -- the index is 3 digits
    key_prefix = prefix,
  }
end

--- The effective settings (a fresh table each call, so config edits between runs apply).
function M.get()
  local t = ((moss.config or {}).agent or {}).tce
  t = type(t) == "table" and t or {}
  local pl = type(t.paging_limit) == "table" and t.paging_limit or {}
  return {
    storage = type(t.storage) == "string" and t.storage ~= "" and t.storage or M.DEFAULTS.storage,
    think_log = log_cfg("think_log", t.think_log),
    evaluation_log = log_cfg("evaluation_log", t.evaluation_log),
    command_log = log_cfg("command_log", t.command_log),
    paging_limit = {
      enable = M.enabled(pl.enable, M.DEFAULTS.paging_limit.enable),
      max_tokens = int(pl.max_tokens, M.DEFAULTS.paging_limit.max_tokens, 1, math.maxinteger),
    },
  }
end

return M

-- Rotating logs in working memory (think_log, evaluation_log, command_log), as the original:
-- entries live under key_prefix .. 3-digit index (think_log_001 ...). The next slot is one
-- past the highest index 1..max_entries holding a non-empty value; past max_entries every
-- entry shifts down one (i+1 -> i) and the new one goes into the last slot, so the oldest
-- is dropped first.
local M = {}

--- The states whose turns write each log (paging archives under "archive,<state>").
M.STATE = { think_log = "thinking", evaluation_log = "evaluating", command_log = "commanding" }
M.NAMES = { "think_log", "evaluation_log", "command_log" }

function M.key(cfg, i) return cfg.key_prefix .. ("%03d"):format(i) end

local function filled(v) return v ~= nil and v ~= "" end

--- Append `text` to the log described by cfg {enable, max_entries, key_prefix}; the key used.
function M.add(wm, cfg, text)
  if not cfg.enable or text == nil or text == "" then return nil end
  local high = 0
  for i = 1, cfg.max_entries do
    if filled(wm[M.key(cfg, i)]) then high = i end
  end
  local slot = high + 1
  if slot > cfg.max_entries then
    for i = 1, cfg.max_entries - 1 do wm[M.key(cfg, i)] = wm[M.key(cfg, i + 1)] end
    slot = cfg.max_entries
  end
  wm[M.key(cfg, slot)] = text
  return M.key(cfg, slot)
end

--- The entries of a log, oldest first: { {key=, value=, index=}, ... }.
function M.entries(wm, cfg)
  local out = {}
  for i = 1, cfg.max_entries do
    local k = M.key(cfg, i)
    if filled(wm[k]) then out[#out + 1] = { key = k, value = wm[k], index = i } end
  end
  return out
end

--- Renumber what is left from 001, keeping the order (after entries were paged out).
function M.compact(wm, cfg)
  local left = M.entries(wm, cfg)
  for _, e in ipairs(left) do wm[e.key] = nil end
  for i, e in ipairs(left) do wm[M.key(cfg, i)] = e.value end
end

return M

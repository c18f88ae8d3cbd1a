-- What an [agent] setting is when no config file sets it: `moss config get KEY` shows this
-- (and says it is the default). The values are the ones scripts/agent.lua and the machines
-- fall back to; a project that overrides those scripts can override this file alongside.
local M = {}

local function machine_of(config)
  return ((config or {}).agent or {}).machine or "v1"
end

M.settings = {
  ["agent.machine"] = function() return "v1", "the freeform loop; --v2 or --machine NAME choose another" end,
  ["agent.max_turns"] = function(config)
    local name = machine_of(config)
    local ok, m = pcall(require, "machines." .. name)
    if ok and type(m) == "table" and m.max_turns then
      return m.max_turns, "the " .. name .. " machine's; each machine has its own"
    end
    return 15, "when the machine names none"
  end,
  ["agent.role"] = function() return "explorer", "--audit, --refactor or --role NAME choose another" end,
  ["agent.auto_approve"] = function() return "low", "edits of higher risk ask first" end,
  ["agent.validate_on"] = function() return "edit", "when validation is configured" end,
}

--- (value, why) of the default of `key` (dotted), or nil when it has none.
function M.get(config, key)
  local f = M.settings[key]
  if f then return f(config) end
  return nil
end

return M

-- System prompts: the role's text for a state, plus a reference of exactly the commands
-- that state may use, plus the role's answer format where the state concludes.
local commands = require("lib.agent.commands")

local M = {}

--- The command names a state may use, with "tools" expanded to the role's tools.
function M.allowed(state, role)
  local out = {}
  for _, name in ipairs(state.commands or {}) do
    if name == "tools" then
      for _, t in ipairs(role.commands or {}) do out[#out + 1] = t end
    else
      out[#out + 1] = name
    end
  end
  return out
end

function M.reference(names)
  local lines = {}
  for _, name in ipairs(names) do
    local def = commands.defs[name]
    if def and def.help then lines[#lines + 1] = "$(" .. def.help:gsub(" — ", ") — ", 1) end
  end
  return table.concat(lines, "\n")
end

function M.system(role, state_name, state)
  local text = role.prompts[state_name]
  if not text then
    moss.error("usage", "role '" .. role.name .. "' has no prompt for state '" .. state_name .. "'")
  end
  local parts = { text }
  local names = M.allowed(state, role)
  if #names > 0 then
    parts[#parts + 1] = "Commands you can use (write them as $(name args); several per reply are fine):\n" ..
      M.reference(names)
  end
  if state.concludes and role.answer_format then
    parts[#parts + 1] = "When you answer: " .. role.answer_format
  end
  return table.concat(parts, "\n\n")
end

return M

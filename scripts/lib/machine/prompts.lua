-- System prompts: the role's text for a state, plus a reference of exactly the commands
-- that state may use, plus the role's answer format where the state concludes.
local commands = require("lib.machine.commands")

local M = {}

M.allowed = commands.allowed
M.reference = commands.reference

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

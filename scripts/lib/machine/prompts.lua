-- System prompts: the role's text for a state, plus a reference of exactly the commands
-- that state may use, plus the role's answer format where the state concludes.
local commands = require("lib.machine.commands")

local M = {}

M.allowed = commands.allowed
M.reference = commands.reference

local function role_text(role, state_name)
  local text = role.prompts[state_name]
  if not text then
    moss.error("usage", "role '" .. role.name .. "' has no prompt for state '" .. state_name .. "'")
  end
  return text
end

local function command_list(role, state, who)
  local names = M.allowed(state, role)
  if #names == 0 then return nil end
  return "Commands you can use" .. (who and (" as the " .. who) or "") ..
    " (write them as $(name args); several per reply are fine):\n" .. M.reference(names)
end

function M.system(role, state_name, state)
  local parts = { role_text(role, state_name) }
  parts[#parts + 1] = command_list(role, state)
  if state.concludes and role.answer_format then
    parts[#parts + 1] = "When you answer: " .. role.answer_format
  end
  return table.concat(parts, "\n\n")
end

--- One system prompt for several states of a machine (`machine.shared_system`, a list of
-- state names): each state's text and commands under its own heading. The states' calls
-- then start with the same bytes, so a provider's prompt cache serves them all; the last
-- block of each user message says which state is speaking.
function M.shared(role, machine)
  local names = machine.shared_system
  local upper = {}
  for i, name in ipairs(names) do upper[i] = name:upper() end
  local parts = { "You are one coding agent working in turns, as " .. table.concat(upper, " and ") ..
    ". The end of each message says which of them you are now: follow that one's rules " ..
    "and use only its commands." }
  local answer
  for i, name in ipairs(names) do
    local state = machine.states[name]
    parts[#parts + 1] = "## As the " .. upper[i] .. "\n\n" ..
      role_text(role, state.role_prompt or name)
    parts[#parts + 1] = command_list(role, state, upper[i])
    if state.concludes and role.answer_format then answer = role.answer_format end
  end
  if answer then parts[#parts + 1] = "When you answer: " .. answer end
  return table.concat(parts, "\n\n")
end

--- Whether `state_name` of `machine` uses the machine's shared system prompt.
function M.is_shared(machine, state_name)
  for _, name in ipairs(machine.shared_system or {}) do
    if name == state_name then return not machine.states[name].prompt end
  end
  return false
end

return M

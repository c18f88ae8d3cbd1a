-- System prompts: the role's text for a state, plus a reference of exactly the commands
-- that state may use, plus the role's answer format where the state concludes.
--
-- A role's prompts are keyed by machine, with a default:
--   prompts = { default = { planner = "..." }, v1 = { agent = "..." }, v2 = { explorer = "...", ... } }
-- The text for state NAME of machine M is prompts[M][NAME], else prompts.default[NAME]; a
-- state copied from another machine (its `prompts_of = "v2"`) also finds prompts.v2[NAME];
-- failing all that, any machine's text for a state of that name (sorted by machine).
-- A flat table (prompts = { agent = "...", explorer = "..." }) still reads as the default.
local commands = require("lib.machine.commands")

local M = {}

M.allowed = commands.allowed
M.reference = commands.reference

--- The role's text for state `state_name` of `machine` (see above); nil when it has none.
function M.role_text(role, state_name, state, machine)
  local p = role.prompts or {}
  local function from(key)
    local t = key and p[key]
    return type(t) == "table" and t[state_name] or nil
  end
  local text = from(machine and machine.name) or from(state and state.prompts_of) or from("default")
  if text == nil and type(p[state_name]) == "string" then text = p[state_name] end -- a flat table
  if text == nil then
    -- a project machine naming a state like one of another machine's: that machine's text
    local keys = {}
    for k, t in pairs(p) do if type(t) == "table" then keys[#keys + 1] = k end end
    table.sort(keys)
    for _, k in ipairs(keys) do text = text or from(k) end
  end
  return text
end

local function role_text(role, state_name, state, machine)
  local text = M.role_text(role, state_name, state, machine)
  if not text then
    moss.error("usage", "role '" .. tostring(role.name) .. "' has no prompt for state '" .. state_name .. "'" ..
      (machine and machine.name and (" of machine '" .. machine.name .. "'") or ""))
  end
  -- `prompt_extra`: a paragraph under every prompt of the role (what a role that extends
  -- another adds without copying its prompts, lib/machine/extend.lua)
  if type(role.prompt_extra) == "string" and role.prompt_extra ~= "" then
    text = text .. "\n\n" .. role.prompt_extra
  end
  return text
end

local function command_list(role, state, who, machine)
  local names = M.allowed(state, role, machine)
  if #names == 0 then return nil end
  return "Commands you can use" .. (who and (" as the " .. who) or "") ..
    " (write them as $(name args); several per reply are fine):\n" .. M.reference(names)
end

function M.system(role, state_name, state, machine)
  local parts = { role_text(role, state_name, state, machine) }
  parts[#parts + 1] = command_list(role, state, nil, machine)
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
      role_text(role, state.role_prompt or name, state, machine)
    parts[#parts + 1] = command_list(role, state, upper[i], machine)
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

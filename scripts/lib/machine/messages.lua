-- Messages from moss to the model: refusals, validation reports, "The user says: ..." on
-- --resume. Each state has its own list (S.messages[state]), shown on that state's next
-- turn and then cleared. Every machine shows them with `block`, so they read the same.
local M = {}

-- The block's title (tests read it here instead of copying the words)
M.HEADING = "Messages from moss"

--- Add a message for the current state (or `state`).
function M.say(S, msg, state)
  state = state or S.state
  S.messages = S.messages or moss.dict()
  local box = S.messages[state] or {}
  box[#box + 1] = msg
  S.messages[state] = box
end

--- The current state's messages (a list, possibly empty).
function M.list(S)
  return (S.messages and S.messages[S.state]) or {}
end

--- The "Messages from moss" block for the current state, plus `extra` lines; nil when
-- empty. `style = "xml"` writes it as <messages_from_moss> for tag-driven machines.
function M.block(S, extra, style)
  local lines = {}
  for _, m in ipairs(S and M.list(S) or {}) do lines[#lines + 1] = "- " .. m end
  for _, m in ipairs(extra or {}) do lines[#lines + 1] = "- " .. m end
  if #lines == 0 then return nil end
  if style == "xml" then
    return "<messages_from_moss>\n" .. table.concat(lines, "\n") .. "\n</messages_from_moss>"
  end
  return "**" .. M.HEADING .. ":**\n" .. table.concat(lines, "\n")
end

--- Forget the current state's messages (they were shown).
function M.clear(S)
  if S.messages then S.messages[S.state] = nil end
end

--- Move the current state's messages to state `to` (a state that hands over the turn).
function M.forward(S, to)
  local box = M.list(S)
  if #box == 0 or to == S.state then return end
  for _, m in ipairs(box) do M.say(S, m, to) end
  M.clear(S)
end

--- A checkpoint written before messages had their name (S.inbox) reads the same.
function M.upgrade(S)
  if S.inbox and not S.messages then S.messages, S.inbox = S.inbox, nil end
  S.messages = S.messages or moss.dict()
end

return M

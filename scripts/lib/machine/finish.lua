-- The one way a session ends: `finish.now(reason, answer, extra)` throws a finish, and the
-- runner (lib/machine/runner.lua) catches it once, between its steps, and closes the session:
-- S.reason = reason, S.answer = answer, every field of `extra` copied onto S (detail,
-- questions, progress, forced, ...). Reasons map to exit statuses in lib/machine/output.lua
-- (a machine adds its own as MACHINE.reasons).
--
-- Anything the runner calls between two model calls may finish: a state's `handle`, a
-- command's `run` (not a tool's: a tool's errors become its output), a hook. The older
-- shapes still finish too, because the runner turns them into a throw at one place:
--   a verdict { finished = reason, answer = ..., extra = {...} } or { answer = text }
--   a hook that returns a reason (before_turn, after_turn)
local M = {}

local FINISH = {}
FINISH.__index = FINISH
FINISH.__tostring = function(f) return "session finished: " .. tostring(f.reason) end

--- End the session now with `reason` (and the answer it ended with, and fields for S).
function M.now(reason, answer, extra)
  if type(reason) ~= "string" or reason == "" then
    moss.error("usage", "a session finishes with a reason (a string such as \"answered\"), not " .. tostring(reason))
  end
  error(setmetatable({ reason = reason, answer = answer, extra = extra }, FINISH), 0)
end

--- Whether an error value is a finish (and not a real error).
function M.is(e) return getmetatable(e) == FINISH end

--- A verdict that ends the session finishes it; any other verdict is returned as it is.
-- { finished = reason, answer?, extra? } ends with that reason; { answer = text } answers.
function M.verdict(v)
  if type(v) ~= "table" then
    moss.error("usage", "a state's handle must return a verdict table ({ outputs = {...} }, " ..
      "{ answer = text } or { finished = reason }), not " .. type(v))
  end
  if v.finished then M.now(v.finished, v.answer, v.extra) end
  if v.answer then M.now("answered", v.answer, v.extra) end
  return v
end

--- A hook's answer: a reason ends the session, nil (or false) goes on.
function M.unless(reason)
  if reason then M.now(reason) end
end

return M

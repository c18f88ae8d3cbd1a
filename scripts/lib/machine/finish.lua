-- How a session ends, in one shape: `finish.now(reason, answer, extra)` throws a finish, and
-- the runner (lib/machine/runner.lua) catches it once, between its steps, and closes the
-- session in its one place (`runner.close`): S.reason = reason, S.answer = answer, every
-- field of `extra` copied onto S (detail, questions, progress, forced, ...). Reasons map to
-- exit statuses in lib/machine/output.lua (a machine adds its own as MACHINE.reasons).
--
-- Anything the runner calls between two model calls may finish: a state's `handle`, a
-- command's `run` (not a tool's: a tool's errors become its output), a hook. There is no
-- other shape: a `handle`'s verdict or a command's result that carries `finished` (or a
-- handle's that carries `answer`) is a usage error naming this call, not a second way to end.
-- (The runner's hooks keep their declared results, runner.ENV: before_turn and after_turn
-- return a reason, which the runner finishes with.)
local M = {}

M.USAGE = 'require("lib.machine.finish").now(reason, answer, extra)'

local FINISH = {}
FINISH.__index = FINISH
FINISH.__tostring = function(f) return "session finished: " .. tostring(f.reason) end

--- End the session now with `reason` (and the answer it ended with, and fields for S).
function M.now(reason, answer, extra)
  if type(reason) ~= "string" or reason == "" then
    moss.error("usage", "a session finishes with a reason (a string such as \"answered\"), not " .. tostring(reason))
  end
  if extra ~= nil and type(extra) ~= "table" then
    moss.error("usage", "finish.now's extra is a table of fields for the session, not " .. type(extra))
  end
  error(setmetatable({ reason = reason, answer = answer, extra = extra }, FINISH), 0)
end

--- Whether an error value is a finish (and not a real error).
function M.is(e) return getmetatable(e) == FINISH end

--- A value returned where a finish was once accepted as data ({ finished = reason } from a
-- state's handle or a command, { answer = text } from a handle): a usage error saying how
-- a session ends now. `what` names who returned it ("command stop (PATH)").
function M.refuse_shape(what, v)
  local key = v.finished ~= nil and "finished" or "answer"
  local shown = type(v[key]) == "string" and ("%q"):format(v[key]:sub(1, 40)) or tostring(v[key])
  moss.error("usage", ("%s returned { %s = %s }: a session ends with %s, called where it ends " ..
    "(lib/machine/finish.lua)"):format(what, key, shown, M.USAGE), 0)
end

return M

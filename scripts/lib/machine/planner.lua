-- The planner state, shared by machines: it sees only the task, runs nothing, and its
-- reply becomes S.plan, which later states show. `planner("explorer")` hands over to it.
local parser = require("lib.machine.parser")

return function(next_state)
  return {
    role_prompt = "planner",
    context = "task_only",
    commands = {},
    next = next_state,
    on_response = function(S, text) S.plan = parser.strip(text) end,
    footer = "Write a short plan (2-4 concrete steps). Do not run commands.",
  }
end

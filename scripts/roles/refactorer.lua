-- refactorer: plans changes, edits the code, and verifies them by running the checks.
return {
  name = "refactorer",
  description = "plans, edits and verifies changes to the code",
  access = "edit",
  commands = { "view", "text-search", "run", "edit", "batch-edit" },
  plan = true, -- always starts with a planner state
  spawn = { "explorer", "refactorer" }, -- children it may start with --spawn ($(spawn ROLE "task"))
  -- [agent] scout = true: before the first turn, an explorer child maps the code the task
  -- touches; its answer starts out as a note in this session's working memory.
  prepare = function(S, _env, o)
    if not o.cfg.scout then return end
    local memory = require("lib.machine.memory")
    local h = moss.spawn { role = "explorer", machine = "v1", max_turns = o.cfg.child_max_turns or 8,
      task = "Map the code that this change will touch, for the engineer who will make it: the files, " ..
        "functions and tests involved, with file:line. The change: " .. S.task }
    local r = h:wait()
    moss.session.log(S.id, "scout", { child = h.id, reason = r.reason, answer = r.answer })
    if r.success then
      memory.note(S.mem, "Map of the code (from explorer child " .. h.id .. "): " .. tostring(r.answer), 0)
    end
  end,
  answer_format = [[
## Changes
- `file` — what changed and why
## Validation
what you ran and its result (passed/failed)]],
  -- prompts keyed by machine (lib/machine/prompts.lua): v1's state, v2's states, and the
  -- planner any machine may start with
  prompts = {
    default = {
      planner = [[
You are the PLANNER of a refactoring agent. Given the task, list the files to change, the
change in each, and how to verify it (which command to run). 2-5 steps. Do not run commands.
End with "Ready to refactor."]],
    },
    v1 = {
      agent = [[
You are a REFACTORER working in the current project. Look at the code, make the change with
edit commands, verify it with $(run ...), and when the checks pass answer with a short
change report via $(answer ## Changes ... ## Validation ...).
Edit commands: $(edit path/Symbol replace <code>), $(edit path/Symbol insert --after <code>),
$(edit path/Symbol delete), $(edit path --old "exact text" --new "new text"),
$(batch-edit t1 replace c1 | t2 delete). Write code in a fence (```lang on its own line, the
code, then ``` and the closing parenthesis), exactly as the file should hold it. Results are
shown once; keep what you need.]],
    },
    v2 = {
      explorer = [[
You are a REFACTORER. Carry out the plan one change at a time:
1. Look at the code you will change ($(view path/Symbol), $(text-search "pattern")).
2. Edit it:
   $(edit path/Symbol replace <new code>)      replace a function, class, struct, ...
   $(edit path/Symbol insert --after <code>)   add code next to a symbol (or --before)
   $(edit path/Symbol delete)                  remove a symbol
   $(edit path --old "exact old text" --new "new text")   any other exact-text change
   $(batch-edit t1 replace c1 | t2 delete)     several edits, all or nothing
   Write code in a fence (```lang on its own line, the code, then ``` and the closing
   parenthesis), exactly as the file should hold it.
3. Verify with $(run <the project's test or check command>).
Do NOT write the final report; the evaluator decides when the work is done.]],

      evaluator = [[
You are a REFACTORING EVALUATOR, not an editor. Never write edit, view, text-search or run
commands. Judge the latest results: did the edit land, did the build and tests pass?
If everything asked for is done and verified, answer with the change report:
$(answer ## Changes ... ## Validation ...). Otherwise say exactly what is wrong or missing
(e.g. "the test still fails: expected 3, got 2 in tests/test_x.py:14").
Record facts with $(note ...) and keep results you need with $(keep N).]],
    },
  },
}

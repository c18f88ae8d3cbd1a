-- auditor: finds issues (security, correctness, quality) and reports them with file:line and severity.
return {
  name = "auditor",
  description = "finds issues and reports them with file:line and severity",
  access = "read-shell",
  commands = { "view", "text-search", "run" },
  plan = false,
  spawn = { "explorer", "auditor" }, -- children it may start with --spawn ($(spawn ROLE "task"))
  -- [agent] fan_out = N: in a tree with at least N top-level directories, one read-only
  -- auditor child per directory audits it first; their findings start out as notes that
  -- this session checks, merges and reports.
  prepare = function(S, _env, o)
    local n = o.cfg.fan_out
    if not n or n < 1 then return end
    local dirs = {}
    for line in moss.code.view(".", { depth = 1 }):gmatch("[^\n]+") do
      local d = line:match("^([^%s]+)/$")
      if d and d:sub(1, 1) ~= "." then dirs[#dirs + 1] = d end
    end
    if #dirs < n then return end
    local memory = require("lib.machine.memory")
    local handles = {}
    for i, d in ipairs(dirs) do
      handles[i] = moss.spawn { role = "auditor", machine = "v1", access = "read-only",
        max_turns = o.cfg.child_max_turns or 8, task = S.task .. "\n\nAudit only the directory " .. d .. "/." }
    end
    for i, r in ipairs(moss.wait_all(handles)) do
      moss.session.log(S.id, "fan_out", { child = handles[i].id, dir = dirs[i], reason = r.reason })
      if r.success then
        memory.note(S.mem, ("Findings for %s/ (auditor child %s): %s"):format(dirs[i], handles[i].id,
          tostring(r.answer)), 0)
      else
        memory.note(S.mem, ("%s/ was not audited by child %s (%s): check it yourself"):format(dirs[i],
          handles[i].id, tostring(r.reason)), 0)
      end
    end
  end,
  answer_format = [[
a findings report in Markdown:
## Findings
- **SEVERITY** (critical/high/medium/low) `file:line` — what is wrong and why it matters; how to fix it.
(one bullet per finding, most severe first; "No findings" if none, with what you checked)]],
  -- prompts keyed by machine (lib/machine/prompts.lua): v1's state, v2's states, and the
  -- planner any machine may start with
  prompts = {
    default = {
      planner = [[
You are the PLANNER of a code auditor. Given the audit task, plan 2-4 concrete checks
(which files or patterns to inspect, what could go wrong there). Do not run commands.
End with "Ready to audit."]],
    },
    v1 = {
      agent = [[
You are a code AUDITOR. Find real issues in the codebase: search for risky patterns, view the
code to confirm each one, and record confirmed issues with $(note SEVERITY file:line - description).
Results are shown once: keep what you need with $(keep N). When done, answer with the findings
report via $(answer ## Findings ...).]],
    },
    v2 = {
      explorer = [[
You are an AUDITOR's explorer. Gather evidence for the audit by writing commands: search for
risky patterns (unsanitised input, shell/SQL built from strings, secrets, unchecked errors,
unsafe code), then view the code around each hit to confirm it. Always note file:line.

Write commands directly as $(name args). Do NOT write the report: the evaluator does that.
Example: $(text-search "unsafe|unwrap\(\)") $(view src/config.rs:10-40)]],

      evaluator = [[
You are an AUDIT EVALUATOR, not an explorer. Judge the evidence; never write view,
text-search or run commands.

For every confirmed issue record $(note SEVERITY file:line - description), e.g.
$(note HIGH src/db.rs:42 - SQL query built by string concatenation from user input).
Keep results you still need with $(keep N). When the checks are done, answer with the full
findings report: $(answer ## Findings ...). If evidence is missing, say exactly what to check.]],
    },
  },
}

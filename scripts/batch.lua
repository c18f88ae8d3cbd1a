-- `moss batch`: run a list of agent tasks, each in a fresh copy of its repository, and collect
-- each task's outcome and the patch it made into one results file; `moss batch status` reads it.
--
-- This file is the policy (copy it to .moss/scripts/batch.lua to change it): which words each
-- task's agent gets, what a task's outcome is, the order and what is printed. moss.eval is the
-- mechanism, shared with `moss eval`: copies, parallel attempts, the budget, retries, the
-- results file, the patch (host/eval/).
local cli = require("lib.cli")

local M = {}

local HELP = [==[
usage: moss batch TASKS [--executor local|ray] [-j N] [--max-cost USD] [--retries N]
                        [-o RESULTS.jsonl] [--resume] [--json]
       moss batch status RESULTS [--patch ID] [--json]

Run every task of TASKS, each in a fresh copy of its repository (a temp folder; the
repository itself is never touched), and write one line per task to RESULTS: its outcome,
turns, tokens, cost and the patch its agent made (a unified diff against the repository as
given; `git apply` it there).

TASKS is a .jsonl file (one object a line) or a .toml file ([[task]] tables), each task:
  repo        the repository folder, relative to TASKS (inside its folder)    required
  prompt      what the agent is asked to do                                    required
  id          unique name (default task-N)    machine, role (default refactorer),
  model, provider, max_turns, max_cost (USD), max_tokens                       optional
A repository's own .moss/ is ignored: each copy runs with this project's .moss/ when you
trust it, else with moss's built-in scripts and your own config.

running:
  -j N                    tasks at once (default min(4, CPUs), capped by [llm] max_parallel)
  --max-cost USD          one budget for the batch (also --max-tokens N): once spent, nothing
                          new starts and running tasks are stopped cleanly (not counted)
  --retries N             run a task again up to N times when the infrastructure failed (the
                          copy, the agent process, the executor); an agent's own failure is
                          never retried (default 0)
  --executor local|ray    where tasks run (default local); ray: each task one Ray job on a
                          cluster (docs/fleet.md)
  --ray-address URL       the cluster's dashboard (default $RAY_ADDRESS)
  --num-cpus N            CPUs each task's Ray job asks for (default 1)
  --provider, --model     for tasks that name none

results:
  -o FILE                 the results file (default .moss/batch/RUN_ID.jsonl); each task's
                          logs go in FILE's name with .logs instead of .jsonl
  --resume                go on with -o FILE: finished tasks are skipped, the rest run once
  --json                  the outcomes as JSON on stdout instead of a table

Outcomes: done (the agent answered), failed (the agent's own end: turn limit, loop, error),
infrastructure (the copy, process, model server or executor failed, after --retries), not
started (the agent could not start: a bad flag or no model configured), stopped (the budget
or Ctrl-C; runs again with --resume).

Exit status: 0 every task done, 1 a task failed, hit the infrastructure or was stopped,
2 usage or a bad TASKS file (FILE:LINE: task: field: what is wrong), 130 interrupted.]==]

M.FLAGS = {
  { "-j", "--jobs", type = "number", key = "jobs", help = "tasks at once" },
  { "--retries", type = "number", help = "retries after an infrastructure failure" },
  { "-o", "--out", metavar = "FILE", key = "out", help = "the results file" },
  { "--resume", type = "flag", help = "go on with -o FILE" },
  { "--executor", metavar = "NAME", help = "where tasks run (local, ray)" },
  { "--ray-address", metavar = "URL", key = "ray_address", help = "ray: the cluster's dashboard" },
  { "--num-cpus", type = "number", key = "num_cpus", help = "ray: CPUs per task's job" },
  { "--patch", metavar = "ID", help = "status: print one task's patch" },
  { "--json", type = "flag", help = "JSON on stdout" },
  { "-h", "--help", type = "flag", help = "show this help" },
}

-- a model or server that could not be reached is the infrastructure, not the agent
M.INFRA_ERROR_KINDS = { llm = true, io = true }

--- A task's outcome from its ended attempt, and whether the agent succeeded (true), failed
--- (false) or neither can be said (nil: the batch, the machine or the setup ended it).
function M.outcome(r)
  if r.reason == "budget" or r.reason == "interrupted" then return "stopped", nil end
  if r.reason == "infra_error" then return "infrastructure", nil end
  if r.exit == 2 then return "not started", nil end
  if r.reason == "error" and M.INFRA_ERROR_KINDS[r.error_kind or ""] then return "infrastructure", nil end
  if r.reason == "answered" then return "done", true end
  return "failed", false
end

--- The words a task's agent gets before its prompt. Edits up to medium risk apply without
--- asking (the copy is thrown away; the patch is what comes back).
function M.agent_args(t)
  local args = {}
  local function add(flag, v) if v ~= nil then args[#args + 1] = flag; args[#args + 1] = tostring(v) end end
  add("--machine", t.machine)
  add("--role", t.role or "refactorer")
  add("--auto-approve", "medium")
  add("--provider", t.provider or moss.options.provider)
  add("--model", t.model or moss.options.model)
  add("--max-turns", t.max_turns)
  return args
end

function M.attempts(batch)
  local out = {}
  for i, t in ipairs(batch.tasks) do
    out[#out + 1] = { key = t.id, task = t.id, cell = "default", trial = 1, args = M.agent_args(t),
                      max_cost = t.max_cost, max_tokens = t.max_tokens,
                      info = { id = t.id, repo = t.repo, place = i } } -- place: its order in TASKS
  end
  return out
end

local function whole(v, flag, min)
  if v ~= nil and (v < min or v ~= math.floor(v)) then
    moss.error("usage", ("%s must be a whole number >= %d"):format(flag, min), 0)
  end
end

local function logs_of(file)
  return (file:gsub("%.jsonl$", "")) .. ".logs"
end

function M.run(opts, rest)
  if #rest == 0 then moss.error("usage", "which tasks? moss batch TASKS (a .jsonl or .toml file)", 0) end
  if #rest > 1 then moss.error("usage", "unexpected '" .. rest[2] .. "' (see moss batch --help)", 0) end
  if opts.patch then moss.error("usage", "--patch is for `moss batch status RESULTS --patch ID`", 0) end
  whole(opts.jobs, "-j", 1)
  whole(opts.retries, "--retries", 0)
  if opts.resume and not opts.out then
    moss.error("usage", "--resume goes on with a results file: give it with -o FILE", 0)
  end
  if opts.out and not opts.out:match("%.jsonl$") then
    moss.error("usage", "-o names the results file, ending in .jsonl, got '" .. opts.out .. "'", 0)
  end
  if opts.executor ~= "ray" and (opts.ray_address or opts.num_cpus) then
    moss.error("usage", (opts.ray_address and "--ray-address" or "--num-cpus") .. " is for --executor ray", 0)
  end
  local okb, batch = pcall(moss.eval.batch, rest[1])
  if not okb then -- FILE:LINE: task: field: ... is the whole message, without the primitive's name
    local kind = moss.error_kind(batch)
    if kind == "interrupted" then error(batch, 0) end
    moss.error(kind or "error", (tostring(batch.message or batch):gsub("^moss%.eval%.batch: ", "")), 0)
  end
  if not moss.trust.trusted and moss.trust.needed then
    moss.ui.print("note: this project is not trusted: tasks use moss's built-in scripts and your own " ..
      "config, not its .moss/ (`moss trust` to use them)", { style = "yellow" })
  end
  -- without -j: as `moss eval` picks it (CPUs, capped by each provider's max_parallel)
  local providers = {}
  for _, t in ipairs(batch.tasks) do providers[#providers + 1] = { provider = t.provider or moss.options.provider } end
  local jobs = opts.jobs or require("eval").policy.default_jobs(providers)
  local file = opts.out or (moss.root .. "/.moss/batch/" .. os.date("!%Y%m%d-%H%M%S") .. "-" ..
    moss.session.new_id() .. ".jsonl")
  local started = moss.eval.start({
    suite = batch.path, attempts = M.attempts(batch), file = file, out = logs_of(file), jobs = jobs,
    max_cost = moss.options.max_cost, max_tokens = moss.options.max_tokens, retries = opts.retries or 0,
    resume = opts.resume == true, executor = opts.executor, ray_address = opts.ray_address, num_cpus = opts.num_cpus,
    title = ("batch %s (%d tasks)"):format(batch.name, #batch.tasks), tally = "outcomes",
  })
  if started.skipped > 0 then
    moss.ui.print(("resuming %s: %d of %d tasks finished before, %d to run"):format(
      file, started.skipped, started.total, started.to_run), { style = "dim" })
  end
  while true do
    local r = moss.eval.next()
    if not r then break end
    local outcome, passed = M.outcome(r)
    moss.eval.record(r.key, { passed = passed, outcome = outcome, verdict = r.detail })
  end
  local done = moss.eval.finish()
  local rows = M.latest(done.rows)
  local counts = {}
  for _, row in ipairs(rows) do
    local o = row.outcome or M.outcome(row)
    counts[o] = (counts[o] or 0) + 1
  end
  if opts.json then
    print(moss.json.encode({ file = done.file, tasks = M.entries(rows), counts = moss.dict(counts),
                             stopped = done.stopped or moss.json.null, not_run = done.not_run, jobs = jobs }))
  else
    M.table(rows)
  end
  local parts = {}
  for _, o in ipairs({ "done", "failed", "infrastructure", "not started", "stopped" }) do
    if counts[o] then parts[#parts + 1] = ("%d %s"):format(counts[o], o) end
  end
  moss.ui.print(("%d tasks: %s"):format(#rows, #parts > 0 and table.concat(parts, ", ") or "none ran"),
    { style = (counts.done or 0) == #rows and "green" or "yellow" })
  if done.stopped == "budget" then
    moss.ui.print(("budget reached: %d tasks not run, %d stopped; raise --max-cost/--max-tokens and " ..
      "`moss batch %s -o %s --resume` to go on"):format(done.not_run, done.budget_cut, rest[1], done.file),
      { style = "yellow" })
  end
  moss.ui.print("results: " .. done.file, { style = "dim" })
  if done.stopped or (counts.done or 0) < started.total then return 1 end
  return 0
end

--- Each task's last line, in the order of the tasks file (lines without a place last, as they come).
function M.latest(rows)
  local order, by, first = {}, {}, {}
  for i, row in ipairs(rows) do
    if not by[row.key] then order[#order + 1] = row.key; first[row.key] = i end
    by[row.key] = row
  end
  local function place(k)
    local p = by[k].place
    return math.type(p) == "integer" and p or (1000000000 + first[k])
  end
  table.sort(order, function(a, b) return place(a) < place(b) end)
  local out = {}
  for i, k in ipairs(order) do out[i] = by[k] end
  return out
end

local function patch_size(row)
  local s = row.patch_stat
  if row.patch == nil or row.patch == moss.json.null or type(s) ~= "table" then
    return row.patch_error and "error" or "-"
  end
  if s.files == 0 then return "none" end
  local text = ("%d file%s +%d -%d"):format(s.files, s.files == 1 and "" or "s", s.added, s.removed)
  if (s.binary or 0) > 0 then text = text .. (" (%d binary)"):format(s.binary) end
  if row.patch_cut then text = text .. " (cut)" end
  return text
end

function M.entries(rows)
  local out = {}
  for _, row in ipairs(rows) do
    out[#out + 1] = { id = row.id or row.task, repo = row.repo, outcome = row.outcome or (M.outcome(row)),
                      reason = row.reason, turns = row.turns, tokens = row.tokens, cost = row.cost,
                      tries = row.tries, patch_stat = row.patch_stat, patch_cut = row.patch_cut,
                      detail = row.detail, job = M.job(row) }
  end
  return out
end

--- The cluster job that ran a task (`--executor ray`: its Ray submission id), or nil.
function M.job(row)
  return type(row.ray) == "table" and row.ray.submission_id or nil
end

function M.table(rows)
  local out, jobs = {}, false
  for _, row in ipairs(rows) do
    local outcome = row.outcome or M.outcome(row)
    out[#out + 1] = {
      task = row.id or row.task, outcome = outcome,
      turns = row.turns and tostring(row.turns) or "-",
      tokens = row.tokens and tostring(math.tointeger(row.tokens) or row.tokens) or "-",
      cost = row.cost and ("$%.4f"):format(row.cost) or "-",
      patch = patch_size(row), job = M.job(row) or "-",
      _style = outcome == "done" and "green" or (outcome == "failed" and "red" or "yellow"),
    }
    jobs = jobs or M.job(row) ~= nil
  end
  local columns = { "task", "outcome", "turns", "tokens", "cost", "patch" }
  if jobs then columns[#columns + 1] = "job" end -- on a cluster: which job (`ray job logs ID`)
  moss.ui.table(out, { columns = columns })
end

--- status: the table of a results file, or one task's patch (--patch ID) on stdout.
function M.status(opts, files)
  if #files ~= 1 then
    moss.error("usage", "status takes one results file: moss batch status RESULTS [--patch ID]", 0)
  end
  local rows = M.latest(moss.eval.read(files[1]))
  if opts.patch then
    for _, row in ipairs(rows) do
      if (row.id or row.task) == opts.patch then
        if type(row.patch) ~= "string" then
          moss.ui.print(("task %s has no patch: %s"):format(opts.patch, row.patch_error or
            ("its agent never ran (" .. tostring(row.reason) .. ")")), { style = "yellow" })
          return 1
        end
        if row.patch == "" then
          moss.ui.print(("task %s changed nothing"):format(opts.patch), { style = "dim" })
        else
          print((row.patch:gsub("\n$", "")))
        end
        return 0
      end
    end
    moss.error("not_found", ("no task %s in %s"):format(opts.patch, files[1]), 0)
  end
  if opts.json then print(moss.json.encode({ tasks = M.entries(rows) })) else M.table(rows) end
  return 0
end

function M.main(args)
  return cli.main(args, M.FLAGS, HELP, { M.run, status = M.status })
end

return { help = HELP, main = M.main, policy = M }

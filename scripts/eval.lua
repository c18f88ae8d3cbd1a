-- `moss eval`: run a suite of tasks across a matrix of cells, say how often the agent succeeded
-- and what it cost; `moss eval compare A B` says whether B is better than A.
--
-- This file is the policy (copy it to .moss/scripts/eval.lua to change it): how a suite and
-- the matrix become attempts, which flags each attempt's agent gets, what counts as a pass,
-- and how results read. moss.eval is the mechanism: copies, parallel attempts, the budget,
-- the results file, the statistics (host/eval/).
local cli = require("lib.cli")

local M = {}

local HELP = [[
usage: moss eval [SUITE] [--suite SUITE] [matrix] [running] [record and replay] [results]
       moss eval compare A.jsonl B.jsonl [--fail-if worse] [--json]
       moss eval compare RESULTS          (one eval of two cells: the first of the matrix is A)
       moss eval compare A B --cell NAME  (two evals of several cells: that cell of each)
       moss eval report RESULTS [--html FILE] [--json]   (the table of an eval that ran)

Run every task of SUITE (a folder with suite.toml, a .toml file, a suite name such as
builtin, or a folder of exercises in the polyglot benchmark's layout: C++, Go, Java,
JavaScript, Python, Rust) in every cell of the matrix, each attempt in a fresh copy of the
task's repository.

matrix (comma lists; every combination is a cell):
  --machine v1,v2         the agent's machine
  --role NAME[,NAME]      the role (default: explorer for questions, refactorer for changes)
  --provider A,B          LLM providers
  --model A,B             models
  --variant NAME=PATH     a folder laid over the project's .moss/ (config.toml merged, other
                          files replaced); repeatable; `--variant base=` for none
  --trials N              attempts per task and cell (default 1)
  --tries N               tries per attempt of a change (default: the task's, else 1): when
                          the check fails, the same session gets its output and goes on; the
                          table shows pass@1 .. pass@N (the benchmark's leaderboard: --tries 2)

running:
  -j N                    attempts at once (default min(4, CPUs), capped by [llm] max_parallel
                          or a provider's max_parallel: what its rate limit takes)
  --max-cost USD          one budget for the whole eval: once spent, nothing new starts and
  --max-tokens N          running attempts are stopped cleanly (reason budget, not counted)
  --retries N             run an attempt again up to N times when the infrastructure failed
                          (its copy, the agent's process, the executor; default 0); the
                          agent's own failures are never retried
  --keep                  keep every attempt's copy; --keep-failed only the failed ones'
  --check-timeout S       seconds each check command may take (default: the task's; an
                          exercise's 180 s, as the benchmark's own harness allows)
  --prepare DIR           make once what DIR's exercises need, then exit: JavaScript's jest
                          and babel from the npm registry (the only network an eval uses),
                          Go's build cache, the C++ Catch main (docs/eval.md)
  --executor local|ray    where attempts run (default [eval] executor, else local); ray: each
                          attempt one Ray job on a cluster (docs/fleet.md)
  --ray-address URL       the cluster's dashboard (default [eval] ray_address, $RAY_ADDRESS)
  --num-cpus N            CPUs each attempt's Ray job asks for (default [eval] ray_num_cpus, 1);
                          with ray, --retries counts jobs lost or stopped on the cluster too

record and replay:
  --record DIR            keep each attempt's LLM cassette in DIR (TASK--CELL--TRIAL.jsonl)
  --replay DIR            run offline from DIR's cassettes (same suite and matrix; a variant
                          cell without its own replays its base cell's): each attempt whose
                          requests leave its recording is reported at the first request that
                          differs (diverged, not counted; exit 1); one without is not run

results:
  --out DIR               where attempts.jsonl and the logs go (default .moss/eval/RUN_ID/)
  --resume DIR            go on with an eval that was stopped: finished attempts are skipped
  --json                  the summary as JSON on stdout instead of a table
  --html FILE             also write a self-contained HTML report (a name ending in .html):
                          the table, pass rate (95% interval) against cost per cell, tasks

A pass is the agent's outcome `answered` AND the task's check passing. An attempt the eval
stopped (budget, Ctrl-C) or that could not run (setup or infrastructure error, an exercise
whose toolchain or library is not here: not run) counts neither way; a task whose check
passes before the agent ran, or an exercise that cannot be read, is a suite error.

Exit status: 0 every attempt ran, 1 the budget stopped the eval, the suite has errors, an
attempt could not run here, or a replayed attempt diverged or had no recording, 2 usage,
130 interrupted (re-run with --resume DIR to go on).]]

M.FLAGS = {
  { "--suite", metavar = "SUITE", help = "the suite (or give it as the first word)" },
  { "--machine", metavar = "A,B", help = "machines" },
  { "--role", metavar = "A,B", help = "roles" },
  { "--variant", metavar = "NAME=PATH", multiple = true, help = "a .moss/ overlay (repeatable)" },
  { "--trials", type = "number", help = "attempts per task and cell" },
  { "--tries", type = "number", help = "tries per attempt of a change (pass@1 .. pass@N)" },
  { "--check-timeout", type = "number", key = "check_timeout", help = "seconds a check command may take" },
  { "--prepare", metavar = "DIR", help = "prepare DIR's exercises' toolchains, then exit" },
  { "-j", "--jobs", type = "number", key = "jobs", help = "attempts at once" },
  { "--out", metavar = "DIR", help = "results folder" },
  { "--resume", metavar = "DIR", help = "go on with this results folder" },
  { "--retries", type = "number", help = "retries after an infrastructure failure" },
  { "--keep", type = "flag", help = "keep every copy" },
  { "--keep-failed", type = "flag", key = "keep_failed", help = "keep the copies of failed attempts" },
  { "--json", type = "flag", help = "JSON on stdout" },
  { "--html", metavar = "FILE", help = "also write a self-contained HTML report" },
  { "--executor", metavar = "NAME", help = "where attempts run (local, ray)" },
  { "--ray-address", metavar = "URL", key = "ray_address", help = "ray: the cluster's dashboard" },
  { "--num-cpus", type = "number", key = "num_cpus", help = "ray: CPUs per attempt's job" },
  { "--fail-if", metavar = "worse", key = "fail_if", choices = { "worse" }, help = "compare: exit 1 when B is worse" },
  { "--alpha", type = "number", help = "compare: significance level (default 0.05)" },
  { "--cell", metavar = "NAME", help = "compare: that cell of each of two results files" },
  { "-h", "--help", type = "flag", help = "show this help" },
}

-- outcomes that say nothing about the agent: the eval stopped it, or it never really ran
-- (replaying: an attempt that left its recording, or had none, says nothing about the agent either)
-- (an exercise whose toolchain, library or packages this machine lacks was not run: not the agent's doing)
M.NOT_COUNTED = { budget = true, interrupted = true, infra_error = true, setup_error = true, suite_error = true,
                  diverged = true, not_recorded = true, not_run = true }
-- a model or server that could not be reached is the infrastructure, not the agent
M.INFRA_ERROR_KINDS = { llm = true, io = true }

--- The verdict on an ended attempt: true (pass), false (fail) or nil (not counted), and why;
--- with tries, a pass's third value is the try it passed on.
function M.score(r)
  if r.reason == "diverged" or r.reason == "not_recorded" or r.reason == "not_run" or r.reason == "suite_error" then
    return nil, r.detail or r.reason
  end
  if M.NOT_COUNTED[r.reason] then return nil, r.reason end
  -- exit 2: the session could not start (a bad flag, no model configured): the eval's setup
  if r.exit == 2 then return nil, "could not start: " .. tostring(r.detail or r.error_kind or "usage") end
  if r.reason == "error" and M.INFRA_ERROR_KINDS[r.error_kind or ""] then return nil, "infrastructure" end
  local check = r.check or {}
  if r.reason ~= "answered" then return false, "agent: " .. tostring(r.reason) end
  if not check.passed then return false, "check: " .. tostring(check.detail or "failed") end
  local on = type(r.checks) == "table" and #r.checks or 1
  return true, on > 1 and ("answered and the check passed on try " .. on) or "answered and the check passed", on
end

--- The prompt an attempt's agent gets: the task's, or for an exercise of the polyglot benchmark
--- its instructions and what to change (as the benchmark's harness words it, for an agent that
--- can also read and run the tests).
function M.prompt(task)
  local ex = task.exercise
  if not ex then return task.prompt end
  return ex.instructions .. "\n\n" .. ("Use the instructions above to change %s (%s). Keep the names of the " ..
    "functions, classes and types they declare: the tests (%s) use them. Use only the standard library; " ..
    "do not change the tests."):format(table.concat(ex.solution, ", "), ex.title, table.concat(ex.test, ", "))
end

--- The config an attempt's agent runs with, merged over its copy's (nil: none of its own). An
--- exercise's agent does not validate on its own: the benchmark's first try has no test results
--- (and a detected validator, such as package.json's `npm test`, cannot run in the sandbox
--- without the check's prepared packages); it gets the failing tests' output on its next try.
function M.agent_config(task, _cell)
  if task.exercise then return { agent = { validate_on = "never" } } end
  return nil
end

--- After a failed check, the same session gets this and one more try (--tries): {output} is
--- the check's output, cut to its last `lines` lines and at most `chars` characters.
M.RETRY = { lines = 50, chars = 4000 }
function M.retry(task)
  local files = task.exercise and table.concat(task.exercise.solution, ", ") or "the code"
  return { lines = M.RETRY.lines, chars = M.RETRY.chars,
           message = "The tests failed:\n\n```\n{output}\n```\n\nThe tests are correct: do not change them. Fix " ..
             files .. " so that they pass." }
end

local function split(s)
  if s == nil then return { false } end -- false: the dimension is not given
  local out = {}
  for w in tostring(s):gmatch("[^,]+") do
    w = w:match("^%s*(.-)%s*$")
    if w ~= "" then out[#out + 1] = w end
  end
  if #out == 0 then moss.error("usage", "an empty list: give at least one value", 0) end
  return out
end

local function variants(list)
  if not list then return { { name = false } } end
  local out, seen = {}, {}
  for _, v in ipairs(list) do
    local name, path = v:match("^([%w_%-%.]+)=(.*)$")
    if not name then moss.error("usage", "--variant takes NAME=PATH (or NAME= for none), got '" .. v .. "'", 0) end
    if seen[name] then moss.error("usage", "--variant " .. name .. " is given twice", 0) end
    seen[name] = true
    out[#out + 1] = { name = name, path = path ~= "" and path or nil }
  end
  return out
end

--- The cells: every combination of the given dimensions, each with a stable name.
function M.cells(opts)
  local cells = {}
  for _, machine in ipairs(split(opts.machine)) do
    for _, role in ipairs(split(opts.role)) do
      for _, provider in ipairs(split(moss.options.provider)) do
        for _, model in ipairs(split(moss.options.model)) do
          for _, variant in ipairs(variants(opts.variant)) do
            local c = { machine = machine or nil, role = role or nil, provider = provider or nil,
                        model = model or nil, variant = variant.name or nil, variant_path = variant.path }
            local parts = {}
            for _, dim in ipairs({ "machine", "role", "provider", "model", "variant" }) do
              if c[dim] then parts[#parts + 1] = dim .. "=" .. c[dim] end
            end
            c.name = #parts > 0 and table.concat(parts, " ") or "default"
            -- replaying, a variant's cell with no recording of its own replays its base cell's: the
            -- same cell without the variant, or with variant=base (the change checked against it)
            if c.variant and c.variant ~= "base" then
              local base = {}
              for i = 1, #parts - 1 do base[i] = parts[i] end
              c.recorded_as = { #base > 0 and table.concat(base, " ") or "default",
                                table.concat(base, " ") .. (#base > 0 and " " or "") .. "variant=base" }
            end
            cells[#cells + 1] = c
          end
        end
      end
    end
  end
  return cells
end

--- The words the agent gets before the task, for a task in a cell.
function M.agent_args(task, cell)
  local args = {}
  if cell.machine then args[#args + 1] = "--machine"; args[#args + 1] = cell.machine end
  local role = cell.role or (task.kind == "change" and "refactorer" or nil)
  if role then args[#args + 1] = "--role"; args[#args + 1] = role end
  -- nobody approves an attempt's edits: a change gets medium. One that asks for a change of public
  -- API (tag "public-api": a rename, a new signature), which the edit rating calls high, gets high;
  -- so does an exercise: solving it may reshape the API its tests call (a stub's `_x` parameters,
  -- a type the instructions ask for), and its copy is thrown away after the check
  if task.kind == "change" then
    local public = task.exercise and true or false
    for _, tag in ipairs(task.tags or {}) do public = public or tag == "public-api" end
    args[#args + 1] = "--auto-approve"; args[#args + 1] = public and "high" or "medium"
  end
  if cell.provider then args[#args + 1] = "--provider"; args[#args + 1] = cell.provider end
  if cell.model then args[#args + 1] = "--model"; args[#args + 1] = cell.model end
  return args
end

--- Suite x cells x trials -> attempts, trial-major (every task once before any twice). `tries`
--- (--tries) overrides each change task's own.
function M.attempts(suite, cells, trials, tries)
  local out = {}
  for trial = 1, trials do
    for _, task in ipairs(suite.tasks) do
      for ci, cell in ipairs(cells) do
        local recordings = nil
        if cell.recorded_as then
          recordings = { task.id .. "|" .. cell.name .. "|" .. trial }
          for _, name in ipairs(cell.recorded_as) do
            recordings[#recordings + 1] = task.id .. "|" .. name .. "|" .. trial
          end
        end
        out[#out + 1] = {
          key = task.id .. "|" .. cell.name .. "|" .. trial, task = task.id, cell = cell.name, trial = trial,
          recordings = recordings,
          args = M.agent_args(task, cell), variant = cell.variant_path, prompt = M.prompt(task),
          config = M.agent_config(task, cell),
          tries = task.kind == "change" and (tries or task.tries or 1) or 1, retry = M.retry(task),
          info = { machine = cell.machine, role = cell.role, provider = cell.provider, model = cell.model,
                   variant = cell.variant, cell_index = ci }, -- ci: the cell's place in the matrix (compare's A, B)
        }
      end
    end
  end
  return out
end

local function fmt(v, pattern)
  if v == nil then return "-" end
  return pattern:format(v)
end

--- The summary per cell as people read it: the columns and each cell's row of texts (the
--- terminal table and the HTML report show the same).
function M.rows(cells, how)
  how = how or {}
  local rows, tries = {}, 1
  for _, c in ipairs(cells) do tries = math.max(tries, c.tries or 1) end
  for _, c in ipairs(cells) do
    local row = {
      cell = c.cell,
      passed = ("%d/%d"):format(c.passed, c.n),
      rate = c.rate and ("%.0f%%"):format(100 * c.rate) or "-",
      ["95% CI"] = c.n > 0 and ("%.0f-%.0f%%"):format(100 * c.ci_low, 100 * c.ci_high) or "-",
      turns = fmt(c.mean_turns, "%.1f"), tokens = fmt(c.mean_tokens, "%.0f"), cost = fmt(c.mean_cost, "$%.4f"),
      ["p50 s"] = fmt(c.p50_wall, "%.1f"), ["p90 s"] = fmt(c.p90_wall, "%.1f"),
      ["not counted"] = tostring(c.not_counted), diverged = tostring(c.diverged or 0),
    }
    for k = 1, tries do  -- pass@k: passed on try k or earlier, as the benchmark's leaderboard scores
      local p = (c.pass_at or {})[k]
      row["pass@" .. k] = (p and c.n > 0) and ("%.0f%% (%d/%d)"):format(100 * p.rate, p.passed, c.n) or "-"
      row["pass@" .. k .. " CI"] = (p and c.n > 0) and ("%.0f-%.0f%%"):format(100 * p.ci_low, 100 * p.ci_high) or "-"
    end
    rows[#rows + 1] = row
  end
  local columns = { "cell", "passed", "rate", "95% CI" }
  if tries > 1 then
    columns = { "cell", "passed" }
    for k = 1, tries do
      columns[#columns + 1] = "pass@" .. k
      columns[#columns + 1] = "pass@" .. k .. " CI"
    end
  end
  for _, name in ipairs({ "turns", "tokens", "cost", "p50 s", "p90 s", "not counted" }) do
    columns[#columns + 1] = name
  end
  if how.replay then columns[#columns + 1] = "diverged" end
  return columns, rows
end

function M.table(cells, how)
  local columns, rows = M.rows(cells, how)
  moss.ui.table(rows, { columns = columns })
end

--- The HTML report: the table; each cell's pass rate (with its 95% interval) against its mean
--- cost per attempt, so a cheaper cell that passes as often stands out; then each task's passes
--- per cell, to see where a cell lost.
function M.report(cells, how, rows)
  how = how or {}
  local names, table_rows = M.rows(cells, how)
  local columns = {}
  for i, name in ipairs(names) do columns[i] = { key = name, label = name, numeric = name ~= "cell" } end
  local points = {}
  for _, c in ipairs(cells) do
    points[#points + 1] = { label = c.cell, x = c.mean_cost, y = c.rate, low = c.n > 0 and c.ci_low or nil,
                            high = c.n > 0 and c.ci_high or nil,
                            note = c.n == 0 and "no counted attempts" or nil }
  end
  local sections = {
    { title = "Cells", columns = columns, rows = table_rows },
    { title = "Pass rate against cost", chart = { x_label = "mean cost per counted attempt (USD)",
      y_label = "pass rate (bars: 95% Wilson interval)", x_format = "usd", points = points } },
  }
  -- each task's passes per cell: "2/3" (passes over counted attempts), "-" when none counted
  local tasks, by = {}, {}
  for _, row in ipairs(rows or {}) do
    if not by[row.task] then by[row.task] = {}; tasks[#tasks + 1] = row.task end
    local t = by[row.task][row.cell] or { k = 0, n = 0 }
    by[row.task][row.cell] = t
    if row.passed ~= nil and row.passed ~= moss.json.null then
      t.n = t.n + 1
      if row.passed == true then t.k = t.k + 1 end
    end
  end
  if #tasks > 0 then
    local tcols = { { key = "task", label = "task" } }
    for _, c in ipairs(cells) do tcols[#tcols + 1] = { key = c.cell, label = c.cell, numeric = true } end
    local trows = {}
    for _, task in ipairs(tasks) do
      local r = { task = task }
      for _, c in ipairs(cells) do
        local t = by[task][c.cell]
        r[c.cell] = (t and t.n > 0) and ("%d/%d"):format(t.k, t.n) or "-"
      end
      trows[#trows + 1] = r
    end
    sections[#sections + 1] = { title = "Tasks (passes over counted attempts, per cell)", columns = tcols,
      rows = trows }
  end
  return {
    title = how.title or "moss eval", subtitle = how.subtitle, sections = sections,
    notes = {
      "passed/rate: passes over counted attempts; 95% CI: the Wilson score interval of the rate.",
      "turns, tokens, cost: means over counted attempts; p50/p90: wall time of an attempt, copy and check included.",
      "not counted: attempts whose end says nothing about the agent (stopped by the eval, setup or " ..
        "infrastructure errors, diverged replays).",
    },
  }
end

function M.html(path, cells, how, rows)
  local written = moss.eval.html(path, M.report(cells, how, rows))
  moss.ui.print("report: " .. written.file, { style = "dim" })
end

local function run_id()
  return os.date("!%Y%m%d-%H%M%S") .. "-" .. moss.session.new_id()
end

--- How many attempts at once without -j: the CPUs (at most 4), and no more than the model
--- providers of the matrix take side by side — `[llm] max_parallel`, or `max_parallel` in a
--- provider's `[llm.providers.NAME]` (an account with a low rate limit answers more with 429s).
function M.default_jobs(cells)
  local jobs = math.min(4, moss.eval.cpus())
  local llm = moss.config.llm or {}
  local function cap(v, where)
    if v == nil then return end
    if math.type(v) ~= "integer" or v < 1 then
      moss.error("config", where .. " max_parallel must be a whole number >= 1, got " .. tostring(v), 0)
    end
    jobs = math.min(jobs, v)
  end
  cap(llm.max_parallel, "[llm]")
  for _, c in ipairs(cells) do
    local name = c.provider or llm.provider
    local p = name and type(llm.providers) == "table" and llm.providers[name] or nil
    if type(p) == "table" then cap(p.max_parallel, "[llm.providers." .. name .. "]") end
  end
  return jobs
end

--- --prepare DIR: what DIR's exercises' checks need made once, one line per language.
function M.prepare(dir)
  local ok, got = pcall(moss.eval.prepare, dir)
  if not ok then -- said as the flag the person typed, not as the primitive behind it
    local why = tostring(type(got) == "table" and got.message or got):gsub("^moss%.eval%.prepare: ", "")
    moss.error(moss.error_kind(got) or "usage", "--prepare " .. dir .. ": " .. why, 0)
  end
  local ready = true
  for _, p in ipairs(got) do
    moss.ui.print(("%-10s %s  %s"):format(p.language, p.ready and "ready" or "NOT READY", p.detail),
      { style = p.ready and "green" or "red" })
    ready = ready and p.ready
  end
  return ready and 0 or 1
end

function M.run(opts, rest)
  if opts.prepare then
    if rest[1] or opts.suite then moss.error("usage", "--prepare DIR prepares and exits: give no suite with it", 0) end
    return M.prepare(opts.prepare)
  end
  local spec = opts.suite or rest[1]
  if not spec then moss.error("usage", "which suite? moss eval SUITE (a folder, a .toml file, or builtin)", 0) end
  if opts.suite and rest[1] then moss.error("usage", "give the suite once: --suite or the first word", 0) end
  if #rest > 1 then moss.error("usage", "unexpected '" .. rest[2] .. "' (see moss eval --help)", 0) end
  local trials = opts.trials or 1
  if trials < 1 or trials ~= math.floor(trials) then moss.error("usage", "--trials must be a whole number >= 1", 0) end
  if opts.jobs and (opts.jobs < 1 or opts.jobs ~= math.floor(opts.jobs)) then
    moss.error("usage", "-j must be a whole number >= 1", 0)
  end
  if opts.tries and (opts.tries < 1 or opts.tries > 10 or opts.tries ~= math.floor(opts.tries)) then
    moss.error("usage", "--tries must be a whole number from 1 to 10", 0)
  end
  if opts.check_timeout and opts.check_timeout <= 0 then moss.error("usage", "--check-timeout must be > 0", 0) end
  if opts.retries and (opts.retries < 0 or opts.retries ~= math.floor(opts.retries)) then
    moss.error("usage", "--retries must be a whole number >= 0", 0)
  end
  if opts.out and opts.resume then moss.error("usage", "--resume DIR is the results folder: no --out with it", 0) end
  local suite = moss.eval.suite(spec)
  if not moss.trust.trusted and moss.trust.needed then
    moss.ui.print("note: this project is not trusted: attempts use moss's built-in scripts and your own " ..
      "config, not its .moss/ (`moss trust` to use them)", { style = "yellow" })
  end
  local cells = M.cells(opts)
  local jobs = opts.jobs or M.default_jobs(cells)
  -- where attempts run: the flags, else [eval] in the config (a project's needs trust: host/trust/)
  local ecfg = type(moss.config.eval) == "table" and moss.config.eval or {}
  if (opts.executor or ecfg.executor or "local") ~= "ray" then
    for _, f in ipairs({ { "ray_address", "--ray-address" }, { "num_cpus", "--num-cpus" } }) do
      if opts[f[1]] ~= nil then moss.error("usage", f[2] .. " is for --executor ray", 0) end
    end
  end
  local out = opts.resume or opts.out or (moss.root .. "/.moss/eval/" .. run_id())
  local started = moss.eval.start({
    suite = suite.path, attempts = M.attempts(suite, cells, trials, opts.tries), out = out, jobs = jobs,
    check_timeout = opts.check_timeout,
    max_cost = moss.options.max_cost, max_tokens = moss.options.max_tokens, resume = opts.resume ~= nil,
    keep = opts.keep, keep_failed = opts.keep_failed, executor = opts.executor or ecfg.executor,
    ray_address = opts.ray_address or ecfg.ray_address, num_cpus = opts.num_cpus or ecfg.ray_num_cpus,
    retries = opts.retries,
    record = moss.options.record, replay = moss.options.replay,
    title = ("eval %s (%d tasks x %d cells x %d trials)"):format(suite.name, #suite.tasks, #cells, trials),
  })
  if started.skipped > 0 then
    moss.ui.print(("resuming %s: %d of %d attempts finished before, %d to run"):format(
      started.out, started.skipped, started.total, started.to_run), { style = "dim" })
  end
  while true do
    local r = moss.eval.next()
    if not r then break end
    local passed, why, on = M.score(r)
    moss.eval.record(r.key, { passed = passed, verdict = why, passed_on = on })
  end
  local done = moss.eval.finish()
  local summary = moss.eval.summary(done.rows)
  local suite_errors, diverged, not_recorded, not_run = {}, {}, 0, {}
  for _, row in ipairs(done.rows) do
    if row.reason == "not_run" then not_run[row.task] = row.detail end
    if row.reason == "suite_error" then suite_errors[row.task] = row.detail end
    if row.reason == "diverged" and row.diverged then
      local d = row.diverged
      diverged[#diverged + 1] = { task = row.task, cell = row.cell, trial = row.trial, request = d.request,
                                  what = d.what, field = d.field, recorded = d.recorded, now = d.now,
                                  detail = d.detail }
    end
    if row.reason == "not_recorded" then not_recorded = not_recorded + 1 end
  end
  local replaying = moss.options.replay ~= nil
  if opts.json then
    print(moss.json.encode({ out = done.out, file = done.file, cells = summary,
                             stopped = done.stopped or moss.json.null,
                             not_run = done.not_run, suite_errors = moss.dict(suite_errors), jobs = jobs,
                             could_not_run = moss.dict(not_run),
                             peak = done.peak,
                             diverged = replaying and diverged or nil,
                             not_recorded = replaying and not_recorded or nil }))
  else
    M.table(summary, { replay = replaying })
  end
  M.report_problems(suite_errors, not_run)
  if replaying then M.report_replay(diverged, not_recorded, #done.rows, moss.options.replay) end
  if opts.html then
    M.html(opts.html, summary, { title = "moss eval: " .. suite.name, replay = replaying,
      subtitle = ("%d tasks x %d cells x %d trials; results: %s"):format(#suite.tasks, #cells, trials, done.file) },
      done.rows)
  end
  if done.stopped == "budget" then
    moss.ui.print(("budget reached: %d attempts not run, %d stopped; raise --max-cost/--max-tokens and " ..
      "`moss eval ... --resume %s` to go on"):format(done.not_run, done.budget_cut, done.out), { style = "yellow" })
  end
  moss.ui.print("results: " .. done.file, { style = "dim" })
  if done.stopped or next(suite_errors) or next(not_run) or #diverged > 0 or not_recorded > 0 then return 1 end
  return 0
end

--- One line per task that could not be read (a suite error) or not run here, task by task.
function M.report_problems(suite_errors, not_run)
  local function sorted(t)
    local keys = {}
    for k in pairs(t) do keys[#keys + 1] = k end
    table.sort(keys)
    return keys
  end
  for _, task in ipairs(sorted(suite_errors)) do
    moss.ui.print(("suite error: task %s: %s"):format(task, suite_errors[task]), { style = "red" })
  end
  for _, task in ipairs(sorted(not_run)) do
    moss.ui.print(("not run: task %s: %s"):format(task, (not_run[task]:gsub("^not run: ", ""))), { style = "yellow" })
  end
end

--- Replaying: each attempt that left its recording, at its first differing request, then one line.
function M.report_replay(diverged, not_recorded, total, dir)
  for _, d in ipairs(diverged) do
    local where = d.field ~= "" and ("%s changed: recorded %s vs now %s"):format(d.what, d.recorded, d.now) or d.detail
    moss.ui.print(("diverged: %s (%s, trial %d) at request %d: %s"):format(d.task, d.cell, d.trial, d.request, where),
      { style = "red" })
  end
  if not_recorded > 0 then
    moss.ui.print(("not run: %d attempts have no recording in %s (recorded with another suite or matrix?)"):format(
      not_recorded, dir), { style = "yellow" })
  end
  local replayed = total - not_recorded
  if #diverged == 0 then
    moss.ui.print(("replay: all %d replayed attempts sent exactly their recorded requests"):format(replayed),
      { style = "green" })
  else
    moss.ui.print(("replay: %d of %d replayed attempts diverged from their recordings"):format(#diverged, replayed),
      { style = "red" })
  end
end

--- compare: pair the counted attempts of A and B on (task, trial), name the flips, and test.
function M.compare(opts, files)
  if #files < 1 or #files > 2 then
    moss.error("usage", "compare takes two results files (one cell each), or one holding two cells: " ..
      "moss eval compare A.jsonl B.jsonl", 0)
  end
  -- the counted attempts of a file, per cell: cell -> "task|trial" -> row; the cells in the
  -- matrix's order (the command line's), not the order attempts happened to end in
  local function cells_of(path)
    local by, order, place = {}, {}, {}
    for _, row in ipairs(moss.eval.read(path)) do
      if row.passed ~= nil and row.reason ~= "budget" and row.reason ~= "interrupted" then
        if not by[row.cell] then
          by[row.cell] = {}; order[#order + 1] = row.cell
          place[row.cell] = math.type(row.cell_index) == "integer" and row.cell_index or (1000000 + #order)
        end
        by[row.cell][row.task .. "|" .. tostring(row.trial)] = row
      end
    end
    table.sort(order, function(x, y) return place[x] < place[y] end)
    return by, order
  end
  local function one(path)
    local by, order = cells_of(path)
    if opts.cell then
      if not by[opts.cell] then
        moss.error("usage", path .. " has no cell '" .. opts.cell .. "' among its counted attempts (it has " ..
          (#order > 0 and table.concat(order, ", ") or "none") .. ")", 0)
      end
      return by[opts.cell]
    end
    if #order ~= 1 then
      moss.error("usage", path .. " holds " .. #order .. " cells (" .. table.concat(order, ", ") ..
        "): compare two files of one cell each, or one file of two cells", 0)
    end
    return by[order[1]]
  end
  local a, b, names
  if #files == 1 and opts.cell then
    moss.error("usage", "--cell picks one cell of each of two results files: moss eval compare A B --cell NAME", 0)
  end
  if #files == 1 then
    local by, order = cells_of(files[1])
    if #order ~= 2 then
      moss.error("usage", files[1] .. " holds " .. #order .. " cells (" .. table.concat(order, ", ") ..
        "): with one file, compare needs exactly two", 0)
    end
    print(("A = %s, B = %s"):format(order[1], order[2]))
    a, b, names = by[order[1]], by[order[2]], { order[1], order[2] }
  else
    a, b, names = one(files[1]), one(files[2]), { files[1], files[2] }
  end
  local both, only_a, only_b, pairs_n = 0, {}, {}, 0
  local keys, shared_tasks = {}, {}
  for k in pairs(a) do if b[k] then keys[#keys + 1] = k end end
  table.sort(keys)
  if #keys == 0 then M.nothing_shared(a, b, names) end
  for _, k in ipairs(keys) do
    pairs_n = pairs_n + 1
    shared_tasks[a[k].task] = true
    local pa, pb = a[k].passed, b[k].passed
    if pa and pb then both = both + 1
    elseif pa then only_a[#only_a + 1] = k:gsub("|", " trial ")
    elseif pb then only_b[#only_b + 1] = k:gsub("|", " trial ") end
  end
  local p = moss.eval.mcnemar(#only_a, #only_b)
  local alpha = opts.alpha or 0.05
  local verdict = "no detectable difference"
  if p < alpha then verdict = #only_b > #only_a and "better" or "worse" end
  local tasks_n = 0
  for _ in pairs(shared_tasks) do tasks_n = tasks_n + 1 end
  local power = M.power(#only_a + #only_b, pairs_n, tasks_n, alpha)
  if opts.json then
    print(moss.json.encode({ pairs = pairs_n, both = both, fixed = only_b, broke = only_a, p = p,
                             test = "exact McNemar", verdict = verdict, alpha = alpha,
                             too_few = power ~= nil, disagree_needed = power and power.needed or moss.json.null,
                             trials_needed = power and power.trials or moss.json.null,
                             note = power and power.text or moss.json.null }))
  else
    for _, t in ipairs(only_b) do print("fixed in B:  " .. t) end
    for _, t in ipairs(only_a) do print("broken in B: " .. t) end
    local head = verdict == "no detectable difference" and "no detectable difference between A and B"
      or ("B is " .. verdict .. " than A")
    print(("%s (exact McNemar on %d paired attempts: %d fixed, %d broken, p = %.3g)"):format(
      head, pairs_n, #only_b, #only_a, p))
    if power then print(power.text) end
  end
  if opts.fail_if == "worse" and verdict == "worse" then return 1 end
  return 0
end

--- The fewest disagreeing pairs (all one way) that can reach p < alpha in the exact McNemar test.
function M.disagree_needed(alpha)
  for n = 1, 1000 do
    if moss.eval.mcnemar(0, n) < alpha then return n end
  end
  return nil
end

--- nil when enough pairs disagree for a verdict to reach `alpha`; else {needed, trials, text}:
--- how many disagreeing pairs any verdict needs and, at the rate seen, how many trials per
--- task would bring that many.
function M.power(disagree, pairs_n, tasks_n, alpha)
  local needed = M.disagree_needed(alpha)
  if needed == nil or disagree >= needed then return nil end
  local best = moss.eval.mcnemar(0, disagree)
  local text = ("too few pairs disagree for any verdict: %d of %d disagree, and at alpha %g a verdict takes " ..
    "at least %d disagreeing pairs (with %d, p is at least %.3g however they split)"):format(
    disagree, pairs_n, alpha, needed, disagree, best)
  local trials
  if disagree > 0 and tasks_n > 0 then
    local pairs_needed = math.ceil(needed * pairs_n / disagree)
    trials = math.ceil(pairs_needed / tasks_n)
    text = text .. ("; at this rate that takes about %d pairs: --trials %d on these %d tasks"):format(
      pairs_needed, trials, tasks_n)
  else
    text = text .. "; none disagree here: more trials of these tasks may show no difference at all"
  end
  return { needed = needed, trials = trials, text = text }
end

--- Two results with no (task, trial) in common: a usage error naming what each side has.
function M.nothing_shared(a, b, names)
  local function tasks_of(side)
    local seen, list = {}, {}
    for _, row in pairs(side) do
      if not seen[row.task] then seen[row.task] = true; list[#list + 1] = tostring(row.task) end
    end
    table.sort(list)
    local shown = { table.unpack(list, 1, math.min(#list, 8)) }
    local text = #list == 0 and "no counted attempts" or
      (("%d task%s: %s"):format(#list, #list == 1 and "" or "s", table.concat(shown, ", ")) ..
        (#list > #shown and (", and %d more"):format(#list - #shown) or ""))
    return text
  end
  moss.error("usage", ("nothing to compare: A (%s) and B (%s) share no task and trial among their counted " ..
    "attempts. A has %s; B has %s. Compare two runs of the same suite."):format(
    names[1], names[2], tasks_of(a), tasks_of(b)), 0)
end

--- report: the table (or JSON) of an eval that ran, and with --html its HTML report.
function M.report_cmd(opts, files)
  if #files ~= 1 then
    moss.error("usage", "report takes one results file or folder: moss eval report RESULTS [--html FILE]", 0)
  end
  local rows = moss.eval.read(files[1])
  local summary = moss.eval.summary(rows)
  local replaying = false
  for _, c in ipairs(summary) do
    if (c.diverged or 0) > 0 or (c.not_recorded or 0) > 0 then replaying = true end
  end
  if opts.json then print(moss.json.encode({ cells = summary })) else M.table(summary, { replay = replaying }) end
  if opts.html then
    M.html(opts.html, summary, { title = "moss eval: " .. files[1], replay = replaying,
      subtitle = ("%d attempts in %s"):format(#rows, files[1]) }, rows)
  end
  return 0
end

function M.main(args)
  return cli.main(args, M.FLAGS, HELP, { M.run, compare = M.compare, report = M.report_cmd })
end

return { help = HELP, main = M.main, policy = M }

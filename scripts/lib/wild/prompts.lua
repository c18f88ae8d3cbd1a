-- The Wild Loop's prompts. Every call is stateless: each stage's user message is rebuilt
-- from the session (goal, iteration, sweep, the one event being shown).
local prompts = require("lib.machine.prompts")

local M = {}

M.SWEEP_TEMPLATE = [[
<sweep>
{
  "name": "LR sweep 1e-4 to 1e-2",
  "base_command": "python train.py",
  "parameters": {"lr": [0.0001, 0.001, 0.01]},
  "workdir": ".",
  "max_runs": 10
}
</sweep>]]

-- who raised an alert (moss.runs' `source`), as the alert prompt says it; rules say nothing
M.SOURCES = { manual = "raised by a person", script = "raised by a script", judge = "raised by the LLM judge" }

-- The titles of the prompts' sections and the reminder of a pending alert, in one place (a
-- project rewording them changes this table; tests read it instead of copying the words)
M.HEADINGS = { results = "Results of your commands", notes = "Your notes", earlier = "Earlier sweeps",
  analysis_then = "Your analysis then", log_tail = "Log tail",
  still_pending = "Every run has ended, but this alert is still pending: the loop cannot move on to the " ..
    "analysis until it is resolved." }
local H = M.HEADINGS

M.ICONS = { finished = "✅", failed = "❌", stopped = "⏹", running = "🏃", queued = "⏳" }

local context = require("lib.machine.context")
local fence = context.fence
M.fence = fence

local join = context.join
M.join = join

local function heading(stage, iteration, what)
  return ("## Wild Loop — %s (iteration %d)%s"):format(stage, iteration, what and (": " .. what) or "")
end

local function goal(S) return "**Goal:** " .. S.task end

--- The system prompt: the loop and its tags; in EXPLORING also the commands the role may use.
function M.system(S, env, state)
  local parts = { [[
You are a research agent running the Wild Loop: an autonomous loop of experiments toward a
goal. It has three stages, and each message from moss says which one you are in:

1. EXPLORING — understand the project (with commands), then define an experiment sweep.
2. RUNNING — moss runs the sweep's runs in the background and shows you one event at a
   time: an alert raised by a run's log, or a run that finished or failed.
3. ANALYZING — all runs have ended: judge whether the goal is reached.

You never start experiments yourself: you write tags and moss acts on them.

<sweep>{JSON}</sweep> (EXPLORING) — a parameter grid: one run per combination of values,
  each running `base_command --key=value ...` (values shell-quoted). Required: "name",
  "base_command", "parameters" (an object; a scalar counts as a one-value list). Optional:
  "workdir" (relative to the project), "max_runs" (default ]] ..
    tostring(S.wild and S.wild.default_max_runs or 10) .. [[),
  "alerts" (rules like "loss is nan", "loss > 8", "/Traceback/").
<resolve_alert>{"alert_id": "ID", "choice": "CHOICE"}</resolve_alert> — answer an alert
  with one of its choices; a choice starting with "stop" stops that run.
<promise>COMPLETE</promise> — the goal is reached; your reply is the final answer.
<promise>NEEDS_HUMAN</promise> — pause for a person; say exactly what you need.
<promise>CONTINUE</promise> — (ANALYZING) explore again and run another sweep.
Promises are honoured in every stage. Write a tag only when you mean it.]] }
  if state and state.commands and #state.commands > 0 and env and env.role then
    local names = {}
    for _, n in ipairs(prompts.allowed(state, env.role, env.machine)) do
      if n ~= "answer" then names[#names + 1] = n end
    end
    if #names > 0 then
      parts[#parts + 1] = "In EXPLORING you may also write commands as $(name args); their results " ..
        "are shown to you once, on the next turn:\n" .. prompts.reference(names)
    end
  end
  return table.concat(parts, "\n\n")
end

local function messages(list) return require("lib.machine.messages").block(nil, list) end
M.messages = messages

--- "3 runs: ✅ 1 finished, ❌ 1 failed, ⏹ 1 stopped; 1 pending alert"
function M.counts_line(counts, total, pending)
  local parts = {}
  for _, s in ipairs({ "finished", "failed", "stopped", "running", "queued" }) do
    if (counts[s] or 0) > 0 then parts[#parts + 1] = M.ICONS[s] .. " " .. counts[s] .. " " .. s end
  end
  local line = ("%d run%s: %s"):format(total, total == 1 and "" or "s",
    #parts > 0 and table.concat(parts, ", ") or "none")
  if pending and pending > 0 then
    line = line .. ("; ⚠ %d pending alert%s"):format(pending, pending == 1 and "" or "s")
  end
  return line
end

--- One line per run: icon, name, parameters, status, exit code.
function M.run_line(r)
  local status = r.status or "?"
  local bits = { (M.ICONS[status] or "•") .. " " .. r.name .. " (`" .. r.id .. "`)" }
  if r.params and r.params ~= "" then bits[#bits + 1] = "[" .. r.params .. "]" end
  bits[#bits + 1] = status
  if r.code ~= nil then bits[#bits + 1] = "exit " .. tostring(r.code) end
  if r.duration then bits[#bits + 1] = ("%.1f s"):format(r.duration) end
  if r.error and r.error ~= "" then bits[#bits + 1] = "— " .. r.error end
  return table.concat(bits, " ")
end

--- The sweep block shown in RUNNING prompts: name, command, counts.
function M.sweep_block(sw, view)
  return ("**Sweep %q:** `%s` — %s"):format(sw.name, sw.base_command,
    M.counts_line(view.counts, #sw.runs, view.pending))
end

local function history_block(W)
  local hist = W.history or {}
  if #hist == 0 then return nil end
  local lines = { "**" .. H.earlier .. ":**" }
  for i = math.max(1, #hist - 2), #hist do
    local h = hist[i]
    lines[#lines + 1] = ("- iteration %d, %q (`%s`): %s"):format(h.iteration, h.name, h.base_command, h.summary)
    for _, rl in ipairs(h.runs or {}) do lines[#lines + 1] = "  - " .. rl end
    if h.analysis and h.analysis ~= "" then
      lines[#lines + 1] = "  " .. H.analysis_then .. ": " .. h.analysis:gsub("\n+", " ")
    end
  end
  return table.concat(lines, "\n")
end

--- EXPLORING: goal, earlier sweeps, messages, command results, the sweep template.
function M.exploring(S, W, o)
  return join(
    heading("EXPLORING", W.iteration),
    goal(S),
    history_block(W),
    o.notes,
    messages(o.messages),
    o.results,
    [[
Study the project with commands if you need to, then define the experiments. When you are
ready, reply with exactly one sweep tag, for example:]] .. "\n\n" .. M.SWEEP_TEMPLATE .. "\n\n" .. [[
Each combination of parameter values becomes one run of `base_command --key=value ...`.
If the goal is already reached, reply <promise>COMPLETE</promise> with your answer; if you
need a person, <promise>NEEDS_HUMAN</promise> and what you need.]],
    require("lib.wild.loop").executor() == "ray" and [[
The runs go to a Ray cluster, one job per run with the project as its working directory. Add
"resources": {"num_cpus": N, "num_gpus": M} to the sweep for what each run needs (default 1 CPU,
no GPU); a run prints its metrics to its log, and files it must return go to $MOSS_RESULTS_DIR.]] or nil
  )
end

--- RUNNING, an alert: id, severity, message, choices and the resolve template.
function M.alert(S, W, a, view, o)
  local choices = {}
  for _, c in ipairs(a.choices or {}) do choices[#choices + 1] = ("%q"):format(c) end
  local example = (a.choices or {})[1] or "continue"
  return join(
    heading("RUNNING", W.iteration, o.reminder and "alert still pending" or "alert"),
    goal(S),
    ("**Alert** `%s` — severity **%s** — run %s (`%s`)%s\n%s"):format(a.id, (a.severity or "warning"):upper(),
      a.run_name or "?", a.run_id or "?", M.SOURCES[a.source] and (" — " .. M.SOURCES[a.source]) or "",
      a.message or ""),
    a.line and a.line ~= "" and ("Log line:\n" .. fence(a.line)) or nil,
    o.reminder and H.still_pending or nil,
    "**Choices:** " .. table.concat(choices, ", ") .. " (one starting with \"stop\" stops the run)\n\n" ..
      "Decide, then resolve it with the choice you picked, e.g.:\n\n" ..
      ('<resolve_alert>{"alert_id": "%s", "choice": "%s"}</resolve_alert>'):format(a.id, example),
    o.tail and o.tail ~= "" and (H.log_tail .. " of " .. (a.run_name or "the run") .. ":\n" .. fence(o.tail)) or nil,
    M.sweep_block(W.sweep, view),
    messages(o.messages)
  )
end

--- RUNNING, a run ended: run details, log tail, sweep summary.
function M.run_event(S, W, r, view, o)
  return join(
    heading("RUNNING", W.iteration, "run " .. r.status),
    goal(S),
    ("Run %s (`%s`) **%s**%s%s.\nParameters: %s\nCommand: `%s`"):format(r.name, r.id, r.status,
      r.code ~= nil and (" with exit code " .. tostring(r.code)) or "",
      r.duration and (" after %.1f s"):format(r.duration) or "",
      r.params ~= "" and r.params or "(none)", r.cmd),
    (H.log_tail .. " (last %d characters):\n"):format(o.tail_chars) .. fence(o.tail ~= "" and o.tail or "(empty log)"),
    M.sweep_block(W.sweep, view),
    messages(o.messages),
    "Note briefly what this result tells you. Nothing else is needed now: moss shows you the next event " ..
      "when there is one, and the analysis once every run has ended."
  )
end

--- ANALYZING: per-run results and pass/fail counts; asks for a promise.
function M.analysis(S, W, view, o)
  local lines = {}
  for _, r in ipairs(view.runs) do
    local line = "- " .. M.run_line(r)
    if r.last and r.last ~= "" then line = line .. "\n  last output: `" .. r.last .. "`" end
    lines[#lines + 1] = line
  end
  local alerts = {}
  for _, a in ipairs(view.alerts or {}) do
    alerts[#alerts + 1] = ("- `%s` %s on %s: %s — %s"):format(a.id, a.severity or "warning", a.run_name or a.run_id,
      a.message or "", a.status == "resolved" and ("resolved: " .. tostring(a.choice)) or a.status)
  end
  local c = view.counts
  return join(
    heading("ANALYZING", W.iteration),
    goal(S),
    ("**Sweep %q** (`%s`): %d passed (finished), %d failed, %d stopped, of %d runs%s."):format(W.sweep.name,
      W.sweep.base_command, c.finished or 0, c.failed or 0, c.stopped or 0, #W.sweep.runs,
      W.sweep.total and W.sweep.total > #W.sweep.runs and
        (" (the grid had %d combinations)"):format(W.sweep.total) or ""),
    "**Runs:**\n" .. table.concat(lines, "\n"),
    #alerts > 0 and ("**Alerts:**\n" .. table.concat(alerts, "\n")) or nil,
    messages(o.messages),
    [[
Analyse the results against the goal, then end with exactly one of:
<promise>COMPLETE</promise> — the goal is reached; this analysis is the final answer.
<promise>CONTINUE</promise> — not yet: explore again and design the next sweep.
<promise>NEEDS_HUMAN</promise> — you need a person; say exactly what.]]
  )
end

--- The time limit passed: one last reply, a short report.
function M.time_up(S, W, limit, o)
  return join(
    heading("TIME LIMIT", W.iteration),
    goal(S),
    W.sweep and M.sweep_block(W.sweep, o.view) or nil,
    messages(o.messages),
    ("The loop's time limit (%d s, [agent.wild] max_time_s) has passed: no more sweeps will start and " ..
      "this session ends after your reply. Write a short report: what was tried, what was learned, " ..
      "and what you would do next."):format(limit)
  )
end

--- The LLM judge (lib/wild/judge.lua): its system prompt and the question about one run.
M.JUDGE_SYSTEM = [[You watch a machine-learning training run for a research agent. You are shown the
recent log of one run. Decide whether a person should look at it now: divergence, a loss that
stopped improving or explodes, NaN/Inf, errors, stalls, resource trouble. Normal progress is not
an alert.

Answer with exactly one line:
OK
or
ALERT <info|warning|critical>: <one sentence saying what is wrong>]]

function M.judge(S, W, run, tail)
  return join(
    ("Run %s (`%s`) of the sweep %q, status %s."):format(run.name or "?", run.cmd or "?",
      (W.sweep and W.sweep.name) or "?", run.status or "?"),
    "**Goal of the research:** " .. (S.task or ""),
    "Recent log:\n" .. fence(tail),
    "Is there something wrong that needs attention now? One line: OK, or ALERT <severity>: <what>."
  )
end

return M

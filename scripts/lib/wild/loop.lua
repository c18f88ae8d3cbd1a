-- The Wild Loop's stages as functions for the generic runner: a context function per
-- state (what the model sees), one shared `handle` (the tag grammar) and `next`.
--
-- Session data lives in S.wild (checkpointed with the session, so --resume continues):
--   iteration      exploring rounds so far (CONTINUE adds one)
--   sweep          the sweep being run: name, base_command, workdir, total, runs = { {id, name, cmd, params} }
--   reported       run id -> status already shown to the model (finished/failed)
--   seen_alerts    alert id -> true once shown to the model (the "processed" half of the double guard)
--   event          the prompt being answered: {kind = explore|alert|run|analysis|time_up, ...}
--   notes          messages for the next prompt (resolutions, parse errors)
--   history        earlier sweeps with their results and the analysis that ended them
--
-- RUNNING is event driven: its context waits on moss.runs.wait until something happened,
-- then shows ONE event — a pending alert not yet shown (alerts first), else a run that
-- newly finished or failed. Events are derived from moss.runs.list()/alerts() against the
-- tracking above (the wait only wakes us), so nothing is lost across a resume. ANALYZING
-- comes only when every run is terminal AND no alert is pending (the double guard).
local commands = require("lib.machine.commands")
local messages = require("lib.machine.messages")
local parser = require("lib.machine.parser")
local context = require("lib.machine.context")
local finish = require("lib.machine.finish")
local tags = require("lib.wild.tags")
local grid = require("lib.wild.grid")
local P = require("lib.wild.prompts")
local judge = require("lib.wild.judge")

local M = {}

M.TERMINAL = { finished = true, failed = true, stopped = true }
-- run transitions worth a turn of their own (as the original: a stop is not news)
M.EVENT_STATUSES = { finished = true, failed = true }
M.DEFAULT_ALERTS = { "loss is nan", "loss spike" } -- "loss spike" gets [agent.wild] spike_factor (3)

local T0 = nil -- the first turn of this invocation: max_time_s is counted from here
local OUT = nil      -- the output sink, once a handle has seen env

function M.config()
  local agent = moss.config.agent or {}
  return type(agent.wild) == "table" and agent.wild or {}
end

--- Where the sweep's runs go: "local" (subprocesses, the default) or "ray" (one Ray job per run).
function M.executor()
  local ex = M.config().executor
  if ex == nil or ex == "" then return "local" end
  return ex
end

local function max_time()
  local n = tonumber(M.config().max_time_s)
  if n and n > 0 then return n end
  return nil
end

--- Seconds left before [agent.wild] max_time_s, or nil without a limit.
function M.remaining()
  local limit = max_time()
  if not limit then return nil end
  T0 = T0 or os.time()
  return limit - os.difftime(os.time(), T0)
end

function M.expired()
  local r = M.remaining()
  return r ~= nil and r <= 0
end

local function log(S, event, data) moss.session.log(S.id, event, data or {}) end

local function progress(text)
  if OUT and OUT.info then OUT:info(text) else moss.ui.status(text) end
end

local function note(W, msg) W.notes[#W.notes + 1] = msg end

local function cap(text, n)
  text = text or ""
  if #text <= n then return text end
  return text:sub(1, n) .. "…"
end

function M.init(S)
  T0 = T0 or os.time()
  local W = S.wild
  if not W then
    W = { iteration = 1, history = {}, reported = moss.dict(), seen_alerts = moss.dict(), notes = {} }
    S.wild = W
  end
  W.notes = W.notes or {}
  W.history = W.history or {}
  W.reported = W.reported or moss.dict()
  W.seen_alerts = W.seen_alerts or moss.dict()
  W.default_max_runs = M.config().max_runs or 10
  return W
end

-- Messages for the next prompt: moss's for this state (refusals, "The user says: ..." on
-- --resume) and the loop's own notes.
local function message_list(S, W)
  local out = {}
  for _, m in ipairs(messages.list(S)) do out[#out + 1] = m end
  for _, m in ipairs(W.notes or {}) do out[#out + 1] = m end
  return out
end

--- What the sweep's runs and alerts look like now (host truth).
function M.observe(S)
  local W = S.wild
  local view = { runs = {}, by_id = {}, counts = {}, alerts = {}, pending_alerts = {}, pending = 0,
    all_terminal = true }
  local sw = W.sweep
  if not sw then return view end
  local recs = {}
  for _, r in ipairs(moss.runs.list()) do recs[r.id] = r end
  for _, sr in ipairs(sw.runs) do
    local r = recs[sr.id]
    local v = { id = sr.id, name = sr.name, params = sr.params, cmd = sr.cmd,
      status = r and r.status or "failed", code = r and r.code, duration = r and r.duration,
      error = r and r.error or (not r and "its record is gone" or nil) }
    view.runs[#view.runs + 1] = v
    view.by_id[v.id] = v
    view.counts[v.status] = (view.counts[v.status] or 0) + 1
    if not M.TERMINAL[v.status] then view.all_terminal = false end
  end
  for _, a in ipairs(moss.runs.alerts()) do
    if view.by_id[a.run_id] then
      view.alerts[#view.alerts + 1] = a
      if a.status == "pending" then view.pending_alerts[#view.pending_alerts + 1] = a end
    end
  end
  view.pending = #view.pending_alerts
  return view
end

--- The next event to show: an alert not yet shown, else a run that newly finished/failed.
function M.next_event(W, view)
  for _, a in ipairs(view.pending_alerts) do
    if not W.seen_alerts[a.id] then return { kind = "alert", alert = a } end
  end
  for _, r in ipairs(view.runs) do
    if M.EVENT_STATUSES[r.status] and W.reported[r.id] == nil then
      return { kind = "run", run_id = r.id, status = r.status }
    end
  end
  return nil
end

--- The double guard: all runs terminal, no alert the model has not seen, and no alert
-- pending on the host (a resolution may have failed).
function M.ready_for_analysis(W, view)
  if not view.all_terminal then return false end
  for _, a in ipairs(view.pending_alerts) do
    if not W.seen_alerts[a.id] then return false end
  end
  return view.pending == 0
end

local function last_line(text)
  local last = ""
  for line in (text or ""):gmatch("[^\n]+") do
    if line:match("%S") then last = line end
  end
  return cap(last:gsub("^%s+", ""):gsub("%s+$", ""), 200)
end

local function tail_chars() return tonumber(M.config().log_tail_chars) or 1000 end

local function notes_block(S)
  local notes = S.mem and require("lib.machine.memory").notes(S.mem) or {}
  if #notes == 0 then return nil end
  local lines = { "**" .. P.HEADINGS.notes .. ":**" }
  for _, n in ipairs(notes) do lines[#lines + 1] = "- [" .. n.id .. "] " .. n.content end
  return table.concat(lines, "\n")
end

local function results_block(S)
  local pending = S.mem and S.mem.pending or {}
  if #pending == 0 then return nil end
  return context.outputs_block("**" .. P.HEADINGS.results .. "** (shown once):", pending)
end

--- Build the prompt for event `ev` and remember it as the one being answered.
function M.present(S, W, ev, view)
  W.event = ev
  local o = { messages = message_list(S, W) }
  local kind = ev.kind
  log(S, "wild_prompt", { kind = kind, turn = S.turn, alert = ev.alert and ev.alert.id, run = ev.run_id,
    iteration = W.iteration })
  if kind == "time_up" then
    o.view = view or (W.sweep and M.observe(S)) or nil
    progress("time limit reached: asking for a final report")
    return P.time_up(S, W, max_time() or 0, o)
  elseif kind == "explore" then
    o.notes = notes_block(S)
    o.results = results_block(S)
    return P.exploring(S, W, o)
  end
  view = view or M.observe(S)
  if kind == "alert" then
    local a = ev.alert
    o.reminder = ev.reminder
    o.tail = moss.runs.log_tail(a.run_id, tail_chars())
    progress(("⚠ alert %s (%s) on %s: %s"):format(a.id, a.severity or "warning", a.run_name or a.run_id,
      a.message or ""))
    return P.alert(S, W, a, view, o)
  elseif kind == "run" then
    local r = view.by_id[ev.run_id]
    o.tail_chars = tail_chars()
    o.tail = moss.runs.log_tail(r.id, o.tail_chars)
    progress(("%s run %s %s%s"):format(P.ICONS[r.status] or "•", r.name, r.status,
      r.code ~= nil and (" (exit " .. tostring(r.code) .. ")") or ""))
    return P.run_event(S, W, r, view, o)
  else -- analysis
    for _, r in ipairs(view.runs) do r.last = last_line(moss.runs.log_tail(r.id, 400)) end
    progress("all runs ended: " .. P.counts_line(view.counts, #view.runs, view.pending))
    return P.analysis(S, W, view, o)
  end
end

-- ---- contexts ------------------------------------------------------------------------------

function M.exploring_context(S)
  local W = M.init(S)
  if M.expired() then return M.present(S, W, { kind = "time_up" }) end
  return M.present(S, W, { kind = "explore" })
end

function M.running_context(S)
  local W = M.init(S)
  if not W.sweep then return M.present(S, W, { kind = "explore" }) end
  local waiting = false -- logged once a turn: the loop now waits for its runs
  while true do
    if M.expired() then return M.present(S, W, { kind = "time_up" }) end
    local view = M.observe(S)
    -- an event shown before but never answered (the call failed, or moss was stopped)
    local ev = W.event
    if ev and ev.kind ~= "alert" and ev.kind ~= "run" then ev = nil end
    ev = ev or M.next_event(W, view)
    if ev then return M.present(S, W, ev, view) end
    if M.ready_for_analysis(W, view) then return M.present(S, W, { kind = "analysis" }, view) end
    if view.all_terminal and view.pending > 0 then
      -- every run ended but an alert the model saw is still pending: ask again rather
      -- than wait forever (the original's known stuck case)
      return M.present(S, W, { kind = "alert", alert = view.pending_alerts[1], reminder = true }, view)
    end
    local left = M.remaining()
    local step = math.min(30, judge.tick(S, W, view, function(msg) note(W, msg) end) or 30)
    if not waiting then
      waiting = true
      local going = 0
      for _, r in ipairs(view.runs) do if not M.TERMINAL[r.status] then going = going + 1 end end
      log(S, "wild_waiting", { turn = S.turn, sweep = W.sweep.name, going = going })
    end
    moss.runs.wait(left and math.max(1, math.min(left, step)) or step)
  end
end

function M.analyzing_context(S)
  local W = M.init(S)
  if M.expired() then return M.present(S, W, { kind = "time_up" }) end
  if not W.sweep then return M.present(S, W, { kind = "explore" }) end
  return M.present(S, W, { kind = "analysis" })
end

-- ---- the response ------------------------------------------------------------------------

local function commit(W, ev)
  if ev.kind == "alert" and ev.alert then W.seen_alerts[ev.alert.id] = true end
  if ev.kind == "run" and ev.run_id then W.reported[ev.run_id] = ev.status end
end

--- One line on where the loop stands (for a checkpoint or a blocked end).
function M.summary(S, W)
  local parts = { ("Wild Loop iteration %d, stage %s"):format(W.iteration, S.state) }
  if W.sweep then
    local view = M.observe(S)
    parts[#parts + 1] = ("sweep %q: %s"):format(W.sweep.name, P.counts_line(view.counts, #W.sweep.runs, view.pending))
  end
  return table.concat(parts, "; ")
end

--- Start the runs of a sweep. Returns true, or false and why nothing started.
function M.start_sweep(S, W, spec)
  local cfg = M.config()
  local max_runs = spec.max_runs or tonumber(cfg.max_runs) or 10
  local combos, total = grid.expand(spec.parameters, max_runs)
  if total == 0 then
    for _, p in ipairs(spec.parameters) do
      if #p.values == 0 then return false, ("parameter %q has no values, so the grid is empty"):format(p.key) end
    end
  end
  local rules = {}
  local defaults = cfg.alerts
  if defaults == nil then defaults = M.DEFAULT_ALERTS end
  local k = tonumber(cfg.spike_factor)
  for _, r in ipairs(defaults) do
    -- a spike rule without its own factor takes [agent.wild] spike_factor
    if k and type(r) == "string" and r:match("^%s*[%w./_-]+%s+spikes?%s*$") then r = r .. " " .. k end
    rules[#rules + 1] = r
  end
  for _, r in ipairs(spec.alerts or {}) do rules[#rules + 1] = r end
  local sw = { name = spec.name, base_command = spec.base_command, workdir = spec.workdir, total = total,
    iteration = W.iteration, runs = {} }
  local ex = M.executor()
  local resources = nil
  if ex == "ray" then
    local res = spec.resources or {}
    resources = { num_cpus = tonumber(res.num_cpus or cfg.num_cpus) or 1,
      num_gpus = tonumber(res.num_gpus or cfg.num_gpus) or 0 }
  end
  for i, combo in ipairs(combos) do
    local cmd = grid.command(spec.base_command, combo)
    local ok, run = pcall(moss.runs.start, {
      cmd = cmd, name = spec.name .. " #" .. i, workdir = spec.workdir,
      alerts = #rules > 0 and rules or nil, detach = ex == "local" and cfg.detach == true or nil,
      timeout = tonumber(cfg.run_timeout_s), executor = ex, address = ex == "ray" and cfg.ray_address or nil,
      resources = resources, results = cfg.results,
      meta = { sweep = spec.name, iteration = W.iteration, params = grid.describe(combo), session = S.id },
    })
    if not ok then
      local msg = tostring(type(run) == "table" and run.message or run)
      if i == 1 then return false, msg end
      note(W, ("run %d of the sweep could not start (%s); the others run"):format(i, msg))
      break
    end
    sw.runs[#sw.runs + 1] = { id = run.id, name = run.name, cmd = cmd, params = grid.describe(combo) }
  end
  W.sweep = sw
  W.reported, W.seen_alerts = moss.dict(), moss.dict()
  if total > #combos then
    note(W, ("the grid has %d combinations; only the first %d run (max_runs)"):format(total, #combos))
  end
  log(S, "wild_sweep", { name = sw.name, iteration = W.iteration, total = total, runs = sw.runs, turn = S.turn })
  progress(("sweep %q: started %d run%s"):format(sw.name, #sw.runs, #sw.runs == 1 and "" or "s"))
  return true
end

local function has_answer_command(text)
  for _, c in ipairs(parser.parse(text)) do
    if c.name == "answer" or c.name == "done" then return true end
  end
  return false
end

local function explore(S, W, state, text, env)
  local spec, err = tags.sweep(text)
  if spec and M.expired() then
    note(W, "the time limit has passed: the sweep was not started")
    W.go = "exploring" -- whose next prompt asks for the final report
    return { outputs = {} }
  end
  if spec then
    local ok, why = M.start_sweep(S, W, spec)
    if ok then
      if spec.extra > 0 then note(W, "only the first <sweep> of your reply was used") end
      if #parser.parse(text) > 0 then note(W, "commands in the reply that started the sweep were not run") end
      W.go = "running"
      return { outputs = {} }
    end
    note(W, "the sweep was not started: " .. why)
  elseif err then
    note(W, err .. "; nothing was started: fix the tag and send it again")
  end
  if has_answer_command(text) then
    note(W, "$(answer) does not end the Wild Loop: reply <promise>COMPLETE</promise> when the goal is reached")
  end
  local verdict = commands.handle(S, state, text, env) -- a loop finishes the session from there
  if not spec and not err and #(verdict.outputs or {}) == 0 then
    note(W, "no <sweep> in your reply yet: study the project with commands if you need to, then send one")
  end
  W.go = "exploring"
  return { outputs = verdict.outputs or {} }
end

function M.handle(S, state, text, env)
  OUT = env.out
  local W = M.init(S)
  local ev = W.event or { kind = ({ running = "run", analyzing = "analysis" })[S.state] or "explore" }
  W.event = nil
  W.notes = {}
  commit(W, ev)

  -- alert resolutions count in every stage
  local resolutions, errors = tags.resolutions(text)
  for _, e in ipairs(errors) do note(W, e) end
  for _, r in ipairs(resolutions) do
    local ok, res = pcall(moss.runs.resolve, r.alert_id, r.choice)
    if ok then
      W.seen_alerts[r.alert_id] = true
      note(W, ("alert %s resolved with %q (run status: %s)"):format(r.alert_id, res.choice, res.run_status or "?"))
      progress(("alert %s resolved: %s"):format(r.alert_id, res.choice))
    else
      local why = tostring(type(res) == "table" and res.message or res)
      note(W, ("could not resolve alert %s: %s"):format(r.alert_id, why))
    end
    log(S, "wild_resolve", { alert = r.alert_id, choice = r.choice, ok = ok, turn = S.turn })
  end

  -- so do the promises (as the original's later fix did)
  local promise, perr = tags.promise(text)
  if perr then note(W, perr) end
  local body = tags.strip(text)
  if promise then log(S, "wild_promise", { promise = promise, stage = ev.kind, turn = S.turn }) end
  if promise == "COMPLETE" then
    -- an answer like any other: it stands only if the answer gate (validation, when
    -- configured) lets it; else the model is told why (its messages) and the loop goes on
    local answer = body ~= "" and body or "COMPLETE"
    local gate = commands.gate(env)
    if gate then finish.now(gate == true and "answered" or gate, answer) end
    log(S, "answer_rejected", { answer = answer, turn = S.turn })
    note(W, "<promise>COMPLETE</promise> was not accepted yet: see the messages")
  end
  if promise == "NEEDS_HUMAN" then
    finish.now("blocked", nil, { questions = body ~= "" and body or "The agent asked for a person.",
      progress = M.summary(S, W) })
  end

  -- the time limit: the model's report was the last word
  if ev.kind == "time_up" then
    local detail = ("the time limit of %d s ([agent.wild] max_time_s) passed"):format(max_time() or 0)
    if body ~= "" then detail = detail .. "\n\nFinal report:\n" .. body end
    finish.now("max_time", nil, { detail = detail, progress = M.summary(S, W) })
  end

  if ev.kind == "explore" then return explore(S, W, state, text, env) end

  if tags.find(text, "sweep")[1] then
    note(W, "a <sweep> starts only in EXPLORING; after this sweep's analysis, <promise>CONTINUE</promise> " ..
      "leads back there")
  end
  if #parser.parse(text) > 0 then note(W, "commands ($(...)) are only run in EXPLORING") end

  if ev.kind == "analysis" then
    -- CONTINUE (or no signal): keep the results, forget the tracking, explore again
    local view = M.observe(S)
    local lines = {}
    for _, r in ipairs(view.runs) do lines[#lines + 1] = P.run_line(r) end
    W.history[#W.history + 1] = { iteration = W.iteration, name = W.sweep.name, base_command = W.sweep.base_command,
      summary = P.counts_line(view.counts, #W.sweep.runs, 0), runs = lines, analysis = cap(body, 1500) }
    W.sweep = nil
    W.reported, W.seen_alerts = moss.dict(), moss.dict()
    W.iteration = W.iteration + 1
    progress(("continue: iteration %d, back to exploring"):format(W.iteration))
    W.go = "exploring"
    return { outputs = {} }
  end

  -- a RUNNING event was answered: analysis once nothing is left to show and the guard holds
  local view = M.observe(S)
  W.go = (M.next_event(W, view) == nil and M.ready_for_analysis(W, view)) and "analyzing" or "running"
  return { outputs = {} }
end

function M.next(S)
  local W = S.wild
  local go = W and W.go
  if W then W.go = nil end
  return go or S.state
end

--- The system prompt for a state (the same loop description; EXPLORING adds its commands).
function M.system(state)
  return function(S, env) return P.system(S, env, state) end
end

return M

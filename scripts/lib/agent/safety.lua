-- Safety nets for sessions that can write: shadow snapshots before every write, the
-- validation pipeline, and the escalation chain retry -> rollback -> ask.
--
--   1. Retry:    the same step fails again -> the error goes back to the model (up to
--                [agent] max_retries, default 3).
--   2. Rollback: still failing -> the tree is restored to the last snapshot where validation
--                passed (the session's start if it never did) and the model is told.
--   3. Ask:      failing after the rollback -> the user picks from numbered options
--                (interactive), or the session ends `blocked` (exit 3) with a checkpoint.
--
-- The answer gate (hooks.before_answer) holds the outcome to the tree as it is: an answer
-- stands only where validation passed on the current tree. An answer right after a rollback
-- (nothing changed since) claims work that was undone: step 3. A session that never changed
-- the tree, on a project whose validation fails, is sent back once, then ends `unvalidated`.
--
-- Everything here is state in the session table, so it checkpoints and resumes:
--   st.validated  validation passed on the tree as it is now
--   st.touched    the session has changed the tree
--   st.undone     a rollback brought the tree back and nothing has changed since
local validate = require("lib.agent.validate")

local M = {}

local OPTIONS = {
  "Skip this step for now and continue with the rest of the task",
  "Show me the failing output and the code involved, then stop",
  "Explain what you were trying to do and propose another approach",
}

local function say(S, msg) require("lib.machine.runner").say(S, msg) end

local function log(S, event, data) moss.session.log(S.id, event, data or {}) end

--- Prepare S.safety for a session; returns the hooks table for the runner env.
function M.setup(S, opts)
  local cfg = moss.config.agent or {}
  local writes = opts.access == "edit" or opts.access == "full"
  S.safety = S.safety or { failures = 0, failing = nil, rolled_back = false, validated = false, touched = false }
  local st = S.safety
  if st.dirty ~= nil then -- a checkpoint from before the answer gate knew `validated`
    st.touched, st.validated, st.dirty = st.dirty or st.touched or false, false, nil
  end
  -- settings are read afresh every time, so a resumed session uses the fixed config or flags
  st.writes = writes
  st.max_retries = cfg.max_retries or 3
  st.validate_on = opts.validate_on or cfg.validate_on or "edit"
  do
    local steps, source = validate.steps(cfg, opts.validate)
    st.steps, st.source = steps, source
    if #steps > 0 then
      local names = {}
      for _, s in ipairs(steps) do names[#names + 1] = s.name .. " (`" .. s.run .. "`)" end
      st.description = "validation (" .. (source or "") .. "): " .. table.concat(names, ", ") ..
        ", on " .. st.validate_on
    else
      st.description = "no validation: " .. tostring(source)
    end
    log(S, "validation_config", { steps = steps, source = source, on = st.validate_on })
  end
  if writes and not st.start_snapshot then
    if moss.agents.self().isolated then
      -- an isolated child's copy is as it started until its first write, and its first
      -- write's snapshot is taken once the copy is whole: that one is the session's start
      st.start_lazy = true
    else
      M.started(S, moss.shadow.snapshot("session " .. S.id .. " start"))
    end
  end
  return M.hooks(S)
end

--- The session's start snapshot (where a rollback of work that never validated goes back to).
function M.started(S, id)
  local st = S.safety
  st.start_snapshot, st.start_lazy = id, nil
  st.good_snapshot = st.good_snapshot or id
  log(S, "snapshot", { id = id, label = "session start" })
end

--- A write's snapshot: the session's start too, when that was left for the first write.
local function begin_write(S, label)
  local id = moss.shadow.begin_write(label)
  if S.safety.start_lazy then M.started(S, id) end
  return id
end

--- What a restore did, path by path, for the model and the user (at most `cap` paths a list).
function M.describe_restore(res, cap)
  cap = cap or 30
  local lines = {}
  local function list(title, items, fmt)
    if not items or #items == 0 then return end
    local shown = {}
    for i, x in ipairs(items) do
      if i > cap then shown[#shown + 1] = ("and %d more"):format(#items - cap) break end
      shown[#shown + 1] = fmt and fmt(x) or x
    end
    lines[#lines + 1] = title .. ": " .. table.concat(shown, ", ")
  end
  list("reverted", res.reverted)
  list("removed", res.removed)
  list("brought back", res.restored)
  list("NOT restored", res.skipped, function(x) return x.path .. " (" .. (x.detail or x.reason) .. ")" end)
  list("left alone (changed by someone else since)", res.conflicts,
    function(x) return x.path .. (x.session and (" (session " .. x.session .. ")") or "") end)
  if #lines == 0 then return "nothing needed restoring" end
  return table.concat(lines, "\n")
end

local function how(v)
  if v.timed_out then return "timed out" end
  return v.exit ~= nil and ("exit " .. tostring(v.exit)) or "could not start"
end

--- A failed validation, for the person at the terminal: the step and the last lines of its
-- output in a gutter (on stderr, like everything moss says besides the answer).
function M.show_failure(v, headline, style)
  moss.ui.print(headline or ("validation failed at step %s (`%s`, %s)"):format(v.step, v.command, how(v)),
    { style = style or "red" })
  local tail = v.output_tail or ""
  if tail ~= "" then moss.ui.print("  │ " .. tail:gsub("\n", "\n  │ "), { style = "dim" }) end
end

--- Run the pipeline once on the tree as it is. Records S.safety.validated and S.validation
-- (what the result JSON and `moss sessions show` report), logs it, and shows a failure.
function M.run(S, why)
  local st = S.safety
  -- what validation itself writes (build output, caches) is this session's too
  local w = st.writes and begin_write(S, "validation after turn " .. S.turn)
  local ok, r = pcall(validate.run, st.steps)
  if w then moss.shadow.end_write(w) end
  if not ok then error(r, 0) end
  st.validated, st.checked_turn = r.passed, S.turn
  local v = { passed = r.passed, why = why, turn = S.turn }
  if not r.passed then
    v.step, v.command, v.exit, v.timed_out = r.failed.name, r.failed.run, r.code, r.timed_out
    v.output_tail = validate.tail(r.output, 20)
    v.cannot_run = r.cannot_run
  end
  S.validation = v
  log(S, "validation", { why = why, passed = r.passed, step = v.step, command = v.command, exit = v.exit,
    timed_out = v.timed_out, output_tail = v.output_tail, report = r.report, turn = S.turn })
  if not r.passed and why ~= "baseline" then M.show_failure(v) end
  return r
end

--- Before the first turn of a session that can write: run validation once on the untouched
-- tree, so the person knows where they start and a step that cannot run here is reported
-- now, not found by a rollback of correct work. Skipped by --no-baseline or
-- [agent] validate_baseline = false.
function M.baseline(S)
  local st = S.safety
  if not st or not st.writes or #st.steps == 0 or st.validate_on == "never" then return end
  local r = M.run(S, "baseline")
  local v = S.validation
  v.baseline = true
  if r.passed then
    st.good_validated = true
    moss.ui.print("validation passes on the project as it is", { style = "dim" })
    return
  end
  if r.cannot_run then
    local what = ("validation step %s (`%s`) cannot run here (%s)"):format(v.step, v.command, how(v))
    if st.source and st.source:find("detected", 1, true) then
      M.show_failure(v, what)
      moss.ui.print("validation is off for this session: set [agent] validate_commands in .moss/config.toml " ..
        "to a pipeline that runs here (or validate_on = \"never\")", { style = "yellow" })
      log(S, "validation_off", { step = v.step, command = v.command, turn = S.turn })
      st.steps, st.description = {}, "no validation: the detected step cannot run here"
      S.validation = nil
      return
    end
    local tail = v.output_tail ~= "" and (":\n  │ " .. v.output_tail:gsub("\n", "\n  │ ")) or ""
    moss.error("config", what .. tail .. "\nFix the step in [agent] validate_commands, or start with " ..
      "--no-baseline (or [agent] validate_baseline = false) to let the session find out later", 0)
  end
  M.show_failure(v, ("validation fails on the project as it is, before any change: step %s (`%s`, %s)")
    :format(v.step, v.command, how(v)), "yellow")
  say(S, ("Note: validation already fails on the project as it is, before any change (step %s, `%s`). " ..
    "An answer counts as done only once validation passes.\n%s"):format(v.step, v.command, r.report))
end

--- Run the pipeline and escalate on failure. Returns (report, passed).
function M.check(S, why)
  local st = S.safety
  if not st or #st.steps == 0 then return nil, true end
  local r = M.run(S, why)
  if r.passed then
    st.failures, st.failing, st.rolled_back = 0, nil, false
    if st.writes then
      st.good_snapshot = moss.shadow.snapshot("validated after turn " .. S.turn)
      st.good_validated = true
    end
    return r.report, true
  end
  local key = r.failed.name
  if st.failing == key then st.failures = st.failures + 1 else st.failing, st.failures = key, 1 end
  local report = r.report
  if st.failures <= st.max_retries then
    report = report .. ("\n\n[retry %d/%d] Fix the cause and try again."):format(st.failures, st.max_retries)
    log(S, "retry", { step = key, attempt = st.failures, turn = S.turn })
  elseif not st.rolled_back and st.writes and st.good_snapshot then
    local ok, res = pcall(moss.shadow.restore, st.good_snapshot)
    st.rolled_back = true -- the next failure of this step goes straight to step 3
    if not ok then
      report = report .. ("\n\n[rollback] `%s` kept failing after %d retries, but the rollback failed: %s")
        :format(key, st.max_retries, tostring(res.message or res))
      log(S, "rollback_failed", { step = key, snapshot = st.good_snapshot, error = tostring(res.message or res) })
    else
      -- the tree is back where validation last passed, or at the session's start, where it
      -- may never have passed: only a validation run says which (st.validated)
      st.validated, st.undone = st.good_validated or false, true
      S.validation.rolled_back = true
      report = report .. ("\n\n[rollback] `%s` kept failing after %d retries: the project was restored to " ..
        "%s.\n%s\nTake a different approach."):format(key, st.max_retries,
        st.good_validated and "the last state where validation passed" or "how it was at the session's start",
        M.describe_restore(res))
      log(S, "rollback_done", { step = key, snapshot = st.good_snapshot, reverted = res.reverted,
        removed = res.removed, restored = res.restored, skipped = res.skipped, conflicts = res.conflicts,
        turn = S.turn })
      moss.ui.print("rollback: " .. M.describe_restore(res, 8):gsub("\n", "; "), { style = "yellow" })
    end
  else
    M.block(S, key, r.report)
  end
  return report, false
end

--- Step 3 is due: the next after_turn asks the user or ends the session blocked.
function M.block(S, step, report)
  S.blocked = { step = step, report = report, options = OPTIONS }
  log(S, "escalate", { step = step, turn = S.turn })
end

function M.hooks(S)
  local st = S.safety
  local hooks = {}
  --- Before a write-capable command or edit: a snapshot, and a journal line saying the
  -- action started (a resumed session uses it to undo a turn cut off mid-way).
  function hooks.before_write(label)
    if not st.writes then return nil end
    local id = begin_write(S, label)
    st.last_snapshot = id
    log(S, "action_start", { turn = S.turn, label = label, snapshot = id })
    return { snapshot = id, label = label }
  end
  --- After a write-capable edit or command, whether it succeeded or not: what it changed is
  -- this session's (a rollback restores it); a change means validation is due. Returns a
  -- note for the model when something it changed cannot be brought back.
  function hooks.after_write(w)
    if not w then return nil end
    local r = moss.shadow.end_write(w.snapshot)
    local changed, lost = r.changed or {}, r.not_captured or {}
    log(S, "action_done", { turn = S.turn, label = w.label, changed = changed, not_captured = lost })
    if #changed > 0 then
      st.touched, st.validated, st.undone, st.changed_this_turn = true, false, false, true
    end
    if #lost == 0 then return nil end
    local names = {}
    for i, x in ipairs(lost) do
      if i > 10 then names[#names + 1] = ("and %d more"):format(#lost - 10) break end
      names[#names + 1] = x.path .. " (" .. (x.detail or x.reason) .. ")"
    end
    return "Note: a rollback could not bring back " .. table.concat(names, ", ") .. "."
  end
  --- After a turn's tools ran: with validate_on = "edit", a turn that changed the tree (by
  -- edits or shell commands) is validated once; the report goes with its last write.
  function hooks.after_tools(outputs)
    local changed = st.changed_this_turn
    st.changed_this_turn = false
    if not changed or st.validate_on ~= "edit" then return end
    local report, passed = M.check(S, "edit")
    if not report then return end
    for i = #outputs, 1, -1 do
      local o = outputs[i]
      if o.writes then
        o.content = (o.content or "") .. "\n\n" .. report
        if not passed then o.ok = false end
        return
      end
    end
  end
  --- After a turn: validation on "turn"; a blocked escalation asks the user or ends the session.
  function hooks.after_turn(env, ran_commands)
    if st.validate_on == "turn" and ran_commands then
      local report = M.check(S, "turn")
      if report then say(S, report) end
    end
    if S.blocked then return M.escalate(S, env) end
    return nil
  end
  --- The answer gate: true (the answer stands), false (it goes back to the model, or step
  -- 3 is due), or "unvalidated" (the session ends with that reason: the project's validation
  -- fails, this session changed nothing, and the model was already told once).
  function hooks.before_answer()
    if not st.writes or #st.steps == 0 or st.validate_on == "never" then return true end
    if st.undone then
      if st.checked_turn == S.turn then
        -- the rollback came in this very turn, with the reply that answered
        say(S, "Your answer was not accepted: your changes were rolled back (see above).")
        return false
      end
      -- nothing changed since the rollback: the answer describes work that was undone
      say(S, "Your answer was not accepted: the project was rolled back and nothing has changed since, " ..
        "so the work it describes is not in the tree.")
      M.block(S, st.failing or (S.validation and S.validation.step) or "validation",
        S.validation and S.validation.output_tail or "")
      return false
    end
    if st.validated then return true end
    if st.checked_turn == S.turn then
      -- validation already ran on this turn's tree and failed: its report is with the edit
      say(S, "Your answer was not accepted yet: validation fails on the tree as it is now.")
      return false
    end
    if not st.touched then
      local r = M.run(S, "answer")
      if r.passed then return true end
      if st.sent_back then return "unvalidated" end
      st.sent_back = true
      say(S, "Your answer was not accepted yet: validation fails on the project as it is, and this session " ..
        "has not changed anything. If the task needs the project to pass, make the change; if you answer " ..
        "again as it is, the session ends unvalidated.\n" .. r.report)
      return false
    end
    local report, passed = M.check(S, "answer")
    if not passed then say(S, "Your answer was not accepted yet.\n" .. report) end
    if S.blocked then return false end
    return passed
  end
  return hooks
end

--- A resumed session whose last run was killed mid-turn (after it began writing, before
-- its checkpoint) would re-run that turn and apply its writes twice: undo them first.
function M.recover(S)
  local st = S.safety
  if not st or not st.writes then return end
  local first
  for _, e in ipairs(moss.session.events(S.id)) do
    if e.event == "action_start" and (e.turn or 0) > S.turn and e.snapshot then first = first or e end
  end
  if not first then return end
  local ok, res = pcall(moss.shadow.restore, first.snapshot)
  if not ok then
    log(S, "turn_rollback_failed",
      { turn = first.turn, snapshot = first.snapshot, error = tostring(res.message or res) })
    say(S, ("moss was stopped during turn %d, after it had started changing files, and undoing that failed " ..
      "(%s): check what that turn already did before you repeat it."):format(first.turn, tostring(res.message or res)))
    return
  end
  local paths = {}
  for _, key in ipairs({ "reverted", "removed", "restored" }) do
    for _, p in ipairs(res[key] or {}) do paths[#paths + 1] = p end
  end
  log(S, "turn_rolled_back", { turn = first.turn, snapshot = first.snapshot, paths = paths, skipped = res.skipped,
    conflicts = res.conflicts })
  say(S, ("moss was stopped during turn %d, after it had started changing files; those changes were undone, " ..
    "so the turn starts again from the last checkpoint.\n%s"):format(first.turn, M.describe_restore(res)))
end

--- The user answered a blocked escalation (asked, or by resuming with a message): they
-- have seen the failure, so the answer gate takes the tree as it is now.
function M.user_decided(S)
  S.blocked = nil
  local st = S.safety
  if not st then return end
  if not st.validated then
    log(S, "validation_waived", { step = st.failing, turn = S.turn })
    if S.validation then S.validation.waived = true end
  end
  st.failures, st.rolled_back, st.validated, st.undone = 0, false, true, false
end

--- Step 3 of the chain. Returns a finish reason ("blocked") or nil to go on.
function M.escalate(S, env)
  local b = S.blocked
  local question = ("Validation step `%s` still fails after %d retries and a rollback. How should I go on?")
    :format(b.step, S.safety.max_retries)
  if env.interactive then
    local answer = moss.ui.ask(question, { choices = b.options })
    log(S, "ask", { question = question, answer = answer, turn = S.turn })
    if answer then
      local pick = tonumber(answer)
      say(S, "The user answered: " .. (pick and b.options[pick] or answer))
      M.user_decided(S)
      return nil
    end
  end
  S.questions = question .. "\n" .. (function()
    local t = {}
    for i, o in ipairs(b.options) do t[#t + 1] = "  " .. i .. ". " .. o end
    return table.concat(t, "\n")
  end)()
  S.progress = "Blocked on failing validation step " .. b.step
  return "blocked"
end

return M

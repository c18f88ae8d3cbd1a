-- The generic machine runner: one LLM call per state, commands carried out between calls.
--
-- A MACHINE is data:
--   { name = "v2", start = "explorer", max_turns = 16, max_stale = 5,
--     states = { explorer = { context = "last_outputs", next = "evaluator",
--                             commands = {"view", ...}, concludes = false }, ... } }
-- `next` is a state name or a function(S, turn) -> name, so recovery or refinement states
-- are a matter of editing Lua. `commands` lists what the state may do (tools outside the
-- list are reported back as not executed); `concludes` says whether $(answer) ends the
-- session from this state. `judges = true` marks the state whose turns count toward the
-- "no new evidence" cycle limit. `on_response(S, text)` lets a state keep its text (the
-- planner keeps the plan). `handle(S, state, text, env)` replaces the $(...) command
-- handling for a state with a grammar of its own; it returns a verdict
-- { answer = text } | { outputs = {...} } | { finished = reason }.
local parser = require("lib.agent.parser")
local memory = require("lib.agent.memory")
local context = require("lib.agent.context")
local commands = require("lib.agent.commands")
local prompts = require("lib.agent.prompts")

local M = {}

local function now() return os.time() end

local function log(S, event, data)
  if S.log ~= false then moss.session.log(S.id, event, data or {}) end
end

--- A new session table: plain data, so it checkpoints as JSON and resumes as-is.
function M.new_session(t)
  return {
    id = t.id or moss.session.new_id(),
    task = t.task,
    context_note = t.context_note,
    machine = t.machine,
    role = t.role,
    state = t.start,
    turn = 0,
    max_turns = t.max_turns,
    mem = memory.new(),
    last_outputs = {},
    history = {},
    inbox = moss.dict(),
    repeats = moss.dict(),
    seen = moss.dict(),
    stale = 0,
    new_evidence = false,
    usage = nil,
    started_at = now(),
    done = false,
  }
end

local USAGE_KEYS = { "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "cost_usd", "calls" }

-- This session's usage: what earlier runs of it (before a resume) used, plus what this
-- process used since the session (or this pipeline stage) started here.
local function session_usage(S, env)
  local now, start, prior = moss.llm.usage(), env.usage_start or {}, S.usage_prior or {}
  local u = moss.dict()
  for _, k in ipairs(USAGE_KEYS) do
    local v = (prior[k] or 0) + (now[k] or 0) - (start[k] or 0)
    if k == "cost_usd" then v = math.floor(v * 1e6 + 0.5) / 1e6 end
    u[k] = v
  end
  u.cost_known = now.cost_known ~= false and prior.cost_known ~= false
  return u
end

function M.save(S, env)
  S.usage = session_usage(S, env or {})
  moss.session.save(S.id, S)
end

local function finish(S, env, reason, answer, extra)
  S.done = true
  S.reason = reason
  S.answer = answer
  S.success = reason == "answered"
  for k, v in pairs(extra or {}) do S[k] = v end
  if reason == "answered" then S.questions, S.progress = nil, nil end
  M.save(S, env)
  log(S, "session_end", { reason = reason, turns = S.turn, answer = answer, usage = S.usage })
  if env.out then env.out:finish(S) end
  return S
end

local function allowed(state, role, name)
  if state.commands == nil or state.commands == "all" then return true end
  for _, n in ipairs(prompts.allowed(state, role)) do if n == name then return true end end
  return false
end

-- A short fingerprint of a whole output (FNV-1a), to tell "same output again" from progress.
local function signature(text)
  local h = 2166136261
  for i = 1, #text, 4096 do
    local bytes = { text:byte(i, math.min(i + 4095, #text)) }
    for j = 1, #bytes do h = ((h ~ bytes[j]) * 16777619) & 0xffffffff end
  end
  return ("%d:%08x"):format(#text, h)
end

--- A note back to the current state, shown on its next turn ("Messages from moss").
function M.say(S, msg)
  local box = S.inbox[S.state] or {}
  box[#box + 1] = msg
  S.inbox[S.state] = box
end

-- The text of $(answer X), or of the line after $(done ANSWER).
local function answer_text(c)
  local a = parser.unquote(c.args)
  if a == "ANSWER" or a == "" then a = (c.after or ""):gsub("^%s*[-:]?%s*", "") end
  return a
end

-- Carry out the commands of one response. Returns a verdict table:
--   { answer = text | nil, outputs = {...}, finished = reason | nil }
function M.handle(S, state, text, env)
  local cmds = parser.parse(text)
  local outputs, tools, answer, waiting, checkpoint = {}, {}, nil, false, nil
  local machine_name = S.machine
  local function say(msg) M.say(S, msg) end

  for _, c in ipairs(cmds) do
    local def = commands.defs[c.name]
    local name = def and def.name or c.name
    if not def then
      outputs[#outputs + 1] = { cmd = c.name .. " " .. c.args, ok = false,
        content = "unknown command `" .. c.name .. "`; known commands: " .. table.concat(commands.known(), ", ") }
      log(S, "command", { cmd = c.raw, ok = false, error = "unknown", turn = S.turn })
    elseif not allowed(state, env.role, name) then
      if name == "answer" then
        say("Only the " .. (env.concluders or "evaluator") .. " concludes: your $(" .. c.name ..
          ") was not accepted. Gather evidence with commands.")
      else
        say("Not executed: `" .. c.name .. " " .. c.args .. "` — the " .. S.state ..
          " does not run commands here" .. (state.concludes and "; answer with $(answer ...) or say what is missing." or "."))
      end
      log(S, "command_refused", { cmd = c.raw, state = S.state, machine = machine_name, turn = S.turn })
    elseif name == "answer" then
      answer = answer_text(c)
    elseif name == "wait" then
      waiting = true
    elseif name == "note" then
      local item = memory.note(S.mem, parser.unquote(c.args), S.turn)
      log(S, "note", { id = item.id, content = item.content, turn = S.turn })
    elseif name == "keep" then
      local kept, err = memory.keep(S.mem, c.args, S.turn)
      if err then say(err) end
      for _, it in ipairs(kept) do log(S, "keep", { id = it.id, cmd = it.cmd, turn = S.turn }) end
    elseif name == "drop" then
      local it = memory.drop(S.mem, c.args)
      if not it then say("drop: no kept item with id '" .. c.args .. "'") end
      log(S, "drop", { id = c.args, found = it ~= nil, turn = S.turn })
    elseif name == "forget" then
      local n = memory.forget(S.mem, parser.unquote(c.args))
      say("forget: removed " .. n .. " item(s) containing '" .. parser.unquote(c.args) .. "'")
    elseif name == "memorize" then
      local flag, text = c.args:match("^%-%-(%a+)%s+(.*)$")
      local kind = ({ preference = "preferences", decision = "decisions" })[flag or ""] or "facts"
      local ok, res = pcall(moss.memory.memorize, parser.unquote(text or c.args), { kind = kind })
      say(ok and ("memorized in .moss/memory/" .. res.kind .. ".md" .. (res.duplicate and " (already there)" or ""))
        or ("memorize failed: " .. tostring(res.message or res)))
    elseif name == "ask" then
      local q = parser.unquote(c.args)
      local reply = env.interactive and moss.ui.ask(q) or nil
      if reply then
        outputs[#outputs + 1] = { cmd = "ask " .. q, content = "User: " .. reply, ok = true }
      else
        outputs[#outputs + 1] = { cmd = "ask " .. q, ok = false,
          content = "Cannot ask: moss is running non-interactively. Decide using what you have, " ..
            "or end with $(checkpoint PROGRESS | QUESTIONS) so a person can answer and resume." }
        log(S, "blocked_ask", { question = q, turn = S.turn })
      end
      log(S, "ask", { question = q, answer = reply, turn = S.turn })
    elseif name == "checkpoint" then
      local progress, questions = c.args:match("^(.-)%s*|%s*(.*)$")
      checkpoint = { progress = parser.unquote(progress or c.args), questions = parser.unquote(questions or "") }
    else
      -- a tool; loop detection looks at its output once it has run
      c.key = name .. " " .. table.concat(parser.words(c.args), " ")
      tools[#tools + 1] = c
      outputs[#outputs + 1] = false -- placeholder, filled in order below
    end
  end

  if checkpoint then return { finished = "checkpoint", checkpoint = checkpoint } end
  if answer and waiting then
    say("Your answer was set aside because you also wrote $(wait).")
    answer = nil
  end
  if answer and state.concludes then
    if not env.before_answer or env.before_answer() then return { answer = answer } end
    log(S, "answer_rejected", { answer = answer, turn = S.turn })
  end

  local results = #tools > 0 and commands.run_tools(tools, env) or {}
  local k = 0
  for i, o in ipairs(outputs) do
    if o == false then
      k = k + 1
      outputs[i] = results[k]
      -- The same command with the same output again and again is a loop; the same
      -- command with new output (tests after an edit) is progress.
      local key, sig = tools[k].key, signature(results[k].content or "")
      local seen = S.repeats[key]
      local n = (seen and seen.sig == sig) and seen.n + 1 or 1
      S.repeats[key] = { sig = sig, n = n }
      local limit = env.loop_limit or 3
      if n > limit then
        log(S, "loop_detected", { cmd = key, count = n, turn = S.turn })
        return { finished = "loop", loop_cmd = key }
      elseif n == limit then
        outputs[i] = { cmd = results[k].cmd, ok = false,
          content = "Not shown again: this is the " .. n .. "rd time you asked for `" .. key .. "` and its " ..
            "output has not changed. Use what you already have, try something different, or conclude. " ..
            "Asking again ends the session." }
        log(S, "loop_warning", { cmd = key, count = n, turn = S.turn })
      end
    end
  end
  for _, o in ipairs(outputs) do
    log(S, "command", { cmd = o.cmd, ok = o.ok, refused = o.refused, output_chars = #(o.content or ""),
      output = o.content, turn = S.turn })
    if env.out then env.out:command(S, o) end
    if o.ok then
      local sig = signature(o.content or "")
      if not S.seen[sig] then S.seen[sig] = true; S.new_evidence = true end
    end
  end
  return { outputs = outputs }
end

local function system_prompt(S, state, env)
  local p = state.prompt
  if type(p) == "function" then return p(S, env) end
  if p then return p end
  return prompts.system(env.role, state.role_prompt or S.state, state)
end

local function llm_call(S, state, env, extra)
  local user = context.build(S, state)
  if extra then
    if type(user) == "table" then
      user[#user].text = user[#user].text .. "\n\n" .. extra
    else
      user = user .. "\n\n" .. extra
    end
  end
  local request = { system = system_prompt(S, state, env), messages = { { role = "user", content = user } },
    max_tokens = env.max_tokens or 4096 }
  log(S, "turn_start", { turn = S.turn, state = S.state, context_chars = #context.text(user),
    working_memory = #S.mem.items,
    pending = #S.mem.pending })
  local ok, resp = pcall(moss.llm.chat, request)
  if not ok then return nil, resp end
  log(S, "response", { turn = S.turn, state = S.state, text = resp.text })
  return resp
end

--- Run `machine` on session `S` until it answers or a limit ends it.
-- env: { out = output sink, interactive = bool, loop_limit = 3, max_tokens = N }
function M.run(machine, S, env)
  env = env or {}
  local names = {}
  for name, st in pairs(machine.states) do if st.concludes then names[#names + 1] = name end end
  table.sort(names)
  env.concluders = #names > 0 and table.concat(names, "/") or nil
  -- every output of the session is only worth keeping (and checkpointing) for a state
  -- that shows the whole history
  env.keep_history = false
  for _, st in pairs(machine.states) do
    if st.context == "all_outputs" or type(st.context) == "function" then env.keep_history = true end
  end
  S.usage_prior = S.usage
  env.usage_start = moss.llm.usage()
  if S.turn == 0 then
    log(S, "session_start", { session_id = S.id, root = moss.root, machine = S.machine, role = S.role })
    log(S, "task", { task = S.task, machine = S.machine, max_turns = S.max_turns, start = S.state, role = S.role })
    M.save(S, env) -- resumable even if the first turn never completes
  else
    log(S, "session_resume", { session_id = S.id, turn = S.turn, state = S.state })
  end
  while true do
    if S.turn >= S.max_turns then
      log(S, "max_turns", { turn = S.turn })
      return finish(S, env, "max_turns")
    end
    local spent = moss.llm.budget()
    if spent then return finish(S, env, "budget", nil, { detail = spent }) end

    local state = machine.states[S.state]
    if not state then moss.error("usage", "machine '" .. S.machine .. "' has no state '" .. tostring(S.state) .. "'") end
    S.turn = S.turn + 1
    if env.out then env.out:turn(S, state) end

    local resp, err = llm_call(S, state, env)
    if not resp then
      local kind = moss.error_kind(err)
      S.turn = S.turn - 1
      if kind == "budget" then return finish(S, env, "budget", nil, { detail = err.message }) end
      if kind == "config" or kind == "usage" or kind == "interrupted" then error(err, 0) end
      log(S, "error", { message = tostring(err), kind = kind })
      return finish(S, env, "error", nil, { detail = tostring(err) })
    end
    if env.out then env.out:llm(S, state, resp.text) end
    S.inbox[S.state] = nil
    if state.on_response then state.on_response(S, resp.text) end

    -- A state may bring its own grammar (XML tags, JSON, ...) by giving `handle`.
    local verdict = (state.handle or M.handle)(S, state, resp.text, env)
    if verdict.answer then
      log(S, "done", { answer = verdict.answer, turn = S.turn })
      return finish(S, env, "answered", verdict.answer)
    end
    if verdict.finished == "loop" then
      S.questions = "The agent was repeating: " .. verdict.loop_cmd
      return finish(S, env, "loop")
    end
    if verdict.finished == "checkpoint" then
      S.progress, S.questions = verdict.checkpoint.progress, verdict.checkpoint.questions
      log(S, "checkpoint", { progress = S.progress, questions = S.questions })
      local blocked = S.questions ~= "" and not env.interactive
      return finish(S, env, blocked and "blocked" or "checkpoint")
    end
    if verdict.finished then return finish(S, env, verdict.finished, nil, verdict.extra) end

    -- results are shown once: what this turn produced replaces what the last turn did
    local outs = verdict.outputs or {}
    S.mem.pending = outs
    if #outs > 0 then
      S.last_outputs = outs
      if env.keep_history then S.history[#S.history + 1] = { turn = S.turn, state = S.state, outputs = outs } end
    end
    if state.feedback_to then S.feedback = parser.strip(resp.text) end
    if env.after_turn then
      local reason = env.after_turn(env, #outs > 0)
      if reason then return finish(S, env, reason) end
    end

    if state.judges then
      if S.new_evidence then S.stale = 0 else S.stale = S.stale + 1 end
      S.new_evidence = false
      if S.stale >= (machine.max_stale or 5) then
        log(S, "cycle_limit", { cycles = S.stale, turn = S.turn })
        local forced = M.force_answer(S, state, env)
        if forced then return finish(S, env, "answered", forced, { forced = true }) end
        return finish(S, env, "cycle_limit")
      end
    end

    local nxt = state.next
    if type(nxt) == "function" then nxt = nxt(S, verdict) end
    S.state = nxt or S.state
    M.save(S, env)
  end
end

--- One last call that must answer (after too many turns without new evidence).
function M.force_answer(S, state, env)
  S.turn = S.turn + 1
  if env.out then env.out:turn(S, state) end
  local resp = llm_call(S, state, env,
    "You have explored enough: several turns brought no new evidence. Answer now with " ..
    "$(answer YOUR ANSWER) using what you have; say what is uncertain.")
  if not resp then return nil end
  if env.out then env.out:llm(S, state, resp.text) end
  for _, c in ipairs(parser.parse(resp.text)) do
    if c.name == "answer" or c.name == "done" then return answer_text(c) end
  end
  return nil
end

return M

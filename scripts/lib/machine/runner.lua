-- The generic machine runner: one LLM call per state, commands carried out between calls.
--
-- A MACHINE is data:
--   { name = "v2", start = "explorer", max_turns = 16, max_stale = 5,
--     states = { explorer = { context = "last_outputs", next = "evaluator",
--                             commands = {"view", ...}, concludes = false }, ... } }
-- `next` is a state name or a function(S, turn) -> name, so recovery or refinement states
-- are a matter of editing Lua. `commands` lists what the state may do (tools outside the
-- list are reported back as not executed; each command is a file under scripts/commands/,
-- see lib/machine/commands.lua); `concludes` says whether a concluding command ends the
-- session from this state. `judges = true` marks the state whose turns count toward the
-- "no new evidence" cycle limit. `on_response(S, text)` lets a state keep its text (the
-- planner keeps the plan). `handle(S, state, text, env)` replaces the $(...) command
-- handling for a state with a grammar of its own; it returns a verdict
-- { answer = text } | { outputs = {...} } | { finished = reason }.
local parser = require("lib.machine.parser")
local memory = require("lib.machine.memory")
local context = require("lib.machine.context")
local commands = require("lib.machine.commands")
local prompts = require("lib.machine.prompts")
local messages = require("lib.machine.messages")
local usage = require("lib.machine.usage")
local output = require("lib.machine.output")
local compact = require("lib.machine.compact")
local echo = require("lib.machine.echo")

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
    messages = moss.dict(),
    repeats = moss.dict(),
    seen = moss.dict(),
    stale = 0,
    new_evidence = false,
    usage = nil,
    started_at = now(),
    done = false,
  }
end

function M.save(S, env)
  S.usage = usage.of_session(S, env or {})
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

--- A note back to the current state, shown on its next turn ("Messages from moss").
function M.say(S, msg) messages.say(S, msg) end

local function system_prompt(S, state, env)
  local p = state.prompt
  if type(p) == "function" then return p(S, env) end
  if p then return p end
  if prompts.is_shared(env.machine, S.state) then return prompts.shared(env.role, env.machine) end
  return prompts.system(env.role, state.role_prompt or S.state, state)
end

local function build_request(S, state, env, extra)
  local user = context.build(S, state)
  if extra then
    if type(user) == "table" then
      user[#user].text = user[#user].text .. "\n\n" .. extra
    else
      user = user .. "\n\n" .. extra
    end
  end
  return { system = system_prompt(S, state, env), messages = { { role = "user", content = user } },
    max_tokens = env.max_tokens or 4096, label = (S.role and (S.role .. "/") or "") .. S.state }, user
end

local function llm_call(S, state, env, extra)
  -- building a context may wait (the Wild Loop waits for its runs there): the user may stop it
  local built, request, user = pcall(build_request, S, state, env, extra)
  if not built then return nil, request end
  -- the context is filling up: summarise, checkpoint, and go on (lib/machine/compact.lua)
  local rebuilt, err = compact.step(S, state, env, request, function() return build_request(S, state, env, extra) end,
    function() M.save(S, env) end)
  if err then return nil, err end
  if rebuilt then request, user = rebuilt[1], rebuilt[2] end
  env.own_text = echo.own_text(request, state, S, extra) -- what a reply must not echo back
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
  env.machine = machine
  if env.out then env.out.machine = machine end
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
  -- running again: an unfinished session's last reason ("interrupted", written by the host
  -- when its process was stopped) is history now
  if not S.done then S.reason, S.success = nil, nil end
  if S.turn == 0 then
    log(S, "session_start", { session_id = S.id, root = moss.root, machine = S.machine, role = S.role })
    log(S, "task", { task = S.task, machine = S.machine, max_turns = S.max_turns, start = S.state, role = S.role })
    M.save(S, env) -- resumable even if the first turn never completes
  else
    log(S, "session_resume", { session_id = S.id, turn = S.turn, state = S.state })
  end
  while true do
    if env.before_turn then -- what the user said meanwhile (lib/agent/inbox.lua): may end the session
      local reason = env.before_turn(S)
      if reason then return finish(S, env, reason) end
    end
    if S.turn >= S.max_turns then
      log(S, "max_turns", { turn = S.turn })
      return finish(S, env, "max_turns")
    end
    local spent = moss.llm.budget()
    if spent then return finish(S, env, "budget", nil, { detail = spent }) end
    if env.boundary then
      -- a child agent, between turns (its checkpoint is on disk): its parent may have
      -- cancelled it, paused it (this call waits) or sent it a message
      local b = env.boundary(S) or {}
      if b.cancel then return finish(S, env, "cancelled") end
      if b.message then messages.say(S, "Your parent agent says: " .. b.message) end
    end

    local state = machine.states[S.state]
    if not state then moss.error("usage", "machine '" .. S.machine .. "' has no state '" .. tostring(S.state) .. "'") end
    S.turn = S.turn + 1
    if env.out then env.out:turn(S, state) end

    local resp, err = llm_call(S, state, env)
    if not resp then
      local kind = moss.error_kind(err)
      S.turn = S.turn - 1
      if kind == "budget" then return finish(S, env, "budget", nil, { detail = err.message }) end
      if kind == "stopped" and env.before_turn then goto continue end -- the user spoke: see before_turn
      if kind == "config" or kind == "usage" or kind == "interrupted" then error(err, 0) end
      log(S, "error", { message = tostring(err), kind = kind })
      return finish(S, env, "error", nil, { detail = tostring(err) })
    end
    if env.out then env.out:llm(S, state, resp.text) end
    messages.clear(S)
    if resp.stop_reason == "max_tokens" then M.truncated(S, resp) end
    if state.on_response then state.on_response(S, resp.text) end

    -- A state may bring its own grammar (XML tags, JSON, ...) by giving `handle`.
    local verdict = (state.handle or commands.handle)(S, state, resp.text, env)
    -- a verdict that finishes says why, and may carry the answer it finished with (an answer
    -- the gate did not let stand: "unvalidated")
    if verdict.finished then return finish(S, env, verdict.finished, verdict.answer, verdict.extra) end
    if verdict.answer then
      log(S, "done", { answer = verdict.answer, turn = S.turn })
      return finish(S, env, "answered", verdict.answer)
    end

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
        if forced then
          -- a forced answer passes the same gate as any other
          local gate = commands.gate(env)
          if gate == true then return finish(S, env, "answered", forced, { forced = true }) end
          if gate then return finish(S, env, gate, forced, { forced = true }) end
        end
        return finish(S, env, "cycle_limit")
      end
    end

    local nxt = state.next
    if type(nxt) == "function" then nxt = nxt(S, verdict) end
    S.state = nxt or S.state
    M.save(S, env)
    ::continue::
  end
end

--- A reply cut off at its token limit (the reply cap, or a local server's window): its
-- complete commands run; the model is told, on its next turn, that the rest was lost.
function M.truncated(S, resp)
  log(S, "truncated", { turn = S.turn, max_tokens = resp.max_tokens })
  messages.say(S, "Your last reply was truncated: it reached the reply limit" ..
    (math.type(resp.max_tokens) == "integer" and (" of " .. resp.max_tokens .. " tokens") or "") ..
    ", and a command left unfinished there was dropped. Keep replies short: a few commands, no " ..
    "repetition of these instructions.")
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
  return commands.answer_in(S, state, resp.text, env)
end

return M

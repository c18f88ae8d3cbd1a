-- The generic machine runner: one LLM call per state, commands carried out between calls.
--
-- A MACHINE is data:
--   { name = "m", start = "look", max_turns = 16, max_stale = 5, reasons = {...},
--     states = { look = { context = "last_outputs", next = "judge",
--                         commands = {"view", ...}, concludes = false }, ... } }
-- `next` is a state name or a function(S, verdict) -> name, so recovery or refinement states
-- are a matter of editing Lua. `commands` lists what the state may do (tools outside the
-- list are reported back as not executed; each command is a file under scripts/commands/,
-- see lib/machine/commands.lua); `concludes` says whether a concluding command ends the
-- session from this state. `judges = true` marks the state whose turns count toward the
-- "no new evidence" cycle limit. `context` is a mode name or a function(S, state) building
-- the state's user message (lib/machine/context.lua); a function that never shows earlier
-- turns' outputs says `history = false`, so they are not kept (and checkpointed). `on_response(S, text)` lets a state
-- keep its text (the planner keeps the plan); `feedback_to` keeps the reply's prose as
-- S.feedback (from S.feedback_from) for the next state. `handle(S, state, text, env)`
-- replaces the $(...) command handling for a state with a grammar of its own; it returns a
-- verdict { outputs = {...}, ... } or finishes the session (below).
--
-- FINISHING. A session ends one way: lib/machine/finish.lua's `finish.now(reason, answer,
-- extra)` throws, and M.run catches it once and closes the session with M.close, the one
-- place a session's end is recorded (the agent script's `interrupted` entry closes a session
-- cut off mid-turn with it too). A handle's verdict or a command's result that carries
-- `finished` (or a verdict that carries `answer`) is a usage error naming finish.now. The
-- before_turn / after_turn hooks return a reason (M.ENV): the runner finishes with it.
--
-- ENV: what the caller (scripts/agent.lua) gives the runner, declared once in M.ENV below:
-- each key's type and when it is called or read. M.run checks env against it first: an
-- unknown key or a wrong type is a `usage` error naming the key. The runner then adds its
-- own keys (M.OWN) for the commands and libraries it calls.
local parser = require("lib.machine.parser")
local memory = require("lib.machine.memory")
local context = require("lib.machine.context")
local commands = require("lib.machine.commands")
local prompts = require("lib.machine.prompts")
local messages = require("lib.machine.messages")
local usage = require("lib.machine.usage")
local compact = require("lib.machine.compact")
local echo = require("lib.machine.echo")
local finish = require("lib.machine.finish")

local M = {}

--- The runner's contract: every key a caller may put in env, its type, and what it is.
-- Hooks are called by the runner (or by the kernel's command handling) at the moment named;
-- what they return is said here. Settings are read where named.
M.ENV = {
  -- settings
  role = { "table", "the role: commands (its tools), prompts, answer_format; read for system prompts and for what "
    .. "a state may use" },
  out = { "table", "the output sink (lib/machine/output.lua): out:turn, :llm, :command, :finish, :info are called "
    .. "as the session goes" },
  interactive = { "boolean", "whether a person can be asked; read by hooks (safety's escalation) and commands "
    .. "($(ask))" },
  loop_limit = { "integer", "how many times one command may give the same output before the session ends as a "
    .. "loop (3)" },
  max_commands = { "integer", "commands run from one reply; the rest are dropped and the model told (50)" },
  max_tokens = { "integer", "the reply cap of every model call (4096)" },
  compact_max_tokens = { "integer", "the reply cap of a compaction summary (2048)" },
  auto_approve = { "string", "the highest edit risk applied without asking; read by commands that write" },
  spawn = { "boolean", "whether the model may start child agents; read by $(spawn)" },
  format = { "string", "the output format, passed on to child agents" },
  -- hooks
  before_turn = { "function", "before_turn(S) -> reason|nil: before every turn (and when the user interrupted a "
    .. "model call); a reason ends the session" },
  boundary = { "function", "boundary(S) -> { cancel = bool, message = text }|nil: between turns, after the "
    .. "checkpoint; cancel ends the session \"cancelled\", a message is shown to the model" },
  after_tools = { "function", "after_tools(outputs): after a reply's tool commands ran, before the outputs are "
    .. "shown; may amend them" },
  before_answer = { "function", "before_answer() -> true|false|reason: when a concluding state answers; true lets "
    .. "the answer stand, false sends it back, a reason ends the session with it and the answer" },
  after_turn = { "function", "after_turn(env, ran_commands) -> reason|nil: after a turn's commands; a reason ends "
    .. "the session" },
  before_write = { "function", "before_write(label) -> token|nil: called by a command before it may write" },
  after_write = { "function", "after_write(token) -> note|nil: called by that command after it ran; a note goes to "
    .. "the model" },
}

--- Keys the runner sets itself (a caller giving one is a usage error).
M.OWN = {
  machine = "the machine being run", concluders = "its concluding states, \"a/b\"",
  keep_history = "whether outputs are kept per turn (a state shows them all)",
  usage_start = "moss.llm.usage() when the run began", own_text = "moss's own text of this turn's request",
  compact_limit = "the request size that triggers compaction (lib/machine/compact.lua)",
}

--- env checked against M.ENV: returns env, or raises a usage error naming the bad key.
function M.check_env(env)
  if env == nil then return {} end
  if type(env) ~= "table" then moss.error("usage", "the runner's env must be a table, not " .. type(env), 0) end
  for key, v in pairs(env) do
    local spec = M.ENV[key]
    if type(key) ~= "string" then
      moss.error("usage", "the runner's env has a key that is not a name: " .. tostring(key), 0)
    elseif M.OWN[key] then
      moss.error("usage", ("env.%s is set by the runner (%s); do not pass it"):format(key, M.OWN[key]), 0)
    elseif not spec then
      local known = {}
      for k in pairs(M.ENV) do known[#known + 1] = k end
      table.sort(known)
      moss.error("usage", ("unknown runner hook or setting env.%s (known: %s)")
        :format(key, table.concat(known, ", ")), 0)
    elseif (spec[1] == "integer" and math.type(v) or type(v)) ~= spec[1] then
      moss.error("usage", ("env.%s must be %s %s (%s), not %s"):format(key, spec[1]:match("^[aeiou]") and "an" or "a",
        spec[1], spec[2], math.type(v) or type(v)), 0)
    end
  end
  return env
end

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

--- Checkpoint S between turns (the final checkpoint is close's, below).
function M.save(S, env)
  S.usage = usage.of_session(S, env or {})
  moss.session.save(S.id, S)
end

--- The one place a session ends, whatever ended it: a finish M.run caught ({ reason, answer,
-- extra }), or the agent script's `interrupted` entry for a session cut off mid-turn (reason
-- "interrupted": resumable as it is, so not done; or "cancelled" by its parent). S says how
-- it ended (done, reason, answer, success: true only for "answered", extra's fields), its
-- final checkpoint is written, the log gets `done` (an answer the model gave) and one
-- `session_end`, and env.out shows the end. env without usage_start (after an interrupt)
-- keeps the usage of the last checkpoint.
local function close(S, env, f)
  local reason, answer, extra = f.reason, f.answer, f.extra or {}
  if reason == "answered" and not extra.forced then log(S, "done", { answer = answer, turn = S.turn }) end
  S.done = reason ~= "interrupted"
  S.reason = reason
  S.answer = answer
  S.success = reason == "answered"
  for k, v in pairs(extra) do S[k] = v end
  if reason == "answered" then S.questions, S.progress = nil, nil end
  if env.usage_start then S.usage = usage.of_session(S, env) end
  moss.session.save(S.id, S, { final = true })
  log(S, "session_end", { reason = reason, turns = S.turn, answer = answer, usage = S.usage })
  if env.out then env.out:finish(S) end
  return S
end
M.close = close

-- An error no turn handled (a usage or config error, a script's bug) still ends the session,
-- here and once, as "error", so its log, checkpoint and listing say what its caller reports;
-- the caller shows the error (out:failed in the json formats), so env.out is not told. An
-- interrupt is not ended here: the agent script's `interrupted` entry closes it, resumable.
local function ended_by(S, env, err)
  local detail = tostring(type(err) == "table" and err.message or err)
  pcall(function()
    log(S, "error", { message = detail, kind = moss.error_kind(err) })
    close(S, setmetatable({ out = false }, { __index = env }), { reason = "error", extra = { detail = detail } })
  end)
end

--- A note back to the current state, shown on its next turn ("Messages from moss").
function M.say(S, msg) messages.say(S, msg) end

local function system_prompt(S, state, env)
  local p = state.prompt
  if type(p) == "function" then return p(S, env) end
  if p then return p end
  if prompts.is_shared(env.machine, S.state) then return prompts.shared(env.role, env.machine) end
  return prompts.system(env.role, state.role_prompt or S.state, state, env.machine)
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

-- Before a run: what the machine implies for env, and the first log lines (or a resume's).
local function begin(machine, S, env)
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
    if st.context == "all_outputs" or (type(st.context) == "function" and st.history ~= false) then
      env.keep_history = true
    end
  end
  S.usage_prior = S.usage
  env.usage_start = moss.llm.usage()
  -- running again: an unfinished session's last reason ("interrupted", written by its script's
  -- `interrupted` entry when its process was stopped) is history now
  if not S.done then S.reason, S.success = nil, nil end
  if S.turn == 0 then
    log(S, "session_start", { session_id = S.id, root = moss.root, machine = S.machine, role = S.role })
    log(S, "task", { task = S.task, machine = S.machine, max_turns = S.max_turns, start = S.state, role = S.role })
    M.save(S, env) -- resumable even if the first turn never completes
  else
    log(S, "session_resume", { session_id = S.id, turn = S.turn, state = S.state })
  end
end

-- Between turns: the user, the turn limit, the budget, a parent agent. Each may finish.
local function between_turns(S, env)
  local asked = env.before_turn and env.before_turn(S) -- the user (lib/agent/inbox.lua)
  if asked then finish.now(asked) end
  if S.turn >= S.max_turns then
    log(S, "max_turns", { turn = S.turn })
    finish.now("max_turns")
  end
  local spent = moss.llm.budget()
  if spent then finish.now("budget", nil, { detail = spent }) end
  if env.boundary then
    -- a child agent, between turns (its checkpoint is on disk): its parent may have
    -- cancelled it, paused it (this call waits) or sent it a message
    local b = env.boundary(S) or {}
    if b.cancel then finish.now("cancelled") end
    if b.message then messages.say(S, "Your parent agent says: " .. b.message) end
  end
end

-- A model call that failed: the turn did not happen. Nil (go on: the user spoke, and
-- before_turn says what they want), a finish, or the error itself when it is the caller's.
local function failed_call(S, env, err)
  local kind = moss.error_kind(err)
  S.turn = S.turn - 1
  if kind == "budget" then finish.now("budget", nil, { detail = err.message }) end
  if kind == "stopped" and env.before_turn then return end
  if kind == "config" or kind == "usage" or kind == "interrupted" then error(err, 0) end
  log(S, "error", { message = tostring(err), kind = kind })
  finish.now("error", nil, { detail = tostring(err) })
end

-- What a turn produced: shown once (it replaces the last turn's), kept per turn if needed.
local function remember(S, state, env, verdict, text)
  local outs = verdict.outputs or {}
  S.mem.pending = outs
  if #outs > 0 then
    S.last_outputs = outs
    if env.keep_history then S.history[#S.history + 1] = { turn = S.turn, state = S.state, outputs = outs } end
  end
  if state.feedback_to then S.feedback, S.feedback_from = parser.strip(text), S.state end
  return #outs > 0
end

-- A judging state's turn without new evidence counts toward the cycle limit; at the limit
-- the model must answer (through the same answer gate) or the session ends.
local function judge(machine, S, state, env)
  if S.new_evidence then S.stale = 0 else S.stale = S.stale + 1 end
  S.new_evidence = false
  if S.stale < (machine.max_stale or 5) then return end
  log(S, "cycle_limit", { cycles = S.stale, turn = S.turn })
  local forced = M.force_answer(S, state, env)
  if forced then
    local gate = commands.gate(env)
    if gate == true then finish.now("answered", forced, { forced = true }) end
    if gate then finish.now(gate, forced, { forced = true }) end
  end
  finish.now("cycle_limit")
end

-- A state's verdict, checked: a table of outputs (and what `next` reads), never a finish.
local function checked(S, v)
  if type(v) ~= "table" then
    moss.error("usage", ("machine %s, state %s: its handle must return a verdict table ({ outputs = {...} }), " ..
      "not %s"):format(S.machine, S.state, type(v)), 0)
  end
  if v.finished ~= nil or v.answer ~= nil then
    finish.refuse_shape(("machine %s, state %s: its handle"):format(S.machine, S.state), v)
  end
  return v
end

-- One turn: a model call for the current state, its reply carried out, the next state.
local function turn(machine, S, env)
  between_turns(S, env)
  local state = machine.states[S.state]
  if not state then moss.error("usage", "machine '" .. S.machine .. "' has no state '" .. tostring(S.state) .. "'") end
  S.turn = S.turn + 1
  if env.out then env.out:turn(S, state) end
  local resp, err = llm_call(S, state, env)
  if not resp then return failed_call(S, env, err) end
  if env.out then env.out:llm(S, state, resp.text) end
  messages.clear(S)
  if resp.stop_reason == "max_tokens" then M.truncated(S, resp) end
  if state.on_response then state.on_response(S, resp.text) end
  -- a state may bring its own grammar (XML tags, JSON, ...) by giving `handle`
  local verdict = checked(S, (state.handle or commands.handle)(S, state, resp.text, env))
  local ran = remember(S, state, env, verdict, resp.text)
  local ended = env.after_turn and env.after_turn(env, ran)
  if ended then finish.now(ended) end
  if state.judges then judge(machine, S, state, env) end
  local nxt = state.next
  if type(nxt) == "function" then nxt = nxt(S, verdict) end
  S.state = nxt or S.state
  M.save(S, env)
end

--- Run `machine` on session `S` until it answers or something finishes it. env: M.ENV.
function M.run(machine, S, env)
  env = M.check_env(env)
  begin(machine, S, env)
  while true do
    local ok, err = pcall(turn, machine, S, env)
    if not ok then
      if finish.is(err) then return close(S, env, err) end
      if moss.error_kind(err) ~= "interrupted" then ended_by(S, env, err) end
      error(err, 0)
    end
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
M.FORCE_ANSWER = "You have explored enough: several turns brought no new evidence. Answer now with " ..
  "$(answer YOUR ANSWER) using what you have; say what is uncertain."
function M.force_answer(S, state, env)
  S.turn = S.turn + 1
  if env.out then env.out:turn(S, state) end
  local resp = llm_call(S, state, env, M.FORCE_ANSWER)
  if not resp then return nil end
  if env.out then env.out:llm(S, state, resp.text) end
  return commands.answer_in(S, state, resp.text, env)
end

return M

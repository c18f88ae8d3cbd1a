-- The $(...) commands: each is a file under scripts/commands/ (a project's
-- .moss/scripts/commands/NAME.lua replaces or adds one), and `handle` carries out the
-- commands of one reply. A command file returns:
--
--   { name = "note", aliases = { ... }, help = "note TEXT — record a finding",
--     access = "read-only",  -- the least access level it needs (shown in listings; the host
--                            -- enforces levels on every primitive, so it is not checked here)
--     concludes = false,     -- true: its result may end the session ({ answer = ... })
--     tool = false,          -- true: its result is an output the next state sees once
--     parallel = nil,        -- tools: a read-only primitive ("code.view") to batch side by side
--     parse = function(args) return prepared end,   -- tools: words -> arguments (usage errors)
--     offer = function() return bool end,  -- tools: also offered wherever a state allows "tools"
--     details = function() return text end,  -- more lines under its help in the system prompt
--     run = function(ctx, args) ... end }
--
-- `run` gets ctx = { S, state, env, cmd, say(msg), log(event, data) }. A tool returns
-- (content, ok, refused); any other command returns nil or a verdict part:
--   { answer = text } | { hold = true } | { output = {cmd, content, ok} }
-- and ends the session, when it must, with lib/machine/finish.lua's finish.now(reason).
--
-- A command that needs more than the kernel says so with `needs = "NAME"` (e.g. "agent": it
-- uses the coding agent's policy in lib/agent, and requires it only when it runs). It is
-- offered and run only by a machine that lists NAME in its `uses` (v1 and v2 list "agent";
-- the Wild Loop and TCE do not, so they never reach lib/agent); elsewhere it is refused.
local parser = require("lib.machine.parser")
local messages = require("lib.machine.messages")
local echo = require("lib.machine.echo")
local finish = require("lib.machine.finish")

local M = {}

M.defs = nil -- name or alias -> definition, loaded on first use (change it with M.define)
M.max_per_reply = 50 -- commands run from one reply ([agent] max_commands_per_reply, env.max_commands)

local sorted_names = nil -- M.known()'s list, worked out once per change of M.defs

--- Add or replace a command at run time (a script may also add a file under commands/).
function M.define(def)
  M.load()
  M.defs[def.name] = def
  for _, alias in ipairs(def.aliases or {}) do M.defs[alias] = def end
  sorted_names = nil
end

--- Every command file, first root wins (project, user, built-in).
function M.load()
  if M.defs then return M.defs end
  M.defs = {}
  sorted_names = nil
  for _, e in ipairs(moss.scripts.list("commands")) do
    local ok, def = pcall(require, e.module)
    if not ok then moss.error("usage", "command file " .. e.path .. " failed to load: " .. tostring(def)) end
    if type(def) ~= "table" or type(def.run) ~= "function" then
      moss.error("usage", "command file " .. e.path .. " must return a table with name and run")
    end
    def.name = def.name or e.name
    def.origin, def.path, def.overrides = e.origin, e.path, e.overrides
    M.defs[def.name] = def
    for _, alias in ipairs(def.aliases or {}) do M.defs[alias] = M.defs[alias] or def end
  end
  return M.defs
end

function M.find(name) return M.load()[name] end

-- The sorted names, shared: every system prompt and every command's check asks for them
local function names_sorted()
  local defs = M.load()
  if sorted_names == nil then
    local names = {}
    for name, def in pairs(defs) do
      if def.name == name then names[#names + 1] = name end
    end
    table.sort(names)
    sorted_names = names
  end
  return sorted_names
end

--- Known command names (no aliases), sorted.
function M.known()
  return { table.unpack(names_sorted()) }
end

--- Whether `machine` may use command `def`: a command that `needs` something runs only
-- under a machine that lists it in `uses`.
function M.usable(def, machine)
  if def.needs == nil then return true end
  for _, u in ipairs((machine or {}).uses or {}) do if u == def.needs then return true end end
  return false
end

--- Tool commands that offer themselves (a command's `offer()` says whether this session
--- can use it, e.g. $(mcp) when a configured server's access is within reach), sorted.
local function offered(except, machine)
  local out = {}
  for _, name in ipairs(names_sorted()) do
    local def = M.defs[name]
    if def.tool and type(def.offer) == "function" and not except[name] and M.usable(def, machine) then
      local ok, yes = pcall(def.offer)
      if ok and yes then out[#out + 1] = name end
    end
  end
  return out
end

--- The command names a state of `machine` may use, with "tools" expanded to the role's
--- tools (and the tool commands that offer themselves to this session); a command that
--- `needs` what the machine does not `use` is left out.
function M.allowed(state, role, machine)
  local out, seen = {}, {}
  local function add(name)
    if seen[name] then return end
    local def = M.find(name)
    if not def or M.usable(def, machine) then out[#out + 1] = name end
    seen[name] = true
  end
  local state_name = M.state_name(state, machine)
  for _, name in ipairs(type(state.commands) == "table" and state.commands or {}) do
    if name == "tools" then
      for _, t in ipairs((role or {}).commands or {}) do add(t) end
      for _, t in ipairs(M.declared_for("roles", role and role.name)) do add(t) end
      for _, t in ipairs(offered(seen, machine)) do add(t) end
    else
      add(name)
    end
  end
  for _, t in ipairs(M.declared_for("states", state_name)) do add(t) end
  return out
end

--- The name `machine` gives the table `state` (nil when it is not one of its states).
function M.state_name(state, machine)
  for name, s in pairs((machine or {}).states or {}) do
    if s == state then return name end
  end
  return nil
end

--- The commands whose file declares that role or state `name` may use them
--- (`roles = { "explorer" }`: among that role's tools; `states = { "agent" }`: in every
--- state of that name), sorted.
function M.declared_for(field, name)
  local out = {}
  if name == nil then return out end
  for _, cmd in ipairs(names_sorted()) do
    for _, n in ipairs(M.defs[cmd][field] or {}) do
      if n == name then out[#out + 1] = cmd; break end
    end
  end
  return out
end

-- The names `state` may use, as a set; nil when it may use every command.
local function allowed_set(state, env)
  if state.commands == nil or state.commands == "all" then return nil end
  local set = {}
  for _, n in ipairs(M.allowed(state, env.role, env.machine)) do set[n] = true end
  return set
end

local function log(S, event, data)
  if S.log ~= false then moss.session.log(S.id, event, data or {}) end
end

local function context_for(S, state, env, c)
  return {
    S = S, state = state, env = env, cmd = c,
    say = function(msg) messages.say(S, msg) end,
    log = function(event, data) log(S, event, data) end,
  }
end

-- How a command is named in its output: its first line, cut at LABEL_MAX bytes (its code is
-- in the reply already, and an edit's result shows the diff: the model need not read it twice,
-- nor a megabyte of it).
local LABEL_MAX = 200
local function label_of(c)
  local text = c.name .. (c.args ~= "" and (" " .. c.args) or "")
  local first = parser.clip(text:match("^[^\n]*"), LABEL_MAX)
  return #first < #text and (first .. " …") or first
end
M.label_of = label_of

--- Carry out tool commands; read-only ones side by side. Returns outputs in command order.
function M.run_tools(S, state, cmds, env)
  env = env or {}
  local outputs, batch = {}, {}
  for i, c in ipairs(cmds) do
    local def = M.find(c.name)
    local label = label_of(c)
    local ok, prepared = true, c.args
    if def.parse then ok, prepared = pcall(def.parse, c.args) end
    if not ok then
      outputs[i] = { cmd = label, content = tostring(prepared.message or prepared), ok = false }
    elseif def.parallel then
      batch[#batch + 1] = { index = i, call = { def.parallel, table.unpack(prepared) }, label = label }
    else
      local ok2, content, success, refused = pcall(def.run, context_for(S, state, env, c), prepared)
      local writes = def.writes == true or (type(def.writes) == "function" and def.writes())
      if ok2 then
        outputs[i] = { cmd = label, content = content, ok = success ~= false, refused = refused,
          writes = writes or nil }
      else
        outputs[i] = { cmd = label, content = tostring(content.message or content), ok = false,
          refused = moss.error_kind(content) == "denied" }
      end
    end
  end
  if #batch > 0 then
    local calls = {}
    for k, b in ipairs(batch) do calls[k] = b.call end
    local results = moss.parallel(calls)
    for k, b in ipairs(batch) do
      local r = results[k]
      outputs[b.index] = { cmd = b.label, content = r.ok and r.value or r.error, ok = r.ok,
        refused = r.kind == "denied" }
    end
  end
  local list = {}
  for i = 1, #cmds do list[#list + 1] = outputs[i] end
  if env.after_tools then env.after_tools(list) end
  for _, o in ipairs(list) do o.writes = nil end
  return list
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

-- Loop and progress detection remember the commands and outputs of the last RECENT turns
-- only, so a long session's state (and so each checkpoint) stays the size of a short one's.
local RECENT = 64

-- S.repeats[key] is "SIG N TURN": the signature of command `key`'s last output, how many
-- times in a row it gave that output, and the turn it last ran. One string per command
-- rather than a table: the checkpoint differ walks every entry on every save, and a table
-- costs it ten times what a string does. A checkpoint written before holds {sig, n, turn}
-- tables; both read.
local function repeat_of(r)
  if type(r) == "table" then return r.sig, tonumber(r.n) or 0, tonumber(r.turn) or 0 end
  if type(r) == "string" then
    local sig, n, turn = r:match("^(%S+) (%d+) (%-?%d+)$")
    if sig then return sig, tonumber(n), tonumber(turn) end
  end
  return nil, 0, 0
end

local function forget_old(S)
  if S.turn % 16 ~= 0 then return end
  local horizon = S.turn - RECENT
  for key, r in pairs(S.repeats) do
    local _, _, turn = repeat_of(r)
    if turn < horizon then S.repeats[key] = nil end
  end
  for sig, turn in pairs(S.seen) do
    if type(turn) ~= "number" or turn < horizon then S.seen[sig] = nil end
  end
end

-- The same command with the same output again and again is a loop; the same command with
-- new output (tests after an edit) is progress. Returns the output to show, or "loop".
local function watch_repeats(S, env, tool, out, sig)
  local key = tool.key
  local last_sig, last_n = repeat_of(S.repeats[key])
  local n = last_sig == sig and last_n + 1 or 1
  S.repeats[key] = sig .. " " .. n .. " " .. S.turn
  local limit = env.loop_limit or 3
  if n > limit then
    log(S, "loop_detected", { cmd = key, count = n, turn = S.turn })
    return "loop"
  elseif n == limit then
    log(S, "loop_warning", { cmd = key, count = n, turn = S.turn })
    return { cmd = out.cmd, ok = false,
      content = "Not shown again: this is the " .. n .. "rd time you asked for `" .. key .. "` and its " ..
        "output has not changed. Use what you already have, try something different, or conclude. " ..
        "Asking again ends the session." }
  end
  return out
end

local told = {} -- "session state command" -> true: the person was told on stderr once

-- A command this state does not allow: the model is told which state it is in and what it
-- may use; the person at the terminal, once per session, state and command, where to allow it
-- (a command file they just wrote must not be refused silently).
local function refuse(S, state, env, c, def)
  local allowed = M.allowed(state, env.role, env.machine)
  if def.concludes then
    messages.say(S, "Only the " .. (env.concluders or "concluding state") .. " concludes: your $(" .. c.name ..
      ") was not accepted. Gather evidence with commands.")
  elseif #allowed == 0 then
    messages.say(S, "Not executed: `" .. label_of(c) .. "` — the " .. S.state ..
      " does not run commands here" ..
      (state.concludes and "; answer with $(answer ...) or say what is missing." or "."))
  else
    messages.say(S, "Not executed: `" .. label_of(c) .. "` — the " .. S.state .. " state may use only " ..
      table.concat(allowed, ", ") .. ".")
  end
  log(S, "command_refused", { cmd = c.raw, state = S.state, machine = S.machine, turn = S.turn })
  local key = tostring(S.id) .. " " .. tostring(S.state) .. " " .. def.name
  if not told[key] and not def.concludes then
    told[key] = true
    local line = ("$(%s) was not run: state %q of machine %s does not allow it (it allows %s)"):format(def.name,
      tostring(S.state), tostring(S.machine), #allowed > 0 and table.concat(allowed, ", ") or "no commands")
    if def.origin ~= "built-in" then -- your own command: where to allow it
      line = line .. (". Allow it in the role's `commands` (or `add_commands` in a role that extends it), the " ..
        "state's `commands`, or with `states = { %q }` in %s"):format(tostring(S.state),
        def.path or ("commands/" .. def.name .. ".lua"))
    end
    moss.ui.print(line, { style = "yellow" })
  end
end

-- The first `max_commands` commands of a reply; the model is told how many more it wrote,
-- none of which ran (one reply must not become thousands of tool calls).
local function drop_beyond_the_cap(S, env, cmds)
  local cap = env.max_commands or M.max_per_reply
  local dropped = #cmds - cap
  if dropped <= 0 then return cmds end
  local kept = table.move(cmds, 1, cap, 1, {})
  log(S, "commands_dropped", { kept = cap, dropped = dropped, turn = S.turn })
  messages.say(S, ("Only the first %d commands of your reply were run; the other %d were dropped, not run. " ..
    "Send at most %d commands in one reply."):format(cap, dropped, cap))
  return kept
end

--- Carry out the commands of one reply. Returns the verdict { outputs = {...} }, or
-- finishes the session (an answer that stands, a concluding command, a loop).
function M.handle(S, state, text, env)
  local outputs, tools, answer, hold = {}, {}, nil, false
  local allow, allow_known = nil, false -- what this state may use: worked out once a reply
  local sigs = {} -- output text -> signature, each output hashed once
  local function sig_of(content)
    local sig = sigs[content]
    if not sig then sig = signature(content); sigs[content] = sig end
    return sig
  end
  local parsed, problems = parser.parse(text)
  local cmds = drop_beyond_the_cap(S, env, parsed)
  local echoes, all_echoed = echo.check(text, cmds, env.own_text)
  if all_echoed then return M.echoed(S, env, cmds) end
  if #cmds > 0 then S.echoes = nil end -- the model wrote commands of its own
  local skipped = {}
  for _, c in ipairs(cmds) do
    local def = M.find(c.name)
    if def and not allow_known then allow, allow_known = allowed_set(state, env), true end
    if echoes[c] then
      skipped[#skipped + 1] = c.raw
    elseif def and not M.usable(def, env.machine) then
      outputs[#outputs + 1] = { cmd = label_of(c), ok = false, refused = true,
        content = "`" .. c.name .. "` is not available in this machine (it needs " .. def.needs .. ")" }
      log(S, "command_refused", { cmd = c.raw, state = S.state, machine = S.machine, turn = S.turn })
    elseif not def then
      outputs[#outputs + 1] = { cmd = label_of(c), ok = false,
        content = "unknown command `" .. c.name .. "`; known commands: " .. table.concat(M.known(), ", ") }
      log(S, "command", { cmd = c.raw, ok = false, error = "unknown", turn = S.turn })
    elseif allow and not allow[def.name] then
      refuse(S, state, env, c, def)
    elseif def.tool then
      c.key = def.name .. " " .. table.concat(parser.words(c.args), " ")
      tools[#tools + 1] = c
      outputs[#outputs + 1] = false -- placeholder, filled in order below
    else
      local r = def.run(context_for(S, state, env, c), c.args) or {}
      if r.finished ~= nil then
        finish.refuse_shape(("command %s (%s)"):format(def.name, def.path or "defined at run time"), r)
      end
      if r.output then outputs[#outputs + 1] = r.output end
      if r.answer then answer = r.answer end
      if r.hold then hold = true end
    end
  end
  for _, p in ipairs(problems) do -- a command left open: dropped with the rest, never half-run
    outputs[#outputs + 1] = { cmd = p.head:sub(3), ok = false, content = parser.describe(p) }
  end

  if #skipped > 0 then
    log(S, "command_echoed", { cmds = skipped, turn = S.turn })
    messages.say(S, "Not run: " .. table.concat(skipped, " ") .. " — copied from moss's own instructions " ..
      "(an example or a placeholder), not a command of yours. Write the real arguments.")
  end
  if answer and hold then
    messages.say(S, "Your answer was set aside because you also wrote $(wait).")
    answer = nil
  end
  local results = #tools > 0 and M.run_tools(S, state, tools, env) or {}
  -- the answer is judged after the reply's own tools ran, on the tree they left
  if answer and state.concludes then
    local gate = M.gate(env)
    if gate == true then finish.now("answered", answer) end
    if gate then finish.now(gate, answer) end
    log(S, "answer_rejected", { answer = answer, turn = S.turn })
  end
  local k = 0
  for i, o in ipairs(outputs) do
    if o == false then
      k = k + 1
      local shown = watch_repeats(S, env, tools[k], results[k], sig_of(results[k].content or ""))
      if shown == "loop" then
        S.questions = "The agent was repeating: " .. tools[k].key
        finish.now("loop")
      end
      outputs[i] = shown
    end
  end
  for _, o in ipairs(outputs) do
    log(S, "command", { cmd = o.cmd, ok = o.ok, refused = o.refused, output_chars = #(o.content or ""),
      output = o.content, turn = S.turn })
    if env.out then env.out:command(S, o) end
    if o.ok then
      local sig = sig_of(o.content or "")
      if not S.seen[sig] then S.new_evidence = true end
      S.seen[sig] = S.turn
    end
  end
  forget_old(S)
  return { outputs = outputs }
end

--- A reply that only echoed moss's own text (lib/machine/echo.lua): nothing runs, and the
-- turn makes no progress; `loop_limit` such replies in a row end the session as a loop.
function M.echoed(S, env, cmds)
  S.echoes = (S.echoes or 0) + 1
  log(S, "echo", { turn = S.turn, commands = #cmds, count = S.echoes })
  if S.echoes >= (env.loop_limit or 3) then
    log(S, "loop_detected", { cmd = "(moss's own prompt, echoed)", count = S.echoes, turn = S.turn })
    S.questions = "The model kept repeating moss's own instructions instead of working on the task " ..
      "(a model too small for the prompt?)"
    finish.now("loop")
  end
  messages.say(S, "Nothing was run: your reply repeated moss's own instructions and examples. Work on " ..
    "the task: write the commands it needs, with real arguments.")
  return { outputs = {} }
end

--- May an answer stand? true, false (it goes back to the model), or the reason the session
-- ends with instead (e.g. "unvalidated"). env.before_answer is the hook (lib/agent/safety.lua).
function M.gate(env)
  if not env.before_answer then return true end
  local verdict = env.before_answer()
  if verdict == true or verdict == false or type(verdict) == "string" then return verdict end
  return verdict and true or false
end

--- The answer in a reply, if it has a concluding command (for a turn that must answer).
function M.answer_in(S, state, text, env)
  local cmds = parser.parse(text)
  local echoes = echo.check(text, cmds, env.own_text)
  for _, c in ipairs(cmds) do
    local def = M.find(c.name)
    if def and def.concludes and not echoes[c] then
      local r = def.run(context_for(S, state, env, c), c.args)
      if r and r.answer then return r.answer end
    end
  end
  return nil
end

--- One line per command a state may use, for its system prompt: "$(name args) — what".
local help_lines = setmetatable({}, { __mode = "k" }) -- def -> { its help, its reference line }

function M.reference(names)
  local lines = {}
  for _, name in ipairs(names) do
    local def = M.find(name)
    if def and def.help then
      local memo = help_lines[def] -- every system prompt, every turn: the line is made once
      if not memo or memo[1] ~= def.help then
        memo = { def.help, "$(" .. def.help:gsub(" — ", ") — ", 1) }
        help_lines[def] = memo
      end
      lines[#lines + 1] = memo[2]
    end
    if def and type(def.details) == "function" then -- more lines, computed when the prompt is built
      local ok, more = pcall(def.details)
      if ok and type(more) == "string" and more ~= "" then lines[#lines + 1] = more end
    end
  end
  return table.concat(lines, "\n")
end

return M

-- The coding agent: flags -> role(s) -> machine -> run -> answer.
local cli = require("lib.cli")
local runner = require("lib.machine.runner")
local output = require("lib.machine.output")
local dispatch = require("lib.agent.dispatch")
local safety = require("lib.agent.safety")
local messages = require("lib.machine.messages")
local timeline = require("lib.agent.timeline")
local inbox = require("lib.agent.inbox")
local commands = require("lib.machine.commands")
local extend = require("lib.machine.extend")
local children = require("lib.agent.children")

output.RESUME = "moss @agent --resume" -- the hints after a session say how to go on

local FLAGS = {
  { "--v1", type = "flag", help = "the freeform loop: one agent explores and concludes" },
  { "--v2", type = "flag", help = "the explorer/evaluator state machine" },
  { "--machine", metavar = "NAME", help = "any machine under scripts/machines/ (project ones too)" },
  { "--plan", type = "flag", help = "start with a planner state whose plan the explorer sees" },
  { "--max-turns", type = "number", help = "LLM calls before giving up (V1 15, V2 16)" },
  { "--role", metavar = "NAME[,NAME]",
    help = "explorer (default), auditor, refactorer, a project role, or a pipeline" },
  { "--audit", type = "flag", help = "shorthand for --role auditor" },
  { "--refactor", type = "flag", help = "shorthand for --role refactorer" },
  { "--auto", type = "flag", help = "let a classifier pick the role from the task" },
  { "--roles", type = "flag", help = "list the roles, their access levels and where they come from" },
  { "--commands", type = "flag", help = "list the $(...) commands, what they need and where they come from" },
  { "--auto-approve", metavar = "LEVEL", choices = { "low", "medium", "high" },
    help = "edits up to this risk apply without asking (default low)" },
  { "--validate", metavar = "CMD", help = "add a validation command (see [agent] validate)" },
  { "--no-baseline", type = "flag", key = "no_baseline",
    help = "skip running validation on the untouched project before the first turn" },
  { "-n", "--non-interactive", type = "flag", key = "non_interactive", help = "never ask the user (CI)" },
  { "--task-file", metavar = "FILE", help = "read the task from FILE (inside the project)" },
  { "--output-format", metavar = "FORMAT", choices = { "text", "json", "stream-json" },
    help = "text (answer on stdout), json (one object), stream-json (events)" },
  { "--spawn", type = "flag",
    help = "let the model start child agents: $(spawn [--isolated] ROLE \"task\"), $(await), $(children), " ..
      "$(merge ID), $(discard ID)" },
  { "--resume", metavar = "[ID]", optional_value = true, help = "continue a saved session (latest without ID)" },
  { "--list-sessions", type = "flag", help = "table of saved sessions (also: moss sessions list)" },
  { "--show-session", metavar = "ID", help = "one session's log as a timeline (also: moss sessions show ID)" },
  { "--list-logs", type = "flag", help = "list session logs" },
  { "-h", "--help", type = "flag", help = "show this help" },
}

local function help()
  return [[
usage: moss @agent [OPTIONS] "TASK"

Ask the coding agent about (or to work on) the project in the current directory. The
answer goes to stdout; progress to stderr.

Options:
]] .. cli.help(FLAGS) .. [[


Exit status: 0 answered (and validation, when configured, passes on the tree as it is),
1 no answer or not a success (turn limit, loop, cycle limit, budget, error, unvalidated),
2 usage or configuration error, 3 blocked, stopped or paused (needs you), 130 interrupted
(Ctrl-C; moss @agent --resume ID goes on), 141 the reader of the output went away (| head).
docs/agent.md has the whole outcome table.

Machines, roles, prompts and commands are Lua: copy a file from moss's scripts/ into
.moss/scripts/ (same relative path) to change it. Config: [agent] machine, max_turns,
role, dispatch, pipeline, auto_approve, validate, validate_commands, validate_on,
validate_baseline, compact_at, spawn, isolate_writers, max_commands_per_reply;
[llm] context_window.
While it works, type to it, or: moss say "...".]]
end

local copy = extend.copy -- a deep copy

local function load_module(kind, name)
  local ok, m = pcall(extend.load, kind .. "s", name) -- a fresh copy, its `extends` laid under it
  if not ok then moss.error("usage", "no " .. kind .. " '" .. name .. "': " .. tostring(m)) end
  -- a machine that does not say what it uses (`uses`, lib/machine/commands.lua) is one of
  -- the coding agent's: commands that need lib/agent ($(run), $(edit), ...) are offered
  if kind == "machine" and m.uses == nil then m.uses = { "agent" } end
  return m
end

local function list_roles()
  local rows = {}
  -- an untrusted project's roles are listed too, by name only: none of their Lua runs before trust
  for _, e in ipairs(moss.scripts.list("roles", { untrusted = true })) do
    local over = #e.overrides > 0 and (" (overrides " .. table.concat(e.overrides, ", ") .. ")") or ""
    if e.trusted == false then
      rows[#rows + 1] = { role = e.name, access = "?", from = "project (not trusted)" ..
        (#e.overrides > 0 and (" (would override " .. table.concat(e.overrides, ", ") .. ")") or ""),
        description = "not read until you trust this project (moss trust)", path = e.path }
    else
      local ok, r = pcall(extend.load, "roles", e.name)
      rows[#rows + 1] = {
        role = e.name, access = ok and r.access or "?", from = e.origin .. over,
        description = ok and r.description or ("broken: " .. tostring(r)), path = e.path,
      }
    end
    rows[#rows]._order = #rows
  end
  table.sort(rows, function(a, b) -- by name; the one in use before the project's that waits
    if a.role ~= b.role then return a.role < b.role end
    return a._order < b._order
  end)
  moss.ui.table(rows, { columns = { "role", "access", "from", "description", "path" } })
end

local function list_commands()
  local rows = {}
  for _, name in ipairs(commands.known()) do
    local def = commands.find(name)
    local aliases = def.aliases and #def.aliases > 0 and (" (" .. table.concat(def.aliases, ", ") .. ")") or ""
    rows[#rows + 1] = {
      command = name .. aliases, access = def.access or "read-only",
      from = (def.origin or "run time") .. (def.overrides and #def.overrides > 0 and
        (" (overrides " .. table.concat(def.overrides, ", ") .. ")") or ""),
      help = (def.help or ""):match("— (.*)$") or def.help or "", path = def.path or "",
    }
  end
  moss.ui.table(rows, { columns = { "command", "access", "from", "help", "path" } })
end

--- A checkpoint that is JSON but not a session (hand-edited, written by something else)
--- is named with how to start fresh, not a Lua error halfway through resuming it.
local SESSION_FIELDS = { { "id", "string" }, { "machine", "string" }, { "state", "string" },
  { "task", "string" }, { "turn", "integer" }, { "max_turns", "integer" }, { "mem", "table" },
  { "messages", "table" }, { "role", "string", optional = true }, { "reason", "string", optional = true },
  { "done", "boolean", optional = true } }
local function check_session(S)
  for _, f in ipairs(SESSION_FIELDS) do
    local v, want = S[f[1]], f[2]
    local absent = f.optional and (v == nil or v == moss.json.null)
    if not absent and (want == "integer" and math.type(v) or type(v)) ~= want then
      moss.error("config", (".moss/agent/session-%s.json is not a usable checkpoint (%s is %s, not a %s); " ..
        "delete it to start fresh, or start a new session instead of resuming this one")
        :format(S.session_id, f[1], v == nil and "missing" or type(v), want), 2)
    end
  end
end

local function list_logs()
  local rows = {}
  for _, l in ipairs(moss.session.logs()) do
    rows[#rows + 1] = { id = l.id, age = timeline.ago(l.mtime), events = l.events, path = l.path }
  end
  moss.ui.table(rows, { columns = { "id", "age", "events", "path" } })
end

--- The roles to run, in order, why they were chosen, and the config key that chose them.
local function choose_roles(opts, cfg, task)
  if opts.role then return opts.role, "--role" end
  if opts.audit then return "auditor", "--audit" end
  if opts.refactor then return "refactorer", "--refactor" end
  if opts.auto or cfg.dispatch == "auto" then
    local choices = {}
    for _, e in ipairs(moss.scripts.list("roles")) do
      local ok, r = pcall(extend.load, "roles", e.name)
      if ok then choices[#choices + 1] = { name = e.name, description = r.description } end
    end
    local name, why = dispatch.classify(task, choices)
    return name, why, not opts.auto and "agent.dispatch" or nil
  end
  if cfg.pipeline and #cfg.pipeline > 0 then
    return table.concat(cfg.pipeline, ","), "[agent] pipeline", "agent.pipeline"
  end
  if cfg.role then return cfg.role, "[agent] role", "agent.role" end
  return "explorer", "default"
end

--- "explorer (default)", or with where a role that is not moss's own comes from:
--- "explorer (project; default)", "auditor → fixer (project) (--role)".
local function role_line(names, why)
  local origin = {}
  for _, e in ipairs(moss.scripts.list("roles")) do origin[e.name] = e.origin end
  local function from(name) return origin[name] ~= nil and origin[name] ~= "built-in" and origin[name] or nil end
  if #names == 1 and from(names[1]) then return ("%s (%s; %s)"):format(names[1], from(names[1]), why) end
  local shown = {}
  for i, name in ipairs(names) do shown[i] = name .. (from(name) and (" (" .. from(name) .. ")") or "") end
  return table.concat(shown, " → ") .. " (" .. why .. ")"
end

local ACCESS_RANK = children.RANK -- the host's order of access levels

local function run_stage(o)
  local machine = load_module("machine", o.machine_name)
  local role = o.role
  -- a machine that needs more than its role (a research loop that starts runs) says so
  local access = machine.access or role.access or "read-only"
  local me = moss.agents.self()
  if me.child and o.clamp and me.max_access and ACCESS_RANK[access] > ACCESS_RANK[me.max_access] then
    access = me.max_access -- the parent asked for less access than the role has (a read-only auditor child)
  end
  local had_rank = o.session and ACCESS_RANK[o.session.access] -- a resumed session's
  if me.child and had_rank and ACCESS_RANK[access] > had_rank then
    access = o.session.access -- a resumed child keeps the access it had (its parent may have asked for less)
  end
  -- the host refuses more than a child's parent has, or than [trust] max_access allows for a
  -- role or machine the project's config chose (the key that chose it is said)
  local key = machine.access and o.machine_key or (not machine.access and o.role_key) or nil
  moss.access.set(access, key and { chosen_by = key, what = (machine.access and "machine " .. o.machine_name
    or "role " .. role.name) } or nil)
  local S = o.session or runner.new_session {
    id = o.id,
    task = o.task,
    context_note = o.context_note,
    machine = o.machine_name,
    role = role.name,
    start = (o.plan or role.plan) and machine.states.planner and "planner" or machine.start,
    max_turns = o.max_turns or machine.max_turns or 15,
  }
  S.access = access
  if o.spawn then S.spawn = true end -- a resumed session keeps its children's commands
  o.spawn = o.spawn or S.spawn
  -- `resume`: Ctrl-C stops every script at once, so the host says how to go on
  moss.session.bind(S.id, { role = role.name, resume = output.RESUME and (output.RESUME .. " " .. S.id) or nil })
  S.parent = me.parent
  if S.turn == 0 and o.cfg.recall ~= false then
    -- long-term memory relevant to the task starts out as notes
    for _, m in ipairs(moss.memory.recall(S.task, { limit = o.cfg.recall_limit or 3 })) do
      require("lib.machine.memory").note(S.mem, "(remembered, " .. m.file .. ") " .. m.text, 0)
    end
  end
  if o.why then moss.session.log(S.id, "dispatch", { role = role.name, why = o.why }) end
  local env = {
    role = children.with_commands(role, machine, o),
    out = o.out,
    interactive = o.interactive,
    loop_limit = o.cfg.loop_limit,
    max_commands = o.cfg.max_commands_per_reply,
    max_tokens = o.cfg.max_tokens,
    auto_approve = o.auto_approve,
    spawn = o.spawn,
    format = o.format,
  }
  if me.child then
    -- a child agent stops or waits (paused) between turns when its parent says so
    env.boundary = function(S2) return moss.agents.boundary(S2.turn, S2.state) end
  end
  local hooks = safety.setup(S, { access = access, validate = o.validate, validate_on = o.cfg.validate_on })
  if o.session then safety.recover(S) end
  for k, f in pairs(hooks) do env[k] = f end
  if o.out.start then o.out:start(S) end
  if S.turn == 0 and o.out.info and S.safety.writes then o.out:info(S.safety.description) end
  -- where the session starts: validation on the untouched tree, before any model call
  if S.turn == 0 and not o.session and not me.child and o.baseline then safety.baseline(S) end
  if o.session and S.children then children.reattach(S) end
  if S.turn == 0 and role.prepare and not me.child then role.prepare(S, env, o) end
  local listening = inbox.setup(S, env, { terminal = not me.child })
  if listening.terminal and o.out.info then
    o.out:info("type a line and Enter to talk to the agent while it works (stop, pause, or a message)")
  end
  local ok, err = pcall(runner.run, machine, S, env)
  moss.inbox.close()
  if not ok then error(err, 0) end
  return S, machine
end

local run_main -- defined after main, which wraps it
local settle_llm -- defined beside run_main


local function exit_status(reason, machine) return output.reason(reason, machine).exit end

--- A finished session goes on (a follow-up message, or an answer to its question).
local function reopen(S, machine, max_turns, answered_by_user)
  if not S.done then return end
  if S.reason == "blocked" and answered_by_user then safety.user_decided(S) end
  S.done, S.reason, S.success = false, nil, nil
  S.blocked = nil
  if S.safety then S.safety.failures, S.safety.rolled_back = 0, false end
  S.stale, S.repeats, S.echoes = 0, moss.dict(), nil
  if S.turn >= S.max_turns then S.max_turns = S.turn + (max_turns or machine.max_turns or 15) end
  if S.answer then
    -- a follow-up to an answered session: it goes on from the state that concluded
    S.previous_answer, S.answer = S.answer, nil
  end
end

local function resume(opts, base, extra_words)
  local id = opts.resume ~= true and opts.resume or nil
  if id and not id:match("^[%w_-]+$") then
    -- `--resume "please also add tests"`: a message for the latest session, not an id
    table.insert(extra_words, 1, id)
    id = nil
  end
  local S = moss.session.load(id)
  messages.upgrade(S)
  check_session(S)
  local role = load_module("role", S.role or "explorer")
  if S.done and S.reason == "answered" and #extra_words == 0 then
    moss.ui.print("session " .. S.id .. " already answered; add a message to go on from there", { style = "dim" })
    base.out:finish(S)
    return 0
  end
  settle_llm() -- once the checkpoint is known to be usable: a broken one is the first thing to fix
  local machine = load_module("machine", S.machine)
  reopen(S, machine, opts.max_turns, #extra_words > 0)
  if #extra_words > 0 then messages.say(S, "The user says: " .. table.concat(extra_words, " ")) end
  moss.ui.status(("resuming %s at turn %d (%s)"):format(S.id, S.turn, S.state))
  base.session, base.role, base.machine_name, base.task = S, role, S.machine, S.task
  local done, ran = run_stage(base)
  return exit_status(done.reason, ran)
end

-- [agent] keys this script reads, with the shape each must have. A wrong type is a
-- configuration error naming the key, not a Lua traceback halfway through a session.
local CONFIG = {
  machine = "string", role = "string", dispatch = "string", output_format = "string",
  max_turns = "count", max_retries = "natural", loop_limit = "count", max_tokens = "count",
  recall_limit = "natural", plan = "boolean", recall = "boolean", spawn = "boolean",
  validate_baseline = "boolean",
  scout = "boolean", isolate_writers = "boolean", fan_out = "natural", max_children = "count",
  max_commands_per_reply = "count",
  pipeline = "strings", validate = "strings", validate_commands = "commands",
  auto_approve = { "low", "medium", "high" }, validate_on = { "edit", "done", "turn", "never" },
}

local function bad(key, want, value)
  moss.error("config", ("[agent] %s must be %s, got %s (set in .moss/config.toml or " ..
    "~/.config/moss/config.toml)"):format(key, want, type(value) == "string" and ('"' .. value .. '"') or
    tostring(type(value) == "table" and "a table" or value)), 3)
end

local function check_config(cfg)
  if type(cfg) ~= "table" then moss.error("config", "[agent] in the config must be a table", 0) end
  for key, want in pairs(CONFIG) do
    local v = cfg[key]
    if v ~= nil then
      if type(want) == "table" then
        local ok = false
        for _, c in ipairs(want) do if v == c then ok = true end end
        if not ok then bad(key, "one of " .. table.concat(want, ", "), v) end
      elseif want == "count" or want == "natural" then
        if math.type(v) ~= "integer" or v < (want == "count" and 1 or 0) then
          bad(key, want == "count" and "a whole number above 0" or "a whole number", v)
        end
      elseif want == "strings" then
        if type(v) ~= "table" then bad(key, "a list of names", v) end
        for _, x in ipairs(v) do if type(x) ~= "string" then bad(key, "a list of names", v) end end
      elseif want == "commands" then
        if type(v) ~= "table" then bad(key, "a list of { name = ..., run = ... } tables", v) end
        for _, c in ipairs(v) do
          if type(c) ~= "table" or type(c.name) ~= "string" or type(c.run) ~= "string" then
            bad(key, "a list of { name = ..., run = ... } tables", v)
          end
        end
      elseif type(v) ~= want then
        bad(key, "a " .. want, v)
      end
    end
  end
  return cfg
end

local function main(args)
  local ok, opts, rest = pcall(cli.parse, args, FLAGS)
  if not ok then
    moss.ui.print(tostring(opts.message or opts), { style = "red" })
    return 2
  end
  if opts.help then print(help()) return 0 end
  if opts.roles then list_roles() return 0 end
  if opts.commands then list_commands() return 0 end
  if opts.list_sessions then return timeline.list() end
  if opts.show_session then return timeline.show(opts.show_session) end
  if opts.list_logs then list_logs() return 0 end
  local cfg = check_config(moss.config.agent or {})
  if opts.max_turns and (math.type(opts.max_turns) ~= "integer" or opts.max_turns < 1) then
    moss.ui.print("--max-turns must be a whole number above 0", { style = "red" })
    return 2
  end

  local format = opts.output_format or cfg.output_format or "text"
  local out = output.new(format, { verbose = moss.options.verbose })
  local ok2, code = pcall(run_main, opts, cfg, rest, out, format)
  if ok2 then return code end
  -- json consumers get an object even when the session could not start
  if format ~= "text" then out:failed(code) end
  error(code, 0)
end

-- Which LLM (or why there is none: nothing configured and no local server found) is
-- settled before any turn is shown; the message is the host's, without a Lua position.
settle_llm = function()
  local ok, e = pcall(moss.llm.provider)
  if not ok then
    moss.error(type(e) == "table" and e.kind or "config",
      (tostring(type(e) == "table" and e.message or e):gsub("^moss%.llm%.provider: ", "")), 0)
  end
end

run_main = function(opts, cfg, rest, out, format)
  local base = {
    cfg = cfg,
    out = out,
    plan = opts.plan or cfg.plan,
    max_turns = opts.max_turns or cfg.max_turns,
    interactive = not opts.non_interactive and moss.ui.interactive(),
    auto_approve = opts.auto_approve or cfg.auto_approve or "low",
    validate = opts.validate and { opts.validate } or nil,
    baseline = not opts.no_baseline and cfg.validate_baseline ~= false,
    spawn = opts.spawn or cfg.spawn or false,
    format = format,
  }
  if opts.resume then return resume(opts, base, rest) end

  local task = table.concat(rest, " ")
  if opts.task_file then
    local ok, text = pcall(moss.fs.read, opts.task_file)
    if not ok then -- the host's reason, named after the flag, without a position in this file
      local why = tostring(type(text) == "table" and text.message or text):gsub("^.-moss%.fs%.read: ", "")
      moss.error(type(text) == "table" and text.kind or "usage", "--task-file: " .. why, 0)
    end
    task = text
  end
  if task:match("^%s*$") then
    moss.ui.print('no task given: moss @agent "what does this project do?" (see --help)', { style = "red" })
    return 2
  end
  settle_llm()
  base.task = task
  base.machine_name = opts.machine or (opts.v2 and "v2") or (opts.v1 and "v1") or cfg.machine or "v1"
  load_module("machine", base.machine_name) -- fail early on a bad name

  local spec, why, chosen_by = choose_roles(opts, cfg, task)
  local names = {}
  for name in spec:gmatch("[^,%s]+") do names[#names + 1] = name end
  if #names == 0 then
    moss.error("usage", "--role needs a role name, e.g. --role auditor or --role auditor,refactorer")
  end
  local roles = {}
  for i, name in ipairs(names) do roles[i] = load_module("role", name) end
  -- a role or machine that the project's config chose gets no more access than the user's
  -- [trust] max_access: the host decides, told which key chose it, before any model call
  local machine_key = not (opts.machine or opts.v1 or opts.v2) and cfg.machine and "agent.machine" or nil
  base.role_key, base.machine_key = chosen_by, machine_key
  local before = moss.access.get()
  if chosen_by then
    for _, r in ipairs(roles) do
      moss.access.set(r.access or "read-only", { chosen_by = chosen_by, what = "role " .. r.name })
    end
  end
  if machine_key then
    local m = load_module("machine", base.machine_name)
    if m.access then moss.access.set(m.access, { chosen_by = machine_key, what = "machine " .. base.machine_name }) end
  end
  moss.access.set(before)
  moss.ui.status("role: " .. role_line(names, why))

  if #roles == 1 then
    base.role, base.why = roles[1], why
    local S, machine = run_stage(base)
    return exit_status(S.reason, machine)
  end

  -- A pipeline: each role's answer becomes context for the next; the output reports all.
  local stages, note, machine = {}, nil, nil
  local final_out = out
  for i, role in ipairs(roles) do
    local stage = copy(base)
    stage.out = output.new(format == "stream-json" and "stream-json" or "quiet", { stage = true })
    stage.role, stage.why, stage.context_note = role, why, note
    local S
    S, machine = run_stage(stage)
    stages[i] = S
    if S.reason ~= "answered" then break end
    note = "**Result of the previous step (" .. role.name .. "):**\n" .. S.answer
  end
  final_out.machine = machine
  return exit_status(final_out:pipeline(stages, #roles), machine)
end

--- A child agent's whole run, in its own thread and runtime (host/api/agents.py calls this
-- with the spawn spec). Returns its result as plain data; the parent sees it through
-- handle:wait() or $(await).
local function child(spec)
  local cfg = check_config(moss.config.agent or {})
  local base = {
    cfg = cfg, out = output.new("child"), interactive = false,
    auto_approve = spec.auto_approve or cfg.auto_approve or "low",
    max_turns = spec.max_turns, plan = spec.plan, spawn = spec.spawn or false,
    format = spec.events, clamp = spec.access ~= nil,
  }
  if spec.resume then
    local S = moss.session.load(spec.resume)
    -- a child that finished in an earlier run: its result stands, unless its parent says more
    if S.done and not spec.message then return children.result(S) end
    messages.upgrade(S)
    local machine = load_module("machine", S.machine)
    reopen(S, machine, spec.max_turns, spec.message ~= nil)
    if spec.message then messages.say(S, "Your parent agent says: " .. spec.message) end
    base.session, base.role = S, load_module("role", S.role or "explorer")
    base.machine_name, base.task = S.machine, S.task
  else
    base.role = load_module("role", spec.role or "explorer")
    base.machine_name = spec.machine or cfg.machine or "v1"
    base.task, base.id, base.context_note = spec.task, spec.id, spec.context
  end
  local S = run_stage(base)
  return children.result(S)
end

--- `moss sessions list` / `moss sessions show ID` (host/cli.py), and MCP list_sessions /
-- show_session (host/mcp/server.py): args is {"list"}, {"show", ID} or {"json"} (one JSON
-- object on stdout, {"sessions": [...]}: each session's saved fields, running, reason), and
-- `moss ui`'s {"timeline", ID} (one JSON object: what `show` draws, as data).
local function sessions(args)
  local what = args[1]
  if what == "list" then return timeline.list() end
  if what == "show" and args[2] then return timeline.show(args[2]) end
  if what == "json" then
    print(moss.json.encode({ sessions = timeline.data() })) -- an empty list encodes as []
    return 0
  end
  if what == "timeline" and args[2] then -- `moss ui`'s session page: show's content as data
    print(moss.json.encode(timeline.data_of(args[2])))
    return 0
  end
  moss.ui.print("usage: sessions list | sessions show ID | sessions json | sessions timeline ID", { style = "red" })
  return 2
end

--- `moss mcp serve`'s run_agent and resume_session (host/mcp/server.py): args[1] is a JSON
-- request, {task, role?, machine?, max_turns?} or {resume = ID | true, message?, max_turns?};
-- the session runs non-interactively and writes stream-json, its `result` event last.
local function serve(args)
  local ok, req = pcall(moss.json.decode, args[1] or "")
  if not ok or type(req) ~= "table" then
    moss.ui.print("serve: expected one JSON object, the request (docs/agent.md)", { style = "red" })
    return 2
  end
  local words = { "--output-format", "stream-json", "-n" }
  local function add(w) words[#words + 1] = w end
  if req.role then add("--role=" .. tostring(req.role)) end
  if req.machine then add("--machine=" .. tostring(req.machine)) end
  if req.max_turns then add("--max-turns=" .. tostring(req.max_turns)) end
  if req.resume then
    add(req.resume == true and "--resume" or ("--resume=" .. tostring(req.resume)))
    if req.message then add("--") add(tostring(req.message)) end
  else
    add("--") add(tostring(req.task or ""))
  end
  return main(words)
end

--- After an interrupt (Ctrl-C, the MCP client's cancel) or a parent's cancel mid-turn, the
-- host calls this once with {ids = {...}, cancelled = bool}: the sessions this process was
-- running. An unfinished one ends in the runner's one place (runner.close), its checkpoint
-- saying how it stopped: "interrupted" (resumable as it is) or, cancelled by its parent,
-- "cancelled" (done). A child gets its result back.
local function interrupted(info)
  local first
  for _, id in ipairs(info.ids or {}) do
    local ok, S = pcall(moss.session.load, id)
    if ok and not S.done and not S.reason then
      runner.close(S, {}, { reason = info.cancelled and "cancelled" or "interrupted" })
    end
    if first == nil then first = ok and S or false end
  end
  if moss.agents.self().child then
    if first then return children.result(first) end
    return { success = false, reason = info.cancelled and "cancelled" or "interrupted",
      status = "cancelled", session_id = (info.ids or {})[1] }
  end
end

-- The entry points moss calls (docs/agent.md, "Entry points an agent script provides").
return { help = help, main = main, child = child, sessions = sessions, serve = serve, interrupted = interrupted }

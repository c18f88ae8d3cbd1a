-- The coding agent: flags -> role -> machine -> run -> answer.
local cli = require("lib.cli")
local runner = require("lib.agent.runner")
local output = require("lib.agent.output")

local FLAGS = {
  { "--v1", type = "flag", help = "the freeform loop: one agent explores and concludes" },
  { "--v2", type = "flag", help = "the explorer/evaluator state machine" },
  { "--machine", metavar = "NAME", help = "any machine under scripts/machines/ (project ones too)" },
  { "--plan", type = "flag", help = "start with a planner state whose plan the explorer sees" },
  { "--role", metavar = "NAME", help = "role: explorer (default) or any under scripts/roles/" },
  { "--max-turns", type = "number", help = "LLM calls before giving up (V1 15, V2 16)" },
  { "-n", "--non-interactive", type = "flag", key = "non_interactive", help = "never ask the user (CI)" },
  { "--task-file", metavar = "FILE", help = "read the task from FILE (inside the project)" },
  { "--output-format", metavar = "FORMAT", choices = { "text", "json", "stream-json" },
    help = "text (answer on stdout), json (one object), stream-json (events)" },
  { "-h", "--help", type = "flag", help = "show this help" },
}

local function help()
  return [[
usage: moss @agent [OPTIONS] "TASK"

Ask the coding agent about (or to work on) the project in the current directory. The
answer goes to stdout; progress to stderr.

Options:
]] .. cli.help(FLAGS) .. [[


Exit status: 0 answered, 1 no answer (turn limit, loop, cycle limit, budget, error),
2 usage or configuration error, 3 blocked (needs you; non-interactive).

Machines, roles, prompts and commands are Lua: copy a file from moss's scripts/ into
.moss/scripts/ (same relative path) to change it. Config: [agent] machine, max_turns, role.]]
end

local function copy(t)
  if type(t) ~= "table" then return t end
  local out = {}
  for k, v in pairs(t) do out[k] = copy(v) end
  return out
end

local function load_machine(name)
  local ok, m = pcall(require, "machines." .. name)
  if not ok then
    moss.error("usage", "no machine '" .. name .. "': " .. tostring(m))
  end
  return copy(m)
end

local function load_role(name)
  local ok, r = pcall(require, "roles." .. name)
  if not ok then moss.error("usage", "no role '" .. name .. "': " .. tostring(r)) end
  return r
end

local function main(args)
  local ok, opts, rest = pcall(cli.parse, args, FLAGS)
  if not ok then
    moss.ui.print(tostring(opts.message or opts), { style = "red" })
    return 2
  end
  if opts.help then print(help()) return 0 end
  local cfg = moss.config.agent or {}

  local task = table.concat(rest, " ")
  if opts.task_file then task = moss.fs.read(opts.task_file) end
  if task:match("^%s*$") then
    moss.ui.print('no task given: moss @agent "what does this project do?" (see --help)', { style = "red" })
    return 2
  end

  local machine_name = opts.machine or (opts.v2 and "v2") or (opts.v1 and "v1") or cfg.machine or "v1"
  local machine = load_machine(machine_name)
  local role = load_role(opts.role or cfg.role or "explorer")
  moss.access.set(role.access or "read-only")

  local S = runner.new_session {
    task = task,
    machine = machine_name,
    role = role.name,
    start = (opts.plan or cfg.plan) and machine.states.planner and "planner" or machine.start,
    max_turns = opts.max_turns or cfg.max_turns or machine.max_turns or 15,
  }
  moss.session.bind(S.id)
  local out = output.new(opts.output_format or cfg.output_format or "text", { verbose = moss.options.verbose })
  if out.start then out:start(S) end

  local env = {
    role = role,
    out = out,
    interactive = not opts.non_interactive and moss.ui.interactive(),
    loop_limit = cfg.loop_limit,
    max_tokens = cfg.max_tokens,
  }
  runner.run(machine, S, env)
  if S.reason == "answered" then return 0 end
  if S.reason == "blocked" then return 3 end
  return 1
end

return { help = help, main = main }

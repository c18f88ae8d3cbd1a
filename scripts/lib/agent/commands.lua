-- The commands a model can write as $(name args), and how each is carried out.
--
-- Tools produce outputs ({cmd, content, ok}) that the next state sees once. Memory and
-- control commands change the session state. A project adds or replaces a command by
-- overriding this module, or at run time with `commands.define{...}`.
local parser = require("lib.agent.parser")
local edits = require("lib.agent.edits")
local risk = require("lib.agent.risk")

local M = {}

-- name -> { kind = "tool"|"memory"|"control", parallel = primitive name or nil, help = "...",
--           call = function(args, ctx) -> content | error }
M.defs = {}

function M.define(def)
  M.defs[def.name] = def
  for _, alias in ipairs(def.aliases or {}) do M.defs[alias] = def end
end

--- Known command names, sorted (for "unknown command" replies).
function M.known()
  local names = {}
  for name, def in pairs(M.defs) do
    if def.name == name then names[#names + 1] = name end
  end
  table.sort(names)
  return names
end

-- ---- argument helpers ---------------------------------------------------------------
local function take_flags(words, spec)
  local opts, rest, i = {}, {}, 1
  while i <= #words do
    local w = words[i]
    local s = spec[w]
    if s then
      if s == "flag" then
        opts[w] = true
      else
        i = i + 1
        opts[w] = opts[w] or {}
        table.insert(opts[w], words[i])
      end
    else
      rest[#rest + 1] = w
    end
    i = i + 1
  end
  return opts, rest
end

local function view_args(args)
  local opts, rest = take_flags(parser.words(args), { ["--depth"] = "value" })
  local target = #rest > 0 and table.concat(rest, " ") or "."
  return { target, { depth = tonumber(opts["--depth"] and opts["--depth"][1]) or 1 } }
end

local function search_args(args)
  local opts, rest = take_flags(parser.words(args),
    { ["--only"] = "value", ["--limit"] = "value", ["-i"] = "flag", ["--ignore-case"] = "flag" })
  if #rest == 0 then moss.error("usage", 'text-search needs a pattern: $(text-search "regex" [--only GLOB] [--limit N])') end
  return { table.concat(rest, " "), {
    only = opts["--only"],
    limit = tonumber(opts["--limit"] and opts["--limit"][1]) or 50,
    ignore_case = opts["-i"] or opts["--ignore-case"] or false,
  } }
end

local function format_run(r)
  local parts = {}
  if r.stdout ~= "" then parts[#parts + 1] = r.stdout:gsub("\n$", "") end
  if r.stderr ~= "" then parts[#parts + 1] = "[stderr]\n" .. r.stderr:gsub("\n$", "") end
  if r.timed_out then
    parts[#parts + 1] = "[timed out]"
  else
    parts[#parts + 1] = "[exit code " .. tostring(r.code) .. "]"
  end
  return table.concat(parts, "\n"), (r.code == 0 and not r.timed_out)
end

-- ---- tools --------------------------------------------------------------------------
M.define {
  name = "view", kind = "tool", parallel = "code.view",
  help = "view PATH | PATH:START-END | PATH/Symbol | . — tree, file skeleton, lines or a symbol",
  prepare = view_args,
  call = function(a) return moss.code.view(a[1], a[2]) end,
}

M.define {
  name = "text-search", kind = "tool", parallel = "code.search", aliases = { "grep", "search" },
  help = 'text-search "regex" [--only GLOB] [--limit N] — ripgrep with enclosing symbols',
  prepare = search_args,
  call = function(a) return moss.code.search(a[1], a[2]) end,
}

M.define {
  name = "run", kind = "tool",
  help = "run CMD — a shell command (sandboxed by the role's access level)",
  prepare = function(args)
    if args == "" then moss.error("usage", "run needs a command: $(run cargo test)") end
    return { args }
  end,
  call = function(a, env)
    local writes = moss.access.get() == "edit" or moss.access.get() == "full"
    if writes then
      -- a command that can write is approved like an edit of the same risk
      local level, reason = risk.assess_command(a[1])
      local refusal = edits.approve(env, level, reason, "`" .. a[1] .. "`", "Not run")
      if refusal then return refusal, false, true end
    end
    local w = writes and env.before_write and env.before_write("run " .. a[1])
    local r = moss.shell.run(a[1])
    if w and env.after_write then env.after_write(w) end
    return format_run(r)
  end,
  writes = function() return moss.access.get() == "edit" or moss.access.get() == "full" end,
}

M.define {
  name = "edit", kind = "tool",
  help = "edit PATH/Symbol replace <code> | insert --before|--after <code> | delete; " ..
    'edit PATH --old "exact text" --new "text" — change code',
  prepare = edits.parse_one,
  call = function(spec, env) return edits.perform({ spec }, env) end,
  writes = true,
}

M.define {
  name = "batch-edit", kind = "tool",
  help = "batch-edit T1 ACTION1 ARGS1 | T2 ACTION2 ARGS2 — several edits, all or nothing",
  prepare = edits.parse_batch,
  call = function(specs, env) return edits.perform(specs, env) end,
  writes = true,
}

-- ---- memory and control (handled by the runner; listed here so they are known) -------
for _, def in ipairs {
  { name = "note", kind = "memory", help = "note TEXT — record a finding (kept)" },
  { name = "keep", kind = "memory", help = "keep [N ...|all] — keep new results in working memory" },
  { name = "drop", kind = "memory", help = "drop ID — remove a kept item" },
  { name = "forget", kind = "memory", help = "forget TEXT — remove notes containing TEXT" },
  { name = "memorize", kind = "memory",
    help = "memorize [--preference|--decision] TEXT — remember across sessions (.moss/memory/)" },
  { name = "answer", kind = "control", aliases = { "done" }, help = "answer TEXT — conclude with the answer" },
  { name = "ask", kind = "control", help = "ask QUESTION — ask the user" },
  { name = "wait", kind = "control", help = "wait — do not conclude this turn" },
  { name = "checkpoint", kind = "control", help = "checkpoint PROGRESS | QUESTIONS — save and stop" },
} do M.define(def) end

--- Run tool commands; read-only ones side by side. Returns outputs in command order.
-- env carries the session's policy hooks (approval, snapshots, validation) to tools.
function M.run_tools(cmds, env)
  env = env or {}
  local outputs, batch = {}, {}
  for i, c in ipairs(cmds) do
    local def = M.defs[c.name]
    local ok, prepared = pcall(def.prepare, c.args)
    local label = c.name .. (c.args ~= "" and (" " .. c.args) or "")
    if not ok then
      outputs[i] = { cmd = label, content = tostring(prepared.message or prepared), ok = false }
    elseif def.parallel and not (def.parallel == "shell.run") then
      batch[#batch + 1] = { index = i, call = { def.parallel, table.unpack(prepared) }, label = label }
    else
      local ok2, content, success, refused = pcall(def.call, prepared, env)
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

return M

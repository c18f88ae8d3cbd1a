-- $(spawn ROLE "task"): start a child agent on a sub-task; it runs beside this one (its own
-- thread, runtime and session ROOT-N) and its result comes back with $(await).
-- $(spawn --isolated ROLE "task"): the child works in its own copy of the tree; its change
-- comes back with $(await) and reaches this tree only by $(merge ID) (or is dropped by
-- $(discard ID)). [agent] isolate_writers = true isolates every child that can write.
local parser = require("lib.machine.parser")
local function children() return require("lib.agent.children") end

return {
  name = "spawn",
  help = 'spawn ROLE "task" — start a child agent (explorer, ...) on a sub-task; collect it with $(await)',
  access = "read-only",
  needs = "agent", -- the coding agent's policy (lib/agent), required only when it runs
  tool = true,
  -- The task is the rest of the text as the model wrote it (code, apostrophes and all), unquoted
  -- only when one pair of quotes wraps all of it; --isolated may stand before the role or after it.
  parse = function(text)
    local rest, isolated = text:gsub("^%s+", ""), false
    local function flag()
      local after = rest == "--isolated" and "" or rest:match("^%-%-isolated%s+(.*)$")
      if after then isolated, rest = true, after end
    end
    flag()
    local role, after = rest:match("^(%S+)%s*(.*)$")
    rest = after or ""
    flag()
    local task = parser.unquote((rest:gsub("%s+$", "")))
    if not role or task:match("^%s*$") then
      moss.error("usage", 'spawn needs a role and a task: $(spawn explorer "find where the config is read")')
    end
    return { parser.unquote(role), task, isolated }
  end,
  run = function(ctx, a)
    local role, task = a[1], a[2]
    local S, env, cfg = ctx.S, ctx.env, moss.config.agent or {}
    local why = children().refusal(env.role, role)
    if why then return "Not started: " .. why .. ".", false, true end
    local running = 0
    for _, c in ipairs(S.children or {}) do if not c.delivered then running = running + 1 end end
    if running >= (cfg.max_children or 8) then
      return ("Not started: %d children are already running or waiting to be collected ([agent] max_children); " ..
        "collect them with $(await) first."):format(running), false, true
    end
    local isolated = children().isolated(role, a[3])
    local h = moss.spawn {
      task = task, role = role, machine = cfg.child_machine or "v1",
      max_turns = cfg.child_max_turns or 8, auto_approve = env.auto_approve,
      events = env.format, isolate = isolated,
      -- an isolated child is held to its role's level: one that cannot write gets a copy of
      -- hard links (cheap), which is safe only while nothing in it can write
      access = isolated and children().access_of(role) or nil,
    }
    children().track(S, h, role, task, isolated)
    ctx.log("spawn", { child = h.id, role = role, task = task, turn = S.turn, isolated = isolated })
    return ("started child agent %s (%s%s): %s\nIt works beside you%s; collect its result with $(await %s) " ..
      "or every pending one with $(await)."):format(h.id, role, isolated and ", isolated" or "", task,
        isolated and ", in its own copy of the tree" or "", h.id), true
  end,
}

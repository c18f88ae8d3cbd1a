-- Child agents, as the coding agent uses them: which roles may start which, the
-- $(spawn)/$(await)/$(children) commands' shared state (S.children, checkpointed with the
-- session), result tables, and re-attaching a resumed tree. Mechanism (threads, ids,
-- access caps, the shared budget) is the host's: moss.spawn, see docs/lua-api.md.
local M = {}

-- access level -> rank, weakest first: the order is the host's (moss.access.levels())
M.RANK = {}
for i, level in ipairs(moss.access.levels()) do M.RANK[level] = i end
M.COMMANDS = { "spawn", "await", "children", "merge", "discard" }
M.EVIDENCE_CHARS = 4000 -- of a child's kept items shown to its parent
M.PATCH_CHARS = 6000    -- of an isolated child's patch shown to its parent ($(await))
M.HUNK_CHARS = 1500     -- of each conflicting region shown after $(merge)

--- The role the runner sees: with spawn/await/children among its tools when spawning is on
-- (--spawn or [agent] spawn = true), the role lists roles it may start (`spawn = {...}`)
-- and the machine does not forbid it (`spawn = false`).
function M.with_commands(role, machine, o)
  if not o.spawn or machine.spawn == false or type(role.spawn) ~= "table" or #role.spawn == 0 then
    return role
  end
  local copy = {}
  for k, v in pairs(role) do copy[k] = v end
  copy.commands = {}
  for _, c in ipairs(role.commands or {}) do copy.commands[#copy.commands + 1] = c end
  local writes = (M.RANK[role.access or "read-only"] or 1) >= (M.RANK["edit"] or 3)
  for _, c in ipairs(M.COMMANDS) do
    -- merging writes the tree, and only a role that can write has isolated children to merge
    if writes or (c ~= "merge" and c ~= "discard") then copy.commands[#copy.commands + 1] = c end
  end
  return copy
end

--- Whether `role` may start a child of role `name`; nil or the reason it may not.
function M.refusal(role, name)
  local found, child = pcall(require("lib.machine.extend").load, "roles", name)
  if not found then return "no role '" .. name .. "'" end
  local need, have = child.access or "read-only", moss.access.get()
  if (M.RANK[need] or 1) > (M.RANK[have] or 1) then
    return ("role %s needs access %s and this agent has %s: a child never gets more access than its parent")
      :format(name, need, have)
  end
  for _, r in ipairs(role.spawn or {}) do if r == name then return nil end end
  return ("role %s may start only %s children"):format(role.name, table.concat(role.spawn or {}, ", "))
end

--- A child's result as its parent gets it: the output fields plus its kept evidence (capped)
-- and its status. It is what agent.lua's `child` entry returns (also for a child that
-- finished in an earlier run, from its checkpoint): the host computes no result of its own.
function M.result(S)
  local r = require("lib.machine.output").result(S)
  local ev, used = {}, 0
  for _, it in ipairs((S.mem or {}).items or {}) do
    local text = tostring(it.content or "")
    if it.cmd then text = it.cmd .. ": " .. text end
    if used + #text > M.EVIDENCE_CHARS then text = text:sub(1, math.max(0, M.EVIDENCE_CHARS - used)) .. "…" end
    ev[#ev + 1] = text
    used = used + #text
    if used >= M.EVIDENCE_CHARS then break end
  end
  r.evidence = ev
  -- how the host files it (handle:status()): done, failed, or cancelled
  local cancelled = S.reason == "cancelled" or S.reason == "interrupted"
  r.status = S.success and "done" or (cancelled and "cancelled" or "failed")
  return r
end

--- Whether a child of role `name` works in its own copy of the tree: asked for
-- ($(spawn --isolated ...)), or every child that can write when [agent] isolate_writers is on.
function M.isolated(name, asked)
  if asked then return true end
  if not (moss.config.agent or {}).isolate_writers then return false end
  return (M.RANK[M.access_of(name)] or 1) >= (M.RANK["edit"] or 3)
end

--- The access level role `name` asks for (read-only when it cannot be loaded).
function M.access_of(name)
  local found, role = pcall(require("lib.machine.extend").load, "roles", name)
  return found and role.access or "read-only"
end

--- Remember a started child in the session (checkpointed with the next turn).
function M.track(S, h, role, task, isolated)
  S.children = S.children or {}
  S.children[#S.children + 1] = { id = h.id, role = role, task = task, delivered = false, isolated = isolated or nil }
end

--- The tracked child `id`, or nil.
function M.find(S, id)
  for _, c in ipairs(S.children or {}) do if c.id == id then return c end end
end

--- Child `c` known to this run (a resumed parent re-attaches one it collected before, from
-- its checkpoint and its copy) and ended: its result, or nil and why not.
function M.ended(c)
  local ok, status = pcall(moss.agents.status, c.id)
  if not ok then
    local started, err = pcall(moss.spawn, { resume = c.id, role = c.role, task = c.task, isolate = c.isolated })
    if not started then return nil, tostring(type(err) == "table" and err.message or err) end
    status = "running"
  end
  if status == "running" or status == "paused" then
    if not c.delivered then return nil, ("it is still %s: collect it with $(await %s) first"):format(status, c.id) end
  end
  return moss.agents.wait(c.id)
end

--- A resumed parent: its children that had not finished go on from their own checkpoints;
-- finished ones keep their results for $(await).
function M.reattach(S)
  for _, c in ipairs(S.children or {}) do
    if not c.delivered then
      local ok, err = pcall(moss.spawn, { resume = c.id, role = c.role, task = c.task, isolate = c.isolated })
      moss.session.log(S.id, "child_reattach", { child = c.id, ok = ok, error = not ok and tostring(err) or nil })
    end
  end
end

--- The children not yet delivered to the model, or the one named.
function M.pending(S, id)
  local out = {}
  for _, c in ipairs(S.children or {}) do
    if (id and c.id == id) or (not id and not c.delivered) then out[#out + 1] = c end
  end
  return out
end

local function one_line(s, n)
  s = tostring(s or ""):gsub("%s+", " ")
  return #s > n and s:sub(1, n - 1) .. "…" or s
end

--- One child's result as the text of a command output.
function M.render(c, r)
  local lines = {}
  if not r then
    lines[#lines + 1] = ("child %s (%s) is still running: %s"):format(c.id, c.role, one_line(c.task, 80))
    return table.concat(lines, "\n")
  end
  local head = ("child %s (%s), %s after %s turn(s)"):format(c.id, c.role or r.role or "?", r.reason or "?",
    tostring(r.turns or 0))
  lines[#lines + 1] = head .. ": " .. one_line(c.task, 80)
  if r.answer and r.answer ~= moss.json.null then
    lines[#lines + 1] = "answer:\n" .. tostring(r.answer)
  elseif r.error then
    lines[#lines + 1] = "failed: " .. tostring(r.error)
  else
    lines[#lines + 1] = "no answer" .. (r.detail and (": " .. tostring(r.detail)) or "")
  end
  if r.evidence and #r.evidence > 0 then
    lines[#lines + 1] = "evidence it kept:"
    for _, e in ipairs(r.evidence) do lines[#lines + 1] = "- " .. e end
  end
  if r.isolated then lines[#lines + 1] = M.render_change(c, r) end
  return table.concat(lines, "\n")
end

--- An isolated child's change, as its parent's model sees it after $(await).
function M.render_change(c, r)
  if r.merge_state then return ("its copy of the tree was %s"):format(r.merge_state) end
  if r.patch_error then return "its change could not be read: " .. tostring(r.patch_error) end
  local changed = r.changed or {}
  if #changed == 0 then
    return ("it worked in its own copy of the tree and changed nothing; drop the copy with $(discard %s)"):format(c.id)
  end
  local st = r.patch_stat or {}
  local patch = tostring(r.patch or "")
  if #patch > M.PATCH_CHARS then
    patch = patch:sub(1, M.PATCH_CHARS) .. ("\n… (%d more characters)"):format(#patch - M.PATCH_CHARS)
  end
  return table.concat({
    ("its change, in its own copy of the tree (nothing of it is in yours yet): %d file(s), +%d -%d: %s"):format(
      #changed, st.added or 0, st.removed or 0, table.concat(changed, ", ")),
    patch,
    ("Merge it into your tree with $(merge %s), or drop it with $(discard %s)."):format(c.id, c.id) }, "\n")
end

--- What $(merge ID) did, for the model: what was applied, and each conflict with its hunks.
function M.render_merge(id, m)
  local lines = { ("merged child %s: %d path(s) applied%s"):format(id, #m.applied,
    #m.applied > 0 and (" (" .. table.concat(m.applied, ", ") .. ")") or "") }
  if #m.conflicts > 0 then
    lines[#lines + 1] = ("%d conflict(s), left as they are in your tree:"):format(#m.conflicts)
    for _, x in ipairs(m.conflicts) do
      lines[#lines + 1] = ("- %s: %s%s"):format(x.path, x.reason, x.detail and (" (" .. x.detail .. ")") or "")
      for _, h in ipairs(x.hunks or {}) do
        lines[#lines + 1] = #h > M.HUNK_CHARS and (h:sub(1, M.HUNK_CHARS) .. "\n…") or h
      end
    end
    lines[#lines + 1] = "Resolve them with your own edits if the child's version should win."
  end
  return table.concat(lines, "\n")
end

return M

-- $(merge ID): bring an isolated child's change into this agent's tree (three-way, against
-- where the child started). A snapshot comes first, so a rollback covers it; a file that
-- conflicts is left as it is here and shown with its conflicting regions.
local function children() return require("lib.agent.children") end

return {
  name = "merge",
  help = 'merge ID — bring the change of a child started with $(spawn --isolated ROLE "task"), which works in ' ..
    "its own copy of the tree, into yours (conflicts are shown, not applied); discard ID drops it",
  access = "edit",
  needs = "agent", -- the coding agent's policy (lib/agent), required only when it runs
  tool = true,
  writes = true,
  parse = function(text)
    local id = text:match("^%s*(%S+)%s*$")
    if not id then moss.error("usage", "merge needs a child's id: $(merge ab12cd34-1)") end
    return { id }
  end,
  run = function(ctx, a)
    local S, env, id = ctx.S, ctx.env, a[1]
    local c = children().find(S, id)
    if not c then return "no child agent " .. id .. " (see $(children))", false end
    local _, why = children().ended(c)
    if why then return ("child %s was not merged: %s"):format(id, why), false end
    local w = env.before_write and env.before_write("merge child " .. id)
    local ok, m = pcall(moss.agents.merge, id)
    local note = w and env.after_write and env.after_write(w)
    if not ok then
      return ("child %s was not merged: %s"):format(id, type(m) == "table" and m.message or tostring(m)), false
    end
    c.merged = true
    ctx.log("merge", { child = id, applied = m.applied, conflicts = #m.conflicts, turn = S.turn })
    local text = children().render_merge(id, m)
    if note then text = text .. "\n" .. note end
    return text, #m.conflicts == 0
  end,
}

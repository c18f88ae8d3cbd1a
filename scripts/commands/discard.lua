-- $(discard ID): drop an isolated child's copy of the tree without merging its change.
local function children() return require("lib.agent.children") end

return {
  name = "discard",
  help = "discard ID — drop an isolated child's copy without merging its change",
  access = "read-only",
  needs = "agent", -- the coding agent's policy (lib/agent), required only when it runs
  tool = true,
  parse = function(text)
    local id = text:match("^%s*(%S+)%s*$")
    if not id then moss.error("usage", "discard needs a child's id: $(discard ab12cd34-1)") end
    return { id }
  end,
  run = function(ctx, a)
    local c = children().find(ctx.S, a[1])
    if not c then return "no child agent " .. a[1] .. " (see $(children))", false end
    local _, why = children().ended(c)
    if why then return ("child %s's copy was not dropped: %s"):format(a[1], why), false end
    local ok, r = pcall(moss.agents.discard, a[1])
    if not ok then
      local why_not = type(r) == "table" and r.message or tostring(r)
      return ("child %s's copy was not dropped: %s"):format(a[1], why_not), false
    end
    c.discarded = true
    ctx.log("discard", { child = a[1], turn = ctx.S.turn })
    return ("dropped child %s's copy of the tree; none of its change reached yours"):format(a[1]), true
  end,
}

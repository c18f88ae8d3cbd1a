-- $(batch-edit T1 A1 ARGS1 | T2 A2 ARGS2): several edits, applied all or nothing.
local function edits() return require("lib.agent.edits") end

return {
  name = "batch-edit",
  help = "batch-edit T1 ACTION1 ARGS1 | T2 ACTION2 ARGS2 — several edits, all or nothing",
  access = "edit",
  needs = "agent", -- the coding agent's policy (lib/agent), required only when it runs
  tool = true,
  writes = true,
  details = function()
    return "  Each part's code in a fence of its own, as for $(edit); a | inside a fence is code."
  end,
  parse = function(text) return edits().parse_batch(text) end,
  run = function(ctx, specs) return edits().perform(specs, ctx.env) end,
}

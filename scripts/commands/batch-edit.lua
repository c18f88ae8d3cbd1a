-- $(batch-edit T1 A1 ARGS1 | T2 A2 ARGS2): several edits, applied all or nothing.
local edits = require("lib.agent.edits")

return {
  name = "batch-edit",
  help = "batch-edit T1 ACTION1 ARGS1 | T2 ACTION2 ARGS2 — several edits, all or nothing",
  access = "edit",
  tool = true,
  writes = true,
  parse = edits.parse_batch,
  run = function(ctx, specs) return edits.perform(specs, ctx.env) end,
}

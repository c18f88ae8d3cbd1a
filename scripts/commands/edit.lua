-- $(edit TARGET ACTION ...): one change to code, under the approval policy (lib/agent/edits.lua).
local edits = require("lib.agent.edits")

return {
  name = "edit",
  help = "edit PATH/Symbol replace <code> | insert --before|--after <code> | delete; " ..
    'edit PATH --old "exact text" --new "text" — change code',
  access = "edit",
  tool = true,
  writes = true,
  parse = edits.parse_one,
  run = function(ctx, spec) return edits.perform({ spec }, ctx.env) end,
}

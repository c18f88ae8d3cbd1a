-- $(edit TARGET ACTION ...): one change to code, under the approval policy (lib/agent/edits.lua).
local function edits() return require("lib.agent.edits") end

return {
  name = "edit",
  help = "edit PATH/Symbol replace <code> | insert --before|--after <code> | delete; " ..
    'edit PATH --old "exact text" --new "text" — change code',
  access = "edit",
  needs = "agent", -- the coding agent's policy (lib/agent), required only when it runs
  tool = true,
  writes = true,
  -- the fenced form, under its help line in every prompt that offers $(edit)
  details = function() return edits().FENCE_HELP end,
  parse = function(text) return edits().parse_one(text) end,
  run = function(ctx, spec) return edits().perform({ spec }, ctx.env) end,
}

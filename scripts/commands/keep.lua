-- $(keep N ...|all): new results stay in working memory instead of disappearing.
local memory = require("lib.machine.memory")

return {
  name = "keep",
  help = "keep [N ...|all] — keep new results in working memory",
  run = function(ctx, args)
    local kept, err = memory.keep(ctx.S.mem, args, ctx.S.turn)
    if err then ctx.say(err) end
    for _, it in ipairs(kept) do ctx.log("keep", { id = it.id, cmd = it.cmd, turn = ctx.S.turn }) end
  end,
}

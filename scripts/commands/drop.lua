-- $(drop ID): remove a kept item from working memory.
local memory = require("lib.machine.memory")

return {
  name = "drop",
  help = "drop ID — remove a kept item",
  run = function(ctx, args)
    local it = memory.drop(ctx.S.mem, args)
    if not it then ctx.say("drop: no kept item with id '" .. args .. "'") end
    ctx.log("drop", { id = args, found = it ~= nil, turn = ctx.S.turn })
  end,
}

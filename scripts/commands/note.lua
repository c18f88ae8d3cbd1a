-- $(note TEXT): a finding kept in working memory.
local memory = require("lib.machine.memory")
local parser = require("lib.machine.parser")

return {
  name = "note",
  help = "note TEXT — record a finding (kept)",
  run = function(ctx, args)
    local item = memory.note(ctx.S.mem, parser.unquote(args), ctx.S.turn)
    ctx.log("note", { id = item.id, content = item.content, turn = ctx.S.turn })
  end,
}

-- $(forget TEXT): remove the notes that contain TEXT.
local memory = require("lib.machine.memory")
local parser = require("lib.machine.parser")

return {
  name = "forget",
  help = "forget TEXT — remove notes containing TEXT",
  run = function(ctx, args)
    local text = parser.unquote(args)
    local n = memory.forget(ctx.S.mem, text)
    ctx.say("forget: removed " .. n .. " item(s) containing '" .. text .. "'")
  end,
}

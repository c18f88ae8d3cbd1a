-- $(answer TEXT) or $(done ANSWER) followed by the answer: conclude (from a state that
-- concludes; the runner's answer gate may send it back).
local parser = require("lib.machine.parser")

return {
  name = "answer",
  aliases = { "done" },
  help = "answer TEXT — conclude with the answer",
  concludes = true,
  run = function(ctx, args)
    local a = parser.unquote(args)
    if a == "ANSWER" or a == "" then a = (ctx.cmd.after or ""):gsub("^%s*[-:]?%s*", "") end
    return { answer = a }
  end,
}

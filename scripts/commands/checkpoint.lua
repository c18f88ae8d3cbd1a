-- $(checkpoint PROGRESS | QUESTIONS): save and stop; open questions with nobody to answer
-- them end the session blocked (exit 3), resumable with --resume ID "answer".
local parser = require("lib.machine.parser")
local finish = require("lib.machine.finish")

return {
  name = "checkpoint",
  help = "checkpoint PROGRESS | QUESTIONS — save and stop",
  run = function(ctx, args)
    local progress, questions = args:match("^(.-)%s*|%s*(.*)$")
    local S = ctx.S
    S.progress, S.questions = parser.unquote(progress or args), parser.unquote(questions or "")
    ctx.log("checkpoint", { progress = S.progress, questions = S.questions })
    local blocked = S.questions ~= "" and not ctx.env.interactive
    finish.now(blocked and "blocked" or "checkpoint")
  end,
}

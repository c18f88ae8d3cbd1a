-- $(ask QUESTION): ask the user; non-interactive, the model is told to decide or checkpoint.
local parser = require("lib.machine.parser")

return {
  name = "ask",
  help = "ask QUESTION — ask the user",
  run = function(ctx, args)
    local q = parser.unquote(args)
    local reply = ctx.env.interactive and moss.ui.ask(q) or nil
    ctx.log("ask", { question = q, answer = reply, turn = ctx.S.turn })
    if reply then return { output = { cmd = "ask " .. q, content = "User: " .. reply, ok = true } } end
    ctx.log("blocked_ask", { question = q, turn = ctx.S.turn })
    return { output = { cmd = "ask " .. q, ok = false,
      content = "Cannot ask: moss is running non-interactively. Decide using what you have, " ..
        "or end with $(checkpoint PROGRESS | QUESTIONS) so a person can answer and resume." } }
  end,
}

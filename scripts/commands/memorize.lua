-- $(memorize [--preference|--decision] TEXT): long-term memory in .moss/memory/*.md.
local parser = require("lib.machine.parser")

local KINDS = { preference = "preferences", decision = "decisions" }

return {
  name = "memorize",
  help = "memorize [--preference|--decision] TEXT — remember across sessions (.moss/memory/)",
  run = function(ctx, args)
    local flag, text = args:match("^%-%-(%a+)%s+(.*)$")
    local kind = KINDS[flag or ""] or "facts"
    local ok, res = pcall(moss.memory.memorize, parser.unquote(text or args), { kind = kind })
    ctx.say(ok and ("memorized in .moss/memory/" .. res.kind .. ".md" .. (res.duplicate and " (already there)" or ""))
      or ("memorize failed: " .. tostring(res.message or res)))
  end,
}

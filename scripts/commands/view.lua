-- $(view TARGET [--depth N]): the project tree, a file skeleton, lines, or one symbol.
local args = require("lib.machine.args")

return {
  name = "view",
  help = "view PATH | PATH:START-END | PATH/Symbol | . — tree, file skeleton, lines or a symbol",
  access = "read-only",
  tool = true,
  parallel = "code.view",
  parse = function(text)
    local opts, rest = args.flags(text, { ["--depth"] = "value" })
    local target = #rest > 0 and table.concat(rest, " ") or "."
    return { target, { depth = tonumber(opts["--depth"] and opts["--depth"][1]) or 1 } }
  end,
  run = function(_, a) return moss.code.view(a[1], a[2]) end,
}

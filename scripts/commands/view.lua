-- $(view TARGET [--depth N] [--full]): the project tree, a file skeleton, lines, or one symbol.
-- The model gets the compact form (every token earns its place: a skeleton's symbols by
-- their first line, a docstring cut to its first line, each naming the command that shows
-- the rest); --full shows end lines and whole docstrings.
local args = require("lib.machine.args")

return {
  name = "view",
  help = "view PATH | PATH:START-END | PATH/Symbol | . [--full] — tree, file skeleton, lines or a symbol",
  access = "read-only",
  tool = true,
  parallel = "code.view",
  parse = function(text)
    local opts, rest = args.flags(text, { ["--depth"] = "value", ["--full"] = "flag" })
    local target = #rest > 0 and table.concat(rest, " ") or "."
    return { target, { depth = tonumber(opts["--depth"] and opts["--depth"][1]) or 1,
      compact = not opts["--full"] } }
  end,
  run = function(_, a) return moss.code.view(a[1], a[2]) end,
}

-- $(text-search "regex" [--only GLOB] [--limit N] [-i] [--full]): ripgrep with the enclosing
-- symbols. The model gets the compact form (labels without line ranges, at most a few hits
-- a file, then the search that lists the rest); --full labels each hit with its symbol's lines.
local args = require("lib.machine.args")

return {
  name = "text-search",
  aliases = { "grep", "search" },
  help = 'text-search "regex" [--only GLOB] [--limit N] — ripgrep with enclosing symbols',
  access = "read-only",
  tool = true,
  parallel = "code.search",
  parse = function(text)
    local opts, rest = args.flags(text,
      { ["--only"] = "value", ["--limit"] = "value", ["-i"] = "flag", ["--ignore-case"] = "flag",
        ["--full"] = "flag" })
    if #rest == 0 then
      moss.error("usage", 'text-search needs a pattern: $(text-search "regex" [--only GLOB] [--limit N])')
    end
    return { table.concat(rest, " "), {
      only = opts["--only"],
      limit = tonumber(opts["--limit"] and opts["--limit"][1]) or 50,
      ignore_case = opts["-i"] or opts["--ignore-case"] or false,
      compact = not opts["--full"],
    } }
  end,
  run = function(_, a) return moss.code.search(a[1], a[2]) end,
}

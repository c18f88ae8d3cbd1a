-- Command arguments: `flags("a --only x b -i", {["--only"]="value", ["-i"]="flag"})` ->
-- { ["--only"] = {"x"}, ["-i"] = true }, { "a", "b" }. Words are split as the parser does
-- (quotes group, backslashes escape).
local parser = require("lib.machine.parser")

local M = {}

function M.flags(text, spec)
  local words = parser.words(text)
  local opts, rest, i = {}, {}, 1
  while i <= #words do
    local w = words[i]
    local s = spec[w]
    if s == "flag" then
      opts[w] = true
    elseif s then
      i = i + 1
      opts[w] = opts[w] or {}
      table.insert(opts[w], words[i])
    else
      rest[#rest + 1] = w
    end
    i = i + 1
  end
  return opts, rest
end

return M

-- luacheck's settings for moss's Lua (scripts/): `luacheck scripts` from the repository root.
-- tests/test_luacheck.py runs it (skipped where luacheck is not installed, but never under CI,
-- whose .ci/run installs Debian's lua-check).

-- The globals are what moss's Lua runtime gives a script (host/bootstrap.lua): Lua 5.4's
-- standard library without io, debug, dofile and loadfile, with only os.time/clock/date/
-- difftime, package.loaded and no string.dump; and `moss`, the API (host/api/declarations.lua,
-- whose stubs are scripts/types/moss.lua). A script that reaches for anything else would
-- fail at run time; here it fails the lint first. The standard library's definitions are
-- luacheck's own (its builtin_standards), narrowed as the runtime narrows them.
local lua54 = require("luacheck.builtin_standards").lua54.read_globals

local function only(def, names)
  local fields = {}
  for _, name in ipairs(names) do fields[name] = assert(def.fields[name], name) end
  return { fields = fields }
end

local function without(def, gone)
  local fields = {}
  for name, field in pairs(def.fields) do
    if name ~= gone then fields[name] = field end
  end
  return { fields = fields }
end

local removed = { io = true, debug = true, dofile = true, loadfile = true }
local runtime = {}
for name, def in pairs(lua54) do
  if not removed[name] then runtime[name] = def end
end
runtime.os = only(lua54.os, { "time", "clock", "date", "difftime" })
runtime.package = only(lua54.package, { "loaded" })
runtime.string = without(lua54.string, "dump")
runtime.moss = { other_fields = true }  -- its fields are checked by the stubs, not here

stds.moss_runtime = { read_globals = runtime }
std = "moss_runtime"

-- generated from host/api/declarations.lua (`python -m moss.api`): annotations, not code
exclude_files = { "scripts/types/**" }

max_line_length = 120  -- as ruff's line-length for host/

-- An output format (lib/machine/output.lua) is a class: a method that implements the
-- interface without needing its object (Json:turn, a no-op) cannot rename the implicit
-- `self` of `function T:m()`, so an unused implicit self is not reported. An unused named
-- argument still is: prefix it with `_` (the interface's position) or drop it (a trailing one).
self = false

-- Run moss's quick checks: compile the host, then the [agent] quick_tests of .moss/config.toml.
--
-- The worked example of a project's own config field: `quick_tests` means nothing to moss;
-- this script reads it from moss.config.agent.

local function help()
  return [[
usage: moss @quick [--list]

Compile host/ and run the test files listed in .moss/config.toml's [agent] quick_tests, in
the read-shell sandbox (read-only files, no network). --list prints the files.
Exit status: 0 all passed, 1 a step failed, 2 quick_tests is missing.]]
end

local function main(args)
  local tests = (moss.config.agent or {}).quick_tests
  if type(tests) ~= "table" or #tests == 0 then
    moss.error("config", '[agent] quick_tests in .moss/config.toml must list test files, e.g. ' ..
      'quick_tests = ["tests/test_config.py"]', 0)
  end
  if args[1] == "--list" then
    for _, t in ipairs(tests) do print(t) end
    return 0
  end
  moss.access.set("read-shell")
  local steps = {
    -- the project is read-only here: the bytecode goes to the sandbox's private /tmp (without
    -- it, compileall writes host/__pycache__ and fails wherever no cache was left behind,
    -- as under PYTHONDONTWRITEBYTECODE=1)
    { "syntax", ".venv/bin/python -X pycache_prefix=/tmp/pycache -m compileall -q host" },
    { "quick tests", ".venv/bin/python -m pytest -q -x -p no:cacheprovider " .. table.concat(tests, " ") },
  }
  for _, step in ipairs(steps) do
    moss.ui.status(step[1] .. ": " .. step[2])
    local r = moss.shell.run(step[2], { timeout = 300 })
    if r.code ~= 0 then
      moss.ui.print(r.stdout .. r.stderr)
      moss.ui.print(step[1] .. " failed (exit " .. tostring(r.code) .. ")", { style = "red" })
      return 1
    end
    print(step[1] .. ": ok " .. (r.stdout:match("([^\n]+)\n?$") or ""))
  end
  return 0
end

return { help = help, main = main }

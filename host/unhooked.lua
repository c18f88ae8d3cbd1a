-- unhooked(f, a, b): f(a, b)'s first result, run with the count hook off and the hook put
-- back after, also on an error (see Runtime._install, host/runtime.py). Compiled before the
-- sandbox: its pcall is Lua's own, not the bootstrap's (which polls the host on entry).
local gethook, sethook, pcall, error = debug.gethook, debug.sethook, pcall, error
return function(f, a, b)
  local hook, mask, count = gethook()
  if hook then sethook() end
  local ok, r = pcall(f, a, b)
  if hook then sethook(hook, mask, count) end
  if not ok then error(r, 0) end
  return r
end

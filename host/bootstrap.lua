-- Runs once in every fresh runtime, before any user code, with the host table H.
-- It keeps private references to what the sandbox takes away (the debug hook, the
-- traceback), installs the cancel/deadline hook, the module loader and the `moss`
-- global, then strips every effectful library. Nothing here is reachable afterwards
-- except through the closures it returns.
local H = ...

local sethook, gethook, getinfo, traceback = debug.sethook, debug.gethook, debug.getinfo, debug.traceback
local raw_pcall, raw_xpcall, raw_load, raw_error = pcall, xpcall, load, error
local co_create, co_resume, co_status = coroutine.create, coroutine.resume, coroutine.status
local pack, unpack, concat = table.pack, table.unpack, table.concat
local setmetatable, getmetatable, rawget, type, tostring, select = setmetatable, getmetatable, rawget, type, tostring, select
local string = string
local raw_dump = string.dump -- kept for the host's chunk cache only (see the end)
local check, COUNT = H.check, H.hook_count

-- Errors raised by moss primitives (and by cancellation) are tables that behave like
-- strings: tostring, .., and string methods work; err.kind and err.message are there too.
local Err = {}
Err.__index = function(self, k)
  local f = string[k]
  if f then
    return function(s, ...) return f(tostring(s), ...) end
  end
end
Err.__tostring = function(self)
  return (rawget(self, "where") or "") .. rawget(self, "message")
end
Err.__concat = function(a, b) return tostring(a) .. tostring(b) end
Err.__name = "moss.error"

local function make_error(kind, message, level)
  local where = ""
  if level then
    local info = getinfo(level + 1, "Sl")
    if info and info.currentline and info.currentline > 0 then
      where = info.short_src .. ":" .. info.currentline .. ": "
    end
  end
  return setmetatable({ kind = kind, message = message, where = where }, Err)
end

-- ---- cancellation and deadlines ---------------------------------------------------
local tripped = nil -- "interrupted" or "timeout" once the host says stop

local function tripped_hook()
  raw_error(make_error(tripped, tripped == "timeout" and "script deadline exceeded" or "interrupted"), 0)
end

local function trip(why)
  tripped = why
  sethook(tripped_hook, "", 1) -- every further instruction in this coroutine fails
  tripped_hook()
end

local function hook()
  local why = check()
  if why then trip(why) end
end

local function poll()
  local why = tripped or check()
  if why then trip(why) end
end

-- pcall/xpcall would swallow the stop; these re-raise it and also poll on entry, which
-- catches recursion patterns that starve the count hook.
pcall = function(f, ...)
  poll()
  local r = pack(raw_pcall(f, ...))
  if tripped then trip(tripped) end
  return unpack(r, 1, r.n)
end

xpcall = function(f, handler, ...)
  poll()
  local r = pack(raw_xpcall(f, handler, ...))
  if tripped then trip(tripped) end
  return unpack(r, 1, r.n)
end

-- Hooks are per coroutine: every new coroutine inherits ours.
coroutine.create = function(f)
  local co = co_create(f)
  sethook(co, hook, "", COUNT)
  return co
end

coroutine.resume = function(co, ...)
  poll()
  local r = pack(co_resume(co, ...))
  if tripped then trip(tripped) end
  return unpack(r, 1, r.n)
end

coroutine.wrap = function(f)
  local co = coroutine.create(f)
  return function(...)
    local r = pack(coroutine.resume(co, ...))
    if not r[1] then raw_error(r[2], 0) end
    return unpack(r, 2, r.n)
  end
end

-- ---- text-only load ---------------------------------------------------------------
load = function(chunk, name, mode, env)
  if env == nil then
    return raw_load(chunk, name, "t")
  end
  return raw_load(chunk, name, "t", env)
end

-- ---- require: project, then user, then built-in scripts ---------------------------
local loaded, loading = {}, {}
require = function(name)
  if type(name) ~= "string" then
    raw_error(make_error("usage", "require: module name must be a string, got " .. type(name), 2), 0)
  end
  local m = loaded[name]
  if m ~= nil then return m end
  if loading[name] then
    raw_error(make_error("lua", "require: circular require of '" .. name .. "'", 2), 0)
  end
  local ok, fn, err = H.find_module(name) -- compiled by the host (text, or its own dump)
  if not ok then raw_error(make_error(err or "not_found", fn, 2), 0) end -- err: the kind (denied, ...)
  if not fn then raw_error(err, 0) end
  loading[name] = true
  local r = pack(raw_pcall(fn, name))
  loading[name] = nil
  if not r[1] then raw_error(r[2], 0) end
  local value = r[2]
  if value == nil then value = true end
  loaded[name] = value
  return value
end

-- ---- print goes to stdout ---------------------------------------------------------
local write_out = H.write_stdout
print = function(...)
  local n = select("#", ...)
  local parts = {}
  for i = 1, n do parts[i] = tostring((select(i, ...))) end
  write_out(concat(parts, "\t") .. "\n")
end

-- ---- the moss global --------------------------------------------------------------
-- Raw host functions answer (true, results...) or (false, message, kind); the wrapper
-- turns the second form into an ordinary Lua error raised at the caller's line.
local function wrap(fullname, raw)
  return function(...)
    local r = pack(raw(...))
    if r[1] then return unpack(r, 2, r.n) end
    local message, kind = r[2], r[3]
    if kind == "interrupted" or kind == "timeout" then trip(kind) end
    raw_error(make_error(kind or "error", fullname .. ": " .. tostring(message), 2), 0)
  end
end

local OBJECT = {} -- metatable marking a table that converts to a JSON object / dict
local moss = {}
for fullname, raw in pairs(H.functions) do
  local node = moss
  local parts = {}
  for part in fullname:gmatch("[^.]+") do parts[#parts + 1] = part end
  for i = 1, #parts - 1 do
    node[parts[i]] = node[parts[i]] or {}
    node = node[parts[i]]
  end
  node[parts[#parts]] = wrap("moss." .. fullname, raw)
end

--- A table that converts to a dict (JSON object) even when empty.
function moss.dict(t) return setmetatable(t or {}, OBJECT) end

-- moss.json.null: a value that converts to JSON null / Python None (nil cannot sit in a table).
local NULL = setmetatable({}, {
  __name = "moss.null",
  __tostring = function() return "null" end,
  __newindex = function() raw_error("moss.json.null is read-only", 2) end,
})
moss.json = moss.json or {}
moss.json.null = NULL

-- Key order of objects decoded with {ordered = true}: the host hands each object's keys
-- over under the integer key 0; they move here (weak, so they go with their table).
do
  local ORDER = setmetatable({}, { __mode = "k" })
  local host_decode = moss.json.decode
  local function adopt(v, depth)
    if type(v) ~= "table" or depth > 250 then return end
    local keys = rawget(v, 0)
    if type(keys) == "table" then
      rawset(v, 0, nil)
      ORDER[v] = keys
      for _, k in ipairs(keys) do
        if rawget(v, k) == nil then rawset(v, k, NULL) end -- a member that was null
      end
    end
    for _, x in pairs(v) do adopt(x, depth + 1) end
  end
  --- Decode JSON; with {ordered = true}, objects remember their key order (moss.json.keys)
  -- and null members are moss.json.null instead of absent.
  function moss.json.decode(text, opts)
    local ok, v = pcall(host_decode, text, opts)
    if not ok then raw_error(make_error(moss.error_kind(v), v.message or tostring(v), 2), 0) end
    if type(opts) == "table" and opts.ordered then adopt(v, 0) end
    return v
  end
  --- An object's keys in source order (decoded with {ordered = true}); sorted otherwise.
  function moss.json.keys(t)
    if ORDER[t] then return { table.unpack(ORDER[t]) } end
    local out = {}
    for k in pairs(t) do out[#out + 1] = k end
    table.sort(out, function(a, b) return tostring(a) < tostring(b) end)
    return out
  end
  --- Whether `t` was decoded (with {ordered = true}) from a JSON object, not an array.
  function moss.json.is_object(t) return ORDER[t] ~= nil end
end

-- moss.inbox.watch(handler): the host calls handler(records) while it waits for the model or
-- a shell command; returning "interrupt" ends that wait (host/api/inbox.py).
if moss.inbox then
  local handler
  function moss.inbox.watch(fn)
    handler = fn
    moss.inbox._watched(fn ~= nil)
  end
  function moss.inbox._dispatch(records, offset)
    if handler then return handler(records, offset) end
  end
end

--- Raise a moss error with a kind scripts can branch on. `level` 0 names no position (a
-- configuration or usage problem that no line of Lua caused). Raised on purpose, it reaches
-- the person as its sentence alone (the host keeps `where` for --verbose).
function moss.error(kind, message, level)
  local e = make_error(kind, message, level ~= 0 and (level or 1) + 1 or nil)
  rawset(e, "on_purpose", true)
  raw_error(e, 0)
end

--- The kind of an error value from pcall ("lua" for plain Lua errors).
function moss.error_kind(err)
  if getmetatable(err) == Err then return err.kind end
  return "lua"
end

moss.fmt = string.format

-- ---- child agents and locks: handles over host functions keyed by id ---------------
-- Python objects never reach Lua; a handle is a plain table whose methods call the host
-- with the child's (or lock's) id, so it checkpoints as data too ({id=...}).
if moss.agents then
  local agents = moss.agents
  local Handle = {}
  Handle.__index = Handle
  Handle.__name = "moss.agent"
  function Handle:wait(timeout) return agents.wait(self.id, timeout) end
  function Handle:status() return agents.status(self.id) end
  function Handle:pause() return agents.pause(self.id) end
  function Handle:resume(message) return agents.resume(self.id, message) end
  function Handle:cancel() return agents.cancel(self.id) end
  function Handle:info() return agents.info(self.id) end
  function Handle:merge() return agents.merge(self.id) end
  function Handle:discard() return agents.discard(self.id) end

  --- moss.spawn{task=, role=, machine=, max_turns=, access=} -> handle (starts at once);
  -- moss.spawn{resume=ID} re-attaches a child of this session saved by an earlier run.
  function moss.spawn(spec)
    local id = agents.start(spec)
    return setmetatable({ id = id, role = spec.role, task = spec.task }, Handle)
  end

  local function ids(handles)
    local out = {}
    for i, h in ipairs(handles or {}) do out[i] = type(h) == "table" and h.id or h end
    return out
  end

  --- The first of `handles` to end: handle, result (nil after `timeout` seconds).
  function moss.wait_any(handles, timeout)
    local i, result = agents.wait_any(ids(handles), timeout)
    if i == nil then return nil end
    return handles[i], result
  end

  --- Every handle's result, in order (nil for one still running after `timeout`).
  function moss.wait_all(handles, timeout)
    local out = {}
    local deadline = timeout and (os.time() + timeout) or nil
    for i, h in ipairs(handles or {}) do
      local left = deadline and math.max(0, deadline - os.time()) or nil
      out[i] = agents.wait(type(h) == "table" and h.id or h, left)
    end
    return out
  end
end

if moss.locks then
  local locks = moss.locks
  local Lock = {}
  Lock.__index = Lock
  Lock.__name = "moss.lock"
  function Lock:release()
    if self.released then return false end
    self.released = true
    return locks.release(self.id)
  end

  --- moss.lock(target, {timeout=30}) -> handle, or nil, "locked by ID (role) since TIME".
  function moss.lock(target, opts)
    local id, err = locks.acquire(target, opts)
    if not id then return nil, err end
    return setmetatable({ id = id, target = target }, Lock)
  end
end
_G.moss = moss

-- ---- strip what the sandbox forbids -----------------------------------------------
local os_keep = { time = os.time, clock = os.clock, date = os.date, difftime = os.difftime }
os = os_keep
io, debug, dofile, loadfile, python = nil, nil, nil, nil, nil
package = { loaded = loaded }
string.dump = nil
local raw_collect = collectgarbage
collectgarbage = function(opt, ...)
  opt = opt or "collect"
  if opt == "count" or opt == "collect" or opt == "step" then return raw_collect(opt, ...) end
  raw_error(make_error("denied", "collectgarbage: only 'count', 'collect' and 'step' are available", 2), 0)
end

-- Shared metatables: strings and wrapped host functions.
getmetatable("").__metatable = false
do
  local mt = getmetatable(H.write_stdout)
  if type(mt) == "table" then mt.__metatable = false end
end

-- ---- entry points handed back to the host -----------------------------------------
local function is_object(t) return getmetatable(t) == OBJECT end
local function is_null(t) return rawequal(t, NULL) end

-- Run fn(...) under the hook; answer (true, results...) or (false, text, kind, trace, where,
-- on_purpose): `where` is the "file:line: " that starts `text` ("" when none), `on_purpose`
-- whether moss.error raised it.
local function run(fn, ...)
  tripped = nil
  sethook(hook, "", COUNT)
  local function handler(e)
    sethook() -- unwinding to the host: stop tripping so the handler itself can run
    if getmetatable(e) == Err then
      if e.kind == "interrupted" or e.kind == "timeout" then return e end
      return setmetatable({ kind = e.kind, message = e.message, where = e.where, on_purpose = rawget(e, "on_purpose"),
        trace = traceback("", 2) }, Err)
    end
    local where = ""
    if type(e) ~= "string" then -- error({...}) carries no position: take the raiser's
      for level = 2, 4 do -- skip the C function `error` itself
        local info = getinfo(level, "Sl")
        if info and info.currentline and info.currentline > 0 then
          where = info.short_src .. ":" .. info.currentline .. ": "
          break
        end
      end
      e = "error object " .. tostring(e) .. (type(e) == "table" and " (raise strings, or moss.error(kind, message))" or "")
    end
    return setmetatable({ kind = "lua", message = e, where = where, trace = traceback("", 2) }, Err)
  end
  local r = pack(raw_xpcall(fn, handler, ...))
  sethook()
  if r[1] then return unpack(r, 1, r.n) end
  local e = r[2]
  if getmetatable(e) == Err then
    return false, tostring(e), e.kind, rawget(e, "trace") or "", rawget(e, "where") or "",
      rawget(e, "on_purpose") == true
  end
  -- memory errors skip the handler
  return false, tostring(e), (tostring(e):find("not enough memory", 1, true) and "memory" or "lua"), ""
end

local function compile(src, chunkname)
  return raw_load(src, chunkname, "t")
end

-- The host's chunk cache (host/runtime.py, _Chunks): dump a function it compiled from text,
-- and load such a dump back in another runtime of the same process. Binary mode is
-- reachable only through this closure, which only the host holds; it is handed bytecode
-- that this process produced from source it compiled, never bytes from a file or a script.
local function dump(fn)
  return raw_dump(fn)
end

local function load_dump(bytecode, chunkname)
  return raw_load(bytecode, chunkname, "b")
end

return run, compile, is_object, is_null, load_dump, dump

-- Lua -> Python for a whole table in one crossing: Lua writes the table as JSON text (one
-- string), Python parses it with the C json module. Walking a table from Python costs a
-- bridge crossing per entry; this costs one, which is what makes a checkpoint of a long
-- session or a prompt of hundreds of blocks cheap to hand over. It covers plain data (string
-- keys, or exactly the keys 1..n; strings, numbers, booleans, moss.json.null, nested to
-- max_depth) and answers nil for anything else (a mixed table, a function, too deep), which
-- then takes host/convert.py's entry-by-entry path, with its errors. Compiled before the sandbox
-- strips the globals, so it keeps its own references to the library functions it uses.
--
-- Strings are not escaped in Lua: a Lua pattern scan (gsub) costs ~15 ns a byte, so escaping
-- a 3 KB system prompt took ~50 µs and a 30-block prompt ~200 µs, most of a call's bridge
-- time. Control characters go into the text raw (Python parses with strict=False, which takes
-- them inside strings); a string holding `"` or `\` (found with plain finds, i.e. memchr) is
-- handed over beside the text instead: the encoder returns the text cut where such strings
-- go, with those strings in between (text, raw, text, raw, ..., text), and Python escapes them
-- with the json module's C encoder. Past raw_max (convert.RAW_MAX) such strings in one table
-- (a result count Lua must not exceed), the rest are escaped in Lua as before.
--
-- The encoder runs with the runtime's count hook off (see Runtime.hook_fns): while any count
-- hook is set, Lua 5.4 traps every VM instruction, which made this loop half as slow again.
-- It is host code over plain data (raw access only: no metamethod, no script code runs in it)
-- and ends, so the cancellation hook has nothing to catch here; it is put back before return.
-- Run by host/convert.py (Converter) with (max_depth, raw_max); it returns the function that
-- makes the encoder once is_object and null are known.
local max_depth, raw_max = ...
local pcall = pcall
local next, type, rawlen, rawget, rawequal = next, type, rawlen, rawget, rawequal
local mtype, concat, format, find, gsub = math.type, table.concat, string.format, string.find, string.gsub
local unpack = table.unpack
local huge = math.huge
local ESC = { ['"'] = '\\"', ['\\'] = '\\\\' }
return function(is_object, null, gethook, sethook)
  local out, n, cuts
  local keys, nkeys = {}, 0 -- '"key":' for the keys seen so far (a few hundred at most)
  local enc
  local function str(s)
    if find(s, '"', 1, true) or find(s, '\\', 1, true) then
      if #cuts < raw_max then
        -- cut the text here: the string goes over raw, between two pieces of text
        cuts[#cuts + 1] = n
        n = n + 1; out[n] = s
        return
      end
      s = gsub(s, '["\\]', ESC)
    end
    out[n + 1] = '"'; out[n + 2] = s; out[n + 3] = '"'
    n = n + 3
  end
  local function key(k)
    local q = keys[k]
    if q then n = n + 1; out[n] = q return end
    if find(k, '"', 1, true) or find(k, '\\', 1, true) then
      str(k)
      n = n + 1; out[n] = ":"
      return
    end
    q = '"' .. k .. '":'
    if nkeys < 512 then nkeys = nkeys + 1; keys[k] = q end
    n = n + 1; out[n] = q
  end
  local function num(x)
    n = n + 1
    if mtype(x) == "integer" then out[n] = format("%d", x)
    elseif x ~= x then out[n] = "NaN"
    elseif x == huge then out[n] = "Infinity"
    elseif x == -huge then out[n] = "-Infinity"
    else
      local t = format("%.17g", x)
      if not find(t, "[.eEn]") then t = t .. ".0" end
      out[n] = t
    end
  end
  enc = function(v, depth)
    local tv = type(v)
    if tv == "string" then str(v) return true end
    if tv == "number" then num(v) return true end
    if tv == "boolean" then n = n + 1; out[n] = v and "true" or "false" return true end
    if tv ~= "table" then return false end
    if rawequal(v, null) then n = n + 1; out[n] = "null" return true end
    if depth > max_depth then return false end
    local k1 = next(v)
    if k1 == nil then
      n = n + 1; out[n] = is_object(v) and "{}" or "[]"
      return true
    end
    local len = rawlen(v)
    if len > 0 and mtype(k1) == "integer" then
      -- a list when its keys are exactly 1..len
      local count = 0
      for k in next, v do
        if mtype(k) ~= "integer" or k < 1 or k > len then return false end
        count = count + 1
      end
      if count ~= len then return false end
      n = n + 1; out[n] = "["
      for i = 1, len do
        if i > 1 then n = n + 1; out[n] = "," end
        if not enc(rawget(v, i), depth + 1) then return false end
      end
      n = n + 1; out[n] = "]"
      return true
    end
    n = n + 1; out[n] = "{"
    local first = true
    for k, x in next, v do
      if type(k) ~= "string" then return false end
      if not first then n = n + 1; out[n] = "," end
      first = false
      key(k)
      if not enc(x, depth + 1) then return false end
    end
    n = n + 1; out[n] = "}"
    return true
  end
  return function(v)
    local hook, mask, count
    if gethook then
      hook, mask, count = gethook()
      if hook then sethook() end
    end
    out, n, cuts = {}, 0, {}
    local done, ok = pcall(enc, v, 0)
    if hook then sethook(hook, mask, count) end
    if not (done and ok) then out, cuts = nil, nil return nil end
    if #cuts == 0 then -- one piece of text (most small tables): no list of pieces to make
      local text = concat(out, "", 1, n)
      out, cuts = nil, nil
      return text
    end
    local pieces, prev = {}, 1
    for i = 1, #cuts do
      local at = cuts[i] + 1 -- out[at] is a raw string
      pieces[#pieces + 1] = concat(out, "", prev, at - 1)
      pieces[#pieces + 1] = out[at]
      prev = at + 1
    end
    pieces[#pieces + 1] = concat(out, "", prev, n)
    out, cuts = nil, nil
    return unpack(pieces)
  end
end

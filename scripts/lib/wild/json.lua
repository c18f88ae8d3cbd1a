-- A small JSON decoder that remembers the order of object keys.
--
-- moss.json.decode gives plain tables, and Lua tables forget key order; a sweep's grid is
-- expanded "in parameter order", so the <sweep> tag is decoded here instead.
--   decode(text) -> value | nil, "message at line L, column C"
--   keys(obj)    -> the object's keys in source order (sorted keys for other tables)
--   null         -> the value JSON `null` decodes to (a unique sentinel table)
local M = {}

local ORDER = setmetatable({}, { __mode = "k" })
M.null = setmetatable({}, { __tostring = function() return "null" end, __name = "json.null" })

function M.keys(obj)
  local order = ORDER[obj]
  if order then return order end
  local out = {}
  for k in pairs(obj) do out[#out + 1] = k end
  table.sort(out, function(a, b) return tostring(a) < tostring(b) end)
  return out
end

--- Whether `t` was decoded from a JSON object (as opposed to an array).
function M.is_object(t) return ORDER[t] ~= nil end

local ESCAPES = { ['"'] = '"', ["\\"] = "\\", ["/"] = "/", b = "\b", f = "\f", n = "\n", r = "\r", t = "\t" }

function M.decode(text)
  if type(text) ~= "string" then return nil, "expected a string" end
  local pos = 1
  local function fail(msg)
    local before = text:sub(1, pos - 1)
    local line = select(2, before:gsub("\n", "")) + 1
    local col = pos - (before:match(".*\n()") or 1) + 1
    error({ json_error = ("%s at line %d, column %d"):format(msg, line, col) }, 0)
  end
  local function skip()
    pos = text:find("[^ \t\r\n]", pos) or (#text + 1)
  end
  local value

  local function str()
    pos = pos + 1 -- opening quote
    local parts = {}
    while true do
      local s, e, chunk = text:find('^([^"\\%c]*)', pos)
      parts[#parts + 1] = chunk
      pos = e + 1
      local c = text:sub(pos, pos)
      if c == '"' then
        pos = pos + 1
        return table.concat(parts)
      elseif c == "\\" then
        local esc = text:sub(pos + 1, pos + 1)
        if ESCAPES[esc] then
          parts[#parts + 1] = ESCAPES[esc]
          pos = pos + 2
        elseif esc == "u" then
          local hex = text:match("^%x%x%x%x", pos + 2)
          if not hex then fail("bad \\u escape") end
          local code = tonumber(hex, 16)
          pos = pos + 6
          if code >= 0xD800 and code <= 0xDBFF then
            local lo = text:match("^\\u(%x%x%x%x)", pos)
            local low = lo and tonumber(lo, 16)
            if low and low >= 0xDC00 and low <= 0xDFFF then
              code = 0x10000 + (code - 0xD800) * 0x400 + (low - 0xDC00)
              pos = pos + 6
            end
          end
          parts[#parts + 1] = utf8.char(code)
        else
          fail("bad escape \\" .. esc)
        end
      elseif c == "" then
        fail("unterminated string")
      else
        fail("control character in string")
      end
    end
  end

  local function num()
    local start = pos
    local int = text:match("^-?%d+", pos)
    if not int then fail("unexpected character '" .. text:sub(pos, pos) .. "'") end
    if int:match("^-?0%d") then fail("leading zero in number") end
    pos = pos + #int
    local is_float = false
    local frac = text:match("^%.%d+", pos)
    if frac then pos, is_float = pos + #frac, true
    elseif text:sub(pos, pos) == "." then fail("digits expected after '.'") end
    local exp = text:match("^[eE][-+]?%d+", pos)
    if exp then pos, is_float = pos + #exp, true
    elseif text:find("^[eE]", pos) then fail("bad number exponent") end
    local s = text:sub(start, pos - 1)
    if is_float then return tonumber(s) + 0.0 end
    return math.tointeger(tonumber(s)) or tonumber(s)
  end

  local function arr()
    pos = pos + 1
    local out = {}
    skip()
    if text:sub(pos, pos) == "]" then pos = pos + 1 return out end
    while true do
      out[#out + 1] = value()
      skip()
      local c = text:sub(pos, pos)
      pos = pos + 1
      if c == "]" then return out end
      if c ~= "," then pos = pos - 1 fail("expected ',' or ']'") end
    end
  end

  local function obj()
    pos = pos + 1
    local out, order = {}, {}
    ORDER[out] = order
    skip()
    if text:sub(pos, pos) == "}" then pos = pos + 1 return out end
    while true do
      skip()
      if text:sub(pos, pos) ~= '"' then fail("expected a string key") end
      local k = str()
      skip()
      if text:sub(pos, pos) ~= ":" then fail("expected ':'") end
      pos = pos + 1
      local v = value()
      if out[k] == nil then order[#order + 1] = k end
      out[k] = v
      skip()
      local c = text:sub(pos, pos)
      pos = pos + 1
      if c == "}" then return out end
      if c ~= "," then pos = pos - 1 fail("expected ',' or '}'") end
    end
  end

  value = function()
    skip()
    local c = text:sub(pos, pos)
    if c == "{" then return obj() end
    if c == "[" then return arr() end
    if c == '"' then return str() end
    if text:find("^true", pos) then pos = pos + 4 return true end
    if text:find("^false", pos) then pos = pos + 5 return false end
    if text:find("^null", pos) then pos = pos + 4 return M.null end
    if c == "" then fail("unexpected end of input") end
    return num()
  end

  local ok, res = pcall(function()
    local v = value()
    skip()
    if pos <= #text then fail("unexpected text after the value") end
    return v
  end)
  if ok then return res end
  if type(res) == "table" and res.json_error then return nil, res.json_error end
  error(res, 0)
end

return M

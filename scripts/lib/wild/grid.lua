-- Sweep grids: parameters -> combinations -> commands.
--
-- As the original server did: the Cartesian product of each parameter's values, in
-- parameter order (the first parameter varies slowest), a scalar counting as a one-item
-- list, cut to the first `max_runs` combinations; each run's command is base_command plus
-- ` --key=value` per parameter. Unlike the original, values are shell-quoted.
local json = moss.json

local M = {}

--- Single-quote `s` for sh unless it is made only of characters that never need quoting.
function M.shquote(s)
  s = tostring(s)
  if s ~= "" and not s:find("[^%w@%%+=:,./_-]") then return s end
  return "'" .. s:gsub("'", "'\"'\"'") .. "'"
end

-- A float the way Python's repr writes it (the original built commands in Python):
-- shortest round-trip digits, and always a '.' or an exponent (0.001, 1e-05, 100.0).
local function float_text(v)
  if v ~= v then return "nan" end
  if v == math.huge then return "inf" end
  if v == -math.huge then return "-inf" end
  local s
  for digits = 1, 17 do
    s = ("%." .. digits .. "g"):format(v)
    if tonumber(s) == v then break end
  end
  local mant, exp = s:match("^(-?[%d.]+)e([-+]%d+)$")
  if mant then
    local n = tonumber(exp)
    if n >= -4 and n < 16 then
      s = ("%." .. math.max(0, -n + #mant:gsub("[-.]", "") - 1) .. "f"):format(v)
    else
      return mant .. "e" .. (n < 0 and "-" or "+") .. ("%02d"):format(math.abs(n))
    end
  end
  if not s:find("[.e]") then s = s .. ".0" end
  return s
end

-- Compact JSON for a list or object value (rare in a grid, but possible).
local function encode(v)
  if v == json.null then return "null" end
  local t = type(v)
  if t == "string" then return moss.json.encode(v) end
  if t ~= "table" then return M.format_value(v) end
  local parts = {}
  if json.is_object(v) then
    for _, k in ipairs(json.keys(v)) do parts[#parts + 1] = moss.json.encode(k) .. ":" .. encode(v[k]) end
    return "{" .. table.concat(parts, ",") .. "}"
  end
  for _, x in ipairs(v) do parts[#parts + 1] = encode(x) end
  return "[" .. table.concat(parts, ",") .. "]"
end

--- A parameter value as command-line text (before quoting): strings as they are, integers
-- as digits, floats as Python prints them, booleans true/false, null as "null", and lists
-- or objects as compact JSON.
function M.format_value(v)
  if v == json.null or v == nil then return "null" end
  local t = type(v)
  if t == "string" then return v end
  if t == "boolean" then return v and "true" or "false" end
  if t == "number" then
    if math.type(v) == "integer" then return tostring(v) end
    return float_text(v)
  end
  return encode(v)
end

--- The combinations of `params` ({ {key=, values={...}}, ... }, in order): a list of
-- combinations (each a list of {key=, value=}), cut to `max_runs`; and the full grid size.
function M.expand(params, max_runs)
  local total = 1
  for _, p in ipairs(params) do total = total * #p.values end
  local limit = max_runs and math.min(max_runs, total) or total
  local combos = {}
  if total == 0 then return combos, 0 end
  for i = 0, limit - 1 do
    -- mixed-radix digits of i, the last parameter varying fastest (itertools.product)
    local combo, rest = {}, i
    for j = #params, 1, -1 do
      local n = #params[j].values
      combo[j] = { key = params[j].key, value = params[j].values[rest % n + 1] }
      rest = rest // n
    end
    combos[#combos + 1] = combo
  end
  return combos, total
end

--- base_command plus ` --key=value` for each parameter, values shell-quoted.
function M.command(base, combo)
  local parts = { base }
  for _, kv in ipairs(combo) do
    local key, value = tostring(kv.key), M.format_value(kv.value)
    if key:find("^[%w_.-]+$") then
      parts[#parts + 1] = "--" .. key .. "=" .. M.shquote(value)
    else
      parts[#parts + 1] = M.shquote("--" .. key .. "=" .. value)
    end
  end
  return table.concat(parts, " ")
end

--- "lr=0.001, bs=32": a combination for people (and prompts).
function M.describe(combo)
  local parts = {}
  for _, kv in ipairs(combo) do parts[#parts + 1] = tostring(kv.key) .. "=" .. M.format_value(kv.value) end
  return table.concat(parts, ", ")
end

return M

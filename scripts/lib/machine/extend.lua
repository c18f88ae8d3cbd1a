-- Roles and machines that extend another one instead of copying it:
--
--   -- .moss/scripts/roles/explorer.lua: the built-in explorer, plus $(todo)
--   return { extends = "explorer", add_commands = { "todo" },
--            prompt_extra = "Keep a to-do list with $(todo TEXT)." }
--
-- The result is the base with this table laid over it:
--   * a field here replaces the base's field;
--   * a table of named fields in both (a role's `prompts`, a machine's `states`, one state)
--     is merged field by field, so `states = { agent = { footer = "..." } }` changes one field
--     of one state;
--   * `add_NAME = { ... }` appends to the base's list NAME (names already there are not
--     repeated), `add_NAME = "text"` adds a paragraph to the base's text NAME.
-- The base is the module of that name from the script roots, as `require` finds it; a file
-- that extends the name it overrides (the project's roles/explorer.lua extending "explorer")
-- gets the one below it (the user's, else the built-in). A base may extend another; at most
-- MAX_DEPTH links.
local M = {}

M.MAX_DEPTH = 8

local function copy(t)
  if type(t) ~= "table" then return t end
  local out = {}
  for k, v in pairs(t) do out[k] = copy(v) end
  return out
end
M.copy = copy -- a deep copy (tables only; a cycle is not expected in a role or machine)

-- a table of named fields, not a list (an empty table counts as neither: it replaces)
local function is_map(t)
  return type(t) == "table" and next(t) ~= nil and #t == 0
end

local function add(out, name, v, where)
  local cur = out[name]
  if type(v) == "string" then
    if cur ~= nil and type(cur) ~= "string" then
      moss.error("usage", ("%s: add_%s is text but %s is a %s"):format(where, name, name, type(cur)))
    end
    out[name] = cur and (cur .. "\n\n" .. v) or v
  elseif type(v) == "table" then
    if cur ~= nil and type(cur) ~= "table" then
      moss.error("usage", ("%s: add_%s is a list but %s is a %s"):format(where, name, name, type(cur)))
    end
    local list, seen = copy(cur) or {}, {}
    for _, x in ipairs(list) do seen[x] = true end
    for _, x in ipairs(v) do
      if not seen[x] then list[#list + 1] = x; seen[x] = true end
    end
    out[name] = list
  else
    moss.error("usage", ("%s: add_%s must be a list or a text, not a %s"):format(where, name, type(v)))
  end
end

--- `over` laid over `base` (see the header); neither is changed.
function M.merge(base, over, where)
  local out = copy(base)
  local adds = {}
  for k, v in pairs(over) do
    if k ~= "extends" then -- the link itself is not part of the result
      if type(k) == "string" and k:sub(1, 4) == "add_" and #k > 4 then
        adds[#adds + 1] = k
      elseif is_map(v) and is_map(out[k]) then
        out[k] = M.merge(out[k], v, where)
      else
        out[k] = copy(v)
      end
    end
  end
  table.sort(adds) -- after the replacements, in a fixed order
  for _, k in ipairs(adds) do add(out, k:sub(5), over[k], where) end
  return out
end

--- Module `m` (loaded as KIND.NAME from root `origin`, nil when `require` loaded it) with its
--- `extends` chain resolved.
function M.resolve(kind, name, m, origin, depth)
  if type(m) ~= "table" or m.extends == nil then return m end
  depth = depth or 0
  local where = ("%s/%s.lua"):format(kind, name)
  if type(m.extends) ~= "string" then
    moss.error("usage", where .. ": extends must be the name of a " .. kind:sub(1, -2) .. ", not a " .. type(m.extends))
  end
  if depth >= M.MAX_DEPTH then
    moss.error("usage", ("%s: more than %d `extends` links (a cycle?)"):format(where, M.MAX_DEPTH))
  end
  local base_name = m.extends
  local base, base_origin
  if base_name == name then
    local chunk, o = moss.scripts.below(kind .. "." .. name, origin)
    if not chunk then
      moss.error("not_found", ("%s extends %q, the %s it overrides, but no script root below it has one")
        :format(where, name, kind:sub(1, -2)))
    end
    base, base_origin = chunk(kind .. "." .. name), o
  else
    local ok, got = pcall(require, kind .. "." .. base_name)
    if not ok then
      moss.error("not_found", ("%s extends %q: there is no %s/%s.lua (%s)")
        :format(where, base_name, kind, base_name, tostring(got)))
    end
    base = got
  end
  if type(base) ~= "table" then
    moss.error("usage", ("%s extends %q, which is not a table"):format(where, base_name))
  end
  local out = M.merge(M.resolve(kind, base_name, base, base_origin, depth + 1), m, where)
  if m.name == nil then out.name = name end
  return out
end

--- The role or machine KIND.NAME ("roles", "explorer") with what it extends laid under it: a
--- fresh table each call (callers change their copy).
function M.load(kind, name)
  local m = require(kind .. "." .. name)
  if type(m) == "table" and m.extends ~= nil then return M.resolve(kind, name, m) end
  return copy(m)
end

return M

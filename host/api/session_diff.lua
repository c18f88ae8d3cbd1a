-- The Lua half of incremental checkpoints (moss.session.save, host/api/session.py; the file
-- side is host/sessions/checkpoint.py). copy(t) is a deep copy of the session table (the
-- "shadow" of what was saved); diff(shadow, t) brings the shadow up to date with t and returns
-- the operations that did it (see checkpoint.apply_ops), or nil when nothing changed. A
-- table's kind is what it converts to: "list" (keys exactly 1..n), "map", or empty; a change
-- of kind replaces the value. A list that only grew is an append; one that lost elements (its
-- others shifted up) is removals then an append; one whose elements changed a lot is replaced.
-- Loaded by the host with (is_object, NULL, unhooked); never reachable from a script.
local is_object, NULL, unhooked = ...
local next, type, rawget, rawset, rawlen, rawequal, ipairs = next, type, rawget, rawset, rawlen, rawequal, ipairs
local mtype, table_remove = math.type, table.remove
local setmetatable, getmetatable = setmetatable, getmetatable
-- shadow table -> its kind: "list", "{}", "[]", or for a map how many keys it has (a number)
local KIND = setmetatable({}, { __mode = "k" })

local function kind(t)
  local len = rawlen(t)
  if len == 0 then
    if next(t) == nil then return is_object(t) and "{}" or "[]" end
    return "map"
  end
  local c = 0
  for k in next, t do
    if mtype(k) ~= "integer" or k < 1 or k > len then return "map" end
    c = c + 1
  end
  return c == len and "list" or "map"
end

local function copy(t, depth)
  if type(t) ~= "table" or depth > 220 or rawequal(t, NULL) then return t end
  local c, n = {}, 0
  for k, v in next, t do
    rawset(c, k, copy(v, depth + 1))
    n = n + 1
  end
  local mt = getmetatable(t)
  if mt ~= nil and type(mt) == "table" then setmetatable(c, mt) end
  local k = kind(t)
  KIND[c] = k == "map" and n or k
  return c
end

-- `path` is one array shared by the whole walk: path[1..depth] leads to the node in hand;
-- an operation takes a copy of it (most nodes are visited and found unchanged)
local function path_of(path, depth, k)
  local p = {}
  for i = 1, depth do p[i] = path[i] end
  if k ~= nil then p[depth + 1] = k end
  return p
end

local diff_node

-- "same_scalar(ov, nv)", written out in the list and map loops below: whether the shadow's
-- `ov` and the table's `nv` are the same string, boolean or number as JSON writes them (1
-- and 1.0, 0.0 and -0.0 are equal in Lua but not in JSON). Most values of a session are,
-- and this answers without a call to diff_value.

-- the value `nv` at `key` of the shadow node `old` (whose value there is `ov`)
local function diff_value(old, key, ov, nv, path, depth, ops)
  local tn = type(nv)
  if tn == "table" then
    if rawequal(ov, nv) then return end -- moss.json.null (the only table shared with the shadow)
    if type(ov) == "table" and not rawequal(ov, NULL) and not rawequal(nv, NULL) then
      path[depth + 1] = key
      if diff_node(ov, nv, path, depth + 1, ops) then return end
    end
    rawset(old, key, copy(nv, 0))
    ops[#ops + 1] = { "s", path_of(path, depth, key), nv }
    return
  end
  if tn == type(ov) and ov == nv then
    if tn ~= "number" then return end
    -- 1 and 1.0, 0.0 and -0.0 are equal in Lua but not in JSON
    if mtype(ov) == mtype(nv) and (nv ~= 0 or 1 / nv == 1 / ov) then return end
  end
  rawset(old, key, nv)
  if nv == nil then ops[#ops + 1] = { "d", path_of(path, depth, key) }
  else ops[#ops + 1] = { "s", path_of(path, depth, key), nv } end
end

-- whether the shadow's `ov` and the table's `nv` read the same as JSON (no ops, no change)
local function same(ov, nv, depth)
  local tn = type(nv)
  if tn ~= "table" then
    if tn == "number" then return mtype(ov) == mtype(nv) and ov == nv and (nv ~= 0 or 1 / nv == 1 / ov) end
    return rawequal(ov, nv)
  end
  if rawequal(ov, nv) then return true end -- moss.json.null
  if type(ov) ~= "table" or rawequal(ov, NULL) or rawequal(nv, NULL) or depth > 220 then return false end
  local k_old, k_new = KIND[ov], kind(nv)
  if k_old ~= k_new and not (k_new == "map" and mtype(k_old)) then return false end
  if k_new == "list" then
    local n = rawlen(nv)
    if rawlen(ov) ~= n then return false end
    for i = 1, n do
      if not same(rawget(ov, i), rawget(nv, i), depth + 1) then return false end
    end
    return true
  end
  if k_new ~= "map" then return true end -- both empty, of the same kind
  local c = 0
  for k, v in next, nv do
    c = c + 1
    local o = rawget(ov, k)
    if o == nil or not same(o, v, depth + 1) then return false end
  end
  return c == k_old
end

-- A list: the elements it starts with unchanged, then removals (the shadow's element i is
-- gone when its next one is the table's element i: $(forget) and $(drop) take notes out of
-- the middle of working memory), then elementwise changes and what was appended. A list
-- whose elements merely shifted left used to be rewritten whole, every element of it.
local function diff_list(old, new, path, depth, ops)
  local n_new, mark = rawlen(new), #ops
  local function give_up()
    for j = #ops, mark + 1, -1 do ops[j] = nil end
    return false
  end
  local i, n_old = 1, rawlen(old)
  while i <= n_old do
    if i <= n_new and same(rawget(old, i), rawget(new, i), depth + 1) then
      i = i + 1
    elseif i > n_new or (i < n_old and same(rawget(old, i + 1), rawget(new, i), depth + 1)) then
      table_remove(old, i) -- the shadow's element i is gone
      n_old = n_old - 1
      ops[#ops + 1] = { "d", path_of(path, depth, i) }
      if #ops - mark > n_new // 2 + 4 then return give_up() end
    else
      break
    end
  end
  if n_new < n_old then return give_up() end
  for j = i, n_old do
    local ov, nv = rawget(old, j), rawget(new, j)
    local tn = type(nv) -- same_scalar(ov, nv), written out: this loop runs for every entry
    if not (tn == "number" and mtype(ov) == mtype(nv) and ov == nv and (nv ~= 0 or 1 / nv == 1 / ov)
        or tn ~= "table" and tn ~= "number" and rawequal(ov, nv)) then
      diff_value(old, j, ov, nv, path, depth, ops)
      if #ops - mark > n_new // 2 + 4 then return give_up() end
    end
  end
  if n_new > n_old then
    local tail = {}
    for j = n_old + 1, n_new do
      local v = rawget(new, j)
      tail[#tail + 1] = v
      rawset(old, j, copy(v, 0))
    end
    ops[#ops + 1] = { "a", path_of(path, depth), tail }
  end
  return true
end

-- brings `old` (at path[1..depth]) up to `new` in place, emitting ops; false when it must
-- be replaced whole (nothing emitted for it then)
diff_node = function(old, new, path, depth, ops)
  if depth > 220 then return false end
  local k_old, k_new = KIND[old], kind(new)
  if k_old ~= k_new and not (k_new == "map" and mtype(k_old)) then return false end
  if k_new == "{}" or k_new == "[]" then return true end
  if k_new == "list" then return diff_list(old, new, path, depth, ops) end
  local kept, total = 0, 0 -- keys of `new` already in the shadow, all keys of `new`
  for k, nv in next, new do
    total = total + 1
    local ov = rawget(old, k)
    if ov ~= nil then kept = kept + 1 end
    local tn = type(nv) -- same_scalar(ov, nv), written out
    if not (tn == "number" and mtype(ov) == mtype(nv) and ov == nv and (nv ~= 0 or 1 / nv == 1 / ov)
        or tn ~= "table" and tn ~= "number" and rawequal(ov, nv)) then
      diff_value(old, k, ov, nv, path, depth, ops)
    end
  end
  if kept ~= k_old then -- a key of the shadow is no longer in the table: find which
    local gone = {}
    for k in next, old do
      if rawget(new, k) == nil then gone[#gone + 1] = k end
    end
    for _, k in ipairs(gone) do
      rawset(old, k, nil)
      ops[#ops + 1] = { "d", path_of(path, depth, k) }
    end
  end
  KIND[old] = total
  return true
end

local function diff(shadow, t)
  local ops = {}
  if not diff_node(shadow, t, {}, 0, ops) then return false end -- replaced whole: a new base
  if #ops == 0 then return nil end
  return ops
end

-- both run with the count hook off (Runtime.unhooked): raw access to plain data only
local M = {}
function M.copy(t) return unhooked(copy, t, 0) end
function M.diff(shadow, t) return unhooked(diff, shadow, t) end
return M

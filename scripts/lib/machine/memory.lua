-- Working memory: what survives from one turn to the next.
--
-- Tool outputs are ephemeral: a state sees them once as numbered "new results". The model
-- keeps what matters with $(keep 1 3) and records conclusions with $(note ...). Kept items
-- and notes get random 4-character ids from an alphabet without look-alikes (no 0/o, 1/l/i)
-- so a model cannot guess or autocomplete them; $(drop ID) and $(forget PATTERN) remove.
-- The context therefore grows with what is kept, not with the number of turns.
local M = {}

M.ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"

function M.new_id(len, taken)
  len = len or 4
  for _ = 1, 1000 do
    local t = {}
    for i = 1, len do
      local k = math.random(1, #M.ALPHABET)
      t[i] = M.ALPHABET:sub(k, k)
    end
    local id = table.concat(t)
    if not (taken and taken[id]) then return id end
  end
  error("could not find a free id")
end

--- A fresh, empty memory (plain data, so it checkpoints as JSON).
function M.new()
  return { items = {}, pending = {} }
end

local function taken(mem)
  local t = {}
  for _, it in ipairs(mem.items) do t[it.id] = true end
  return t
end

--- Record new tool results; they are shown once, numbered from 1.
function M.set_pending(mem, outputs)
  mem.pending = outputs
end

function M.note(mem, text, turn)
  local item = { id = M.new_id(4, taken(mem)), kind = "note", content = text, turn = turn }
  mem.items[#mem.items + 1] = item
  return item
end

--- Parse "1 3", "all" or "" against n pending results.
function M.keep_indices(args, n)
  local picked = {}
  args = args or ""
  if args:match("^%s*$") or args:match("^%s*all%s*$") then
    for i = 1, n do picked[#picked + 1] = i end
    return picked, {}
  end
  local bad, seen = {}, {}
  for tok in args:gmatch("[^%s,]+") do
    local k = tonumber(tok)
    if k and k >= 1 and k <= n and k == math.floor(k) then
      if not seen[k] then picked[#picked + 1] = k; seen[k] = true end
    else
      bad[#bad + 1] = tok
    end
  end
  return picked, bad
end

--- Keep pending results by number; answers (kept items, error text or nil).
function M.keep(mem, args, turn)
  local n = #mem.pending
  if n == 0 then return {}, "there are no new results to keep" end
  local picked, bad = M.keep_indices(args, n)
  local kept = {}
  for _, k in ipairs(picked) do
    local out = mem.pending[k]
    if not out.kept then
      local item = { id = M.new_id(4, taken(mem)), kind = "output", cmd = out.cmd, content = out.content,
        ok = out.ok, turn = turn }
      mem.items[#mem.items + 1] = item
      out.kept = item.id
      kept[#kept + 1] = item
    end
  end
  local err
  if #bad > 0 then
    err = "keep: no result numbered " .. table.concat(bad, ", ") .. " (there are " .. n .. ")"
  end
  return kept, err
end

function M.drop(mem, id)
  id = (id or ""):match("^%s*%[?([%w]+)%]?%s*$")
  for i, it in ipairs(mem.items) do
    if it.id == id then
      table.remove(mem.items, i)
      return it
    end
  end
  return nil
end

--- Remove notes (and kept outputs) whose text contains `pattern` (plain text, not a Lua pattern).
function M.forget(mem, pattern)
  pattern = (pattern or ""):lower()
  if pattern == "" then return 0 end
  local n, keep = 0, {}
  for _, it in ipairs(mem.items) do
    local hay = ((it.content or "") .. " " .. (it.cmd or "")):lower()
    if hay:find(pattern, 1, true) then n = n + 1 else keep[#keep + 1] = it end
  end
  mem.items = keep
  return n
end

function M.notes(mem)
  local out = {}
  for _, it in ipairs(mem.items) do if it.kind == "note" then out[#out + 1] = it end end
  return out
end

function M.outputs(mem)
  local out = {}
  for _, it in ipairs(mem.items) do if it.kind == "output" then out[#out + 1] = it end end
  return out
end

--- Rough size in characters, for bounding context.
function M.size(mem)
  local n = 0
  for _, it in ipairs(mem.items) do n = n + #(it.content or "") + #(it.cmd or "") end
  return n
end

return M

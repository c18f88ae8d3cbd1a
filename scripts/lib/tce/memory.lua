-- Working memory: a flat key -> text table kept in the session (S.tce.wm), so it is saved
-- with every checkpoint and comes back on --resume. It is all the model sees of the past.
-- (storage_search writes a nested table under "search_results", as the original did.)
local M = {}

--- The tce part of a session, created on first use: { wm = {task = ...}, pages = 0 }.
function M.init(S)
  if not S.tce then
    S.tce = { wm = moss.dict { task = S.task }, pages = 0 }
  end
  S.tce.wm = S.tce.wm or moss.dict()
  return S.tce
end

--- Token estimate, as the original: the JSON of working memory / 4.
function M.estimate(wm)
  return #moss.json.encode(moss.dict(wm)) // 4
end

local FIRST = { task = 1, paging_summary = 2, state_transition_invalid = 3 }

--- Keys in display order: task, the paging summary, then the rest sorted.
function M.keys(wm)
  local keys = {}
  for k in pairs(wm) do keys[#keys + 1] = tostring(k) end
  table.sort(keys, function(a, b)
    local fa, fb = FIRST[a] or 99, FIRST[b] or 99
    if fa ~= fb then return fa < fb end
    return a < b
  end)
  return keys
end

local function attr(s) return (s:gsub("&", "&amp;"):gsub("\"", "&quot;")) end

local function render_value(v, indent, out)
  for _, k in ipairs(M.keys(v)) do
    local x = v[k]
    if type(x) == "table" then
      out[#out + 1] = indent .. '<entry key="' .. attr(k) .. '">'
      render_value(x, indent .. "  ", out)
      out[#out + 1] = indent .. "</entry>"
    else
      out[#out + 1] = indent .. '<entry key="' .. attr(k) .. '">' .. tostring(x) .. "</entry>"
    end
  end
end

--- <working_memory> with one <entry key="..."> per key (nested tables nest).
function M.render(wm, tag)
  tag = tag or "working_memory"
  local out = { "<" .. tag .. ">" }
  render_value(wm, "  ", out)
  out[#out + 1] = "</" .. tag .. ">"
  return table.concat(out, "\n")
end

return M

-- Keys: the original's tag rules.
--   storage:        split on commas, trim, lower-case, spaces -> "_", sort byte-wise,
--                   drop duplicates, join with commas; at most 64 tags. " Project Facts,answer"
--                   and "ANSWER, project facts" are both "answer,project_facts".
--   working memory: the <tags> text (trimmed) with spaces -> "_", nothing else.
local M = {}

M.MAX_TAGS = 64

local function trim(s) return (s:gsub("^%s+", ""):gsub("%s+$", "")) end

--- normalize(text) -> key, list  |  nil, error
function M.normalize(text)
  local list, seen = {}, {}
  for part in ((text or "") .. ","):gmatch("([^,]*),") do
    part = trim(part):lower():gsub("%s", "_")
    if part ~= "" and not seen[part] then
      seen[part] = true
      list[#list + 1] = part
    end
  end
  if #list == 0 then return nil, "no tags given" end
  if #list > M.MAX_TAGS then return nil, ("too many tags (%d; at most %d)"):format(#list, M.MAX_TAGS) end
  table.sort(list)
  return table.concat(list, ","), list
end

--- The tags of a storage key, as a set.
function M.set(key)
  local s = {}
  for part in (key .. ","):gmatch("([^,]*),") do if part ~= "" then s[part] = true end end
  return s
end

--- Does storage `key` carry every tag of `wanted` (a list of normalised tags) as a whole tag?
function M.matches(key, wanted)
  local have = M.set(key)
  for _, t in ipairs(wanted) do if not have[t] then return false end end
  return true
end

--- A working-memory key from <tags>.
function M.wm_key(text)
  return (trim(text or ""):gsub(" ", "_"))
end

return M

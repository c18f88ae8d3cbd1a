-- Storage: the persistent key -> text space, shared by every tce session of the project.
-- Keys are normalised tag lists ("answer,project_facts"); it lives in moss.store under the
-- name [agent.tce] storage (default "tce": .moss/agent/store/tce.json). The model never sees
-- it whole: only storage_load and storage_search bring parts of it into working memory.
local tags = require("lib.tce.tags")

local M = {}

function M.load(name)
  local t = moss.store.load(name)
  local out = {}
  for k, v in pairs(type(t) == "table" and t or {}) do
    if type(k) == "string" then out[k] = type(v) == "string" and v or moss.json.encode(v) end
  end
  return out
end

function M.save(name, t)
  moss.store.save(name, moss.dict(t))
end

--- The keys carrying every tag of `wanted` (a normalised tag list), sorted.
function M.search(t, wanted)
  local found = {}
  for k in pairs(t) do
    if tags.matches(k, wanted) then found[#found + 1] = k end
  end
  table.sort(found)
  return found
end

return M

-- The actions a model can take with <action><type>T</type><tags>..</tags><value>..</value></action>.
-- Each handler is function(S, action, ctx) -> ok, message [, extra]; ctx = {cfg, env}.
-- `ok = false` is a failed dispatch: the machine goes back to thinking (as the original).
-- Add or replace an action by assigning to require("lib.tce.actions").handlers[NAME].
local tags = require("lib.tce.tags")
local storage = require("lib.tce.storage")

local M = {}
local H = {}
M.handlers = H

local function need_value(a)
  if a.value == nil or a.value == "" then return false, "needs a <value>" end
  return true
end

function H.working_memory_add(S, a)
  local key = tags.wm_key(a.tags)
  if key == "" then return false, "needs <tags> (the key)" end
  local ok, err = need_value(a)
  if not ok then return false, err end
  S.tce.wm[key] = a.value
  return true, "Added to working memory as " .. key
end

function H.working_memory_remove(S, a)
  local key = tags.wm_key(a.tags)
  if key == "" then return false, "needs <tags> (the key)" end
  if key == "task" then return false, "the task cannot be removed" end
  if S.tce.wm[key] == nil then return true, "Not in working memory: " .. key end
  S.tce.wm[key] = nil -- the original blanked the value; removing it keeps the context small
  return true, "Removed " .. key .. " from working memory"
end

function H.storage_save(_S, a, ctx)
  local key, err = tags.normalize(a.tags)
  if not key then return false, err end
  local ok, verr = need_value(a)
  if not ok then return false, verr end
  local t = storage.load(ctx.cfg.storage)
  local existed = t[key] ~= nil
  t[key] = a.value
  storage.save(ctx.cfg.storage, t)
  return true, (existed and "Replaced" or "Saved") .. " in storage as " .. key
end

function H.storage_load(S, a, ctx)
  local key, err = tags.normalize(a.tags)
  if not key then return false, err end
  local v = storage.load(ctx.cfg.storage)[key]
  if v == nil then return true, "Item not found: " .. key end
  S.tce.wm[key] = v
  return true, "Loaded " .. key .. " into working memory"
end

function H.storage_search(S, a, ctx)
  local key, list = tags.normalize(a.tags)
  if not key then return false, list end
  local found = storage.search(storage.load(ctx.cfg.storage), list)
  local sr = type(S.tce.wm.search_results) == "table" and S.tce.wm.search_results or moss.dict()
  -- the matching keys, "; "-separated (a key itself holds commas)
  sr[key] = #found > 0 and table.concat(found, "; ") or "(none)"
  S.tce.wm.search_results = sr
  return true, ("%d match%s for %s"):format(#found, #found == 1 and "" or "es", key)
end

--- Conclude: the value is the answer to the task and ends the session.
function H.answer(_S, a)
  local ok, err = need_value(a)
  if not ok then return false, err end
  return true, "Answered", { answer = a.value }
end

--- Carry out one parsed action. -> { ok, message, answer? }
function M.dispatch(S, a, ctx)
  if a.error then return { ok = false, message = a.error } end
  local h = H[a.type]
  if not h then
    local known = {}
    for name in pairs(H) do known[#known + 1] = name end
    table.sort(known)
    return { ok = false,
      message = "Unknown action type '" .. a.type .. "' (known: " .. table.concat(known, ", ") .. ")" }
  end
  local pok, ok, message, extra = pcall(h, S, a, ctx)
  if not pok then
    local err = ok
    if moss.error_kind(err) == "interrupted" then error(err, 0) end
    return { ok = false, message = "failed: " .. tostring(type(err) == "table" and err.message or err) }
  end
  return { ok = ok and true or false, message = message or "", answer = extra and extra.answer }
end

return M

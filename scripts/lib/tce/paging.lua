-- Paging: when working memory grows past [agent.tce.paging_limit] max_tokens (estimated as
-- its JSON / 4), the machine goes through the `paging` state. Unlike the original's
-- placeholder, it really pages: the oldest entries of each log (all but the newest one) are
-- shown to the model, which writes a <summary> that also folds in the previous summary.
-- Then the entries are archived to storage (tags "archive,<state>,page_<session>_<n>", so
-- storage_search "archive,thinking" finds them), removed from working memory (what is left
-- is renumbered from 001), and the summary becomes working memory's `paging_summary`.
local logs = require("lib.tce.logs")
local memory = require("lib.tce.memory")
local storage = require("lib.tce.storage")
local tags = require("lib.tce.tags")

local M = {}

M.SUMMARY_KEY = "paging_summary"

--- What would be paged now: { {log=, state=, entries={{key,value,index}...}}, ... } (maybe empty).
function M.plan(wm, cfg)
  local out = {}
  for _, name in ipairs(logs.NAMES) do
    local entries = logs.entries(wm, cfg[name])
    if #entries >= 2 then
      table.remove(entries) -- the newest stays
      out[#out + 1] = { log = name, state = logs.STATE[name], entries = entries }
    end
  end
  return out
end

--- Is paging needed (enabled, at or over the limit, and something to page)? -> bool, estimate
function M.required(wm, cfg)
  local est = memory.estimate(wm)
  if not cfg.paging_limit.enable or est < cfg.paging_limit.max_tokens then return false, est end
  return #M.plan(wm, cfg) > 0, est
end

--- The paging state's user message: the task, the previous summary, the entries to page.
function M.context(S, cfg)
  local wm = S.tce.wm
  local plan = M.plan(wm, cfg)
  S.tce.page_plan = plan -- what this turn's summary covers (kept for the handler and --resume)
  local lines = { "<task>" .. tostring(wm.task or S.task) .. "</task>" }
  if wm[M.SUMMARY_KEY] then
    lines[#lines + 1] = "<previous_summary>" .. wm[M.SUMMARY_KEY] .. "</previous_summary>"
  end
  local page = moss.dict()
  for _, p in ipairs(plan) do
    for _, e in ipairs(p.entries) do page[e.key] = e.value end
  end
  lines[#lines + 1] = memory.render(page, "entries_to_page")
  return table.concat(lines, "\n"), plan
end

--- Archive the planned entries, drop them, store the summary. -> { archived = n, keys = {...}, before, after }
function M.apply(S, cfg, plan, summary)
  local wm = S.tce.wm
  local before = memory.estimate(wm)
  S.tce.pages = (S.tce.pages or 0) + 1
  local page_tag = ("page_%s_%03d"):format(S.id, S.tce.pages)
  local store = storage.load(cfg.storage)
  local keys, n = {}, 0
  local function archive(state, text)
    local key = tags.normalize("archive," .. state .. "," .. page_tag)
    store[key] = text
    keys[#keys + 1] = key
  end
  for _, p in ipairs(plan) do
    local text = {}
    for _, e in ipairs(p.entries) do
      text[#text + 1] = e.key .. ": " .. tostring(e.value)
      -- only page what is still there unchanged (a plan restored on --resume may be stale)
      if wm[e.key] == e.value then wm[e.key] = nil; n = n + 1 end
    end
    archive(p.state, table.concat(text, "\n"))
    logs.compact(wm, cfg[p.log])
  end
  if wm[M.SUMMARY_KEY] and wm[M.SUMMARY_KEY] ~= "" then archive("paging", wm[M.SUMMARY_KEY]) end
  storage.save(cfg.storage, store)
  wm[M.SUMMARY_KEY] = summary
  return { archived = n, keys = keys, before = before, after = memory.estimate(wm) }
end

return M

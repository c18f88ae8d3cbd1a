-- The tce response grammar: XML-ish tags found by substring search, as the original did
-- (not a real XML parser). The first occurrence of each tag counts; tag names are matched
-- case-insensitively; everything outside the tags is ignored, code fences included.
--
--   <next_state>thinking|commanding|evaluating</next_state>
--   <think_log>...</think_log>   <evaluation_log>...</evaluation_log>
--   <action><type>T</type><tags>a, b</tags><value>...</value></action>
--   <action type="T"><tags>...</tags><value>...</value></action>    (attribute form)
--   <summary>...</summary>       (the paging state)
--
-- parse(text) -> { next_state?, think_log?, evaluation_log?, summary?,
--                  action? = { type, tags, value?, error? } }
local M = {}

-- The original's size limits (characters). Logs are cut to fit; an action field that is
-- too long makes the action fail with a message (storing half a value silently is worse).
M.LIMITS = { next_state = 64, think_log = 1024, evaluation_log = 1024, summary = 2048,
  type = 1024, tags = 1024, value = 2048 }

local function trim(s) return (s:gsub("^%s+", ""):gsub("%s+$", "")) end
M.trim = trim

-- The text between <name> and </name> within [from, to] of `text` (`low` is text:lower()).
local function element(text, low, name, from, to)
  from, to = from or 1, to or #text
  local open = "<" .. name .. ">"
  local s, e = low:find(open, from, true)
  if not s or e > to then return nil end
  local cs = low:find("</" .. name .. ">", e + 1, true)
  if not cs or cs + #name + 2 > to then return nil end
  return text:sub(e + 1, cs - 1)
end
M.element = element

local function cut(s, n)
  if #s <= n then return s end
  return s:sub(1, n - 3) .. "..."
end

local function action(text, low)
  local pos = 1
  local s, open_end
  while true do
    s = low:find("<action", pos, true)
    if not s then return nil end
    local c = low:sub(s + 7, s + 7)
    if c == ">" or c:match("%s") then break end
    pos = s + 7 -- e.g. <actions>: not ours
  end
  open_end = low:find(">", s, true)
  if not open_end then return nil end
  local close = low:find("</action>", open_end + 1, true)
  local body_to = close and close - 1 or #text -- an unclosed action runs to the end
  local a = {}
  local t = element(text, low, "type", open_end + 1, body_to)
  if not t then
    local attrs = text:sub(s + 7, open_end - 1)
    t = attrs:match("[Tt][Yy][Pp][Ee]%s*=%s*\"([^\"]*)\"") or attrs:match("[Tt][Yy][Pp][Ee]%s*=%s*'([^']*)'")
  end
  a.type = trim(t or ""):lower()
  a.tags = trim(element(text, low, "tags", open_end + 1, body_to) or "")
  local v = element(text, low, "value", open_end + 1, body_to)
  a.value = v and trim(v) or nil
  for _, f in ipairs { "type", "tags", "value" } do
    if a[f] and #a[f] > M.LIMITS[f] and not (f == "value" and a.type == "answer") then
      a.error = ("<%s> too long (%d characters; at most %d)"):format(f, #a[f], M.LIMITS[f])
    end
  end
  return a
end

function M.parse(text)
  text = text or ""
  local low = text:lower() -- byte-wise, so positions in `low` are positions in `text`
  local r = {}
  local ns = element(text, low, "next_state")
  if ns then r.next_state = trim(ns):lower() end
  for _, name in ipairs { "think_log", "evaluation_log", "summary" } do
    local v = element(text, low, name)
    if v then
      v = trim(v)
      if v ~= "" then r[name] = cut(v, M.LIMITS[name]) end
    end
  end
  r.action = action(text, low)
  return r
end

return M

-- How risky an edit is, and whether --auto-approve lets it through without asking.
--   high:   deletes (also a replace with nothing), config/build files, entry points, and
--           what an edit does to a file's public surface: removing, renaming or changing the
--           signature of a public item (moss.edit.preview's `surfaces`, read by tree-sitter:
--           host/tools/surface.py; a file it cannot read falls back to its text, and only an
--           exported name that disappears counts)
--   low:    inserts and added code, comment-only inserts or text edits
--   medium: everything else: a body rewritten, public items added, a new file
local shell_risk = require("lib.agent.shell_risk")

local M = {}

M.LEVELS = { low = 1, medium = 2, high = 3 }

local CONFIG_PATTERNS = { "%.toml$", "%.json$", "%.ya?ml$", "%.env$", "%.ini$", "%.cfg$", "Dockerfile$",
  "Makefile$", "%.lock$", "setup%.py$", "go%.mod$", "requirements[%w_.-]*%.txt$", "pom%.xml$" }
local ENTRY_POINTS = { "main", "run", "execute", "start", "init", "__init__", "__main__" }

-- The file part of "path/Symbol": up to the last segment with an extension (a leading dot,
-- as in .github, is not one); the whole target when no segment has one.
local function path_of(target)
  local segs, last = {}, 0
  for seg in target:gmatch("[^/]+") do
    segs[#segs + 1] = seg
    if seg:match("[^.]%.[%w]+$") or seg == "Dockerfile" or seg == "Makefile" then last = #segs end
  end
  if last == 0 then return target end
  return table.concat(segs, "/", 1, last)
end

local function is_comment(s)
  return s:match("^//") or s:match("^%-%-") or s:match("^/%*") or s:match("^%*/") or s:match("^%*%s")
    or s == "*" or s:match("^#%s") or s == "#" or s:sub(1, 3) == "'''" or s:sub(1, 3) == '"""'
end

--- (level, reason) for one edit spec {target, action, content}.
function M.assess(spec)
  local target, action, content = spec.target or "", spec.action or "", spec.content or ""
  if action == "delete" or (action == "replace" and not content:match("%S")) then
    return "high", "deletes " .. target
  end
  local path = path_of(target)
  for _, pat in ipairs(CONFIG_PATTERNS) do
    if path:match(pat) then return "high", "changes config/build file " .. path end
  end
  local symbol = target:sub(#path + 2)
  local last = symbol:match("([^/]+)$")
  for _, name in ipairs(ENTRY_POINTS) do
    if last == name then return "high", "changes entry point " .. symbol end
  end
  local only_comments = content:match("%S") ~= nil
  for line in content:gmatch("[^\n]+") do
    local s = line:match("^%s*(.-)%s*$")
    if s ~= "" and not is_comment(s) then only_comments = false end
  end
  -- adding or rewording comments is low risk; replacing code with a comment is not
  if only_comments and action ~= "replace" then return "low", "comments only" end
  if action == "insert" or action == "append" or action == "prepend" or action == "create" then
    return "low", "adds code without changing existing code"
  end
  return "medium", action .. " of " .. target
end

-- An item as the reason shows it: its head, cut at 120 bytes.
local function shown(text)
  return #text > 120 and (require("lib.machine.parser").clip(text, 117) .. "...") or text
end

--- (level, reason) for what an edit does to one file's public surface (an entry of
--- moss.edit.preview's `surfaces`), or nil when it removes, renames and changes nothing public.
function M.surface(s)
  local removed, changed, added = s.removed or {}, s.changed or {}, s.added or {}
  local notes = {}
  for _, c in ipairs(changed) do
    local before_head = c.before:sub(1, #c.before - #c.before_sig)
    local after_head = c.after:sub(1, #c.after - #c.after_sig)
    notes[#notes + 1] = shown(c.before) .. " → " .. shown(before_head == after_head and c.after_sig or c.after)
  end
  for _, r in ipairs(removed) do
    -- one item gone and one come with the same signature: a rename
    local a = #removed == 1 and #added == 1 and added[1].sig == r.sig and added[1] or nil
    notes[#notes + 1] = a and (shown(r.text) .. " renamed to " .. a.name) or (shown(r.text) .. " removed")
  end
  if #notes == 0 then return nil end
  local more = #notes > 1 and (" (and " .. (#notes - 1) .. " more)") or ""
  return "high", "changes public API of " .. s.path .. ": " .. notes[1] .. more
end

--- The highest risk among specs, with its reason; `surfaces` (moss.edit.preview's) adds what
--- the edits do to each file's public items.
function M.batch(specs, surfaces)
  local level, reason = "low", "no edits"
  local function take(l, r)
    if M.LEVELS[l] > M.LEVELS[level] or reason == "no edits" then level, reason = l, r end
  end
  for _, s in ipairs(specs) do take(M.assess(s)) end
  for _, s in ipairs(surfaces or {}) do
    local l, r = M.surface(s)
    if l then take(l, r) end
  end
  return level, reason
end

-- ---- shell commands --------------------------------------------------------------
-- Read the way /bin/sh reads them, in lib/agent/shell_risk.lua: every part of a compound
-- command, past wrappers (timeout, env, xargs, sudo, …) and into `sh -c '…'`; what it cannot
-- read is high. It is an approval policy against mistakes, not a boundary: the sandbox (access
-- level) and rollback hold against a program that deletes by itself (`python x.py`).

--- (level, reason) for a shell command: the riskiest thing any part of it does.
M.assess_command = function(cmd) return shell_risk.assess(cmd or "") end

--- Whether `level` is within the auto-approve threshold.
function M.auto_approved(level, threshold)
  return M.LEVELS[level] <= (M.LEVELS[threshold or "low"] or 1)
end

return M

-- How risky an edit is, and whether --auto-approve lets it through without asking.
--   high:   deletes (also a replace with nothing), config/build files, entry points,
--           public API (pub/export/public, also after doc comments and attributes)
--   low:    inserts and added code, comment-only inserts or text edits
--   medium: everything else (including replacing code with a comment)
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

local function is_attribute(s)
  return s:match("^#!?%[") or s:match("^@[%w_.]+")
end

-- The first token of the first line that is neither a comment nor an attribute.
local function first_code_token(content)
  for line in content:gmatch("[^\n]+") do
    local s = line:match("^%s*(.-)%s*$")
    if s ~= "" and not is_comment(s) and not is_attribute(s) then return s:match("^(%S+)") end
  end
  return ""
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
  local first = first_code_token(content)
  if first == "pub" or first:match("^pub%(") or first == "public" or first == "export" then
    return "high", "changes public API"
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

--- The highest risk among specs, with its reason.
function M.batch(specs)
  local level, reason = "low", "no edits"
  for _, s in ipairs(specs) do
    local l, r = M.assess(s)
    if M.LEVELS[l] > M.LEVELS[level] or reason == "no edits" then level, reason = l, r end
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

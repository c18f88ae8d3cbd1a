-- How risky an edit is, and whether --auto-approve lets it through without asking.
--   high:   deletes, config/build files, entry points, public API (pub/export/public)
--   low:    comment-only content, inserts
--   medium: everything else
local M = {}

M.LEVELS = { low = 1, medium = 2, high = 3 }

local CONFIG_PATTERNS = { "%.toml$", "%.json$", "%.ya?ml$", "%.env$", "%.ini$", "%.cfg$", "Dockerfile$",
  "Makefile$", "%.lock$", "setup%.py$", "package%.json$" }
local ENTRY_POINTS = { "main", "run", "execute", "start", "init", "__init__", "__main__" }

local function path_of(target)
  return target:match("^(.-%.[%w]+)/") or target
end

--- (level, reason) for one edit spec {target, action, content}.
function M.assess(spec)
  local target, action, content = spec.target or "", spec.action or "", spec.content or ""
  if action == "delete" then return "high", "deletes " .. target end
  local path = path_of(target)
  for _, pat in ipairs(CONFIG_PATTERNS) do
    if path:match(pat) then return "high", "changes config/build file " .. path end
  end
  local symbol = target:sub(#path + 2)
  local last = symbol:match("([^/]+)$")
  for _, name in ipairs(ENTRY_POINTS) do
    if last == name then return "high", "changes entry point " .. symbol end
  end
  local first = content:match("^%s*(%S+)") or ""
  if first == "pub" or first:match("^pub%(") or first == "public" or first == "export" then
    return "high", "changes public API"
  end
  local only_comments = content:match("%S") ~= nil
  for line in content:gmatch("[^\n]+") do
    local s = line:match("^%s*(.-)%s*$")
    if s ~= "" and not (s:match("^//") or s:match("^#") or s:match("^%-%-") or s:match("^/?%*")
        or s:match("^'''") or s:match('^"""')) then
      only_comments = false
    end
  end
  if only_comments then return "low", "comments only" end
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

--- Whether `level` is within the auto-approve threshold.
function M.auto_approved(level, threshold)
  return M.LEVELS[level] <= (M.LEVELS[threshold or "low"] or 1)
end

return M

-- How risky an edit is, and whether --auto-approve lets it through without asking.
--   high:   deletes (also a replace with nothing), config/build files, entry points,
--           public API (pub/export/public, also after doc comments and attributes)
--   low:    inserts and added code, comment-only inserts or text edits
--   medium: everything else (including replacing code with a comment)
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
-- A command is rated by what its words say it does. This is an approval policy against
-- mistakes, not a boundary: the sandbox (access level) and rollback are what hold against
-- a model that hides a delete (`python -c`, `$(echo rm)`); inline code is rated medium.

-- first word -> level, what it does
local COMMANDS = {
  rm = { "high", "deletes files" }, rmdir = { "high", "deletes directories" },
  unlink = { "high", "deletes files" }, shred = { "high", "destroys files" },
  mv = { "high", "moves or renames files" }, dd = { "high", "overwrites files or devices" },
  truncate = { "high", "truncates files" }, chown = { "high", "changes ownership" },
  curl = { "high", "uses the network" }, wget = { "high", "uses the network" },
  nc = { "high", "uses the network" }, ncat = { "high", "uses the network" },
  ssh = { "high", "uses the network" }, scp = { "high", "uses the network" },
  rsync = { "high", "copies over the network or deletes" }, ftp = { "high", "uses the network" },
  telnet = { "high", "uses the network" },
  ["apt-get"] = { "high", "installs packages" }, apt = { "high", "installs packages" },
  dpkg = { "high", "installs packages" }, yum = { "high", "installs packages" },
  dnf = { "high", "installs packages" }, apk = { "high", "installs packages" },
  brew = { "high", "installs packages" },
  cp = { "medium", "copies over files" }, tee = { "medium", "overwrites files" },
  chmod = { "medium", "changes permissions" }, ln = { "medium", "creates links" },
  install = { "medium", "copies over files" }, patch = { "medium", "changes files" },
  eval = { "medium", "runs generated code" }, source = { "medium", "runs another script" },
}
-- tools whose subcommand decides: "tool sub" -> level, what it does
local SUBCOMMANDS = {
  ["pip install"] = { "high", "installs packages" }, ["pip uninstall"] = { "high", "removes packages" },
  ["pip3 install"] = { "high", "installs packages" }, ["uv pip"] = { "high", "installs packages" },
  ["uv add"] = { "high", "installs packages" }, ["poetry add"] = { "high", "installs packages" },
  ["npm install"] = { "high", "installs packages" }, ["npm i"] = { "high", "installs packages" },
  ["npm ci"] = { "high", "installs packages" }, ["yarn add"] = { "high", "installs packages" },
  ["pnpm add"] = { "high", "installs packages" }, ["npx"] = { "high", "downloads and runs packages" },
  ["cargo install"] = { "high", "installs packages" }, ["cargo add"] = { "high", "changes dependencies" },
  ["go install"] = { "high", "installs packages" }, ["go get"] = { "high", "changes dependencies" },
  ["gem install"] = { "high", "installs packages" },
  ["git clone"] = { "high", "uses the network" }, ["git fetch"] = { "high", "uses the network" },
  ["git pull"] = { "high", "uses the network" }, ["git push"] = { "high", "uses the network" },
  ["git reset"] = { "high", "discards changes" }, ["git clean"] = { "high", "deletes files" },
  ["git checkout"] = { "high", "overwrites files" }, ["git restore"] = { "high", "overwrites files" },
  ["git rm"] = { "high", "deletes files" }, ["git mv"] = { "high", "moves files" },
  ["git stash"] = { "medium", "sets changes aside" }, ["git commit"] = { "medium", "records a commit" },
  ["git add"] = { "medium", "stages changes" }, ["git apply"] = { "medium", "changes files" },
  ["git init"] = { "high", "creates a repository" }, ["git config"] = { "high", "changes git configuration" },
  ["sed -i"] = { "medium", "edits files in place" }, ["perl -i"] = { "medium", "edits files in place" },
  ["python -c"] = { "medium", "runs inline code" }, ["python3 -c"] = { "medium", "runs inline code" },
  ["node -e"] = { "medium", "runs inline code" }, ["perl -e"] = { "medium", "runs inline code" },
  ["ruby -e"] = { "medium", "runs inline code" },
  ["find -delete"] = { "high", "deletes files" }, ["find -exec"] = { "medium", "runs a command per file" },
  ["xargs rm"] = { "high", "deletes files" },
}
local WRAPPERS = { sudo = true, env = true, command = true, nohup = true, time = true, exec = true,
  nice = true, timeout = true, xargs = true, builtin = true, stdbuf = true }
local SHELLS = { sh = true, bash = true, dash = true, zsh = true }

local function rank(best, level, reason)
  if not best or M.LEVELS[level] > M.LEVELS[best[1]] then return { level, reason } end
  return best
end

-- The words of one simple command (no shell operators), quotes removed.
local function words_of(segment)
  local out, i, n = {}, 1, #segment
  while i <= n do
    local c = segment:sub(i, i)
    if c:match("%s") then
      i = i + 1
    else
      local w = {}
      while i <= n and not segment:sub(i, i):match("%s") do
        local ch = segment:sub(i, i)
        if ch == "'" or ch == '"' then
          local close = segment:find(ch, i + 1, true) or (n + 1)
          w[#w + 1] = segment:sub(i + 1, close - 1)
          i = close + 1
        elseif ch == "\\" then
          w[#w + 1] = segment:sub(i + 1, i + 1)
          i = i + 2
        else
          w[#w + 1] = ch
          i = i + 1
        end
      end
      out[#out + 1] = table.concat(w)
    end
  end
  return out
end

local assess_command

local function assess_simple(segment, depth)
  local best
  -- output redirection to a file overwrites it (>>, 2>&1 and /dev/null do not count)
  for target in segment:gmatch("[^>&%d]>%s*([^%s;&|>]+)") do
    if target ~= "/dev/null" and not target:match("^&") then
      best = rank(best, "medium", "overwrites " .. target)
    end
  end
  if segment:match("^>%s*[^%s>&]") then best = rank(best, "medium", "overwrites a file") end
  local w = words_of(segment)
  local i = 1
  while w[i] and (w[i]:match("^[%w_]+=") or WRAPPERS[w[i]] or (w[i]:match("^%-") and i > 1 and WRAPPERS[w[i - 1]])) do
    i = i + 1
  end
  local first = w[i]
  if not first then return best end
  first = first:match("([^/]+)$") or first -- /bin/rm is rm
  if SHELLS[first] then
    for k = i + 1, #w do
      if w[k] == "-c" and w[k + 1] and depth < 3 then
        local l, r = assess_command(w[k + 1], depth + 1)
        return rank(best, l, r)
      end
    end
  end
  local c = COMMANDS[first]
  if c then best = rank(best, c[1], c[2] .. " (`" .. first .. "`)") end
  for k = i + 1, #w do
    local sub = SUBCOMMANDS[first .. " " .. w[k]]
    if sub then best = rank(best, sub[1], sub[2] .. " (`" .. first .. " " .. w[k] .. "`)") end
    if first ~= "find" and first ~= "xargs" and not w[k]:match("^%-") then break end
  end
  if first == "xargs" then
    for k = i + 1, #w do if w[k] == "rm" then best = rank(best, "high", "deletes files (`xargs rm`)") end end
  end
  return best
end

--- (level, reason) for a shell command: the riskiest thing any part of it does.
assess_command = function(cmd, depth)
  depth = depth or 0
  local best
  -- command substitutions and backticks run too
  for inner in cmd:gmatch("%$%((.-)%)") do
    local l, r = assess_command(inner, depth + 1)
    best = rank(best, l, r)
  end
  for inner in cmd:gmatch("`(.-)`") do
    local l, r = assess_command(inner, depth + 1)
    best = rank(best, l, r)
  end
  local flat = cmd:gsub("\\\n", " ")
  for segment in (flat .. "\n"):gmatch("(.-)[;&|\n()]") do
    if segment:match("%S") then
      local b = assess_simple(segment:match("^%s*(.-)%s*$"), depth)
      if b then best = rank(best, b[1], b[2]) end
    end
  end
  if not best then return "low", "no delete, move, overwrite, network use or install recognised" end
  return best[1], best[2]
end
M.assess_command = function(cmd) return assess_command(cmd or "", 0) end

--- Whether `level` is within the auto-approve threshold.
function M.auto_approved(level, threshold)
  return M.LEVELS[level] <= (M.LEVELS[threshold or "low"] or 1)
end

return M

-- How risky a shell command is, read the way /bin/sh reads it. lib/agent/risk.lua's
-- assess_command calls `assess`; edits.approve then asks, refuses or lets it run.
--
-- One pass over the text splits it into simple commands (`;` `&&` `||` `|` `&` newlines,
-- `( … )`, `{ …; }`, `$( … )`, backticks, `<( … )`), removing quotes and escapes from each
-- word the way the shell does and noting words whose value is only known when it runs ($X).
-- Each simple command is then rated by its program after leading VAR=x assignments and
-- wrappers (timeout, nice, env, xargs, sudo, busybox, …) are taken off, with git's global
-- options, sed/perl in-place flags, `find -delete`/`-exec` and `sh -c '…'` (rated inside)
-- read too. A redirection that writes a file is at least medium. The command's level is the
-- highest of its parts, and its reason the first part at that level.
--
-- Low is an allow-list, not the absence of a match: a part is low only when its program is
-- one known to read without writing (READERS, in lib/agent/shell_programs.lua), with no flag
-- that makes it write (`sort -o`, `uniq IN OUT`, `git diff --output`, a sed script's `w`), or
-- one of the known builds and test runners (BUILDS: `cargo test`, `pytest`, `make check`),
-- which run the project's own code and write build output, bounded by the sandbox as any
-- command is. Every other program is at least medium, however harmless its name looks; the
-- deny-list below (COMMANDS, SUBCOMMANDS, GIT, …) still makes deleting, moving, network use
-- and installs high.
--
-- Anything this reading cannot follow (an unclosed quote, a program named by a variable,
-- eval, a case statement, nesting too deep) is high: unknown is not safe. It is still a
-- best-effort reading of words: what a build or test runs (`make check`, `cargo test`) and
-- what a program unknown to it does (`python3 tidy.py`, medium) are bounded by the sandbox
-- (the access level), not by this rating.
--
-- Linear in the command's length: every character is read once per level of `sh -c '…'`,
-- backticks or `env -S` it sits in, and those levels are capped (MAX_DEPTH).
local M = {}

local programs = require("lib.agent.shell_programs") -- what readers, builds and sed/awk scripts do
local note, short, unknown = programs.note, programs.short, programs.unknown
local READERS, BUILDS, AWKS = programs.READERS, programs.BUILDS, programs.AWKS
local MAX_DEPTH = 6
M.LOW_REASON = "only programs known to read, build or test; no write, delete, move, network use or install seen"

-- ---- reading the text ------------------------------------------------------------------

local parse_list -- (st, closer) reads commands until `closer` (")") or the end
local rate_string -- (st, text, how) rates a string run as a shell command

-- The body of a backtick substitution, from just after the opening ` (escapes \` \\ \$ undone).
local function read_backticks(st)
  local s, i, parts = st.s, st.i, {}
  while true do
    local j = s:find("[`\\]", i)
    if not j then
      st.i = #s + 1
      unknown(st, "unclosed backtick")
      return table.concat(parts) .. s:sub(i)
    end
    parts[#parts + 1] = s:sub(i, j - 1)
    if s:sub(j, j) == "`" then
      st.i = j + 1
      return table.concat(parts)
    end
    local nx = s:sub(j + 1, j + 1)
    if nx == "`" or nx == "\\" or nx == "$" then parts[#parts + 1] = nx else parts[#parts + 1] = "\\" .. nx end
    i = j + 2
  end
end

-- After `$`: a substitution, a parameter, or a literal `$`. Marks the word dynamic when its
-- value is made at run time; `$( … )` and backticks inside are rated as commands.
local function read_dollar(st, w)
  local s, i = st.s, st.i -- s[i] == "$"
  local nx = s:sub(i + 1, i + 1)
  if s:sub(i + 1, i + 2) == "((" then
    -- arithmetic, up to the matching )). Commands in it ($( … ), backticks) are read; text
    -- that is not arithmetic (`$((cd a && rm x))`, which bash runs as a subshell) is high.
    local depth, j = 0, i + 1
    while j <= #s do
      local c = s:sub(j, j)
      if c == "(" then depth = depth + 1
      elseif c == ")" then depth = depth - 1; if depth == 0 then break end
      elseif c == "$" and s:sub(j + 1, j + 1) == "(" and s:sub(j + 2, j + 2) ~= "(" then
        st.i = j + 2
        parse_list(st, ")")
        j = st.i - 1
      elseif c == "`" then
        st.i = j + 1
        rate_string(st, read_backticks(st), "backticks")
        j = st.i - 1
      elseif c == ";" or c == "'" or c == '"' or c == "\\" or c == "\n"
        or (c:match("[%w_]") and s:find("^%s+[%a_]", j + 1)) then
        unknown(st, "`$((` that is not arithmetic")
      end
      j = j + 1
    end
    if j > #s then unknown(st, "unclosed $((") end
    st.i = j + 1
    w.dynamic = true
  elseif nx == "(" then
    st.i = i + 2
    parse_list(st, ")")
    w.dynamic = true
  elseif nx == "{" then
    local j = s:find("}", i + 2, true)
    if not j then unknown(st, "unclosed ${"); j = #s end
    local body = s:sub(i + 2, j - 1)
    if body:find("[`'\"]") or body:find("$(", 1, true) then unknown(st, "a command or quote inside ${ … }") end
    st.i = j + 1
    w.dynamic = true
  elseif nx:match("[%w_@*#?$!%-]") and nx ~= "" then
    local j = nx:match("[%a_]") and (s:find("[^%w_]", i + 1) or #s + 1) or i + 2
    st.i = j
    w.dynamic = true
  elseif nx == "'" then -- $'…' (bash): escapes make the text, so its value is not what is shown
    local j = i + 2
    while true do
      local k = s:find("['\\]", j)
      if not k then unknown(st, "unclosed $'"); j = #s + 1; break end
      if s:sub(k, k) == "'" then j = k + 1; break end
      j = k + 2
    end
    st.i = j
    w.dynamic = true
  else
    w.parts[#w.parts + 1] = "$"
    st.i = i + 1
  end
end

-- One word from st.i (which is not a blank or an operator): its text with quotes removed,
-- and whether it is quoted, dynamic (expanded at run time) or a pattern (unquoted * ? [ {).
local function read_word(st)
  local s, n = st.s, #st.s
  local w = { parts = {}, quoted = false, dynamic = false, glob = false }
  local start = st.i
  while st.i <= n do
    local i = st.i
    local run = s:match("^[^%s;&|<>()'\"\\`$]+", i)
    if run then
      w.parts[#w.parts + 1] = run
      if run:find("[*?[{]") then w.glob = true end
      st.i = i + #run
    else
      local c = s:sub(i, i)
      if c == "'" then
        local j = s:find("'", i + 1, true)
        w.quoted = true
        if not j then unknown(st, "unclosed '"); j = n + 1 end
        w.parts[#w.parts + 1] = s:sub(i + 1, j - 1)
        st.i = j + 1
      elseif c == '"' then
        w.quoted = true
        st.i = i + 1
        while true do
          local j = s:find('["\\`$]', st.i)
          if not j then unknown(st, 'unclosed "'); w.parts[#w.parts + 1] = s:sub(st.i); st.i = n + 1; break end
          w.parts[#w.parts + 1] = s:sub(st.i, j - 1)
          local d = s:sub(j, j)
          if d == '"' then st.i = j + 1; break
          elseif d == "\\" then
            local e = s:sub(j + 1, j + 1)
            if e ~= "\n" then -- (a backslash-newline is a line continuation: it adds nothing)
              w.parts[#w.parts + 1] = e:match('["\\`$]') and e or "\\" .. e
            end
            st.i = j + 2
          elseif d == "`" then
            st.i = j + 1
            rate_string(st, read_backticks(st), "backticks")
            w.dynamic = true
          else
            st.i = j
            read_dollar(st, w)
          end
        end
      elseif c == "\\" then
        local e = s:sub(i + 1, i + 1)
        if e ~= "\n" then w.parts[#w.parts + 1] = e; w.quoted = true end
        st.i = i + 2
      elseif c == "`" then
        st.i = i + 1
        rate_string(st, read_backticks(st), "backticks")
        w.dynamic = true
      elseif c == "$" then
        read_dollar(st, w)
      else
        break -- a blank or an operator ends the word
      end
    end
  end
  w.text = table.concat(w.parts)
  w.parts = nil
  if w.dynamic then w.raw = s:sub(start, math.min(st.i - 1, start + 40)) end
  return w
end

-- ---- rating one simple command ---------------------------------------------------------

-- program -> level, what it does
local COMMANDS = {
  rm = { "high", "deletes files" }, rmdir = { "high", "deletes directories" },
  unlink = { "high", "deletes files" }, shred = { "high", "destroys files" },
  mv = { "high", "moves or renames files" }, dd = { "high", "overwrites files or devices" },
  truncate = { "high", "truncates files" }, chown = { "high", "changes ownership" },
  mkfs = { "high", "formats a device" },
  curl = { "high", "uses the network" }, wget = { "high", "uses the network" },
  nc = { "high", "uses the network" }, ncat = { "high", "uses the network" },
  ssh = { "high", "uses the network" }, scp = { "high", "uses the network" },
  rsync = { "high", "copies over the network or deletes" }, ftp = { "high", "uses the network" },
  telnet = { "high", "uses the network" }, npx = { "high", "downloads and runs packages" },
  ["apt-get"] = { "high", "installs packages" }, apt = { "high", "installs packages" },
  dpkg = { "high", "installs packages" }, yum = { "high", "installs packages" },
  dnf = { "high", "installs packages" }, apk = { "high", "installs packages" },
  brew = { "high", "installs packages" },
  eval = { "high", "runs text as a command, which cannot be read before it runs" },
  alias = { "high", "defines an alias, so later words may name another command" },
  cp = { "medium", "copies over files" }, tee = { "medium", "overwrites files" },
  chmod = { "medium", "changes permissions" }, ln = { "medium", "creates links" },
  install = { "medium", "copies over files" }, patch = { "medium", "changes files" },
  source = { "medium", "runs another script" }, ["."] = { "medium", "runs another script" },
  ed = { "medium", "edits files" }, ex = { "medium", "edits files" }, vi = { "medium", "edits files" },
  vim = { "medium", "edits files" }, nvim = { "medium", "edits files" }, nano = { "medium", "edits files" },
  emacs = { "medium", "edits files" },
  coproc = { "high", "runs a coprocess, which this rating does not read" },
  touch = { "medium", "creates files or changes their times" }, mkdir = { "medium", "creates directories" },
  chattr = { "medium", "changes file attributes" }, setfacl = { "medium", "changes permissions" },
  dos2unix = { "medium", "rewrites files in place" }, unix2dos = { "medium", "rewrites files in place" },
  sponge = { "medium", "overwrites files" }, rename = { "high", "renames files" },
}
-- tools whose subcommand decides: "tool sub" -> level, what it does
local SUBCOMMANDS = {
  ["pip install"] = { "high", "installs packages" }, ["pip uninstall"] = { "high", "removes packages" },
  ["uv pip"] = { "high", "installs packages" }, ["uv add"] = { "high", "installs packages" },
  ["poetry add"] = { "high", "installs packages" }, ["npm install"] = { "high", "installs packages" },
  ["npm i"] = { "high", "installs packages" }, ["npm ci"] = { "high", "installs packages" },
  ["yarn add"] = { "high", "installs packages" }, ["pnpm add"] = { "high", "installs packages" },
  ["cargo install"] = { "high", "installs packages" }, ["cargo add"] = { "high", "changes dependencies" },
  ["go install"] = { "high", "installs packages" }, ["go get"] = { "high", "changes dependencies" },
  ["gem install"] = { "high", "installs packages" },
  ["npm uninstall"] = { "high", "removes packages" }, ["npm remove"] = { "high", "removes packages" },
  ["npm rm"] = { "high", "removes packages" }, ["npm update"] = { "high", "installs packages" },
  ["yarn remove"] = { "high", "removes packages" }, ["pnpm install"] = { "high", "installs packages" },
  ["pnpm i"] = { "high", "installs packages" }, ["pnpm remove"] = { "high", "removes packages" },
  ["poetry install"] = { "high", "installs packages" }, ["poetry remove"] = { "high", "removes packages" },
  ["uv remove"] = { "high", "removes packages" }, ["uv sync"] = { "high", "installs packages" },
  ["uv tool"] = { "high", "installs packages" }, ["cargo remove"] = { "high", "changes dependencies" },
  ["cargo uninstall"] = { "high", "removes packages" }, ["pipx install"] = { "high", "installs packages" },
  ["conda install"] = { "high", "installs packages" }, ["mamba install"] = { "high", "installs packages" },
  ["bundle install"] = { "high", "installs packages" }, ["composer require"] = { "high", "installs packages" },
  ["composer install"] = { "high", "installs packages" },
}
local INLINE = { python = "-c", node = "-e", ruby = "-e" } -- perl is read below
local ARCHIVERS, rate_archiver -- below

-- git subcommands: level, what it does (the rest: rate_git below)
local GIT = {
  rm = { "high", "deletes files" }, clean = { "high", "deletes untracked files" },
  reset = { "high", "discards changes" }, restore = { "high", "overwrites files" },
  checkout = { "high", "overwrites files" }, mv = { "high", "moves files" },
  push = { "high", "uses the network" }, fetch = { "high", "uses the network" },
  pull = { "high", "uses the network" }, clone = { "high", "uses the network" },
  ["ls-remote"] = { "high", "uses the network" }, submodule = { "high", "uses the network" },
  ["filter-branch"] = { "high", "rewrites history" }, ["filter-repo"] = { "high", "rewrites history" },
  prune = { "high", "deletes objects" }, init = { "high", "creates a repository" },
  config = { "high", "changes git configuration" },
  stash = { "medium", "sets changes aside" }, commit = { "medium", "records a commit" },
  add = { "medium", "stages changes" }, apply = { "medium", "changes files" }, am = { "medium", "changes files" },
  merge = { "medium", "changes files" }, rebase = { "medium", "rewrites commits" },
  ["cherry-pick"] = { "medium", "changes files" }, revert = { "medium", "changes files" },
  switch = { "medium", "changes files" }, tag = { "medium", "changes tags" },
  ["update-ref"] = { "medium", "moves a ref" }, ["update-index"] = { "medium", "changes the index" },
  ["read-tree"] = { "medium", "changes the index" }, notes = { "medium", "changes notes" },
  gc = { "medium", "repacks the repository" }, repack = { "medium", "repacks the repository" },
  reflog = { "low", "reads history" }, worktree = { "medium", "changes worktrees" },
  remote = { "low", "lists remotes" }, branch = { "low", "lists or creates branches" },
  bisect = { "medium", "changes files" }, sparse = { "medium", "changes files" },
}
-- `git branch` with one of these only lists; these take the next word as their value
local GIT_BRANCH_LISTS = { ["-l"] = true, ["--list"] = true, ["-a"] = true, ["--all"] = true, ["-r"] = true,
  ["--remotes"] = true, ["--contains"] = true, ["--no-contains"] = true, ["--merged"] = true,
  ["--no-merged"] = true, ["--points-at"] = true, ["--show-current"] = true }
local GIT_BRANCH_VALUES = { ["--sort"] = true, ["--format"] = true }
local GIT_LOW = {}
for sub in ("status log diff show grep blame ls-files ls-tree cat-file rev-parse rev-list describe shortlog "
  .. "whatchanged help version merge-base for-each-ref show-ref name-rev count-objects fsck "
  .. "var check-ignore check-attr diff-tree diff-files diff-index range-diff annotate "
  .. "archive bundle verify-commit verify-tag show-branch cherry"):gmatch("%S+") do GIT_LOW[sub] = true end
-- git global options that take the next word as their value
local GIT_VALUE = { ["-C"] = true, ["-c"] = true, ["--git-dir"] = true, ["--work-tree"] = true,
  ["--namespace"] = true, ["--config-env"] = true, ["--super-prefix"] = true, ["--exec-path"] = false }
-- git -c keys whose value git runs as a command
local function git_key_runs(key)
  key = key:lower()
  return key:match("^alias%.") or key:match("%.command$") or key:match("^core%.pager$")
    or key:match("^core%.editor$") or key:match("^core%.sshcommand$") or key:match("^core%.fsmonitor$")
    or key:match("^core%.hookspath$") or key:match("^core%.askpass$") or key:match("^diff%.external$")
    or key:match("^pager%.") or key:match("%.textconv$") or key:match("helper$") or key:match("^include")
    or key:match("^sequence%.editor$") or key:match("%.cmd$") or key:match("%.driver$") or key:match("%.clean$")
    or key:match("%.smudge$") or key:match("%.process$")
end

local function has(args, from, set)
  for k = from, #args do if set[args[k]] then return args[k] end end
end

local rate_words

-- git: global options, then the subcommand and what its flags make of it.
local function rate_git(st, w, i, shown)
  local k = i + 1
  while w[k] and w[k].text:sub(1, 1) == "-" do
    local t = w[k].text
    local opt, val = t:match("^(%-%-[%w-]+)=(.*)$")
    opt = opt or t
    if GIT_VALUE[opt] and not val then
      val = w[k + 1] and w[k + 1].text or ""
      k = k + 1
    end
    if opt == "-c" and git_key_runs(val:match("^([^=]*)") or val) then
      note(st, "high", "sets a git option that runs a command (`git -c " .. short(val:match("^([^=]*)")) .. "`)")
    elseif opt == "--exec-path" and val then
      note(st, "high", "runs git programs from another directory (`git --exec-path`)")
    elseif opt == "--version" or opt == "--help" or opt == "-h" then
      return
    end
    k = k + 1
  end
  local sw = w[k]
  if not sw then return end
  if sw.dynamic then return unknown(st, "a git subcommand that is only known when it runs") end
  local sub = short(sw.text)
  local args = {}
  for a = k + 1, #w do args[#args + 1] = w[a].text end
  local function say(level, what, extra)
    note(st, level, what .. " (`" .. shown .. " " .. sub .. (extra or "") .. "`)")
  end
  for a = 1, #args do -- diff, log, show and their kin write their output to a file with --output
    local out = args[a] == "--output" and (args[a + 1] or "") or args[a]:match("^%-%-output=(.*)$")
    if out then return say("medium", "writes to " .. short(out), " --output") end
  end
  if sub == "branch" then
    local f = has(args, 1, { ["-D"] = true, ["-d"] = true, ["--delete"] = true, ["-M"] = true, ["-m"] = true,
      ["--move"] = true, ["-f"] = true, ["--force"] = true, ["-C"] = true, ["--copy"] = true })
    if f then return say("high", "deletes, moves or overwrites a branch", " " .. f) end
    if has(args, 1, GIT_BRANCH_LISTS) then return end
    for a = 1, #args do
      local t = args[a]
      if t == "-u" or t == "--unset-upstream" or t == "--edit-description" or t:match("^%-%-set%-upstream%-to") then
        return say("medium", "changes a branch's settings", " " .. short(t))
      end
      if not t:match("^%-") and not GIT_BRANCH_VALUES[args[a - 1] or ""] then
        return say("medium", "creates a branch", " " .. short(t))
      end
    end
    return
  elseif sub == "archive" then
    for a = 1, #args do
      local t = args[a]
      if t:match("^%-%-remote") then return say("high", "uses the network", " --remote") end
      if t == "-o" or t:match("^%-o.") then return say("medium", "writes to " .. short(t:sub(3) ~= "" and t:sub(3)
        or args[a + 1] or ""), " -o") end
    end
  elseif sub == "grep" then
    for a = 1, #args do
      if args[a]:match("^%-O") or args[a]:match("^%-%-open%-files%-in%-pager") then
        return say("medium", "runs a pager on the files it finds", " -O")
      end
    end
  elseif sub == "bundle" and args[1] ~= "verify" and args[1] ~= "list-heads" then
    return say("medium", "writes a bundle or objects", args[1] and " " .. short(args[1]) or nil)
  elseif sub == "fsck" and has(args, 1, { ["--lost-found"] = true }) then
    return say("medium", "writes what it finds to .git/lost-found", " --lost-found")
  elseif sub == "worktree" and args[1] == "list" then
    return
  elseif sub == "remote" and args[1] == "show" and not has(args, 2, { ["-n"] = true }) then
    return say("high", "uses the network", " show")
  elseif sub == "stash" then
    local a = args[1]
    if a == "drop" or a == "clear" then return say("high", "discards stashed changes", " " .. a) end
    if a == "list" or a == "show" then return end
  elseif sub == "update-ref" and has(args, 1, { ["-d"] = true, ["--stdin"] = true }) then
    return say("high", "deletes or rewrites refs", " -d")
  elseif (sub == "gc" or sub == "repack") and (has(args, 1, { ["-d"] = true, ["--prune"] = true, ["--prune=now"] = true,
    ["--prune=all"] = true, ["-a"] = true }) or table.concat(args, " "):find("%-%-prune")) then
    return say("high", "deletes unreachable commits", " --prune")
  elseif sub == "reflog" and (args[1] == "expire" or args[1] == "delete") then
    return say("high", "deletes the record of past commits", " " .. args[1])
  elseif sub == "worktree" and (args[1] == "remove" or args[1] == "prune") then
    return say("high", "deletes a worktree", " " .. args[1])
  elseif sub == "switch"
      and has(args, 1, { ["-f"] = true, ["--force"] = true, ["--discard-changes"] = true, ["-C"] = true }) then
    return say("high", "discards changes", " --discard-changes")
  elseif sub == "checkout" and args[1] and (args[1] == "-b") then
    return say("medium", "creates a branch", " -b")
  elseif sub == "reset" then
    local hard = has(args, 1, { ["--hard"] = true, ["--merge"] = true, ["--keep"] = true })
    return say("high", "discards changes", hard and " " .. hard or nil)
  elseif (sub == "remote" or sub == "tag" or sub == "notes") and args[1] and args[1] ~= "-v" and args[1] ~= "-l"
    and args[1] ~= "show" and args[1] ~= "list" and args[1] ~= "--list" then
    return say("medium", "changes " .. (sub == "remote" and "remotes" or sub == "tag" and "tags" or "notes"))
  elseif sub == "tag" or sub == "notes" then
    return
  elseif sub == "config" and has(args, 1, { ["--get"] = true, ["-l"] = true, ["--list"] = true,
    ["--get-all"] = true, ["--get-regexp"] = true }) then
    return
  elseif sub == "commit" and has(args, 1, { ["--amend"] = true }) then
    return say("medium", "rewrites the last commit", " --amend")
  end
  local g = GIT[sw.text]
  if g then
    if g[1] ~= "low" then say(g[1], g[2]) end
  elseif not GIT_LOW[sw.text] then
    note(st, "medium", "runs `" .. shown .. " " .. sub .. "`, which this rating does not know (it may be an alias)")
  end
end

-- perl: -i (also -pi, -i.bak) edits in place; -e/-E run inline code; a program (a file, or its
-- input) is code this rating does not read
local function rate_perl(st, w, i, shown)
  local k = i + 1
  while w[k] do
    local t = w[k].text
    if t == "-v" or t == "-V" or t == "--version" or t == "-h" or t == "--help" then return end
    if t == "--" or not t:match("^%-.") then break end
    local c = 2
    while c <= #t do
      local ch = t:sub(c, c)
      if ch == "i" then return note(st, "medium", "edits files in place (`" .. shown .. " " .. short(t) .. "`)") end
      if ch == "e" or ch == "E" then
        note(st, "medium", "runs inline code (`" .. shown .. " -" .. ch .. "`)")
        if c == #t then k = k + 1 end -- its code is the next word
        break
      end
      if ch == "l" or ch == "0" then
        c = c + 1
        while t:sub(c, c):match("%x") do c = c + 1 end
      elseif ch:match("[MmIxdDFC]") then break
      else c = c + 1 end
    end
    k = k + 1
  end
  note(st, "medium", "runs a perl program (`" .. shown .. "`)")
end

-- compressors replace a file with its (de)compressed form unless they only write to stdout,
-- list or test; tar and unzip write what they extract or create (tar --remove-files deletes)
ARCHIVERS = { gzip = "z", gunzip = "z", bzip2 = "z", bunzip2 = "z", xz = "z", unxz = "z", zstd = "z",
  unzstd = "z", lzma = "z", tar = "tar", unzip = "unzip", zip = "zip" }
rate_archiver = function(st, w, i, name, suffix)
  local kind = ARCHIVERS[name]
  for k = i + 1, #w do
    local t = w[k].text
    if t == "--remove-files" then return note(st, "high", "deletes files (`tar --remove-files`" .. suffix .. ")") end
    if t == "--" then break end
    if kind == "z" and (t == "--stdout" or t == "--to-stdout" or t == "--list" or t == "--test" or
      (t:match("^%-%a+$") and t:find("[ctl]"))) then return end
    if kind == "tar" and (t == "--list" or (k == i + 1 and t:match("^%-?%a+$") and t:find("t", 1, true))) then
      return
    end
    if kind == "unzip" and (t == "-l" or t == "-t" or t == "-p" or t == "-Z" or t == "-v") then return end
  end
  note(st, "medium", "writes files (`" .. name .. "`" .. suffix .. ")")
end

-- find: -delete is high; -exec/-ok runs its command per file, rated as a command
local function rate_find(st, w, i, shown)
  local k = i + 1
  while w[k] do
    local t = w[k].text
    if t == "-delete" then note(st, "high", "deletes files (`" .. shown .. " -delete`)")
    elseif t == "-exec" or t == "-execdir" or t == "-ok" or t == "-okdir" then
      note(st, "medium", "runs a command per file (`" .. shown .. " " .. t .. "`)")
      local sub, j = {}, k + 1
      while w[j] and w[j].text ~= ";" and w[j].text ~= "+" do sub[#sub + 1] = w[j]; j = j + 1 end
      st.nest = st.nest + 1
      if st.nest > 64 then return unknown(st, "nested too deeply") end
      rate_words(st, sub, 1, "`" .. shown .. " " .. t .. "`")
      st.nest = st.nest - 1
      k = j
    elseif t == "-fprint" or t == "-fprint0" or t == "-fprintf" or t == "-fls" then
      local f = w[k + 1] and w[k + 1].text or ""
      if f ~= "/dev/null" then note(st, "medium", "writes to " .. short(f) .. " (`" .. shown .. " " .. t .. "`)") end
    end
    k = k + 1
  end
end

-- Wrappers run the rest of their words as a command. Each: options that take a value, and
-- how many plain words it takes before the command (timeout's duration, chroot's directory);
-- `writes`, its options whose value is a file it writes; `floor`, what makes the wrapper itself
-- at least medium (another user, another root, a lock file, a proxy).
local WRAPPERS = {
  timeout = { value = { "-s", "--signal", "-k", "--kill-after" }, before = 1 },
  nice = { value = { "-n", "--adjustment" } },
  ionice = { value = { "-c", "--class", "-n", "--classdata", "-p", "--pid", "-P", "--pgid", "-u", "--uid" } },
  env = { value = { "-u", "--unset", "-C", "--chdir" }, assignments = true },
  busybox = {}, nohup = {}, setsid = {}, fakeroot = {}, unbuffer = {}, builtin = {},
  xargs = { value = { "-a", "--arg-file", "-d", "--delimiter", "-E", "-I", "-L", "--max-lines", "-n", "--max-args",
    "-P", "--max-procs", "-s", "--max-chars", "--process-slot-var" } },
  sudo = { value = { "-u", "--user", "-g", "--group", "-C", "--close-from", "-D", "--chdir", "-h", "--host",
    "-p", "--prompt", "-r", "--role", "-t", "--type", "-T", "--command-timeout", "-U", "--other-user" },
    assignments = true, floor = "runs as another user" },
  doas = { value = { "-u", "-C" }, floor = "runs as another user" },
  command = {}, exec = { value = { "-a" } },
  stdbuf = { value = { "-i", "--input", "-o", "--output", "-e", "--error" } },
  time = { value = { "-o", "--output", "-f", "--format" }, writes = { "-o", "--output" } },
  chroot = { value = { "--userspec", "--groups" }, before = 1, floor = "runs in another root directory" },
  -- less common ones: tracing, scheduling, namespaces, locks
  strace = { value = { "-o", "-e", "-p", "-s", "-u", "-a", "-b", "-E", "-I", "-O", "-P", "-S", "-X" },
    writes = { "-o", "--output" } },
  ltrace = { value = { "-o", "-e", "-p", "-s", "-u", "-a", "-n", "-A", "-D", "-F", "-l", "-w", "-x" },
    writes = { "-o", "--output" } },
  taskset = { before = 1 }, chrt = { value = { "-T", "-P", "-D" }, before = 1 }, faketime = { before = 1 },
  unshare = { value = { "-S", "-G", "-R", "-w", "--setuid", "--setgid", "--root", "--wd" },
    floor = "runs in new namespaces" },
  nsenter = { value = { "-t", "--target", "-S", "-G", "-r", "-w", "--setuid", "--setgid" },
    floor = "runs in another process's namespaces" },
  setpriv = { value = { "--reuid", "--regid", "--ruid", "--euid", "--rgid", "--egid", "--groups", "--inh-caps",
    "--ambient-caps", "--bounding-set", "--securebits", "--pdeathsig" }, floor = "changes privileges" },
  prlimit = {}, pkexec = { value = { "--user" }, floor = "runs as another user" },
  valgrind = { writes = { "--log-file", "--xml-file" } }, firejail = { floor = "runs in another sandbox" },
  catchsegv = {}, eatmydata = {}, ["dbus-run-session"] = { floor = "starts a message bus" },
  torsocks = { floor = "sends its traffic through a proxy" },
  proxychains = { value = { "-f" }, floor = "sends its traffic through a proxy" },
  proxychains4 = { value = { "-f" }, floor = "sends its traffic through a proxy" },
  ["systemd-run"] = { value = { "-p", "--property", "-E", "--setenv", "-u", "--unit", "--uid", "--gid",
    "--working-directory", "-M", "--machine", "--slice", "--description" },
    floor = "starts a service that may outlive the command" },
  parallel = { value = { "-j", "--jobs", "-S", "--sshlogin", "-a", "--arg-file", "-d", "--delimiter", "-I",
    "-n", "-N", "-C", "--colsep", "--joblog", "--results" }, writes = { "--joblog", "--results" } },
  -- flock FILE CMD, or flock FILE -c 'STRING'
  flock = { value = { "-w", "--wait", "--timeout", "-E", "--conflict-exit-code" }, before = 1,
    strings = { "-c", "--command" }, floor = "creates its lock file" },
  -- runs its words joined as one `sh -c` string
  watch = { value = { "-n", "--interval", "-q", "--equexit" }, join = true },
}
for _, spec in pairs(WRAPPERS) do
  local set, strs, writes = {}, {}, {}
  for _, o in ipairs(spec.value or {}) do set[o] = true end
  for _, o in ipairs(spec.strings or {}) do strs[o] = true end
  for _, o in ipairs(spec.writes or {}) do writes[o] = true end
  spec.value, spec.strings, spec.writes = set, strs, writes
end
-- programs whose -c STRING is a shell command, and that start a shell without one
local STRING_RUNNERS = { su = "--command", runuser = "--command", script = "--command" }
local SHELLS = { sh = true, bash = true, dash = true, zsh = true, ksh = true, ash = true, mksh = true }
local KEYWORDS = { ["!"] = true, ["{"] = true, ["}"] = true, ["if"] = true, ["then"] = true, ["else"] = true,
  ["elif"] = true, ["fi"] = true, ["do"] = true, ["done"] = true, ["while"] = true, ["until"] = true }

-- The index of the wrapped command after wrapper w[i], or nil when it runs none.
local function unwrap(st, w, i, name)
  local spec = WRAPPERS[name]
  local k = i + 1
  while w[k] do
    local t = w[k].text
    if t == "--" then k = k + 1; break end
    if not t:match("^%-.") and not (name == "env" and t == "-") then break end
    if name == "busybox" then return nil end -- busybox --list / --install: no command
    if name == "command" and (t == "-v" or t == "-V") then return nil end -- only says what a name is
    if name == "env" and (t == "-S" or t:match("^%-S.") or t == "--split-string" or t:match("^%-%-split%-string=")) then
      local str = t:match("^%-S(.+)") or t:match("^%-%-split%-string=(.*)")
      if not str then
        k = k + 1
        if not w[k] or w[k].dynamic then unknown(st, "`env -S` of a string only known when it runs") return nil end
        str = w[k].text
      end
      rate_string(st, str, "env -S", "`env -S`")
      return nil
    end
    local long, attached = t:match("^(%-%-[%w-]+)=(.*)$")
    local short_opt = not long and t:match("^%-%a") and t:sub(1, 2) or nil
    if spec.writes[long or t] or (short_opt and #t > 2 and spec.writes[short_opt]) then
      local f = attached or (short_opt and #t > 2 and t:sub(3)) or (w[k + 1] and w[k + 1].text) or ""
      if f ~= "/dev/null" then
        note(st, "medium", "writes to " .. short(f) .. " (`" .. name .. " " .. short(long or short_opt or t) .. "`)")
      end
    end
    if spec.value[t] then k = k + 1 end -- its value is the next word (not --opt=value, -n5)
    k = k + 1
  end
  if spec.assignments then
    while w[k] and not w[k].quoted and w[k].text:match("^[%a_][%w_]*=") do k = k + 1 end
  end
  k = k + (spec.before or 0)
  if w[k] and spec.strings[w[k].text] then -- flock FILE -c 'STRING'
    local str = w[k + 1]
    if not str or str.dynamic then unknown(st, "`" .. name .. " -c` of a string only known when it runs") return nil end
    rate_string(st, str.text, name .. " -c", "`" .. name .. " -c`")
    return nil
  end
  if spec.join and w[k] then -- watch 'a b' c: sh -c 'a b c'
    local parts = {}
    for j = k, #w do
      if w[j].dynamic then unknown(st, "`" .. name .. "` of words only known when it runs") return nil end
      parts[#parts + 1] = w[j].text
    end
    rate_string(st, table.concat(parts, " "), name, "`" .. name .. "`")
    return nil
  end
  return w[k] and k or nil
end

local function basename(t)
  return t:match("([^/]+)$") or t
end

-- Rates the simple command w[i..]; `via` names the wrappers it ran under, for the reason.
rate_words = function(st, w, i, via)
  local hops = 0
  while true do
    -- reserved words, assignments (FOO=1 rm …) and `function NAME` come before the program
    while w[i] do
      local t = w[i]
      if not t.quoted and not t.dynamic and KEYWORDS[t.text] then i = i + 1
      elseif not t.quoted and t.text:match("^[%a_][%w_]*=") then i = i + 1
      elseif not t.quoted and t.text == "function" then i = i + 2
      else break end
    end
    local pw = w[i]
    if not pw then return end
    if pw.dynamic then
      return unknown(st, "the program is only known when it runs (`" .. pw.raw .. "`)")
    end
    local shown = short(pw.text)
    if pw.glob and shown ~= "[" and shown ~= "[[" then
      return unknown(st, "the program name is a pattern (`" .. shown .. "`)")
    end
    local name = basename(pw.text)
    name = name:match("^(python)[%d.]*$") or name:match("^(pip)[%d.]*$") or name
    local suffix = via and (", run by " .. via) or ""
    if name == "case" then return unknown(st, "a case statement") end
    if STRING_RUNNERS[name] then
      for k = i + 1, #w do
        local t = w[k].text
        if t == "-c" or t == STRING_RUNNERS[name] or t == "--session-command" then
          local str = w[k + 1]
          if not str or str.dynamic then
            return unknown(st, "`" .. name .. " -c` of a string only known when it runs")
          end
          if name == "script" then note(st, "medium", "writes a typescript file (`script`)")
          else note(st, "medium", "runs as another user (`" .. name .. "`" .. suffix .. ")") end
          return rate_string(st, str.text, name .. " -c", "`" .. name .. " -c`")
        end
      end
      return note(st, "high", "starts a shell that reads commands from its input (`" .. name .. "`" .. suffix .. ")")
    end
    if WRAPPERS[name] then
      local floor = WRAPPERS[name].floor
      if floor then note(st, "medium", floor .. " (`" .. name .. "`" .. suffix .. ")") end
      hops = hops + 1
      if hops > 20 then return unknown(st, "too many wrappers") end
      local k = unwrap(st, w, i, name)
      if not k then return end
      via = via and (via .. ", `" .. name .. "`") or ("`" .. name .. "`")
      i = k
    elseif SHELLS[name] then
      -- sh -c 'STRING' runs STRING; sh FILE runs a script; sh alone reads commands from its input
      local k = i + 1
      while w[k] and w[k].text:match("^[-+].") do
        local t = w[k].text
        if t:sub(1, 1) == "-" and t:sub(2, 2) ~= "-" and t:find("c", 2, true) then
          local str = w[k + 1]
          if not str then return unknown(st, "`" .. name .. " -c` without a command") end
          if str.dynamic then return unknown(st, "`" .. name .. " -c` of a string only known when it runs") end
          local how = "`" .. name .. " -c`"
          return rate_string(st, str.text, how, via and (via .. ", " .. how) or how)
        end
        if t == "-s" or t:match("^%-%a*s%a*$") then break end
        if t == "-o" or t == "+o" or t == "-O" or t == "+O" or t == "--rcfile" or t == "--init-file" then k = k + 1 end
        k = k + 1
      end
      if w[k] and w[k].text ~= "-s" and w[k].text ~= "-" then
        return note(st, "medium", "runs another script (`" .. shown .. " " .. short(w[k].text) .. "`" .. suffix .. ")")
      end
      return note(st, "high", "runs shell commands from its input (`" .. shown .. "`" .. suffix .. ")")
    else
      local c = COMMANDS[name]
      if c then note(st, c[1], c[2] .. " (`" .. name .. "`" .. suffix .. ")") end
      if name == "git" then return rate_git(st, w, i, name)
      elseif name == "sed" then return programs.rate_sed(st, w, i, name)
      elseif name == "perl" then return rate_perl(st, w, i, name)
      elseif name == "find" then return rate_find(st, w, i, name)
      elseif AWKS[name] then return programs.rate_awk(st, w, i, name)
      elseif name == "trap" then -- trap 'STRING' SIGNALS: STRING runs later
        local a = w[i + 1]
        if a and a.text ~= "-l" and a.text ~= "-p" and a.text ~= "--" and w[i + 2] then
          if a.dynamic then return unknown(st, "`trap` of a string only known when it runs") end
          return rate_string(st, a.text, "trap", "`trap`")
        end
      elseif ARCHIVERS[name] then return rate_archiver(st, w, i, name, suffix)
      elseif INLINE[name] then
        local k = i + 1
        while w[k] do
          local t = w[k].text
          if t == INLINE[name] or (t:match("^%-%a+$") and t:sub(-1) == INLINE[name]:sub(2))
            or (name == "node" and (t == "--eval" or t == "-p" or t == "--print")) then
            return note(st, "medium", "runs inline code (`" .. name .. " " .. short(t) .. "`" .. suffix .. ")")
          end
          if name == "python" and t == "-m" then -- python -m pip install …, python -m pytest
            local mod = w[k + 1]
            if mod and mod.text == "pip" then return rate_words(st, w, k + 1, via) end
            if mod and not mod.dynamic and BUILDS[mod.text] then
              return programs.rate_build(st, w, k + 1, mod.text, suffix)
            end
            return note(st, "medium", "runs the module `" .. short(mod and mod.text or "") .. "` (`" .. name
              .. " -m`" .. suffix .. ")")
          end
          if t == "--version" or t == "-V" or t == "--help" or t == "-h" or (name == "node" and t == "--test") then
            return
          end
          if t == "-" or not t:match("^%-") then break end
          if name == "python" and (t == "-W" or t == "-X") then k = k + 1 end
          k = k + 1
        end
        if not w[k] or w[k].text == "-" then -- `… | python3`: the code comes from its input
          return note(st, "medium", "runs code from its input (`" .. name .. "`" .. suffix .. ")")
        end
        return note(st, "medium", "runs a program (`" .. name .. " " .. short(w[k].text) .. "`" .. suffix .. ")")
      else
        -- the first two words that are not options (an option may take the first as its value)
        local seen = 0
        for k = i + 1, #w do
          local t = w[k].text
          if not t:match("^%-") then
            local sub = SUBCOMMANDS[name .. " " .. t]
            if sub then return note(st, sub[1], sub[2] .. " (`" .. name .. " " .. t .. "`" .. suffix .. ")") end
            seen = seen + 1
            if seen == 2 or k == i + 1 then break end
          end
        end
        if c or name == "for" or name == "select" then return end -- rated above; a loop's header
        if READERS[name] then return programs.rate_reader(st, w, i, name, suffix) end
        if name == "make" or name == "gmake" then return programs.rate_make(st, w, i, name, suffix) end
        if name == "cmake" then return programs.rate_cmake(st, w, i, suffix) end
        if programs.build_of(w, i, name) then return programs.rate_build(st, w, i, name, suffix) end
        return note(st, "medium", "runs `" .. shown .. "`" .. (via and (" (run by " .. via .. ")") or "")
          .. ", which this rating does not know to only read")
      end
      return
    end
  end
end

-- A redirection: its operator is at st.i. Writing a file other than /dev/null is medium.
local function read_redirect(st, cmd, fd)
  local s = st.s
  -- the operators sh knows: < > >> <> >| <& >& <<  <<- and bash's <<< &> &>>
  local op = s:match("^<<<", st.i) or s:match("^<<%-", st.i) or s:match("^<<", st.i) or s:match("^&>>", st.i)
    or s:match("^&>", st.i) or s:match("^>>", st.i) or s:match("^>|", st.i) or s:match("^>&", st.i)
    or s:match("^<&", st.i) or s:match("^<>", st.i) or s:sub(st.i, st.i)
  st.i = st.i + #op
  st.i = s:find("[^ \t]", st.i) or #s + 1
  if s:sub(st.i, st.i) == "(" and (op == "<" or op == ">") then -- process substitution <( … )
    st.i = st.i + 1
    return parse_list(st, ")")
  end
  local w = read_word(st)
  if op == "<<" or op == "<<-" then
    cmd.heredocs[#cmd.heredocs + 1] = { delim = w.text, quoted = w.quoted, strip = op == "<<-" }
    return
  end
  if op == "<" or op == "<<<" or op == "<&" then return end
  if op == ">&" and (w.text:match("^%d+$") or w.text == "-") then return end -- 2>&1
  local t = w.text
  if not w.dynamic and (t == "/dev/null" or t == "/dev/stdout" or t == "/dev/stderr") then return end
  if t == "" and not w.dynamic then return unknown(st, "a redirection without a file") end
  local target = w.dynamic and "a file named at run time" or short(t)
  cmd.writes[#cmd.writes + 1] = target .. " (`" .. (fd or "") .. op .. "`)"
end

-- The bodies of here-documents, after the newline that ends their command. With an unquoted
-- delimiter the shell expands $( … ) in the body: that is not read, so it is rated high.
local function read_heredocs(st, docs)
  local s = st.s
  for _, d in ipairs(docs) do
    while true do
      if st.i > #s then break end
      local e = s:find("\n", st.i, true) or #s + 1
      local line = s:sub(st.i, e - 1)
      st.i = e + 1
      if (d.strip and line:match("^\t*(.-)$") or line) == d.delim then break end
      if not d.quoted and (line:find("$(", 1, true) or line:find("`", 1, true)) then
        unknown(st, "a command inside a here-document")
      end
    end
  end
end

local function new_cmd() return { words = {}, writes = {}, heredocs = {} } end

local function finish(st, cmd)
  for _, f in ipairs(cmd.writes) do note(st, "medium", "writes to " .. f) end
  if #cmd.words > 0 then rate_words(st, cmd.words, 1, st.via) end
end

parse_list = function(st, closer)
  st.nest = st.nest + 1
  if st.nest > 64 then
    unknown(st, "nested too deeply")
    st.i = #st.s + 1
  end
  local s, n = st.s, #st.s
  local cmd = new_cmd()
  while true do
    st.i = s:find("[^ \t\r\v\f]", st.i) or n + 1
    local i = st.i
    if i > n then
      if closer then unknown(st, "unclosed (") end
      break
    end
    local c = s:sub(i, i)
    if c == "\\" and s:sub(i + 1, i + 1) == "\n" then
      st.i = i + 2
    elseif c == "#" then
      st.i = s:find("\n", i, true) or n + 1
    elseif c == "\n" or c == ";" or c == "|" or (c == "&" and s:sub(i + 1, i + 1) ~= ">") then
      finish(st, cmd)
      local docs = cmd.heredocs
      cmd = new_cmd()
      local op = s:match("^[;&|]+", i) or ""
      st.i = i + math.max(#op, 1)
      if c == "\n" then read_heredocs(st, docs) else cmd.heredocs = docs end
    elseif c == "(" then
      finish(st, cmd)
      cmd = new_cmd()
      st.i = i + 1
      parse_list(st, ")")
    elseif c == ")" then
      st.i = i + 1
      if closer == ")" then break end
      finish(st, cmd) -- a ) with no ( (sh refuses the command): read on
      cmd = new_cmd()
    elseif c == "<" or c == ">" or c == "&" then
      read_redirect(st, cmd)
    else
      local w = read_word(st)
      if st.i == i then st.i = i + 1 end -- never stand still
      local nx = s:sub(st.i, st.i)
      if (nx == "<" or nx == ">") and not w.quoted and not w.dynamic and w.text:match("^%d+$") then
        read_redirect(st, cmd, w.text) -- 2> file: the digits are the descriptor
      else
        cmd.words[#cmd.words + 1] = w
      end
    end
  end
  finish(st, cmd)
  if #cmd.heredocs > 0 then read_heredocs(st, cmd.heredocs) end
  st.nest = st.nest - 1
end

-- Rates `text` as a command of its own (sh -c '…', backticks), one level deeper.
rate_string = function(st, text, how, via)
  if st.depth >= MAX_DEPTH then return unknown(st, "commands nested too deeply (" .. how .. ")") end
  local sub = { s = text, i = 1, depth = st.depth + 1, nest = st.nest, via = via }
  parse_list(sub, nil)
  if sub.level then note(st, sub.level, sub.reason) end
end

-- Every program name a part can be rated low with (the readers, the builds' tools, the wrappers,
-- the programs read above flag by flag); any other is at least medium (tests/test_risk.py checks
-- random names against it).
M.MAY_BE_LOW = {}
for name in pairs(READERS) do M.MAY_BE_LOW[name] = true end
for key in pairs(BUILDS) do M.MAY_BE_LOW[key:match("^%S+")] = true end
for name in pairs(WRAPPERS) do M.MAY_BE_LOW[name] = true end
for name in pairs(ARCHIVERS) do M.MAY_BE_LOW[name] = true end
for name in pairs(AWKS) do M.MAY_BE_LOW[name] = true end
for name in pairs(INLINE) do M.MAY_BE_LOW[name] = true end
for name in pairs(SHELLS) do M.MAY_BE_LOW[name] = true end -- sh -c 'ls'
for name in pairs(KEYWORDS) do M.MAY_BE_LOW[name] = true end -- `if`, `done`: no program
for name in ("git sed perl find trap make gmake cmake for select function"):gmatch("%S+") do
  M.MAY_BE_LOW[name] = true
end

--- (level, reason) for a shell command: the riskiest thing any part of it does.
function M.assess(cmd)
  local st = { s = cmd or "", i = 1, depth = 0, nest = 0 }
  parse_list(st, nil)
  if not st.level then return "low", M.LOW_REASON end
  return st.level, st.reason
end

return M

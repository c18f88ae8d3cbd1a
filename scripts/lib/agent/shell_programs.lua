-- What programs do that shell_risk.lua rates: the allow-list of programs that only read
-- (READERS) and of builds and test runners (BUILDS), with the flags and operands that make
-- them write; what a sed script or an awk program does; make's targets and cmake's tools.
-- Each rate_* function notes on `st`, a rating in progress, the riskiest thing it finds.
local M = {}

local LEVELS = { low = 1, medium = 2, high = 3 }

--- A rating in progress: the best (level, reason) so far.
function M.note(st, level, reason)
  if not st.level or LEVELS[level] > LEVELS[st.level] then st.level, st.reason = level, reason end
end
local note = M.note

--- A word as a reason shows it: at most 60 bytes, cut at a character boundary.
function M.short(t)
  if #t <= 60 then return t end
  local cut = 57
  while cut > 0 and (t:byte(cut + 1) or 0) >= 128 and t:byte(cut + 1) < 192 do cut = cut - 1 end
  return t:sub(1, cut) .. "…"
end
local short = M.short

function M.unknown(st, why) note(st, "high", "cannot be read safely: " .. why) end
local unknown = M.unknown

function M.set_of(words) local t = {} for x in words:gmatch("%S+") do t[x] = true end return t end
local set_of = M.set_of

-- ---- sed and awk ---------------------------------------------------------------------------

-- What a sed script does besides reading: "w" and the file (`w F`, `W F`, `s///w F`), "e" (`e CMD`,
-- `s///e` run a command), "?" when it cannot be read; nil when it only reads.
local function sed_script(s)
  local i, n = 1, #s
  local function blanks() i = s:find("[^ \t]", i) or n + 1 end
  local function rest_of_line() -- a's text, r's file, a comment: to the end of the line (\ continues it)
    local start = i
    while i <= n and s:sub(i, i) ~= "\n" do i = i + (s:sub(i, i) == "\\" and 2 or 1) end
    local text = s:sub(start, i - 1)
    i = i + 1
    return text
  end
  local function upto(d, regex) -- a regex or a replacement, to the unescaped delimiter d
    while i <= n do
      local c = s:sub(i, i)
      if c == "\\" then i = i + 2
      elseif c == d then i = i + 1; return true
      elseif c == "\n" then return false
      elseif c == "[" and regex then -- a bracket expression: the delimiter is plain text in it
        local j = i + 1
        if s:sub(j, j) == "^" then j = j + 1 end
        if s:sub(j, j) == "]" then j = j + 1 end
        local close = s:find("]", j, true)
        if not close then return false end
        i = close + 1
      else i = i + 1 end
    end
    return false
  end
  local function address()
    local c = s:sub(i, i)
    if c:match("%d") then
      i = s:find("[^%d]", i) or n + 1
      if s:sub(i, i) == "~" then i = s:find("[^%d]", i + 1) or n + 1 end
      return true
    elseif c == "$" then i = i + 1; return true
    elseif c == "/" or c == "\\" then
      local d = "/"
      if c == "\\" then d = s:sub(i + 1, i + 1); i = i + 1 end
      i = i + 1
      if d == "" or d == "\n" or not upto(d, true) then return nil end
      while s:sub(i, i):match("^[IM]$") do i = i + 1 end
      return true
    end
    return false
  end
  while true do
    i = s:find("[^%s;]", i) or n + 1
    if i > n then return nil end
    local a = address()
    if a == nil then return "?" end
    if a then
      blanks()
      if s:sub(i, i) == "," then
        i = i + 1
        blanks()
        if s:sub(i, i):match("^[+~]$") then i = s:find("[^%d]", i + 1) or n + 1
        elseif address() ~= true then return "?" end
      end
    end
    blanks()
    while s:sub(i, i) == "!" do i = i + 1; blanks() end
    local c = s:sub(i, i)
    i = i + 1
    if c == "#" or c == "a" or c == "i" or c == "c" or c == "r" or c == "R" or c == ":" then rest_of_line()
    elseif c == "b" or c == "t" or c == "T" or c == "v" then i = s:find("[;\n}]", i) or n + 1
    elseif c == "q" or c == "Q" or c == "l" or c == "L" then blanks(); i = s:find("[^%d]", i) or n + 1
    elseif c == "w" or c == "W" then
      blanks()
      local f = rest_of_line()
      if f ~= "/dev/stdout" and f ~= "/dev/stderr" then return "w", f end
    elseif c == "e" then return "e"
    elseif c == "s" or c == "y" then
      local d = s:sub(i, i)
      if d == "" or d == "\n" or d == "\\" then return "?" end
      i = i + 1
      if not upto(d, c == "s") or not upto(d, false) then return "?" end
      while c == "s" and i <= n do
        local f = s:sub(i, i)
        if f == "w" then
          i = i + 1
          blanks()
          local file = rest_of_line()
          if file ~= "/dev/stdout" and file ~= "/dev/stderr" then return "w", file end
          break
        elseif f == "e" then return "e"
        elseif f:match("^[gpiImM%d]$") then i = i + 1
        else break end
      end
    elseif not (c == "{" or c == "}" or c:match("^[=dDgGhHnNpPxzF]$")) then -- those take nothing after them
      return "?"
    end
  end
end

-- sed: -i, -i.bak, -ni (in a bundle), --in-place[=SUF] edit in place; its script may write a
-- file (w) or run a command (e); a script from a file (-f) is not read here
function M.rate_sed(st, w, i, shown)
  local scripts, from_file, k = {}, false, i + 1
  while w[k] do
    local t = w[k].text
    if t == "--" then k = k + 1; break end
    if t == "--in-place" or t:match("^%-%-in%-place=") then
      return note(st, "medium", "edits files in place (`" .. shown .. " " .. short(t) .. "`)")
    elseif t == "--expression" or t == "--file" then
      if t == "--file" then from_file = true else scripts[#scripts + 1] = w[k + 1] end
      k = k + 1
    elseif t:match("^%-%-expression=") then scripts[#scripts + 1] = { text = t:match("=(.*)$") }
    elseif t:match("^%-%-file=") then from_file = true
    elseif t:match("^%-%-line%-length$") then k = k + 1
    elseif t:match("^%-[^-]") then
      for c = 2, #t do
        local ch = t:sub(c, c)
        if ch == "i" then return note(st, "medium", "edits files in place (`" .. shown .. " " .. short(t) .. "`)") end
        if ch == "e" or ch == "f" or ch == "l" then -- the rest of the word, or the next one, is its value
          local attached = t:sub(c + 1)
          local v = attached ~= "" and { text = attached } or w[k + 1]
          if attached == "" then k = k + 1 end
          if ch == "e" then scripts[#scripts + 1] = v elseif ch == "f" then from_file = true end
          break
        end
      end
    elseif not t:match("^%-%-") then
      break
    end
    k = k + 1
  end
  if #scripts == 0 and not from_file and w[k] then scripts[1] = w[k] end
  if from_file then
    return note(st, "medium", "runs a sed script from a file, which this rating does not read (`" .. shown .. " -f`)")
  end
  for _, sw in ipairs(scripts) do
    if sw.dynamic then return unknown(st, "a sed script only known when it runs") end
    local what, file = sed_script(sw.text or "")
    if what == "e" then return note(st, "high", "runs a command from its script (`" .. shown .. "` e)") end
    if what == "w" then return note(st, "medium", "writes to " .. short(file) .. " (`" .. shown .. "` w)") end
    if what == "?" then return unknown(st, "a sed script it cannot read") end
  end
end

-- awk: a program that calls system() or pipes to or from a command runs that command, unread;
-- `print > FILE` writes one; options other than these few load code or write files
-- (gawk -i inplace, -f, -l, -o, -p, -d)
M.AWKS = { awk = true, gawk = true, mawk = true, nawk = true }
local AWK_VALUE = set_of("-F -v --field-separator --assign")
local AWK_CODE = set_of("-e --source")
local AWK_FLAGS = set_of("-b -c -C -h -L -M -n -N -O -P -r -s -S -t -V --characters-as-bytes --traditional " ..
  "--copyright --help --lint --non-decimal-data --optimize --posix --re-interval --no-optimize --sandbox " ..
  "--version --use-lc-numeric --bignum")

-- Whether an awk program prints to a file: a `>` after `print`/`printf`, outside parentheses
-- and strings, before the statement ends (`print $1 > "out"`; `$1 > 2 { print }` compares).
local function awk_prints_to_file(p)
  local from = 1
  while true do
    local a, b = p:find("%f[%w_]printf?%f[^%w_]", from)
    if not a then return false end
    local depth, j = 0, b + 1
    while j <= #p do
      local c = p:sub(j, j)
      if c == '"' then
        j = j + 1
        while j <= #p and p:sub(j, j) ~= '"' do j = j + (p:sub(j, j) == "\\" and 2 or 1) end
      elseif c == "(" then depth = depth + 1
      elseif c == ")" then depth = depth - 1
      elseif depth <= 0 and (c == ";" or c == "}" or c == "\n") then break
      elseif depth <= 0 and c == ">" then return true end
      j = j + 1
    end
    from = b + 1
  end
end

function M.rate_awk(st, w, i, shown)
  for k = i + 1, #w do
    local t = w[k].text
    if t:find("system%s*%(") or t:gsub("||", ""):find("|", 1, true) then
      return note(st, "high", "runs a command from its program (`" .. shown .. "` with system() or |)")
    end
  end
  local progs, k = {}, i + 1
  while w[k] do
    local t = w[k].text
    if t == "--" then k = k + 1; break end
    if not t:match("^%-.") then break end
    local long = t:match("^(%-%-[%w-]+)=")
    local attached = AWK_VALUE[long or ""] or t:match("^%-[Fv].") -- -F: or --assign=x=1: the value is attached
    if AWK_VALUE[t] then k = k + 1
    elseif AWK_CODE[t] then progs[#progs + 1] = w[k + 1]; k = k + 1
    elseif AWK_CODE[long or ""] then progs[#progs + 1] = { text = t:match("=(.*)$") }
    elseif not AWK_FLAGS[t] and not attached then
      local lib = t:match("^%-i(.+)$") or t:match("^%-%-include=(.+)$")
        or ((t == "-i" or t == "--include") and w[k + 1] and w[k + 1].text)
      if lib == "inplace" or lib == "inplace.awk" then
        return note(st, "medium", "edits files in place (`" .. shown .. " -i inplace`)")
      end
      return note(st, "medium", "runs `" .. shown .. " " .. short(t) .. "`, which loads code or writes a file")
    end
    k = k + 1
  end
  if #progs == 0 and w[k] then progs[1] = w[k] end
  for _, pw in ipairs(progs) do
    if pw.dynamic then return unknown(st, "an awk program only known when it runs") end
    if awk_prints_to_file(pw.text or "") then
      return note(st, "medium", "writes to a file from its program (`" .. shown .. "` print >)")
    end
  end
end

-- ---- what only reads, and what builds and tests --------------------------------------------

-- READERS: programs that read (files, their input, the system) and write only their output.
-- Each may name `out`, options whose value is a file it writes (sort -o); `at`, the operand it
-- writes (uniq IN OUT); `value`, options that take a value (so it is no operand); `bad`,
-- options that make it run a program or change something (rg --pre); `plus`, operands must
-- start with + (date +%F; another operand sets the clock).
local READERS = {}
M.READERS = READERS
local function readers(names, spec)
  spec = spec or {}
  for _, key in ipairs({ "out", "value", "bad" }) do spec[key] = set_of(spec[key] or "") end
  for name in names:gmatch("%S+") do READERS[name] = spec end
end
readers("cat tac nl head tail wc ls dir vdir cut paste join comm column expand unexpand fold fmt rev od hexdump " ..
  "hd strings base32 base64 basenc cksum sum md5sum sha1sum sha224sum sha256sum sha384sum sha512sum b2sum " ..
  "diff diff3 cmp grep egrep fgrep zgrep zegrep zfgrep zcat bzcat xzcat zstdcat lzcat echo printf true false " ..
  "test [ [[ pwd which whereis type whoami id groups uname arch nproc free uptime realpath readlink basename " ..
  "dirname seq sleep yes expr printenv locale tty getconf stat du df jq ps pgrep pidof lsof look numfmt factor " ..
  "tr cd pushd popd dirs export unset set read local declare typeset shift exit return : wait let hash shopt " ..
  "getopts break continue umask ulimit")
readers("sort", { out = "-o --output", bad = "--compress-program" })
readers("shuf", { out = "-o --output" })
readers("sdiff", { out = "-o --output" })
readers("iconv", { out = "-o --output", value = "-f -t --from-code --to-code" })
readers("tree", { out = "-o", value = "-L -P -I --filelimit --charset -H -T --sort --timefmt" })
readers("uniq", { at = 2, value = "-f -s -w --skip-fields --skip-chars --check-chars" })
readers("xxd", { at = 2, value = "-c -g -l -o -s -n -R --cols --groupsize --len --offset --seek --name" })
readers("file", { bad = "-C --compile", value = "-m --magic-file -e --exclude -F --separator -f --files-from -P" })
readers("rg", { bad = "--pre" })
readers("fd fdfind", { bad = "-x --exec -X --exec-batch" })
readers("date", { bad = "-s --set", value = "-d --date -r --reference -f --file", plus = true })

-- A reader's words: a flag that writes a file, or a program it runs, or an operand it writes.
function M.rate_reader(st, w, i, name, suffix)
  local spec, operands, k, ended = READERS[name], 0, i + 1, false
  local function writes(f, how)
    if f == "/dev/null" or f == "/dev/stdout" or f == "/dev/stderr" or f == "-" then return false end
    note(st, "medium",
      "writes to " .. short(f) .. " (`" .. name .. (how and (" " .. how) or "") .. "`" .. suffix .. ")")
    return true
  end
  while w[k] do
    local t = w[k].text
    if not ended and t == "--" then ended = true
    elseif not ended and t:match("^%-%-.") then
      local opt, attached = t:match("^(%-%-[%w-]+)=(.*)$")
      opt = opt or t
      if spec.bad[opt] then
        return note(st, "medium", "runs a program or changes something (`" .. name .. " " .. short(opt)
          .. "`" .. suffix .. ")")
      end
      if spec.out[opt] then
        if writes(attached or (w[k + 1] and w[k + 1].text) or "", opt) then return end
        if not attached then k = k + 1 end
      elseif spec.value[opt] and not attached then k = k + 1 end
    elseif not ended and t:match("^%-.") then
      for c = 2, #t do -- a bundle of short options; one that takes a value takes the rest, or the next word
        local o = "-" .. t:sub(c, c)
        if spec.bad[o] then
          return note(st, "medium", "runs a program or changes something (`" .. name .. " " .. o .. "`"
            .. suffix .. ")")
        end
        if spec.out[o] or spec.value[o] then
          local v = t:sub(c + 1)
          if v == "" then k = k + 1; v = w[k] and w[k].text or "" end
          if spec.out[o] and writes(v, o) then return end
          break
        end
      end
    else
      operands = operands + 1
      if spec.at == operands and writes(t) then return end
      if spec.plus and t:sub(1, 1) ~= "+" then
        return note(st, "medium", "sets the clock (`" .. name .. " " .. short(t) .. "`" .. suffix .. ")")
      end
    end
    k = k + 1
  end
end

-- BUILDS: the builds and test runners of the usual toolchains ("tool", "tool sub", "tool sub
-- sub"). They run the project's own code and write build output (target/, __pycache__); the
-- sandbox bounds what that code does. `bad`: options that change sources or run more (`cargo
-- clippy --fix`, `go test -exec`); `need`: one of these must be there (`black --check`).
local BUILDS = {}
M.BUILDS = BUILDS
local function builds(keys, spec)
  spec = spec or {}
  spec.bad, spec.need = set_of(spec.bad or ""), set_of(spec.need or "")
  for key in keys:gmatch("[^,]+") do BUILDS[key:match("^%s*(.-)%s*$")] = spec end
end
builds("cargo build, cargo b, cargo check, cargo c, cargo test, cargo t, cargo bench, cargo doc, cargo tree, " ..
  "cargo metadata, cargo version")
builds("cargo clippy", { bad = "--fix" })
builds("cargo fmt", { need = "--check" })
builds("go build, go test, go vet, go list, go version, go doc", { bad = "-exec -toolexec" })
builds("go env", { bad = "-w -u" })
builds("pytest, py.test, unittest, doctest, compileall, py_compile, pyflakes, flake8, pylint, pyright, ctest, jest, " ..
  "vitest, tsc, rspec, phpunit")
builds("mypy", { bad = "--install-types" })
builds("ruff check", { bad = "--fix --unsafe-fixes --add-noqa --fix-only" })
builds("ruff format", { need = "--check --diff" })
builds("black, isort", { need = "--check --diff --check-only -c" })
builds("eslint", { bad = "--fix -o --output-file" })
builds("prettier", { need = "--check -c --list-different -l" })
builds("npm test, npm t, yarn test, pnpm test, bun test, deno test, deno check, deno lint")
for _, tool in ipairs({ "npm run", "yarn run", "pnpm run", "yarn", "pnpm" }) do
  builds(("%s test, %s lint, %s build, %s check, %s typecheck"):format(tool, tool, tool, tool, tool))
end
builds("mvn test, mvn verify, mvn compile, mvn package, mvn validate, gradle test, gradle build, gradle check, " ..
  "gradle assemble, gradlew test, gradlew build, gradlew check, gradlew assemble, dotnet build, dotnet test, " ..
  "swift build, swift test, mix test, mix compile, zig build")

-- The BUILDS entry for the command w[i..] (named `name`), from its first words that are not
-- options (cargo's +toolchain neither), and its key; nil when there is none.
function M.build_of(w, i, name)
  local words, k = {}, i + 1
  while w[k] and #words < 2 and not w[k].dynamic do
    if not w[k].text:match("^[-+]") then words[#words + 1] = w[k].text end
    k = k + 1
  end
  for _, key in ipairs({ name .. " " .. (words[1] or "") .. " " .. (words[2] or ""), name .. " " .. (words[1] or ""),
    name }) do
    if BUILDS[key] then return BUILDS[key], key end
  end
end

function M.rate_build(st, w, i, name, suffix)
  local spec, key = M.build_of(w, i, name)
  local have = false
  name = key
  for k = i + 1, #w do
    local t = w[k].text
    local opt = t:match("^(%-%-?[%w-]+)=") or t
    if spec.bad[opt] then
      return note(st, "medium", "changes files or runs more than the build (`" .. name .. " " .. short(opt) .. "`"
        .. suffix .. ")")
    end
    if spec.need[opt] then have = true end
  end
  if next(spec.need) and not have then
    return note(st, "medium", "rewrites files (`" .. name .. "` without --check" .. suffix .. ")")
  end
end

-- make: the default target or a usual build or test one, with the project's own makefile; a
-- makefile or rules from elsewhere (`-f /dev/stdin`, --eval) or a variable set on the command
-- line (which may change what a rule runs) is medium
local MAKE_TARGETS = set_of("all build test tests check lint compile")
local MAKE_ELSEWHERE = set_of("-f --file --makefile -E --eval -e --environment-overrides -I --include-dir")
local MAKE_VALUE = set_of("-C --directory -o --old-file --assume-old -W --what-if --new-file --assume-new")
function M.rate_make(st, w, i, name, suffix)
  local k = i + 1
  while w[k] do
    local t = w[k].text
    local opt = t:match("^(%-%-[%w-]+)=") or t
    if MAKE_ELSEWHERE[opt] or MAKE_ELSEWHERE[t:sub(1, 2)] then
      return note(st, "medium", "runs make with a makefile or rules from elsewhere (`" .. name .. " " .. short(t) .. "`"
        .. suffix .. ")")
    elseif MAKE_VALUE[t] or ((t == "-j" or t == "-l") and w[k + 1] and w[k + 1].text:match("^%d+$")) then
      k = k + 1
    elseif t:match("^[%a_][%w_]*=") then
      return note(st, "medium", "sets a make variable, which may change what runs (`" .. name .. " " .. short(t) .. "`"
        .. suffix .. ")")
    elseif not t:match("^%-") and not MAKE_TARGETS[t] then
      return note(st, "medium", "runs the make target `" .. short(t) .. "`, which is not a usual build or test target"
        .. suffix)
    end
    k = k + 1
  end
end

-- cmake: configuring and --build are the build; -E rm/remove/rename delete or move, its other
-- tools but the reading ones change files; -P runs a script; --install installs
local CMAKE_E_READS = set_of("echo echo_append cat compare_files environment capabilities sha1sum sha224sum " ..
  "sha256sum sha384sum sha512sum md5sum true false sleep")
local CMAKE_E_HIGH = set_of("rm remove remove_directory rename")
function M.rate_cmake(st, w, i, suffix)
  for k = i + 1, #w do
    local t = w[k].text
    if t == "-E" then
      local tool = w[k + 1] and w[k + 1].text or ""
      if CMAKE_E_HIGH[tool] then
        return note(st, "high", "deletes or moves files (`cmake -E " .. short(tool) .. "`" .. suffix .. ")")
      end
      if not CMAKE_E_READS[tool] then
        return note(st, "medium", "changes files (`cmake -E " .. short(tool) .. "`" .. suffix .. ")")
      end
      return
    elseif t == "-P" then
      return note(st, "medium", "runs a cmake script (`cmake -P`" .. suffix .. ")")
    elseif t == "--install" then
      return note(st, "high", "installs files (`cmake --install`" .. suffix .. ")")
    end
  end
end

return M

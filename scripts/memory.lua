-- Long-term memory for people: list, search, forget and organize .moss/memory/*.md.
--
-- `moss memory SUBCOMMAND` runs this script (so does `moss @memory SUBCOMMAND`). Listing,
-- searching and forgetting use moss.memory; `organize` is policy kept here: the prompt, how
-- the model's reply is read, and what is written (only after a yes, or --yes).
local cli = require("lib.cli")

local M = {}

local HELP = [[
usage: moss memory list
       moss memory search QUERY... [--limit N]
       moss memory forget TEXT... [--yes]
       moss memory organize [--yes] [--provider NAME --model NAME ...]

The project's long-term memory: the Markdown bullets in .moss/memory/*.md that the agent
writes with $(memorize ...) and recalls at the start of a session. Edit the files by hand
too; they are meant to be version controlled.

  list        every memory: kind, text, file:line
  search      the memories sharing the most words with QUERY, best first (exit 1: none)
  forget      remove the memories containing TEXT (case-insensitive) and say how many;
              more than one asks first, unless --yes (exit 3 when nobody can answer)
  organize    ask the LLM to merge duplicates and group related memories under headings;
              shows the diff and writes only after a yes, or with --yes. Without a
              terminal and without --yes it shows the diff, writes nothing, and exits 3.

Exit status: 0 done, 1 nothing matched / declined / the model's reply was unusable,
2 usage error, 3 needs you (non-interactive without --yes).]]

-- What organize asks. Copy this file to .moss/scripts/memory.lua to change any of it.
M.SYSTEM = [[You organise a software project's long-term memory: short notes that a coding
agent wrote down about the project (facts), about how its people like things done
(preferences) and about choices that were made (decisions). Each memory is one Markdown
bullet ending in its date, like "- the tests need Docker (2025-01-31)".

Rewrite the files so that:
- duplicates and near-duplicates become one bullet (keep the most precise wording and the
  newest date); memories that contradict each other are both kept;
- related memories are grouped under "## Category" headings you choose (short nouns);
- a memory moves to another file only when it plainly belongs there;
- nothing is invented, reworded beyond merging, or dropped unless it duplicates another.

Reply with every file, each starting with a line "=== NAME.md" followed by its whole new
content (its "# Title" line, headings and bullets). Write nothing else: no commentary, no
code fences.]]

function M.prompt(files)
  local parts = { "The memory files:" }
  for _, f in ipairs(files) do
    parts[#parts + 1] = "=== " .. f.kind .. ".md\n" .. f.text:gsub("%s+$", "")
  end
  return table.concat(parts, "\n\n")
end

local function lines(text)
  local out = {}
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do out[#out + 1] = line:gsub("\r$", "") end
  return out
end

--- The model's reply as { {kind=, text=}, ... }, or nil and why it cannot be used.
function M.parse(reply)
  local files, current = {}, nil
  for n, line in ipairs(lines(reply)) do
    local name = line:match("^===%s*([%w_%-%.]+)%.md%s*=*%s*$")
    local fence = line:match("^%s*```") -- a code fence around the whole reply: not content
    if name then
      if not name:match("^[a-z][a-z0-9_-]*$") then
        return nil, ("line %d names %q, not a plain lower-case memory file"):format(n, name .. ".md")
      end
      current = { kind = name, lines = {} }
      files[#files + 1] = current
    elseif current and not fence then
      local ok = line:match("^%s*$") or line:match("^#") or line:match("^%s*[-*]%s") or line:match("^%s+%S")
      if not ok then
        return nil, ("line %d is neither a heading nor a bullet: %s"):format(n, line:sub(1, 80))
      end
      current.lines[#current.lines + 1] = line
    elseif not fence and not line:match("^%s*$") then
      return nil, ("it does not start with a \"=== NAME.md\" line (line %d: %s)"):format(n, line:sub(1, 80))
    end
  end
  if #files == 0 then return nil, "it names no file (\"=== NAME.md\")" end
  local seen = {}
  for _, f in ipairs(files) do
    if seen[f.kind] then return nil, f.kind .. ".md appears twice" end
    seen[f.kind] = true
    while #f.lines > 0 and f.lines[#f.lines]:match("^%s*$") do table.remove(f.lines) end
    while #f.lines > 0 and f.lines[1]:match("^%s*$") do table.remove(f.lines, 1) end
    f.text = table.concat(f.lines, "\n") .. "\n"
    f.lines = nil
  end
  return files
end

local function bullet_texts(text)
  local out = {}
  for _, line in ipairs(lines(text)) do
    local b = line:match("^%s*[-*]%s+(%S.*)$")
    if b then out[#out + 1] = b end
  end
  return out
end

local function bullets(text) return #bullet_texts(text) end

local function words(text)
  local set, n = {}, 0
  for w in text:lower():gmatch("[%a_][%w_]+") do
    if #w >= 3 and not set[w] then set[w], n = true, n + 1 end
  end
  return set, n
end

--- The old memories that no new bullet covers (shares at least half of its words): a
-- reply may merge duplicates, never lose a memory.
function M.lost(old_files, new_files)
  local kept = {}
  for _, f in ipairs(new_files) do
    for _, b in ipairs(bullet_texts(f.text)) do kept[#kept + 1] = words(b) end
  end
  local lost = {}
  for _, f in ipairs(old_files) do
    for _, b in ipairs(bullet_texts(f.text)) do
      local want, n = words(b)
      local found = n == 0
      for _, have in ipairs(kept) do
        local shared = 0
        for w in pairs(want) do if have[w] then shared = shared + 1 end end
        if shared * 2 >= n then found = true break end
      end
      if not found then lost[#lost + 1] = f.kind .. ".md: " .. b end
    end
  end
  return lost
end

local function table_of(entries)
  local rows = {}
  for _, e in ipairs(entries) do
    rows[#rows + 1] = { kind = e.kind, text = e.text, where = e.file .. ":" .. e.line }
  end
  moss.ui.table(rows, { columns = { "kind", "text", "where" } })
end

local function list()
  local all = moss.memory.all()
  if #all == 0 then
    moss.ui.print("no memories in .moss/memory/ (the agent adds them with $(memorize ...))", { style = "dim" })
    return 0
  end
  table_of(all)
  return 0
end

local function search(terms, opts)
  local query = table.concat(terms, " ")
  if query:match("^%s*$") then
    moss.ui.print("search needs words to look for: moss memory search QUERY", { style = "red" })
    return 2
  end
  local found = moss.memory.recall(query, { limit = opts.limit or 10 })
  if #found == 0 then
    moss.ui.print(("no memory shares a word with %q"):format(query), { style = "dim" })
    return 1
  end
  table_of(found)
  return 0
end

local function forget(terms, opts)
  local text = table.concat(terms, " ")
  if text:match("^%s*$") then
    moss.ui.print("forget needs the text to match: moss memory forget TEXT", { style = "red" })
    return 2
  end
  local needle, hits = text:lower(), {}
  for _, e in ipairs(moss.memory.all()) do
    if e.text:lower():find(needle, 1, true) then hits[#hits + 1] = e end
  end
  if #hits == 0 then
    moss.ui.print(("no memory contains %q"):format(text), { style = "yellow" })
    return 1
  end
  if #hits > 1 and not opts.yes then
    moss.ui.print(("%d memories contain %q:"):format(#hits, text))
    for _, e in ipairs(hits) do moss.ui.print(("  %s:%d  %s"):format(e.file, e.line, e.text)) end
    if not moss.ui.interactive() then
      moss.ui.print("nothing forgotten: pass --yes to forget all of them, or narrow TEXT", { style = "yellow" })
      return 3
    end
    if not moss.ui.confirm(("Forget these %d memories?"):format(#hits)) then
      moss.ui.print("nothing forgotten", { style = "dim" })
      return 1
    end
  end
  local n = moss.memory.forget(text)
  moss.ui.print(("forgot %d %s"):format(n, n == 1 and ("memory: " .. hits[1].text) or "memories"))
  return 0
end

-- the diff goes to stdout as it is (print adds one newline; a diff already ends in one)
local function show_diff(text) print((text:gsub("\n$", ""))) end

local function organize(opts)
  local files = moss.memory.files()
  local total = 0
  for _, f in ipairs(files) do total = total + bullets(f.text) end
  if total == 0 then
    moss.ui.print("no memories to organise in .moss/memory/", { style = "dim" })
    return 0
  end
  local size = 0
  for _, f in ipairs(files) do size = size + #f.text end
  local okp, e = pcall(moss.llm.provider) -- which LLM, or why there is none, before anything else
  if not okp then
    moss.error(moss.error_kind(e), (tostring(e.message or e):gsub("^moss%.llm%.provider: ", "")), 0)
  end
  moss.ui.status(("organising %d memories in %d files with the LLM"):format(total, #files))
  moss.ui.live("asking the LLM to organise the memory")
  local ok, resp = pcall(moss.llm.chat, { system = M.SYSTEM, prompt = M.prompt(files),
    max_tokens = math.max(2048, size // 2 + 1024), label = "memory/organize" })
  moss.ui.live_stop()
  if not ok then error(resp, 0) end
  if resp.stop_reason == "max_tokens" then
    moss.ui.print("the model's reply was cut off at its token limit; nothing written", { style = "red" })
    return 1
  end
  local new, why = M.parse(resp.text)
  if not new then
    moss.ui.print("the model's reply cannot be used (" .. why .. "); nothing written", { style = "red" })
    return 1
  end
  -- a file the reply leaves out is kept as it is
  local result = {}
  for _, g in ipairs(new) do result[#result + 1] = g end
  for _, f in ipairs(files) do
    local named = false
    for _, g in ipairs(new) do if g.kind == f.kind then named = true end end
    if not named then result[#result + 1] = f end
  end
  local after = 0
  for _, f in ipairs(result) do after = after + bullets(f.text) end
  local lost = M.lost(files, result)
  if #lost > 0 then
    moss.ui.print(("the model's reply drops %d %s; nothing written:"):format(#lost,
      #lost == 1 and "memory" or "memories"), { style = "red" })
    for _, l in ipairs(lost) do moss.ui.print("  " .. l) end
    return 1
  end
  local changes = {}
  for _, f in ipairs(new) do
    local d = moss.memory.write(f.kind, f.text, { dry_run = true })
    if d.changed then changes[#changes + 1] = { kind = f.kind, text = f.text, diff = d.diff } end
  end
  if #changes == 0 then
    moss.ui.print("the memory is already organised; nothing to write", { style = "dim" })
    return 0
  end
  for _, c in ipairs(changes) do show_diff(c.diff) end
  moss.ui.print(("%d memories → %d, in %d changed %s"):format(total, after, #changes,
    #changes == 1 and "file" or "files"))
  if not opts.yes then
    if not moss.ui.interactive() then
      moss.ui.print("nothing written: run `moss memory organize --yes` to write these changes " ..
        "(or answer on a terminal)", { style = "yellow" })
      return 3
    end
    if not moss.ui.confirm("Write these changes to .moss/memory/?") then
      moss.ui.print("nothing written", { style = "dim" })
      return 1
    end
  end
  for _, c in ipairs(changes) do
    local r = moss.memory.write(c.kind, c.text)
    moss.ui.print("wrote " .. r.file)
  end
  return 0
end

local FLAGS = {
  { "--yes", "-y", type = "flag", key = "yes", help = "do it without asking" },
  { "--limit", type = "number", help = "search: how many memories to show (default 10)" },
  { "-h", "--help", type = "flag", help = "show this help" },
}

function M.main(args)
  local ok, opts, rest = pcall(cli.parse, args, FLAGS)
  if not ok then
    moss.ui.print(tostring(opts.message or opts), { style = "red" })
    return 2
  end
  if opts.help then print(HELP) return 0 end
  local sub = table.remove(rest, 1)
  if sub == "list" then return list()
  elseif sub == "search" then return search(rest, opts)
  elseif sub == "forget" then return forget(rest, opts)
  elseif sub == "organize" or sub == "organise" then return organize(opts)
  end
  moss.ui.print(sub and ("unknown memory command '" .. sub .. "': list, search, forget or organize")
    or "which one? moss memory list | search QUERY | forget TEXT | organize", { style = "red" })
  return 2
end

return { help = HELP, main = M.main, policy = M }

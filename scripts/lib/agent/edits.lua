-- Turning $(edit ...) and $(batch-edit ...) into edit specs, and applying them under the
-- approval policy: risk within --auto-approve goes through; above it, an interactive user
-- is shown the diff and asked; non-interactive sessions refuse and tell the model why.
local parser = require("lib.machine.parser")
local risk = require("lib.agent.risk")

local M = {}

--- How code is written in an edit (shown under $(edit)'s help line in the system prompt).
M.FENCE_HELP = [[
  Put code in a fence, exactly as the file should hold it; nothing inside a fence counts as part of
  the command (quotes, parentheses, backslashes are the code's own):
  $(edit path/Symbol replace ```lang
  <the new code>
  ```)
  When the code itself holds ```, fence it with more backticks (````). --old and --new take fenced
  text too: $(edit path --old ```
  <exact old lines>
  ``` --new ```
  <new lines>
  ```)]]

-- The fenced blocks of `text` (lib/machine/parser.lua's fences): {start, code, closing,
-- stop} each: where its opening run starts, where its code starts, where its closing line
-- starts (nil: never closed, the block runs to the end) and the position just past it.
local function fences(text)
  local out, pos = {}, 1
  while true do
    local j = text:find("[`~]", pos)
    if not j then return out end
    local run, code = parser.fence_open(text, j)
    if run then
      local after, closing = parser.fence_close(text, code, run)
      out[#out + 1] = { start = j, code = code, closing = closing, stop = after or (#text + 1), run = run }
      if not after then return out end
      pos = after
    else
      pos = code
    end
  end
end

-- The code of a closed fenced block: its lines, without the newline ending the last one.
local function code_of(text, f)
  local last = f.closing - 2
  if last >= f.code and text:byte(last) == 13 then last = last - 1 end
  return text:sub(f.code, last)
end

local function line_of(text, pos)
  return select(2, text:sub(1, pos - 1):gsub("\n", "")) + 1
end

-- Content that starts with a fence but is not one fenced block was cut short (a line of the
-- code closed the fence, a `)` after it the command) or is malformed: it is never written; the
-- model is told where, and what would have worked.
local function cut(content, fence, closer)
  local f = parser.shown(fence)
  local last = content:gsub("%s+$", ""):match("([^\n]*)$"):gsub("^%s+", "")
  local where = closer and ("the %s fence that opens it is closed on line %d of the code by a line starting " ..
    "with %s, and more follows (the command ended after line %d: `%s`)"):format(f, line_of(content, closer), f,
    line_of(content, #content), parser.shown(last, 60))
    or ("the code starts with %s but is not a fenced block: a line holding the fence (and a language), the " ..
      "code on the lines below, then a line holding only the fence"):format(f)
  local longer = #fence < 20 and (fence .. fence:sub(1, 1)) or fence:sub(1, 1):rep(4)
  return ("Not applied: %s. Nothing was written. Put the code in a fence longer than any run of %s inside " ..
    "it, closed by a line of its own, then `)`: $(edit PATH replace %sLANG ⏎ <code> ⏎ %s)"):format(
    where, fence:sub(1, 1), longer, longer)
end

-- The content of an edit: a fenced block's code exactly (blank lines around the fence
-- aside), or text in one pair of quotes without them, or the text itself.
local function clean(content)
  local code, fence, closer = parser.unfence(content)
  if code then return code end
  if fence then moss.error("usage", cut(content, fence, closer)) end
  content = content:gsub("^%s*\n", ""):gsub("%s+$", "")
  local q = content:sub(1, 1)
  if (q == '"' or q == "'") and #content >= 2 and content:sub(-1) == q then
    local inner = content:sub(2, -2)
    if not inner:gsub("\\.", ""):find(q, 1, true) then return (inner:gsub("\\" .. q, q)) end
  end
  return content
end

-- Words of `text` as parser.words splits them, except that a fenced block is one word: its
-- code, exactly (so `--old` text with quotes in it needs no escaping).
local function words(text)
  local blocks, parts, pos = {}, {}, 1
  for _, f in ipairs(fences(text)) do
    if not f.closing then
      moss.error("usage", ("the %s fence on line %d is never closed by a line of its own; close it, " ..
        "then go on: --old %s ⏎ <old text> ⏎ %s --new %s ⏎ <new text> ⏎ %s"):format(f.run, line_of(text, f.start),
        f.run, f.run, f.run, f.run))
    end
    blocks[#blocks + 1] = code_of(text, f)
    parts[#parts + 1] = text:sub(pos, f.start - 1) .. " \0" .. #blocks .. "\0 "
    pos = f.stop
  end
  parts[#parts + 1] = text:sub(pos)
  local out = parser.words(table.concat(parts))
  for i, w in ipairs(out) do
    local k = w:match("^%z(%d+)%z$")
    if k then out[i] = blocks[tonumber(k)] end
  end
  return out
end

--- One edit from "TARGET ACTION [ARGS]" text. Raises a usage error describing the forms.
function M.parse_one(text)
  local target, rest = text:match("^%s*(%S+)%s*(.-)%s*$")
  if not target then moss.error("usage", "edit needs a target: $(edit path/Symbol replace <code>)") end
  local action, after = rest:match("^(%S+)%s?(.*)$")
  action = action or ""
  if action == "delete" then
    if after:match("%S") then
      moss.error("usage", "delete takes nothing after it (got '" .. after:sub(1, 40) .. "'); " ..
        "to delete several symbols use $(batch-edit a delete | b delete)")
    end
    return { target = target, action = "delete" }
  elseif action == "replace" or action == "create" or action == "append" or action == "prepend" then
    local content = clean(after)
    if action == "replace" and not content:match("%S") then
      moss.error("usage", "replace needs the new code: $(edit " .. target .. " replace <code>) " ..
        "(to remove it, use delete)")
    end
    return { target = target, action = action, content = content }
  elseif action == "insert" then
    local pos, code = after:match("^%-%-(%a+)%s?(.*)$")
    if pos ~= "before" and pos ~= "after" then
      moss.error("usage", "insert needs --before or --after: $(edit path/Symbol insert --after <code>)")
    end
    return { target = target, action = "insert", position = pos, content = clean(code) }
  elseif action == "--old" then
    local w = words(rest)
    local old, new
    for i = 1, #w do
      if w[i] == "--old" then old = w[i + 1] elseif w[i] == "--new" then new = w[i + 1] end
    end
    if not old or not new then
      moss.error("usage", 'exact-text edit: $(edit path --old "old text" --new "new text")')
    end
    return { target = target, action = "text", old = old, content = new }
  end
  moss.error("usage", "unknown edit action '" .. action .. "'; use delete, replace <code>, " ..
    'insert --before|--after <code>, --old "text" --new "text", create <content>, append <content>')
end

--- "t1 a1 c1 | t2 a2 c2" -> specs (a "|" with spaces around it separates; "||" does not, and
--- neither does one inside a fenced block: match arms, union types).
function M.parse_batch(text)
  local specs, start, from = {}, 1, 1
  local blocks, b = fences(text), 1
  while true do
    local s = text:find("%s|%s", from) -- "||" never matches: its neighbours are not spaces
    if not s then break end
    while blocks[b] and blocks[b].stop <= s + 1 do b = b + 1 end
    local block = blocks[b]
    if block and block.start <= s + 1 then
      from = block.stop -- inside a fence: go on after it
    else
      specs[#specs + 1] = M.parse_one(text:sub(start, s))
      start, from = s + 3, s + 3
    end
  end
  specs[#specs + 1] = M.parse_one(text:sub(start))
  return specs
end

local function summary(result)
  local lines = { "Edited " .. table.concat(result.files, ", ") }
  if result.syntax_warning then lines[#lines + 1] = "WARNING: " .. result.syntax_warning end
  lines[#lines + 1] = result.diff
  return table.concat(lines, "\n")
end

--- The approval gate shared by edits and write-capable shell commands: nil when `level`
-- may go ahead (within --auto-approve, or the user said yes), else the refusal text.
-- `what` names the action for the question ("this edit", "`rm a.py`"), `verb` the
-- refusal ("Not applied", "Not run"); `shown` is printed before asking.
function M.approve(env, level, reason, what, verb, shown)
  local threshold = env.auto_approve or "low"
  if risk.auto_approved(level, threshold) then return nil end
  if env.interactive then
    if shown then moss.ui.print(shown) end
    if moss.ui.confirm(("Allow %s? risk %s: %s"):format(what, level, reason)) then return nil end
    return ("%s: the user declined %s (risk %s: %s)."):format(verb, what, level, reason)
  end
  return ("%s: risk %s (%s) is above --auto-approve %s, and nobody can confirm in " ..
    "non-interactive mode. Make a smaller, lower-risk change, or ask the user to rerun with " ..
    "--auto-approve %s."):format(verb, level, reason, threshold, level)
end

--- Apply specs under the approval policy. Returns (content, ok, refused).
-- env: { interactive, auto_approve = "low"|"medium"|"high", before_write(label), after_write(w) }
function M.perform(specs, env)
  local ok, preview = pcall(moss.edit.preview, specs)
  if not ok then return tostring(preview.message or preview), false, moss.error_kind(preview) == "denied" end
  local level, reason = risk.batch(specs, preview.surfaces) -- judged on what the edit changes
  local refusal = M.approve(env, level, reason, "this edit", "Not applied", preview.diff)
  if refusal then return refusal, false, true end
  local w = env.before_write and env.before_write("edit " .. specs[1].target)
  local ok2, result = pcall(moss.edit.apply, specs)
  local note = w and env.after_write and env.after_write(w)
  if not ok2 then return tostring(result.message or result), false, moss.error_kind(result) == "denied" end
  return summary(result) .. (note and ("\n" .. note) or ""), true
end

return M

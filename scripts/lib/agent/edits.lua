-- Turning $(edit ...) and $(batch-edit ...) into edit specs, and applying them under the
-- approval policy: risk within --auto-approve goes through; above it, an interactive user
-- is shown the diff and asked; non-interactive sessions refuse and tell the model why.
local parser = require("lib.machine.parser")
local risk = require("lib.agent.risk")

local M = {}

-- Strip a surrounding code fence or a single pair of quotes that wraps the whole content.
local function clean(content)
  content = content:gsub("^%s*\n", ""):gsub("%s+$", "")
  local fenced = content:match("^```[%w_+-]*\n(.-)\n?```$")
  if fenced then return fenced end
  local q = content:sub(1, 1)
  if (q == '"' or q == "'") and #content >= 2 and content:sub(-1) == q then
    local inner = content:sub(2, -2)
    if not inner:gsub("\\.", ""):find(q, 1, true) then return (inner:gsub("\\" .. q, q)) end
  end
  return content
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
    local w = parser.words(rest)
    local old, new
    for i = 1, #w do
      if w[i] == "--old" then old = w[i + 1] elseif w[i] == "--new" then new = w[i + 1] end
    end
    if not old or not new then moss.error("usage", 'exact-text edit: $(edit path --old "old text" --new "new text")') end
    return { target = target, action = "text", old = old, content = new }
  end
  moss.error("usage", "unknown edit action '" .. action .. "'; use delete, replace <code>, " ..
    'insert --before|--after <code>, --old "text" --new "text", create <content>, append <content>')
end

--- "t1 a1 c1 | t2 a2 c2" -> specs (a "|" with spaces around it separates; "||" does not).
function M.parse_batch(text)
  local specs, start, from = {}, 1, 1
  while true do
    local s = text:find("%s|%s", from) -- "||" never matches: its neighbours are not spaces
    if not s then break end
    -- inside a ``` fence the "|" is code (match arms, union types), not a separator
    local _, fences = text:sub(start, s):gsub("```", "")
    if fences % 2 == 0 then
      specs[#specs + 1] = M.parse_one(text:sub(start, s))
      start = s + 3
    end
    from = s + 3
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
  local level, reason = risk.batch(specs)
  local ok, preview = pcall(moss.edit.preview, specs)
  if not ok then return tostring(preview.message or preview), false, moss.error_kind(preview) == "denied" end
  local refusal = M.approve(env, level, reason, "this edit", "Not applied", preview.diff)
  if refusal then return refusal, false, true end
  local w = env.before_write and env.before_write("edit " .. specs[1].target)
  local ok2, result = pcall(moss.edit.apply, specs)
  local note = w and env.after_write and env.after_write(w)
  if not ok2 then return tostring(result.message or result), false, moss.error_kind(result) == "denied" end
  return summary(result) .. (note and ("\n" .. note) or ""), true
end

return M

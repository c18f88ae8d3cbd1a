-- The $(...) command grammar.
--
--   $(view src/main.rs)            name = "view", args = "src/main.rs"
--   $(text-search "fn (main|run)") nested parentheses and quotes are fine
--   $(note it's in \"llm.rs\")      backslash escapes a quote or a parenthesis
--   $(done 13)  $(done ANSWER) 13  the second form takes the rest of the line
--
-- Code goes in a fence, which is opaque: between an opening fence (a run of 3 or more ` or
-- ~ after whitespace or at a line's start, an optional info string, the end of the line) and
-- the first line that starts with a run of the same character at least as long (optional
-- indentation before it; a letter after it makes it an opening fence of the code's own, not
-- a close), nothing counts as a parenthesis or a quote. After the closing run, counting goes
-- on, so "```)" ends the command:
--
--   $(edit a.py replace ```python
--   print(f'{x}) it's')
--   ```)
--
-- In a command whose arguments are shell text (M.heredoc_commands: `run`), a heredoc's body
-- is opaque too: from the line after `<<EOF` (`<<'EOF'`, `<<"EOF"`, `<<-EOF`) to the first
-- line holding only EOF (tabs before it allowed after `<<-`; a `)` may follow it). Outside
-- fences and heredocs the rules above are all there is.
--
-- An unclosed $( is dropped with everything after it (models get cut off mid-command); the
-- second value of M.parse says so, and M.describe words it for the model. Commands inside
-- the reply's own code fences count: models often wrap them in ``` and mean them all the same.
local M = {}

--- Commands whose arguments are shell text, where a heredoc's body is opaque.
M.heredoc_commands = { run = true }

local BS, DQ, SQ, LP, RP, BT, TL, LT, NL = 92, 34, 39, 40, 41, 96, 126, 60, 10
-- what the scan of a command stops at: everything else is skipped with one string.find
local PLAIN, SHELL = "[\\\"'()`~]", "[\\\"'()`~<\n]"
local IN_QUOTE = { [DQ] = '[\\"]', [SQ] = "[\\']" }
local RUN_END = { [BT] = "[^`]", [TL] = "[^~]" }

-- Position of the next unescaped quote `q` (a byte) after `j`, or nil.
local function closing_quote(text, j, q)
  local cls = IN_QUOTE[q]
  j = j + 1
  while true do
    j = text:find(cls, j)
    if not j then return nil end
    if text:byte(j) ~= BS then return j end
    j = j + 2
  end
end

local function space_before(text, j)
  local b = text:byte(j - 1)
  return b == nil or b == 32 or b == 9 or b == NL or b == 13 or b == 11 or b == 12
end

--- A fence opening at `j` (where a ` or ~ is): (its run, e.g. "````", the position where
--- its code starts) or (nil, the position just past the run of that character).
function M.fence_open(text, j)
  local stop = text:find(RUN_END[text:byte(j)], j) or (#text + 1)
  if stop - j < 3 or not space_before(text, j) then return nil, stop end
  local code = text:match("^[^%s`()]*[ \t\r]*\n()", stop)
  if not code then return nil, stop end
  return text:sub(j, stop - 1), code
end

--- Where the fence `run` whose code starts at `code` closes: (the position just past the
--- closing run, the start of the closing line), or nil when no line closes it.
function M.fence_close(text, code, run)
  local pat, from, rest = "\n[ \t]*" .. run, code - 1, RUN_END[run:byte(1)]
  while true do
    local p, q = text:find(pat, from)
    if not p then return nil end
    local after = text:find(rest, q + 1) or (#text + 1)
    if not text:find("^[%w_{]", after) then return after, p + 1 end
    from = after
  end
end

-- A heredoc operator at `j` (a "<" in shell text): (its delimiter, whether tabs may precede
-- the closing line, the position after it), or nil when "<<" is not one (`<<<`, `1 << 3`).
local function heredoc_op(text, j)
  if text:byte(j + 1) ~= LT or text:byte(j + 2) == LT or text:byte(j - 1) == LT then return nil end
  -- the word as sh takes it: bare, quoted ('EOF', "EOF") or escaped (\EOF, POSIX's other quoting)
  local dash, bs, q, word, after = text:match("^<<(%-?)[ \t]*(\\?)([\"']?)([%w_][%w_.%-]*)%3()", j)
  if not word or (q == "" and bs == "" and word:find("^%d")) then return nil end
  return word, dash == "-", after
end

-- The end of a heredoc body that starts after the newline at `nl`: the position just past
-- the delimiter on its closing line, or nil.
local function heredoc_close(text, nl, word, tabs)
  local pat = "\n" .. (tabs and "\t*" or "") .. (word:gsub("%p", "%%%0"))
  local from = nl
  while true do
    local p, q = text:find(pat, from)
    if not p then return nil end
    local k = text:find("[^ \t\r]", q + 1)
    if not k or text:byte(k) == NL or text:byte(k) == RP then return q + 1 end
    from = q + 1
  end
end

-- `after` of a command: the rest of its line, made when the field is first read (so pairs()
-- and moss.json.encode do not see it before). Made for every command, it would copy the rest
-- of a long one-line reply once per command: quadratic in time and memory.
local reply_of = setmetatable({}, { __mode = "k" }) -- command -> the text it was found in
local lazy_after = {
  __index = function(c, k)
    if k ~= "after" then return nil end
    local text, j = reply_of[c], c.last
    local nl = text:find("\n", j + 1, true)
    local after = text:sub(j + 1, (nl or (#text + 1)) - 1)
    rawset(c, "after", after)
    return after
  end,
}

--- Find every $(...) in `text`. Returns a list of {name, args, raw, line, after, first, last}:
--- `raw` is text:sub(first, last) (byte offsets), `after` the rest of its line; and a list of
--- problems (empty, or one: the command left open, which was dropped with everything after
--- it) as {kind = "unclosed"|"fence"|"heredoc", first, line, head, at_line, what} (see
--- M.describe). Linear in the text: a reply of 50,000 commands costs no more per command
--- than one of five, and a megabyte of fences or heredoc markers no more than of prose.
function M.parse(text)
  local cmds, problems = {}, {}
  local i, n = 1, #text
  local line, nl_next = 1, text:find("\n", 1, true) or (n + 1) -- lines counted up to nl_next
  local next_cmd = 0 -- position of the next "$(" after the current character (0: look it up)

  -- the line of `pos` (positions asked for only grow)
  local function line_at(pos)
    while nl_next < pos do
      line = line + 1
      nl_next = text:find("\n", nl_next + 1, true) or (n + 1)
    end
    return line
  end

  -- The closing ")" of the command whose "$(" is at `s`; or nil, what kept it open, where.
  local function scan(s)
    local depth, j, quote, pending = 1, s + 2, nil, nil
    local name = text:match("^%s*([%w_%-]+)", s + 2)
    local stops = (name and M.heredoc_commands[name:lower()]) and SHELL or PLAIN
    while true do
      j = text:find(quote and IN_QUOTE[quote] or stops, j)
      if not j then
        if pending then return nil, "heredoc", pending[1].at, pending[1].word end
        return nil, "unclosed", s
      end
      local b = text:byte(j)
      if b == BS then
        j = j + 2 -- skip the escaped character
      elseif quote then
        if b == quote then quote = nil end
        j = j + 1
      elseif b == DQ or b == SQ then
        -- an apostrophe inside a word (it's, don't) is not a quote
        if b == DQ or not (text:sub(j - 1, j - 1):match("%w") and text:sub(j + 1, j + 1):match("%w")) then
          -- a quote opens only if it closes before the next command starts (so the
          -- stray " in `5" screen` or the ' in `tests' output` stays literal)
          local close = closing_quote(text, j, b)
          if next_cmd ~= false and next_cmd <= j then next_cmd = text:find("$(", j + 1, true) or false end
          if close and (not next_cmd or close < next_cmd) then quote = b end
        end
        j = j + 1
      elseif b == LP then
        depth, j = depth + 1, j + 1
      elseif b == RP then
        depth = depth - 1
        if depth == 0 then return j end
        j = j + 1
      elseif b == BT or b == TL then
        local run, code = M.fence_open(text, j)
        if run then
          local after = M.fence_close(text, code, run)
          if not after then return nil, "fence", j, run end
          j = after
        else
          j = code
        end
      elseif b == LT then
        local word, tabs, after
        if depth == 1 then word, tabs, after = heredoc_op(text, j) end
        if word then
          pending = pending or {}
          pending[#pending + 1] = { word = word, tabs = tabs, at = j }
          j = after
        else
          j = j + 1
        end
      elseif pending then -- the end of a line that opened heredocs: their bodies follow
        for _, h in ipairs(pending) do
          local after = heredoc_close(text, j, h.word, h.tabs)
          if not after then return nil, "heredoc", h.at, h.word end
          j = after
        end
        pending = nil
      else
        j = j + 1
      end
    end
  end

  while i <= n do
    local s = text:find("$(", i, true)
    if not s then break end
    local j, kind, at, what = scan(s)
    if not j then -- unclosed: drop it and everything after, and say so
      local eol = text:find("\n", s, true) or (n + 1)
      local head = M.clip(text:sub(s, math.min(eol - 1, s + 80)), 80)
      if eol - s > #head then head = head .. "…" end
      local l = line_at(s)
      problems[1] = { kind = kind, first = s, line = l, head = head, at_line = line_at(at), what = what }
      break
    end
    local body = text:sub(s + 2, j - 1)
    local cname, args = body:match("^%s*([%w_%-]+)%s*(.-)%s*$")
    if cname then
      local c = setmetatable({ name = cname:lower(), args = args, raw = "$(" .. body .. ")", line = line_at(s),
        first = s, last = j }, lazy_after)
      reply_of[c] = text
      cmds[#cmds + 1] = c
    end
    i = j + 1
  end
  return cmds, problems
end

--- The first `max` bytes of `s`, or fewer: never half a UTF-8 character.
function M.clip(s, max)
  if #s <= max then return s end
  while max > 0 and (s:byte(max + 1) or 0) & 0xC0 == 0x80 do max = max - 1 end
  return s:sub(1, max)
end

--- `s` for a message: cut to `max` bytes (20), the rest counted.
function M.shown(s, max)
  local head = M.clip(s, max or 20)
  if #head == #s then return s end
  return head .. ("… (%d more bytes)"):format(#s - #head)
end

--- What the model is told about a problem of M.parse: which command, where it ended, and the
--- form that would have worked.
function M.describe(p)
  local where = ("`%s` (line %d of your reply)"):format(p.head, p.line)
  local why, fix
  local what = p.what and M.shown(p.what)
  if p.kind == "fence" then
    why = ("the %s fence it opens on line %d is never closed"):format(what, p.at_line)
    fix = ("end the code with a line holding only %s, then `)`. Code that holds a line starting with %s " ..
      "goes in a longer fence (%s)"):format(what, what, M.shown(p.what .. p.what:sub(1, 1)))
  elseif p.kind == "heredoc" then
    why = ("the heredoc <<%s it opens on line %d never ends"):format(what, p.at_line)
    fix = ("end it with a line holding only %s, then `)`"):format(what)
  else
    why = "no `)` closes it (its parentheses and quotes do not balance, or the reply was cut off)"
    fix = "close each command with `)`, and put code in a fence, inside which nothing counts: " ..
      "$(edit PATH replace ```LANG ⏎ <code> ⏎ ```)"
  end
  return ("Not run: %s and everything after it in your reply: %s. Instead, %s."):format(where, why, fix)
end

--- The code of the fenced block that makes up the whole of `text` (whitespace around it
--- aside): (the code: its lines exactly, each with its newline; its fence). Nil when `text`
--- does not start with a run of 3 or more ` or ~; (nil, that run, where the first line that
--- closes it starts or nil) when it is not one fenced block: no newline after the opening
--- line, no line closing it, or text after the first line that does (a fence in the code as
--- long as the one around it, or a command that ended early).
function M.unfence(text)
  local open = text:match("^%s*()[`~]")
  if not open then return nil end
  local run, code = M.fence_open(text, open)
  if not run then
    local stop = code
    return nil, (stop - open >= 3) and text:sub(open, stop - 1) or nil, nil
  end
  local after, closer = M.fence_close(text, code, run)
  if after and not text:find("%S", after) then return text:sub(code, closer - 1), run end
  return nil, run, closer
end

--- Split an argument string like a shell would: quotes group words. A backslash escapes
-- only a quote, a backslash or whitespace (and nothing inside single quotes), so regexes
-- such as "fn\s+main" or "eval\(" keep their backslashes.
function M.words(s)
  local out, cur, quote, i, had = {}, {}, nil, 1, false
  while i <= #s do
    local c = s:sub(i, i)
    local nxt = s:sub(i + 1, i + 1)
    if c == "\\" and quote ~= "'" and nxt ~= "" and (nxt == '"' or nxt == "'" or nxt == "\\" or
        (not quote and nxt:match("%s"))) then
      cur[#cur + 1] = nxt
      i = i + 1
      had = true
    elseif quote then
      if c == quote then quote = nil else cur[#cur + 1] = c end
    elseif c == '"' or c == "'" then
      quote, had = c, true
    elseif c:match("%s") then
      if #cur > 0 or had then out[#out + 1] = table.concat(cur) end
      cur, had = {}, false
    else
      cur[#cur + 1] = c
    end
    i = i + 1
  end
  if #cur > 0 or had then out[#out + 1] = table.concat(cur) end
  return out
end

--- Remove one layer of matching quotes around free text ("note", "answer").
function M.unquote(s)
  s = s or ""
  local q = s:sub(1, 1)
  if (q == '"' or q == "'") and #s >= 2 and s:sub(-1) == q then
    local inner = s:sub(2, -2)
    -- only when the quotes wrap the whole text: `"parse" is called from "main"` stays
    if not inner:gsub("\\.", ""):find(q, 1, true) then s = inner end
  end
  return (s:gsub("\\([\"'()\\])", "%1"))
end

--- The text of a response with its commands taken out (for feedback shown to other states).
function M.strip(text)
  local out, last = {}, 1
  for _, c in ipairs(M.parse(text)) do
    -- by position: the same raw text may also sit, earlier, inside a $(...) that is no command
    out[#out + 1] = text:sub(last, c.first - 1)
    last = c.last + 1
  end
  out[#out + 1] = text:sub(last)
  return (table.concat(out):gsub("\n%s*\n%s*\n+", "\n\n"):gsub("^%s+", ""):gsub("%s+$", ""))
end

return M

-- The $(...) command grammar.
--
--   $(view src/main.rs)            name = "view", args = "src/main.rs"
--   $(text-search "fn (main|run)") nested parentheses and quotes are fine
--   $(note it's in \"llm.rs\")      backslash escapes a quote or a parenthesis
--   $(done 13)  $(done ANSWER) 13  the second form takes the rest of the line
--
-- An unclosed $( is dropped (models get cut off mid-command). Commands inside code fences
-- count: models often wrap them in ``` and mean them all the same.
local M = {}

-- Position of the next unescaped `q` after `j`, or nil.
local function closing_quote(text, j, q)
  local n = #text
  j = j + 1
  while j <= n do
    local c = text:sub(j, j)
    if c == "\\" then j = j + 1 elseif c == q then return j end
    j = j + 1
  end
  return nil
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
--- `raw` is text:sub(first, last) (byte offsets), `after` the rest of its line. Linear in
--- the text: a reply of 50,000 commands costs no more per command than one of five.
function M.parse(text)
  local cmds = {}
  local i, n = 1, #text
  local line, counted = 1, 0 -- newlines in text:sub(1, counted)
  local next_cmd = 0 -- position of the next "$(" after the current character (0: look it up)
  while i <= n do
    local s = text:find("$(", i, true)
    if not s then break end
    local depth, j, quote = 1, s + 2, nil
    while j <= n do
      local c = text:sub(j, j)
      if c == "\\" then
        j = j + 1 -- skip the escaped character
      elseif quote then
        if c == quote then quote = nil end
      elseif c == '"' or c == "'" then
        -- an apostrophe inside a word (it's, don't) is not a quote
        local prev, nxt = text:sub(j - 1, j - 1), text:sub(j + 1, j + 1)
        if c == '"' or not (prev:match("%w") and nxt:match("%w")) then
          -- a quote opens only if it closes before the next command starts (so the
          -- stray " in `5" screen` or the ' in `tests' output` stays literal)
          local close = closing_quote(text, j, c)
          if next_cmd ~= false and next_cmd <= j then next_cmd = text:find("$(", j + 1, true) or false end
          if close and (not next_cmd or close < next_cmd) then quote = c end
        end
      elseif c == "(" then
        depth = depth + 1
      elseif c == ")" then
        depth = depth - 1
        if depth == 0 then break end
      end
      j = j + 1
    end
    if depth ~= 0 then break end -- unclosed: drop it and everything after
    local body = text:sub(s + 2, j - 1)
    local name, args = body:match("^%s*([%w_%-]+)%s*(.-)%s*$")
    if name then
      for _ in text:sub(counted + 1, s):gmatch("\n") do line = line + 1 end
      counted = s
      local c = setmetatable({ name = name:lower(), args = args, raw = "$(" .. body .. ")", line = line,
        first = s, last = j }, lazy_after)
      reply_of[c] = text
      cmds[#cmds + 1] = c
    end
    i = j + 1
  end
  return cmds
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

-- Echoes: a reply that copies moss's own words back instead of answering.
--
-- Small models often repeat their system prompt; its examples then read as commands, and a
-- placeholder such as `$(answer ...)` would conclude with the answer "...". The runner knows
-- which text of each request moss wrote itself (the system prompt with its command
-- reference, a state's footer, "Messages from moss", the headings around results, a
-- forced-answer request: whatever a user's Lua makes of them) and hands it here as `own`,
-- a list of strings. The test is structural, never about wording:
--
--   a command is a COPY when moss's own text holds the same command: the same name and the
--   same arguments, spacing aside (`$(answer...)` copies `$(answer ...)`);
--   a copy is an ECHO when its argument is placeholder-shaped (see `placeholder`), or when
--   the reply reproduces a long stretch of moss's text (`span_chars` characters in a row
--   of consecutive lines that each occur in it).
--
-- Echoed commands are not run (and an echoed conclusion is not an answer). A reply whose
-- commands are all echoes is a turn without progress: `loop_limit` of them in a row end the
-- session as `loop` (lib/machine/commands.lua). A command the model writes for real runs
-- even when the prompt shows the same text as an example: `$(view src/main.rs)` has no
-- placeholder.
local parser = require("lib.machine.parser")

local M = {}

M.span_chars = 160 -- characters of moss's text, line after line, that make a reply an echo

local function trim(s) return (s:gsub("^%s+", ""):gsub("%s+$", "")) end

--- Whether an argument is a placeholder rather than a value: an ellipsis ("...", "…"), an
-- <angle-bracketed> slot, or only upper-case words (N, ID, TEXT, YOUR ANSWER).
function M.placeholder(args)
  local a = parser.unquote(trim(args or ""))
  if a:find("...", 1, true) or a:find("…", 1, true) or a:find("<[^<>]+>") then return true end
  local words = 0
  for w in a:gmatch("%S+") do
    if w:find("%l") or not w:find("%u") then return false end
    words = words + 1
  end
  return words > 0
end

local function occurs(own, text)
  for _, o in ipairs(own) do
    if o:find(text, 1, true) then return true end
  end
  return false
end

--- The longest run of characters the reply copies from moss's text: consecutive non-blank
-- lines (trimmed) that each occur in it; blank lines neither count nor break a run.
function M.longest_span(text, own)
  local best, run = 0, 0
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    local t = trim(line)
    if t ~= "" then
      if occurs(own, t) then
        run = run + #t
        if run > best then best = run end
      else
        run = 0
      end
    end
  end
  return best
end

-- "name args" with the arguments' spacing collapsed: the same command, however spaced.
local function key(c) return c.name .. " " .. trim((c.args:gsub("%s+", " "))) end

-- The commands in moss's own text, as a set of keys. The system prompt is the same string
-- turn after turn: its set is kept.
local memo = { text = nil, keys = nil }
local function own_commands(own)
  local keys = {}
  for _, o in ipairs(own) do
    local set = memo.text == o and memo.keys
    if not set then
      set = {}
      for _, c in ipairs(parser.parse(o)) do set[key(c)] = true end
      if #o > 1000 then memo.text, memo.keys = o, set end
    end
    for k in pairs(set) do keys[k] = true end
  end
  return keys
end

--- Which commands of a reply are echoes: a set of the parsed commands (by identity), and
-- whether every command of the reply is one (false for a reply without commands).
function M.check(text, cmds, own)
  local echoes, n = {}, 0
  if not own or #own == 0 or #cmds == 0 then return echoes, false end
  local copies = own_commands(own)
  local long = nil -- worked out only when a copy needs it
  for _, c in ipairs(cmds) do
    if copies[key(c)] then
      if M.placeholder(c.args) then
        echoes[c], n = true, n + 1
      else
        if long == nil then long = M.longest_span(text, own) >= M.span_chars end
        if long then echoes[c], n = true, n + 1 end
      end
    end
  end
  return echoes, n == #cmds
end

--- moss's own text of a request: the system prompt, the state's footer, moss's messages
-- to the model, the headings it writes around results, and `extra` (what the runner
-- appended, e.g. a forced-answer request).
function M.own_text(request, state, S, extra)
  local own = {}
  if type(request.system) == "string" and request.system ~= "" then own[#own + 1] = request.system end
  if type(state.footer) == "string" and state.footer ~= "" then own[#own + 1] = state.footer end
  local block = require("lib.machine.messages").block(S)
  if block then own[#own + 1] = block end
  for _, s in ipairs(require("lib.machine.context").framing) do own[#own + 1] = s end
  if extra then own[#own + 1] = extra end
  return own
end

return M

-- How a session is shown: text (answer on stdout, progress on stderr), json (one object at
-- the end) or stream-json (one JSON event per line, for IDEs and CI).
local M = {}

-- The version of the stream-json event schema (docs/events.md); session_start carries it.
M.SCHEMA = 1

-- The command line that goes on with a saved session, for the hints after a session ("go
-- on: ...", "Resume with: ..."); the script that runs sessions sets it (scripts/agent.lua:
-- "moss @agent --resume"). Without it, no such hint is printed.
M.RESUME = nil

-- Why a session ended, and the exit status each reason maps to under the contract: 0
-- answered, 1 ended without an answer, 3 blocked (needs the user). A machine adds its own
-- reasons as MACHINE.reasons = { name = { text = "...", exit = 0|1|3 } }.
local REASONS = {
  answered = { text = "answered", exit = 0 },
  max_turns = { text = "stopped at the turn limit without an answer", exit = 1 },
  loop = { text = "stopped: the agent kept repeating the same command", exit = 1 },
  cycle_limit = { text = "stopped: several turns brought no new evidence", exit = 1 },
  budget = { text = "stopped: the LLM budget is spent", exit = 1 },
  blocked = { text = "blocked: the agent needs an answer from you", exit = 3 },
  checkpoint = { text = "saved a checkpoint and stopped", exit = 1 },
  stopped = { text = "stopped, as you asked", exit = 3 },
  paused = { text = "paused, as you asked", exit = 3 },
  error = { text = "stopped on an error", exit = 1 },
  cancelled = { text = "cancelled by its parent agent", exit = 1 },
  -- an answer on a tree whose validation fails, from a session that changed nothing (the
  -- answer is kept and shown; it is not a success)
  unvalidated = { text = "answered, but validation fails on the project as it is", exit = 1 },
}
M.REASONS = REASONS

--- { text, exit } for a finish reason, the machine's own reasons first.
function M.reason(name, machine)
  local r = (machine and machine.reasons or {})[name] or REASONS[name]
  if not r then return { text = tostring(name), exit = 1 } end
  if r.exit ~= 0 and r.exit ~= 1 and r.exit ~= 3 then
    moss.error("usage", "finish reason '" .. tostring(name) .. "' maps to exit " .. tostring(r.exit) ..
      "; a machine's reasons exit 0 (answered), 1 (no answer) or 3 (blocked)")
  end
  return r
end

local function result(S)
  return {
    answer = S.answer == nil and moss.json.null or S.answer, success = S.success or false, reason = S.reason,
    turns = S.turn,
    session_id = S.id, usage = S.usage, role = S.role, machine = S.machine,
    forced = S.forced or nil, detail = S.detail, progress = S.progress, questions = S.questions,
    validation = S.validation, -- the last validation run: passed, step, command, exit, output_tail, ...
  }
end
M.result = result

local function one_line(s, n)
  s = (s or ""):gsub("%s+", " ")
  if #s > n then s = s:sub(1, n - 1) .. "…" end
  return s
end

-- text ------------------------------------------------------------------------------
local Text = {}
Text.__index = Text

-- On a terminal: a live status line while the model is asked (moss.ui.live: spinner,
-- seconds, tokens streamed), the model's own text set apart once it lands, and a closing
-- line with turns, tokens, cost and the commands to inspect or go on. Elsewhere (a pipe,
-- NO_COLOR) plain progress lines only; stdout carries the answer and nothing else.
local function provider_label(self)
  if self.provider_label == nil then
    local ok, p = pcall(moss.llm.provider)
    self.provider_label = ok and ((p.model or "?") .. " (" .. p.name .. ")") or false
  end
  return self.provider_label or nil
end

function Text:turn(S)
  moss.ui.status(("Turn %d/%d (%s)"):format(S.turn, S.max_turns, S.state))
  local who = provider_label(self)
  moss.ui.live("waiting for " .. (S.role and (S.role .. "/") or "") .. S.state .. (who and (" · " .. who) or ""))
end

M.SHOWN_LINES = 30 -- of a reply, on a terminal

--- A reply as the terminal shows it when the answer goes to the same terminal (stdout too):
--- its $(answer ...) is shown as "$(answer …)", since the answer itself is rendered below once
--- the session ends with it (so it is not read twice). A pipe on stdout keeps the reply whole.
function M.reply_shown(text)
  if not text:find("$(", 1, true) or not moss.ui.is_terminal("stdout") then return text end
  local out, pos = {}, 1
  for _, c in ipairs(require("lib.machine.parser").parse(text)) do
    if c.name == "answer" or c.name == "done" then
      out[#out + 1] = text:sub(pos, c.first - 1) .. "$(" .. c.name .. " …)"
      pos = c.last + 1
      local a = c.args:gsub("^[\"']", ""):gsub("[\"']$", "")
      if a == "" or a == "ANSWER" then -- the answer follows the command on its line
        local eol = text:find("\n", pos, true)
        pos = eol or (#text + 1)
      end
    end
  end
  out[#out + 1] = text:sub(pos)
  return table.concat(out)
end

function Text:llm(S, _state, text)
  if moss.ui.live_stop() then
    text = M.reply_shown(text or "")
    -- the status line counted the reply instead of printing it: show it now, set apart
    -- from moss's own lines by a gutter
    local lines = {}
    for line in ((text or ""):gsub("%s+$", "") .. "\n"):gmatch("([^\n]*)\n") do lines[#lines + 1] = line end
    local n = #lines
    if n > M.SHOWN_LINES then lines = { table.unpack(lines, 1, M.SHOWN_LINES) } end
    moss.ui.markdown(table.concat(lines, "\n"), { gutter = "  │ " }) -- rendered, wrapped after the gutter
    if n > M.SHOWN_LINES then
      moss.ui.print(("  │ … %d more lines (moss sessions show %s has them all)"):format(n - M.SHOWN_LINES, S.id),
        { style = "dim" })
    end
  end
  -- elsewhere, --verbose has the host stream the reply to stderr as it comes: it is shown
end

function Text:command(_S, out)
  local line = "  " .. (out.ok and "✓ " or "✗ ") .. one_line(out.cmd, 100)
  -- a refused command says why (risk and level, or the access level), as the model is told
  if out.refused and out.content then line = line .. " — " .. one_line(out.content, 160) end
  moss.ui.status(line)
end

local function thousands(n)
  local s = tostring(math.floor(n))
  while true do
    local t, k = s:gsub("^(%d+)(%d%d%d)", "%1,%2")
    s = t
    if k == 0 then return s end
  end
end

--- The closing line on a terminal: what the session cost and how to look at it again.
function M.closing(S, machine)
  if not moss.ui.is_terminal() then return end
  local u = S.usage or {}
  local tokens = (u.input_tokens or 0) + (u.output_tokens or 0) + (u.cache_read_tokens or 0)
    + (u.cache_write_tokens or 0)
  local cost = (u.cost_known == false or type(u.cost_usd) ~= "number") and "cost unknown"
    or ("$%.4f"):format(u.cost_usd)
  moss.ui.print(("%s · %d turn%s · %s tokens · %s · session %s"):format(M.reason(S.reason, machine).text, S.turn,
    S.turn == 1 and "" or "s", thousands(tokens), cost, S.id), { style = "dim" })
  moss.ui.print(("inspect: moss sessions show %s"):format(S.id) ..
    (M.RESUME and (" · go on: %s %s \"...\""):format(M.RESUME, S.id) or ""), { style = "dim" })
end

function Text:finish(S)
  moss.ui.live_stop()
  -- the answer on stdout: markdown rendered when a terminal shows it, else exactly as written
  if S.reason == "answered" then
    moss.ui.markdown(S.answer, { stdout = true })
    M.closing(S, self.machine)
    return
  end
  if S.reason == "unvalidated" and S.answer then moss.ui.markdown(S.answer, { stdout = true }) end
  moss.ui.print(M.reason(S.reason, self.machine).text, { style = "yellow" })
  if S.detail then moss.ui.print(tostring(S.detail), { style = "dim" }) end
  if S.questions and S.questions ~= "" then moss.ui.print("Open questions: " .. S.questions) end
  if M.RESUME then moss.ui.print("Resume with: " .. M.RESUME .. " " .. S.id, { style = "dim" }) end
  M.closing(S, self.machine)
end

function Text:info(text) moss.ui.print(text, { style = "dim" }) end

-- What the user said while the agent worked: acknowledged at once, with how it was read.
local ACK = { stop = "will stop after this step", pause = "will pause after this step",
  resume = "going on", related = "noted for the task: the agent sees it from its next turn",
  unrelated = "not about the task: answered apart" }
function Text:input(_S, rec, class)
  if rec.acked then -- the terminal said "got it" when it was typed: say only what it means
    moss.ui.print("  ↳ " .. (ACK[class] or class), { style = "cyan" })
    return
  end
  moss.ui.print(("› got it (%s): %s — %s"):format(class, one_line(rec.text or rec.action or "", 60),
    ACK[class] or class), { style = "cyan" })
end
function Text:aside(_S, question, answer)
  moss.ui.print("── aside: " .. one_line(question, 80), { style = "bold cyan" })
  moss.ui.print(answer)
  moss.ui.print("──", { style = "bold cyan" })
end

-- json --------------------------------------------------------------------------------
local Json = setmetatable({}, { __index = Text })
Json.__index = Json
function Json:turn() end
function Json:command() end
function Json:llm() end
function Json:info() end
function Json:input() end
function Json:aside() end
function Json:finish(S) print(moss.json.encode(result(S), { sort_keys = true })) end

-- stream-json -----------------------------------------------------------------------
local Stream = setmetatable({}, { __index = Json })
Stream.__index = Stream
function Stream:turn(S)
  moss.ui.event { type = "turn", turn = S.turn, max_turns = S.max_turns, state = S.state, session_id = S.id }
end
function Stream:llm(S, _state, text)
  moss.ui.event { type = "assistant", turn = S.turn, state = S.state, text = text }
end
function Stream:command(S, out)
  moss.ui.event { type = "command", turn = S.turn, cmd = out.cmd, ok = out.ok, refused = out.refused,
    output = out.content }
end
function Stream:info(text) moss.ui.event { type = "info", text = text } end
function Stream:input(S, rec, class)
  moss.ui.event { type = "input_received", session_id = S.id, turn = S.turn, id = rec.id, source = rec.source,
    text = rec.text, action = rec.action, class = class }
end
function Stream:aside(S, question, answer)
  moss.ui.event { type = "aside", session_id = S.id, question = question, answer = answer }
end
function Stream:start(S)
  moss.ui.event { type = "session_start", schema = M.SCHEMA, session_id = S.id, task = S.task, machine = S.machine,
    role = S.role, resumed = S.turn > 0, turn = S.turn }
end
function Stream:finish(S)
  local r = result(S)
  r.type = self.stage and "stage_result" or "result"
  moss.ui.event(r)
end

--- A session that could not start or stopped on an error before a result (json formats).
local function failure(err)
  return { answer = moss.json.null, success = false, reason = "error", error_kind = moss.error_kind(err),
    detail = tostring(err.message or err) }
end
function Text:failed() moss.ui.live_stop() end
function Json:failed(err) print(moss.json.encode(failure(err), { sort_keys = true })) end
function Stream:failed(err)
  local r = failure(err)
  r.type = "result"
  moss.ui.event(r)
end

-- quiet: a pipeline stage in text/json mode (progress only; the pipeline reports at the end)
local Quiet = setmetatable({}, { __index = Text })
Quiet.__index = Quiet
function Quiet:finish() moss.ui.live_stop() end

-- child: a child agent's progress goes to the host (live panel; stream-json events with
-- the child's id), never to stdout directly; its result goes back to its parent as data
local Child = setmetatable({}, { __index = Text })
Child.__index = Child
function Child:start(S)
  moss.agents.progress { type = "session_start", turn = S.turn, state = S.state, role = S.role, task = S.task }
end
function Child:turn(S) moss.agents.progress { type = "turn", turn = S.turn, state = S.state } end
function Child:llm(S, _state, text)
  moss.agents.progress { type = "assistant", turn = S.turn, state = S.state, text = text }
end
function Child:command(S, out)
  moss.agents.progress { type = "command", turn = S.turn, cmd = out.cmd, ok = out.ok, refused = out.refused }
end
function Child:info() end
function Child:finish(S)
  local r = result(S)
  r.type = "result"
  moss.agents.progress(r)
end
function Child:failed() end

--- Combined result of a role pipeline: every stage's answer, in order.
local function pipeline_result(stages, n)
  local parts, steps = {}, {}
  for _, S in ipairs(stages) do
    if S.answer then parts[#parts + 1] = "## " .. S.role .. "\n\n" .. S.answer end
    steps[#steps + 1] = { role = S.role, answer = S.answer, reason = S.reason, turns = S.turn, session_id = S.id,
      questions = S.questions, progress = S.progress }
  end
  local last = stages[#stages]
  local ok = #stages == n and last.reason == "answered"
  local usage = moss.llm.usage()
  return {
    answer = table.concat(parts, "\n\n"), success = ok, reason = last.reason, steps = steps,
    turns = (function() local t = 0 for _, S in ipairs(stages) do t = t + S.turn end return t end)(),
    session_id = last.id, usage = usage,
  }
end

function Text:pipeline(stages, n)
  local r = pipeline_result(stages, n)
  local last = stages[#stages]
  local closing = { reason = r.reason, turn = r.turns, usage = r.usage, id = last.id }
  if r.success then
    moss.ui.markdown(r.answer, { stdout = true })
    M.closing(closing, self.machine)
  else
    if r.answer ~= "" then moss.ui.print(r.answer) end
    moss.ui.print("pipeline stopped at " .. last.role .. ": " .. M.reason(r.reason, self.machine).text,
      { style = "yellow" })
    if last.questions and last.questions ~= "" then moss.ui.print("Open questions: " .. last.questions) end
    if M.RESUME then
      moss.ui.print("Resume that step with: " .. M.RESUME .. " " .. last.id ..
        " (the steps after it are not resumed; rerun the pipeline for them)", { style = "dim" })
    end
    M.closing(closing, self.machine)
  end
  return r.reason
end

function Json:pipeline(stages, n)
  local r = pipeline_result(stages, n)
  print(moss.json.encode(r, { sort_keys = true }))
  return r.reason
end

function Stream:pipeline(stages, n)
  local r = pipeline_result(stages, n)
  r.type = "result"
  moss.ui.event(r)
  return r.reason
end

function M.new(format, opts)
  local cls = ({ text = Text, json = Json, ["stream-json"] = Stream, quiet = Quiet, child = Child })[format or "text"]
  if not cls then moss.error("usage", "--output-format must be text, json or stream-json") end
  return setmetatable({ verbose = opts and opts.verbose, stage = opts and opts.stage }, cls)
end

return M

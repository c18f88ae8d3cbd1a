-- What the user says while the agent works (the terminal, `moss say`, stream-json, MCP):
-- acknowledged at once, classified, and acted on.
--
-- (A line typed on the terminal was already acknowledged by the host when Enter was pressed,
-- `rec.acked`; this says what it was read as.)
--
--   stop / abort  -> the turn ends at the next safe point, checkpoint, reason "stopped"
--   pause / wait  -> same, then: on a terminal, wait for "go on"; otherwise reason "paused"
--   related       -> joins the task's context from the next turn ("The user adds: ...")
--   unrelated     -> answered briefly by a separate call, printed apart, never in context
--
-- Obvious phrasings are matched by keywords; anything else gets a cheap LLM classification,
-- with a word-overlap fallback when that fails (as role dispatch does).
local M = {}

M.PHRASES = {
  stop = { "stop", "abort", "cancel", "halt", "quit", "stop it", "stop now", "stop that", "abort that",
    "that's enough", "enough" },
  pause = { "pause", "wait", "hold on", "hold", "one moment", "one sec", "just a moment", "wait a moment",
    "wait a second", "hang on", "pause for now" },
  resume = { "go on", "continue", "resume", "carry on", "proceed", "go ahead", "keep going", "ok go on" },
}

local function normal(text)
  return " " .. text:lower():gsub("[%p]", " "):gsub("%s+", " "):gsub("^ ", ""):gsub(" $", "") .. " "
end

--- "stop" | "pause" | "resume" for an obvious short command, else nil.
function M.by_keywords(text)
  local t = normal(text):gsub("^ please ", " "):gsub(" please $", " ")
  for _, class in ipairs({ "stop", "pause", "resume" }) do
    for _, p in ipairs(M.PHRASES[class]) do
      if t == " " .. p .. " " then return class end
    end
  end
  return nil
end

local function words(text)
  local out = {}
  for w in text:lower():gmatch("[%w_]+") do if #w >= 4 then out[w] = true end end
  return out
end

--- "related" | "unrelated" without a model: shares a word with the task, or is not a question.
function M.by_overlap(task, text)
  local tw = words(task)
  for w in pairs(words(text)) do if tw[w] then return "related" end end
  return text:match("%?%s*$") and "unrelated" or "related"
end

--- One of stop, pause, resume, related, unrelated, and how it was decided.
function M.classify(S, rec)
  if rec.type == "control" then
    local a = rec.action
    return (a == "stop" or a == "pause" or a == "resume") and a or "related", "control message"
  end
  local k = M.by_keywords(rec.text or "")
  if k then return k, "keyword" end
  local ok, resp = pcall(moss.llm.chat, {
    label = (S.role or "agent") .. "/inbox", quiet = true,
    system = "A coding agent is working on a task. Its user sent a message. Reply with one word: " ..
      "STOP (the user wants it to stop), PAUSE (to wait), RELATED (information or a request about " ..
      "the task) or UNRELATED (a question about something else).",
    prompt = "Task: " .. S.task .. "\n\nMessage: " .. rec.text,
    max_tokens = 5,
  })
  local word = ok and resp.text and resp.text:upper():match("%a+") or nil
  local map = { STOP = "stop", PAUSE = "pause", RELATED = "related", UNRELATED = "unrelated" }
  if map[word or ""] then return map[word], "classifier" end
  return M.by_overlap(S.task, rec.text or ""), "word overlap"
end

local function log(S, event, data) moss.session.log(S.id, event, data or {}) end

local function aside(S, env, rec)
  local ok, resp = pcall(moss.llm.chat, {
    label = (S.role or "agent") .. "/aside", quiet = true,
    system = "Answer the user's question briefly (a few sentences). You are an assistant beside a " ..
      "coding agent; the question is not about its task.",
    prompt = rec.text, max_tokens = 400,
  })
  local answer = ok and resp.text or ("(could not answer: " .. tostring(resp.message or resp) .. ")")
  log(S, "aside", { id = rec.id, question = rec.text, answer = answer })
  if env.out and env.out.aside then env.out:aside(S, rec.text, answer) end
end

--- Handle new inbox records; "interrupt" when the agent should stop waiting now.
function M.handle(S, env, records)
  local interrupt = nil
  for _, rec in ipairs(records) do
    local class, how = M.classify(S, rec)
    log(S, "input_received", { id = rec.id, source = rec.source, text = rec.text, action = rec.action,
      class = class, how = how, turn = S.turn })
    if env.out and env.out.input then env.out:input(S, rec, class) end
    if class == "stop" then
      S.user_stop, interrupt = rec.text or rec.action, "interrupt"
    elseif class == "pause" then
      S.user_pause, interrupt = true, "interrupt"
    elseif class == "resume" then
      S.user_pause = nil
    elseif class == "unrelated" then
      aside(S, env, rec)
    else
      S.user_adds = S.user_adds or {}
      S.user_adds[#S.user_adds + 1] = rec.text
    end
  end
  return interrupt
end

local function read_new(S, env)
  local r = moss.inbox.read()
  S.inbox_offset = r.offset
  if #r.records > 0 then return M.handle(S, env, r.records) end
end

--- Before each turn: act on what arrived; a finish reason ("stopped", "paused") or nil.
function M.before_turn(S, env)
  read_new(S, env)
  if S.user_stop then
    S.questions = "You stopped the session (" .. tostring(S.user_stop) .. "). Resume it with a message."
    S.user_stop = nil
    return "stopped"
  end
  if S.user_pause then
    if not env.interactive then
      S.questions = "Paused on your request. Resume it with a message."
      S.user_pause = nil
      return "paused"
    end
    log(S, "paused", { turn = S.turn })
    moss.ui.print("paused: type 'go on' to continue (or a message for the agent, or 'stop')", { style = "yellow" })
    while S.user_pause do
      local line = moss.ui.ask("paused", { timeout = 1, silent = true })
      if line and line:match("%S") then
        M.handle(S, env, { { id = "terminal", type = "user", text = line, source = "terminal", acked = true } })
        if not S.user_stop and S.user_pause then
          -- anything but "stop" or another "wait" goes on (what it said is already handled)
          if M.by_keywords(line) ~= "pause" then S.user_pause = nil end
        end
      end
      read_new(S, env)
      if S.user_stop then return M.before_turn(S, env) end
    end
    log(S, "resumed", { turn = S.turn })
  end
  return nil
end

--- Start listening for this session: its inbox, and the handler the host calls while it waits.
function M.setup(S, env, opts)
  local info = moss.inbox.open(S.id, { offset = S.inbox_offset or 0, task = S.task,
    terminal = not opts or opts.terminal ~= false })
  moss.inbox.watch(function(records, offset)
    S.inbox_offset = offset
    return M.handle(S, env, records)
  end)
  env.before_turn = function() return M.before_turn(S, env) end
  local terminal = false
  for _, c in ipairs(info.channels or {}) do if c == "terminal" then terminal = true end end
  return { terminal = terminal, channels = info.channels }
end

return M

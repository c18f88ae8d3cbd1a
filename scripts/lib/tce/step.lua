-- One tce cycle after the model replied: the original's core.c, as a runner `handle`.
--
--   <action> present  -> dispatch it; ok -> evaluating, failed (unknown type, bad tags,
--                        missing value) -> thinking. The `answer` action ends the session.
--   no action, state evaluating -> paging if working memory is over the limit, else
--                        <next_state> if valid, else thinking
--   no action, other states     -> <next_state> if valid, else thinking
-- A <next_state> that is not thinking|commanding|evaluating falls back to thinking and is
-- recorded twice: working memory `state_transition_invalid` and a command_log entry. A
-- missing <next_state> means thinking (as the original's parser defaulted it).
-- <think_log> and <evaluation_log> are stored (rotating) whenever a reply has them.
-- Every action attempt, success or failure, is written to command_log as
-- "Action: <type>, Tags: <tags>, Result: <message>".
local parse = require("lib.tce.parse")
local config = require("lib.tce.config")
local memory = require("lib.tce.memory")
local logs = require("lib.tce.logs")
local actions = require("lib.tce.actions")
local paging = require("lib.tce.paging")
local commands = require("lib.machine.commands") -- the answer gate, shared with the $(...) grammar
local finish = require("lib.machine.finish") -- how a session ends

local M = {}

--- States a model may ask for with <next_state> (paging is entered only by moss).
M.VALID = { thinking = true, commanding = true, evaluating = true }

local function log(S, event, data)
  if S.log ~= false then moss.session.log(S.id, event, data or {}) end
end

local function one_line(s, n)
  s = tostring(s or ""):gsub("%s+", " ")
  if #s > n then s = s:sub(1, n - 3) .. "..." end
  return s
end

--- Write one command_log entry; returns the output record the runner keeps.
function M.command_log(S, cfg, env, kind, tagtext, message, ok)
  logs.add(S.tce.wm, cfg.command_log, ("Action: %s, Tags: %s, Result: %s"):format(kind, tagtext or "", message))
  local out = { cmd = kind .. (tagtext and tagtext ~= "" and (" " .. tagtext) or ""), ok = ok, content = message }
  log(S, "command", { cmd = out.cmd, ok = ok, output = message, turn = S.turn, state = S.state })
  if env and env.out then env.out:command(S, out) end
  return out
end

-- Messages from moss added while handling (e.g. a refused answer) are for whichever state
-- comes next.
local forward_messages = require("lib.machine.messages").forward

local function transition(S, cfg, env, r, outputs)
  local want = r.next_state
  if want == nil or want == "" then return "thinking", "default" end
  if M.VALID[want] then
    S.tce.wm.state_transition_invalid = nil
    return want, "next_state"
  end
  local msg = ("Invalid next_state '%s' (valid: thinking, commanding, evaluating); went to thinking"):format(
    one_line(want, 64))
  S.tce.wm.state_transition_invalid = msg
  outputs[#outputs + 1] = M.command_log(S, cfg, env, "state_transition", want, msg, false)
  log(S, "state_transition_invalid", { requested = want, turn = S.turn })
  return "thinking", "invalid"
end

--- The `handle` of the thinking, commanding and evaluating states.
function M.handle(S, _state, text, env)
  memory.init(S)
  local cfg = config.get()
  local wm = S.tce.wm
  local r = parse.parse(text)
  local outputs = {}
  if r.think_log then logs.add(wm, cfg.think_log, r.think_log) end
  if r.evaluation_log then logs.add(wm, cfg.evaluation_log, r.evaluation_log) end

  local nxt, why
  if r.action then
    local a = r.action
    local res = actions.dispatch(S, a, { cfg = cfg, env = env })
    if res.ok and res.answer then
      local gate = commands.gate(env)
      if gate then
        log(S, "command", { cmd = "answer", ok = true, turn = S.turn, state = S.state })
        finish.now(gate == true and "answered" or gate, res.answer)
      end
      res = { ok = false, message = "answer not accepted yet (see the messages)" }
      log(S, "answer_rejected", { answer = a.value, turn = S.turn })
    end
    outputs[#outputs + 1] = M.command_log(S, cfg, env, a.type ~= "" and a.type or "(none)", a.tags, res.message, res.ok)
    if res.ok then nxt, why = "evaluating", "action" else nxt, why = "thinking", "action_failed" end
  elseif S.state == "evaluating" then
    local need, est = paging.required(wm, cfg)
    if need then
      nxt, why = "paging", ("~%d tokens >= %d"):format(est, cfg.paging_limit.max_tokens)
    else
      nxt, why = transition(S, cfg, env, r, outputs)
    end
  else
    nxt, why = transition(S, cfg, env, r, outputs)
  end
  log(S, "transition", { from = S.state, to = nxt, why = why, turn = S.turn, tokens = memory.estimate(wm) })
  forward_messages(S, nxt)
  return { outputs = outputs, next_state = nxt }
end

--- The `handle` of the paging state: archive, replace with the summary, back to thinking.
function M.handle_paging(S, _state, text, env)
  memory.init(S)
  local cfg = config.get()
  local r = parse.parse(text)
  local plan = S.tce.page_plan or paging.plan(S.tce.wm, cfg)
  S.tce.page_plan = nil
  local outputs = {}
  if #plan > 0 then
    local summary = r.summary or parse.trim(text or "")
    if summary == "" then summary = "(no summary given)" end
    if #summary > parse.LIMITS.summary then summary = summary:sub(1, parse.LIMITS.summary - 3) .. "..." end
    local res = paging.apply(S, cfg, plan, summary)
    local states = {}
    for _, p in ipairs(plan) do states[#states + 1] = p.state end
    outputs[#outputs + 1] = M.command_log(S, cfg, env, "paging", "archive," .. table.concat(states, "+"),
      ("archived %d entries to storage (%s); working memory ~%d -> ~%d tokens"):format(
        res.archived, table.concat(res.keys, "; "), res.before, res.after), true)
    log(S, "paging",
      { archived = res.archived, keys = res.keys, before = res.before, after = res.after, turn = S.turn })
  end
  log(S, "transition", { from = S.state, to = "thinking", why = "paged", turn = S.turn,
    tokens = memory.estimate(S.tce.wm) })
  forward_messages(S, "thinking")
  return { outputs = outputs, next_state = "thinking" }
end

return M

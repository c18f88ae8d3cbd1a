-- Automatic continuation: a session goes on when its context fills.
--
-- Before each LLM call the runner asks `due(S, request, env)`: does the request (system
-- prompt and messages, estimated at 4 characters a token) take more than
-- [agent] compact_at (default 0.8) of the model's context window? The window is
-- moss.llm.provider().context_window: [llm] context_window, else the known window of the
-- model, else unknown (then nothing is compacted). When it does, `run` has the LLM summarise
-- the progress (one call, labelled ROLE/compact) and the summary replaces the working memory
-- (notes and kept results), the history and the last results as one note; the runner logs
-- `compacted`, checkpoints, and rebuilds the request.
--
-- A machine whose state lives elsewhere (its own memory structures) sets `compact = false`
-- in its MACHINE table, or `[agent] compact_at = false` turns this off everywhere.
local memory = require("lib.machine.memory")
local context = require("lib.machine.context")

local M = {}

M.SYSTEM = [[You are compacting the working context of a coding agent whose context window is
nearly full. Below is everything the agent was about to see: its task, its notes, the
results it kept and the latest command outputs. Write the summary it will continue from
instead; the original will be gone.

Keep: the task's goal and any constraints; what has been found so far, with exact file
paths, line numbers, symbol names, numbers and short code excerpts that an answer will
need; what was tried and failed; what is still open and the next step. Drop: raw output
that no longer matters, repetition, commentary. Plain text or short bullets, no commands.]]

--- Characters of a request: its system prompt and the text of its messages.
function M.chars(request)
  local n = #(request.system or "")
  for _, m in ipairs(request.messages or {}) do n = n + #context.text(m.content) end
  return n
end

-- The share of the window, from [agent] compact_at: a number in (0, 1], or false for never.
local function share()
  local v = (moss.config.agent or {}).compact_at
  if v == nil then return 0.8 end
  if v == false then return nil end
  if type(v) ~= "number" or v <= 0 or v > 1 then
    moss.error("config", "[agent] compact_at must be a share of the context window between 0 and 1 " ..
      "(e.g. 0.8), or false to never compact; got " .. tostring(v), 0)
  end
  return v
end

--- The most characters a request may have before it is compacted (nil: no limit known).
function M.limit(env)
  if env.compact_limit == nil then
    local s = share()
    local ok, p = pcall(moss.llm.provider)
    if ok and s and math.type(p.context_window) == "integer" then
      env.compact_limit = math.floor(p.context_window * s * 4) -- ~4 characters a token
    else
      if not ok and moss.error_kind(p) == "config" then error(p, 0) end -- e.g. a bad [llm] context_window
      env.compact_limit = false
    end
  end
  return env.compact_limit or nil
end

-- Characters of what compaction can replace.
local function compactable(S)
  local n = memory.size(S.mem)
  for _, o in ipairs(S.last_outputs or {}) do n = n + #(o.content or "") end
  for _, o in ipairs(S.mem.pending or {}) do n = n + #(o.content or "") end
  for _, h in ipairs(S.history or {}) do
    for _, o in ipairs(h.outputs or {}) do n = n + #(o.content or "") end
  end
  return n
end

--- Whether this request should be compacted first.
function M.due(S, request, env, machine)
  if (machine and machine.compact == false) or S.compacted_turn == S.turn then return false end
  local limit = M.limit(env)
  return limit ~= nil and M.chars(request) > limit and compactable(S) > 0
end

-- What the summariser reads: the request's text, its middle cut when it alone is too long
-- (the task is at the head, the newest results at the tail).
function M.prompt(S, request, limit)
  local text = context.text(request.messages[#request.messages].content)
  local max = math.max((limit or #text) - #M.SYSTEM - 200, 2000)
  if #text > max then
    local half = max // 2
    text = text:sub(1, half) .. ("\n\n[... %d characters cut ...]\n\n"):format(#text - 2 * half) .. text:sub(-half)
  end
  return "Session so far (turn " .. S.turn .. ", state " .. tostring(S.state) .. "):\n\n" .. text
end

--- Summarise and replace; answers { chars_before, summary_chars } or nil and the error.
function M.run(S, _state, env, request)
  S.compacted_turn = S.turn -- at most once per turn, whatever happens
  local before = M.chars(request)
  local ok, resp = pcall(moss.llm.chat, {
    system = M.SYSTEM, prompt = M.prompt(S, request, M.limit(env)),
    max_tokens = env.compact_max_tokens or 2048,
    label = (S.role and (S.role .. "/") or "") .. "compact",
  })
  if not ok then return nil, resp end
  local summary = (resp.text or ""):gsub("^%s+", ""):gsub("%s+$", "")
  if summary == "" then return nil, "the summary came back empty" end
  S.mem.items = {}
  memory.note(S.mem, ("Summary of the session up to turn %d (the context was compacted; earlier notes, kept " ..
    "results and outputs are in it):\n%s"):format(S.turn, summary), S.turn)
  S.history, S.last_outputs, S.mem.pending = {}, {}, {}
  context.forget(S)
  S.compactions = (S.compactions or 0) + 1
  return { chars_before = before, summary_chars = #summary }
end

--- The runner's compaction step, before a turn's call: when `request` is due, summarise,
-- log `compacted`, checkpoint (as the end of the turn before, so a resume redoes this turn
-- from the compacted context) and return { request, user } rebuilt by `rebuild()`. Returns
-- nil when nothing was done; (nil, err) when the user stopped it meanwhile.
function M.step(S, state, env, request, rebuild, save)
  if not M.due(S, request, env, env.machine) then return nil end
  local done, err = M.run(S, state, env, request)
  if not done then
    local kind = moss.error_kind(err)
    if kind == "interrupted" then error(err, 0) end
    if kind == "stopped" then return nil, err end -- the user spoke meanwhile: as for the turn's own call
    moss.session.log(S.id, "compact_failed", { turn = S.turn, error = tostring(err) })
    return nil
  end
  local new_request, user = rebuild()
  done.turn, done.state, done.chars_after = S.turn, S.state, M.chars(new_request)
  moss.session.log(S.id, "compacted", done)
  if env.out and env.out.info then
    env.out:info(("context compacted: %d → %d characters"):format(done.chars_before, done.chars_after))
  end
  S.turn = S.turn - 1
  save()
  S.turn = S.turn + 1
  return { new_request, user }
end

return M

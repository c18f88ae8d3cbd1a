-- The Wild Loop's optional LLM judge: an alert source that reads a running run's recent log
-- and decides whether a person (the loop's model) should look at it now.
--
--   [agent.wild] judge = true            -- defaults below
--   [agent.wild.judge]                    -- or a table:
--   every_s = 60        -- at most one judgement per run this often
--   max_calls = 20      -- at most this many judge calls per sweep
--   chars = 3000        -- how much of the log it reads
--   model = "..."       -- another model for the judge (default: the session's)
--
-- Policy lives here (when to ask, what to ask, what counts as an alert); the mechanism is
-- moss.llm.chat and moss.runs.alert (which de-duplicates an alert already pending). Each call
-- is labelled "wild/judge" (the X-Moss-Label header). A failed call (budget, network) is
-- noted once and the judge rests for the rest of the sweep.
local P = require("lib.wild.prompts")

local M = {}

M.DEFAULTS = { every_s = 60, max_calls = 20, chars = 3000 }

--- The judge's settings, or nil when it is off.
function M.settings(cfg)
  local j = cfg.judge
  if j == nil or j == false then return nil end
  local out = {}
  for k, v in pairs(M.DEFAULTS) do out[k] = v end
  if type(j) == "table" then
    for k, v in pairs(j) do out[k] = v end
  end
  return out
end

--- Parse the judge's answer: nil (no alert) or {severity=, message=}.
function M.parse(text)
  for line in (text or ""):gmatch("[^\n]+") do
    local sev, msg = line:match("^%s*%**ALERT%**%s*%(?(%a*)%)?%s*:%s*(.-)%s*$")
    if sev then
      sev = sev:lower()
      if sev ~= "info" and sev ~= "warning" and sev ~= "critical" then sev = "warning" end
      if msg == "" then msg = "the judge flagged this run" end
      return { severity = sev, message = msg }
    end
    if line:match("^%s*%**OK%**") then return nil end
  end
  return nil
end

--- Look at the sweep's running runs; raise alerts the judge asks for. Returns the number of
-- seconds until it wants to look again (nil when it is off or has nothing to watch).
function M.tick(S, W, view, note)
  local cfg = M.settings(require("lib.wild.loop").config())
  if not cfg or not W.sweep then return nil end
  local J = W.judge
  if not J or J.sweep ~= W.sweep.name .. "#" .. tostring(W.iteration) then
    J = { sweep = W.sweep.name .. "#" .. tostring(W.iteration), calls = 0, runs = moss.dict() }
    W.judge = J
  end
  if J.off or J.calls >= cfg.max_calls then return nil end
  local now = os.time()
  local soonest = nil
  for _, r in ipairs(view.runs) do
    if r.status == "running" then
      local seen = J.runs[r.id] or { at = -math.huge }
      local wait = seen.at + cfg.every_s - now
      if wait > 0 then
        soonest = math.min(soonest or wait, wait)
      else
        local tail = moss.runs.log_tail(r.id, cfg.chars)
        local last = tail:sub(-200)  -- only a log that changed since the last look is judged
        if last ~= seen.last and tail:match("%S") then
          if J.calls >= cfg.max_calls then break end
          J.calls = J.calls + 1
          local ok, res = pcall(moss.llm.chat, { system = P.JUDGE_SYSTEM, prompt = P.judge(S, W, r, tail),
            label = "wild/judge", max_tokens = 200, model = cfg.model })
          J.runs[r.id] = { at = now, last = last }
          if not ok then
            J.off = true
            local why = type(res) == "table" and res.message or res
            note(("the LLM judge is off for this sweep: %s"):format(tostring(why)))
            return nil
          end
          local verdict = M.parse(res.text)
          moss.session.log(S.id, "wild_judge", { run = r.id, alert = verdict ~= nil, turn = S.turn,
            text = res.text and res.text:sub(1, 300) })
          if verdict then
            pcall(moss.runs.alert, r.id, { severity = verdict.severity, message = "judge: " .. verdict.message,
              source = "judge" })
          end
        end
        soonest = math.min(soonest or cfg.every_s, math.max(cfg.every_s, 1))
      end
    end
  end
  return soonest
end

return M

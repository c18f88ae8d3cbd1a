-- The Wild Loop: an autonomous research loop, EXPLORING -> RUNNING -> ANALYZING.
--
--   moss @agent --machine wild "get the validation loss under 2.0"
--
-- EXPLORING: the model studies the project ($(view) etc.) until it writes a <sweep>; each
-- reply without one re-prompts (a Ralph loop). The sweep's grid becomes background runs
-- (moss.runs). RUNNING: one event per turn (an alert, or a run that finished or failed),
-- alerts first; <resolve_alert> answers an alert. ANALYZING: only once every run is
-- terminal and no alert is pending; <promise>COMPLETE</promise> ends answered (exit 0),
-- NEEDS_HUMAN ends blocked (exit 3, resumable), CONTINUE goes back to EXPLORING.
-- Promises count in every stage. Limits: --max-turns, [agent.wild] max_time_s.
-- See docs/wild-loop.md.
local loop = require("lib.wild.loop")

-- Runs write files, so the loop needs edit (runs under bubblewrap with the project
-- writable) or, when full access is allowed, full; [agent.wild] access decides explicitly.
-- The ray executor runs each command as a Ray job on the cluster, outside moss's sandbox:
-- it needs full, and says so before anything starts.
local function access()
  local cfg = loop.config()
  local agent = moss.config.agent or {}
  local full_ok = (moss.options or {}).allow_full or agent.allow_full
  local ex = loop.executor()
  if ex ~= "local" and ex ~= "ray" then
    moss.error("config", ('[agent.wild] executor must be "local" or "ray", not %q'):format(tostring(ex)), 0)
  end
  if ex == "ray" then
    if not full_ok or (cfg.access and cfg.access ~= "full") then
      moss.error("denied", "[agent.wild] executor = \"ray\" runs every command as a Ray job on the cluster, " ..
        "outside moss's sandbox, so the Wild Loop needs full access: pass --allow-full (or set " ..
        "[agent] allow_full = true in your user config)", 0)
    end
    return "full"
  end
  if cfg.access then return cfg.access end
  if full_ok then return "full" end
  return "edit"
end

local states = {
  exploring = {
    context = loop.exploring_context,
    commands = { "tools", "note", "answer" }, -- $(answer) is noted, not obeyed: COMPLETE ends the loop
    concludes = false,
    handle = loop.handle,
    next = loop.next,
  },
  running = { context = loop.running_context, commands = {}, handle = loop.handle, next = loop.next },
  analyzing = { context = loop.analyzing_context, commands = {}, handle = loop.handle, next = loop.next },
}
for _, st in pairs(states) do st.prompt = loop.system(st) end

return {
  name = "wild",
  start = "exploring",
  max_turns = 50,
  access = access(),
  uses = {}, -- not the coding agent: $(run), $(edit), $(spawn) (lib/agent) are not offered
  states = states,
  reasons = {
    max_time = { text = "stopped: the Wild Loop's time limit ([agent.wild] max_time_s) passed", exit = 1 },
  },
}

-- V1: the freeform loop. One agent explores and concludes; results are shown once unless
-- kept with $(keep), so the context holds what the agent chose to remember.
local planner = require("lib.machine.planner")

return {
  name = "v1",
  start = "agent",
  max_turns = 15,
  uses = { "agent" }, -- the coding agent's commands ($(run), $(edit), ...) are offered
  states = {
    planner = planner("agent"),
    agent = {
      role_prompt = "agent",
      prompts_of = "v1",
      context = "working_memory",
      show_plan = true,
      commands = { "tools", "note", "keep", "drop", "forget", "memorize", "answer", "ask", "wait", "checkpoint" },
      concludes = true,
      next = "agent",
      -- (the new results' heading already says they are shown once and how to keep one)
      footer = "Note what you learn ($(note ...)), run more commands, or $(answer ...) with the evidence.",
    },
  },
}

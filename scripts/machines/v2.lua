-- V2: explorer -> evaluator -> explorer ... Only the evaluator concludes; it never runs commands.
-- The explorer sees only the last outputs (tactical); the evaluator sees working memory and
-- the numbered new results (strategic) and decides what to keep.
local planner = require("lib.machine.planner")

return {
  name = "v2",
  start = "explorer",
  max_turns = 16,
  max_stale = 5, -- evaluator turns without new evidence before a forced answer
  states = {
    planner = planner("explorer"),
    explorer = {
      role_prompt = "explorer",
      context = "last_outputs",
      commands = { "tools", "note", "ask", "wait", "checkpoint" },
      concludes = false,
      next = "evaluator",
      footer = "Suggest the next commands. Do not answer: the evaluator decides when we know enough.",
    },
    evaluator = {
      role_prompt = "evaluator",
      context = "working_memory",
      commands = { "note", "keep", "drop", "forget", "memorize", "answer", "wait", "checkpoint" },
      concludes = true,
      judges = true,
      feedback_to = "explorer",
      next = "explorer",
      footer = "Keep what matters ($(keep N)), note findings ($(note ...)), then $(answer ...) " ..
        "or say exactly what is still missing.",
    },
  },
}

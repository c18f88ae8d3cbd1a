-- V2: explorer -> evaluator -> explorer ... Only the evaluator concludes; it never runs commands.
-- The explorer sees only the last outputs (tactical); the evaluator sees working memory and
-- the numbered new results (strategic) and decides what to keep.
return {
  name = "v2",
  start = "explorer",
  max_turns = 16,
  max_stale = 5, -- evaluator turns without new evidence before a forced answer
  states = {
    planner = {
      role_prompt = "planner",
      context = "task_only",
      commands = {},
      next = "explorer",
      on_response = function(S, text) S.plan = require("lib.agent.parser").strip(text) end,
      footer = "Write a short plan (2-4 concrete steps). Do not run commands.",
    },
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

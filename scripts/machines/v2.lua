-- V2: explorer -> evaluator -> explorer ... Only the evaluator concludes; it never runs commands.
-- The evaluator sees working memory and the numbered new results (strategic) and decides
-- what to keep; the explorer then sees exactly what the evaluator saw, plus its remarks
-- (tactical: the results of its own last commands are there). Both states share one system
-- prompt and one prompt prefix, so each result is billed in full once and read back from
-- the provider's cache by the other state.
-- Its words (the evaluator's remarks, the shared prefix) live in lib/v2/context.lua; it
-- uses the coding agent (lib/agent), so commands that need it ($(run), $(edit), ...) are
-- offered to its states.
local planner = require("lib.machine.planner")
local context = require("lib.v2.context")

return {
  name = "v2",
  start = "explorer",
  max_turns = 16,
  max_stale = 5, -- evaluator turns without new evidence before a forced answer
  uses = { "agent" },
  shared_system = { "explorer", "evaluator" },
  states = {
    planner = planner("explorer"),
    explorer = {
      role_prompt = "explorer",
      context = context.explorer,
      history = false, -- its view never shows earlier turns' outputs
      prompts_of = "v2",
      commands = { "tools", "note", "ask", "wait", "checkpoint" },
      concludes = false,
      next = "evaluator",
      footer = "**You are the EXPLORER now.** Suggest the next commands. Do not answer: the " ..
        "evaluator decides when we know enough.",
    },
    evaluator = {
      role_prompt = "evaluator",
      context = context.evaluator,
      history = false,
      prompts_of = "v2",
      commands = { "note", "keep", "drop", "forget", "memorize", "answer", "wait", "checkpoint" },
      concludes = true,
      judges = true,
      feedback_to = "explorer",
      next = "explorer",
      footer = "**You are the EVALUATOR now.** Keep what matters ($(keep N)), note findings " ..
        "($(note ...)), then $(answer ...) or say exactly what is still missing.",
    },
  },
}

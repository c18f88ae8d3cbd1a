-- What V2's two states see (machines/v2.lua), built from the kernel's context parts
-- (lib/machine/context.lua). Both states share one system prompt and one prompt prefix:
--
--   evaluator  the working memory layout (task, plan, notes and kept results), with the
--              numbered new results behind a cache breakpoint of their own (`shown`)
--   explorer   exactly what the evaluator was shown last turn, byte for byte, then the
--              evaluator's remarks: its call reads the evaluator's prompt from the
--              provider's cache, so each result is billed in full once
--
-- What the explorer continues from is kept in the session's scratch table (not in the
-- checkpoint): after a resume, or when the task changed since (the user added to it), or
-- after a compaction, the same layout is built afresh, which costs one cache miss.
local context = require("lib.machine.context")

local M = {}

local join, parts = context.join, context.parts

local function remarks(S)
  if not S.feedback or S.feedback == "" then return nil end
  return "**Evaluator's remarks:**\n" .. S.feedback
end

local function key(S) return join(context.task_block(S), context.plan_part(S)) end

--- The evaluator: working memory and the new results, remembered for the explorer.
function M.evaluator(S, state)
  local pending = S.mem.pending
  local results = #pending > 0 and context.outputs_block(context.NEW_RESULTS, pending) or nil
  local head = parts(context.task_block(S), context.plan_part(S))
  local stable = parts(head, context.settled_memory(S, "v2", table.concat(head, "\n\n"), context.memory_parts(S)))
  context.scratch(S).v2_prefix = { turn = S.turn, key = key(S), stable = stable, shown = results }
  return {
    stable = stable,
    shown = results,
    volatile = join(
      context.messages_block(S),
      context.any_failed(pending) and context.FAILED_WARNING or nil,
      state.footer
    ),
  }
end

--- The explorer: what the evaluator saw last turn, then its remarks. Before the first
-- evaluation (or when that view is stale) the same layout, built from the session.
function M.explorer(S, state)
  local p = context.scratch(S).v2_prefix
  local stable, shown
  if p and p.turn == S.turn - 1 and p.key == key(S) then
    stable, shown = p.stable, p.shown
  else
    local head = parts(context.task_block(S), context.plan_part(S))
    stable = parts(head, context.settled_memory(S, "v2", table.concat(head, "\n\n"), context.memory_parts(S)))
    shown = #S.last_outputs > 0 and context.outputs_block(context.NEW_RESULTS, S.last_outputs) or nil
  end
  return {
    stable = stable,
    shown = shown,
    volatile = join(
      remarks(S),
      context.messages_block(S),
      context.any_failed(S.last_outputs) and context.FAILED_HINT or nil,
      state.footer
    ),
  }
end

-- a project machine written when this was a kernel mode may still name it
context.modes.after_evaluator = M.explorer

return M

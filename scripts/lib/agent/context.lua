-- What each state sees. A state names a context mode; the mode is a function from the
-- session to the text of the single user message (every LLM call is stateless: the
-- context is rebuilt from the session each turn, so it stays bounded by what is kept).
--
--   task_only       the task (and the role's answer format)
--   last_outputs    task, plan, notes, the evaluator's remarks, the last tool outputs
--   all_outputs     task, notes, every output of the session grouped by turn (unbounded)
--   working_memory  task, notes, kept items, and the numbered new results (shown once)
--
-- Add a mode by assigning `require("lib.agent.context").modes.my_mode = function(S, state) ... end`.
local memory = require("lib.agent.memory")

local M = {}

local function fence(content)
  local ticks = "```"
  while content:find(ticks, 1, true) do ticks = ticks .. "`" end
  return ticks .. "\n" .. content:gsub("\n$", "") .. "\n" .. ticks
end
M.fence = fence

local function output_block(label, out)
  local status = out.ok and "" or (out.refused and " (REFUSED)" or " (FAILED)")
  return label .. " `" .. out.cmd .. "`" .. status .. "\n" .. fence(out.content or "")
end

local function task_block(S)
  local parts = { "**Task:** " .. S.task }
  if S.context_note and S.context_note ~= "" then parts[#parts + 1] = S.context_note end
  return table.concat(parts, "\n\n")
end

local function notes_block(S)
  local notes = memory.notes(S.mem)
  if #notes == 0 then return nil end
  local lines = { "**Notes:**" }
  for _, n in ipairs(notes) do lines[#lines + 1] = "- [" .. n.id .. "] " .. n.content end
  return table.concat(lines, "\n")
end

local function kept_block(S)
  local outs = memory.outputs(S.mem)
  if #outs == 0 then return nil end
  local lines = { "**Working memory** (kept from earlier turns; $(drop ID) to remove):" }
  for _, it in ipairs(outs) do lines[#lines + 1] = output_block("[" .. it.id .. "]", it) end
  return table.concat(lines, "\n\n")
end

function M.outputs_block(title, outputs)
  local lines = { title }
  for i, out in ipairs(outputs) do lines[#lines + 1] = output_block("[" .. i .. "]", out) end
  return table.concat(lines, "\n\n")
end

local function new_results_block(S, title)
  if #S.mem.pending == 0 then return nil end
  return M.outputs_block(title, S.mem.pending)
end

local function messages_block(S)
  local box = S.inbox and S.inbox[S.state]
  if not box or #box == 0 then return nil end
  local lines = { "**Messages from moss:**" }
  for _, m in ipairs(box) do lines[#lines + 1] = "- " .. m end
  return table.concat(lines, "\n")
end

-- join(a, b, ...) skipping nil and empty parts (a table constructor would stop at a nil)
local function join(...)
  local out = {}
  for i = 1, select("#", ...) do
    local p = select(i, ...)
    if p and p ~= "" then out[#out + 1] = p end
  end
  return table.concat(out, "\n\n")
end

M.modes = {}

function M.modes.task_only(S, state)
  return join(task_block(S), state.footer)
end

function M.modes.last_outputs(S, state)
  local failed = false
  for _, o in ipairs(S.last_outputs) do if not o.ok then failed = true end end
  return join(
    task_block(S),
    S.plan and ("**Plan:**\n" .. S.plan) or nil,
    notes_block(S),
    S.feedback and S.feedback ~= "" and ("**Evaluator's remarks:**\n" .. S.feedback) or nil,
    messages_block(S),
    #S.last_outputs > 0 and M.outputs_block("**Last results:**", S.last_outputs) or nil,
    failed and "Some commands failed; try another way." or nil,
    state.footer
  )
end

function M.modes.all_outputs(S, state)
  local hist = {}
  for _, h in ipairs(S.history or {}) do
    local blocks = { "Turn " .. h.turn .. " (" .. h.state .. "):" }
    for _, out in ipairs(h.outputs) do blocks[#blocks + 1] = output_block("", out) end
    hist[#hist + 1] = table.concat(blocks, "\n")
  end
  return join(
    task_block(S),
    notes_block(S),
    messages_block(S),
    #hist > 0 and ("**History:**\n\n" .. table.concat(hist, "\n\n")) or nil,
    state.footer
  )
end

function M.modes.working_memory(S, state)
  local failed = false
  for _, o in ipairs(S.mem.pending) do if not o.ok then failed = true end end
  return join(
    task_block(S),
    state.show_plan and S.plan and ("**Plan:**\n" .. S.plan) or nil,
    failed and "**Warning:** some commands failed; consider other approaches." or nil,
    notes_block(S),
    kept_block(S),
    messages_block(S),
    new_results_block(S, "**New results** (shown once; $(keep N) to keep):"),
    state.footer
  )
end

--- Build the user message for `state` in session `S`.
function M.build(S, state)
  local mode = state.context or "task_only"
  local f = type(mode) == "function" and mode or M.modes[mode]
  if not f then moss.error("usage", "unknown context mode '" .. tostring(mode) .. "'") end
  return f(S, state)
end

return M

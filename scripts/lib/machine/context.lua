-- What each state sees. A state names a context mode; the mode is a function from the
-- session to the single user message (every LLM call is stateless: the context is rebuilt
-- from the session each turn, so it stays bounded by what is kept).
--
--   task_only       the task (and the role's answer format)
--   last_outputs    task, plan, notes, the remarks of a state with `feedback_to`, the last
--                   tool outputs
--   all_outputs     task, notes, every output of the session grouped by turn (unbounded)
--   working_memory  task, working memory (notes and kept results, oldest first), and the
--                   numbered new results (shown once)
--
-- A state may instead give `context = function(S, state)`, built from the parts below
-- (M.task_block, M.plan_part, M.memory_parts, M.outputs_block, ...): machines/v2.lua does,
-- so that its two states share one prompt prefix.
--
-- A mode answers a string, or { stable = {part, ...}, shown = {part, ...}, volatile = text }:
-- the stable parts only ever grow at their end from one turn to the next (the task, then
-- memory in the order it was kept), so providers that cache prompt prefixes bill them as
-- cache reads; what changes every turn comes after. Each stable part becomes its own content block, so a
-- provider that caches at block boundaries (Anthropic) still finds last turn's prefix.
-- `shown` parts come next, with a breakpoint of their own: a state that puts its new
-- results there lets the next state start its call with the very same blocks, so the
-- results are billed in full once and then read from the cache.
--
-- Add a mode by assigning `require("lib.machine.context").modes.my_mode = function(S, state) ... end`.
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
  local parts = { "**" .. M.HEADINGS.task .. ":** " .. S.task }
  if S.context_note and S.context_note ~= "" then parts[#parts + 1] = S.context_note end
  for _, said in ipairs(S.user_adds or {}) do parts[#parts + 1] = "**" .. M.HEADINGS.user_adds .. ":** " .. said end
  return table.concat(parts, "\n\n")
end
M.task_block = task_block

-- The titles of the context's sections, in one place (a project rewording them changes
-- this table; tests and the scripted test model read it instead of copying the words)
M.HEADINGS = { task = "Task", memory = "Working memory", new_results = "New results", plan = "Plan",
  notes = "Notes", last_results = "Last results", history = "History",
  user_adds = "The user adds" }
local H = M.HEADINGS
local MEMORY_HEADING = "**" .. H.memory .. "** (notes and kept results; $(drop ID) to remove):"
local NEW_RESULTS = "**" .. H.new_results .. "** (shown once; $(keep N) to keep):"
local FAILED_HINT = "Some commands failed; try another way."
local FAILED_WARNING = "**Warning:** some commands failed; consider other approaches."
M.NEW_RESULTS, M.FAILED_HINT, M.FAILED_WARNING = NEW_RESULTS, FAILED_HINT, FAILED_WARNING

-- The fixed text moss writes around what it shows (headings, hints): moss's own words, which
-- a reply must not echo back as commands (lib/machine/echo.lua).
M.framing = { MEMORY_HEADING, NEW_RESULTS, FAILED_HINT, FAILED_WARNING }

-- Notes and kept results in the order they were kept (each entry a part), so the memory
-- only grows at its end.
local function memory_parts(S, notes_only)
  local parts = {}
  for _, it in ipairs(S.mem.items) do
    if it.kind == "note" then
      parts[#parts + 1] = "- [" .. it.id .. "] " .. it.content
    elseif not notes_only then
      parts[#parts + 1] = output_block("[" .. it.id .. "]", it)
    end
  end
  if #parts == 0 then return parts end
  table.insert(parts, 1, notes_only and ("**" .. H.notes .. ":**") or
    MEMORY_HEADING)
  return parts
end
M.memory_parts = memory_parts

local function plan_part(S) return S.plan and ("**" .. H.plan .. ":**\n" .. S.plan) or nil end
M.plan_part = plan_part

local function memory_block(S, notes_only)
  local parts = memory_parts(S, notes_only)
  return #parts > 0 and table.concat(parts, "\n") or nil
end

-- A list of the non-empty arguments (the stable parts of a context).
local function parts(...)
  local out = {}
  for i = 1, select("#", ...) do
    local p = select(i, ...)
    if type(p) == "table" then
      for _, q in ipairs(p) do out[#out + 1] = q end
    elseif p and p ~= "" then
      out[#out + 1] = p
    end
  end
  return out
end
M.parts = parts

function M.outputs_block(title, outputs)
  local lines = { title }
  for i, out in ipairs(outputs) do lines[#lines + 1] = output_block("[" .. i .. "]", out) end
  return table.concat(lines, "\n\n")
end

local function messages_block(S) return require("lib.machine.messages").block(S) end
M.messages_block = messages_block

local function any_failed(outputs)
  for _, o in ipairs(outputs) do if not o.ok then return true end end
  return false
end
M.any_failed = any_failed

--- The remarks a state with `feedback_to` left for the next one, under its name.
function M.feedback(S)
  if not S.feedback or S.feedback == "" then return nil end
  local from = S.feedback_from and (S.feedback_from:sub(1, 1):upper() .. S.feedback_from:sub(2) .. "'s remarks")
    or "Remarks"
  return "**" .. from .. ":**\n" .. S.feedback
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
M.join = join

M.modes = {}

function M.modes.task_only(S, state)
  return join(task_block(S), state.footer)
end

function M.modes.last_outputs(S, state)
  return {
    stable = parts(task_block(S), plan_part(S), memory_parts(S, true)),
    volatile = join(
      M.feedback(S),
      messages_block(S),
      #S.last_outputs > 0 and M.outputs_block("**" .. H.last_results .. ":**", S.last_outputs) or nil,
      any_failed(S.last_outputs) and FAILED_HINT or nil,
      state.footer
    ),
  }
end

function M.modes.all_outputs(S, state)
  local hist = {}
  for _, h in ipairs(S.history or {}) do
    local blocks = { "Turn " .. h.turn .. " (" .. h.state .. "):" }
    for _, out in ipairs(h.outputs) do blocks[#blocks + 1] = output_block("", out) end
    hist[#hist + 1] = table.concat(blocks, "\n")
  end
  return {
    stable = parts(task_block(S), #hist > 0 and ("**" .. H.history .. ":**") or nil, hist),
    volatile = join(memory_block(S, true), messages_block(S), state.footer),
  }
end


-- Per session, what a machine's context functions remember between turns without putting
-- it in the session (and its checkpoint): after a resume it starts empty. Compaction
-- rewrites the context, so it empties it too (M.forget).
local scratch = setmetatable({}, { __mode = "k" })

--- The session's scratch table (not checkpointed).
function M.scratch(S)
  local t = scratch[S]
  if not t then t = {}; scratch[S] = t end
  return t
end

--- Forget what the context functions remembered (after a compaction rewrote the context).
function M.forget(S) scratch[S] = nil end

-- The id a memory part starts with ("- [id] note" or "[id] `cmd`"), or nil.
local function part_id(p) return p:match("^%- %[(%w+)%]") or p:match("^%[(%w+)%]") end

--- The memory parts to show, settled for prompt caching: `mem` (memory_parts(S)), unless
-- the parts shown last time under `slot` (with the same `head`: task and plan) are `mem`
-- with some items taken out ($(drop), $(forget)) and new ones added at the end. Then the
-- parts shown last time stay as they were, the removed ones too, followed by one line
-- naming what was removed and then the new parts: everything shown before is still the
-- prompt's prefix, read from the provider's cache, instead of being written again from the
-- first removed item on. Removed items leave for good (the parts are built afresh) once
-- their text outweighs the live parts after the first of them, when the head changes, and
-- after a resume or compaction (the scratch table is empty then).
function M.settled_memory(S, slot, head, mem)
  local sc = M.scratch(S)
  local last = sc[slot]
  local function fresh()
    sc[slot] = { head = head, shown = mem, gone = {} }
    return mem
  end
  if not last or last.head ~= head then return fresh() end
  local at = {}
  for i, p in ipairs(mem) do at[p] = i end
  local out, gone, i = {}, {}, 1
  local removed, after = 0, 0
  for _, p in ipairs(last.shown) do
    if mem[i] == p then
      out[#out + 1] = p
      i = i + 1
      if removed > 0 then after = after + #p end
    elseif at[p] then
      return fresh() -- a part moved: build afresh
    else
      out[#out + 1] = p
      gone[p] = true
      removed = removed + #p
    end
  end
  for j = i, #mem do after = after + #mem[j] end
  if removed == 0 then return fresh() end
  if removed > after then return fresh() end
  local named = {}
  for _, p in ipairs(last.shown) do
    local id = gone[p] and not last.gone[p] and part_id(p)
    if id then named[#named + 1] = "[" .. id .. "]" end
  end
  if #named > 0 then
    local line = "- (removed " .. table.concat(named, ", ")
      .. ": no longer in memory; shown above until the context is rebuilt)"
    out[#out + 1] = line
    gone[line] = true
  end
  for j = i, #mem do out[#out + 1] = mem[j] end
  sc[slot] = { head = head, shown = out, gone = gone }
  return out
end

function M.modes.working_memory(S, state)
  local pending = S.mem.pending
  local results = #pending > 0 and M.outputs_block(NEW_RESULTS, pending) or nil
  local head = parts(task_block(S), state.show_plan and plan_part(S) or nil)
  return {
    stable = parts(head, M.settled_memory(S, "working_memory", table.concat(head, "\n\n"), memory_parts(S))),
    volatile = join(
      messages_block(S),
      any_failed(pending) and FAILED_WARNING or nil,
      results,
      state.footer
    ),
  }
end

--- The user message for `state`: a string, or a list of text blocks whose last stable
-- block is marked for prompt caching.
function M.build(S, state)
  local mode = state.context or "task_only"
  local f = type(mode) == "function" and mode or M.modes[mode]
  if not f then moss.error("usage", "unknown context mode '" .. tostring(mode) .. "'") end
  local c = f(S, state)
  if type(c) ~= "table" then return c end
  local blocks = {}
  local function add(p)
    -- a heading ("**Notes:**") runs into its first entry; parts are separated by a blank line
    local heading = p:sub(1, 2) == "**" and not p:find("\n") and (p:sub(-1) == ":" or p:sub(-3) == ":**")
    blocks[#blocks + 1] = { type = "text", text = p .. (heading and "\n" or "\n\n") }
  end
  -- stable parts, then what is shown once but read again by the next state (`shown`); each
  -- group's last block is a cache breakpoint
  for _, group in ipairs({ c.stable or false, c.shown or false }) do
    local list = type(group) == "table" and group or parts(group)
    for _, p in ipairs(list) do add(p) end
    if #list > 0 then blocks[#blocks].cache = true end
  end
  if (c.volatile or "") == "" then
    if #blocks == 0 then return "" end
    blocks[#blocks].text = blocks[#blocks].text:gsub("%s+$", "")
  else
    blocks[#blocks + 1] = { type = "text", text = c.volatile }
  end
  if #blocks == 1 then return blocks[1].text end
  return blocks
end

--- The text of a built message (either form), e.g. for measuring or logging.
function M.text(message)
  if type(message) ~= "table" then return message end
  local texts = {}
  for _, b in ipairs(message) do texts[#texts + 1] = b.text end
  return table.concat(texts)
end

return M

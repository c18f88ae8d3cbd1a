-- TCE: thinking -> commanding -> evaluating (-> paging) ..., after the C agent "lkjagent".
-- The model writes XML tags (see lib/tce/parse.lua); each state's `handle` applies them to
-- working memory (S.tce.wm, saved with the session) and persistent storage (moss.store),
-- and picks the next state (lib/tce/step.lua). Every call sees only its state's prompt and
-- working memory rendered as <working_memory>, never the conversation so far.
-- Settings: [agent.tce] (lib/tce/config.lua). docs/tce.md explains it all.
local memory = require("lib.tce.memory")
local config = require("lib.tce.config")
local paging = require("lib.tce.paging")
local step = require("lib.tce.step")

local BASE = [[
You are a TCE agent working on a task in steps. Each reply is one step in one STATE:
thinking (decide what to do), commanding (take one action), evaluating (judge the result),
and paging (moss asks you to summarise old entries when working memory is too large).
You remember nothing between steps except your WORKING MEMORY, shown in every request as
<working_memory> with one <entry key="...">value</entry> per item: the task, your recent
think_log / evaluation_log entries, command_log (the result of the last actions) and what
you added or loaded. STORAGE is a persistent store (it outlives this session); you reach it
only through actions.

Actions (one per reply; only the first <action> counts):
<action><type>TYPE</type><tags>TAGS</tags><value>VALUE</value></action>
  working_memory_add     tags = a key, value = the text to keep in working memory
  working_memory_remove  tags = the key to remove
  storage_save           tags = comma-separated tags (order and case do not matter), value = the text
  storage_load           tags = the tags of a stored item: copies it into working memory
  storage_search         tags = tags that must all be present: the matching items' tags go to
                         working memory under search_results
  answer                 value = the final answer to the task: ends the session
After an action you are always in the evaluating state. Write only the tags your state asks
for; text outside tags is ignored.]]

local PROMPTS = {
  thinking = [[
STATE: thinking.
Think about the task and your working memory, and decide the next step.
Emit <think_log>one or two sentences of reasoning</think_log> and
<next_state>commanding</next_state> to act, <next_state>evaluating</next_state> to judge
what you have, or <next_state>thinking</next_state> to keep thinking. Do not emit <action>
here: actions belong to the commanding state.]],
  commanding = [[
STATE: commanding.
Emit exactly one <action> (see the list above) that moves the task forward. Its result will
be in command_log when you evaluate it next.]],
  evaluating = [[
STATE: evaluating.
Judge the result of the last action (command_log) against the task. Emit
<evaluation_log>what you learned, in a sentence or two</evaluation_log> and
<next_state>thinking</next_state> or <next_state>commanding</next_state>.
When working memory holds everything needed, conclude instead with
<action><type>answer</type><value>the answer</value></action>.]],
  paging = [[
STATE: paging.
Working memory has grown too large. The old log entries below will be moved to storage
(tags archive,thinking / archive,evaluating / archive,commanding) and removed from working
memory. Write <summary>...</summary>: a short summary of them and of the previous summary,
keeping every fact, decision and open question still needed for the task. Emit nothing else.]],
}

local function system(name)
  return BASE .. "\n\n" .. PROMPTS[name]
end

local function messages(S) return require("lib.machine.messages").block(S, nil, "xml") end

local function notes(S)
  local items = S.mem and require("lib.machine.memory").notes(S.mem) or {}
  if #items == 0 then return nil end
  local lines = { "<remembered>" }
  for _, n in ipairs(items) do lines[#lines + 1] = "- " .. n.content end
  lines[#lines + 1] = "</remembered>"
  return table.concat(lines, "\n")
end

local join = require("lib.machine.context").join -- skips nil and empty parts

--- thinking / commanding / evaluating see the whole working memory.
local function context(S)
  memory.init(S)
  return join(
    S.context_note,
    notes(S),
    memory.render(S.tce.wm),
    messages(S),
    "Current state: " .. S.state .. ". Reply with the tags this state asks for."
  )
end

--- paging sees the task, the previous summary and the entries to page.
local function paging_context(S)
  memory.init(S)
  local text = paging.context(S, config.get())
  return join(text, messages(S), "Current state: paging. Reply with <summary>...</summary>.")
end

local function next_state(_S, verdict) return verdict.next_state end

local function st(name, ctx, handle)
  return { prompt = system(name), context = ctx, handle = handle, next = next_state, concludes = true,
    commands = {} }
end

return {
  name = "tce",
  start = "thinking",
  max_turns = 40,
  uses = {}, -- not the coding agent: its actions are its own (lib/tce), never lib/agent
  prompts = PROMPTS,
  base_prompt = BASE,
  states = {
    thinking = st("thinking", context, step.handle),
    commanding = st("commanding", context, step.handle),
    evaluating = st("evaluating", context, step.handle),
    paging = st("paging", paging_context, step.handle_paging),
  },
}

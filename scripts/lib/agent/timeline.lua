-- How a saved session reads for people: `moss sessions list`, `moss sessions show ID` (and
-- @agent --list-sessions / --show-session ID). Which events there are and what each shows is
-- the agent's business, so it is decided here; the host only hands over the log's records.
local M = {}

-- One line of at most n characters: whitespace collapsed, control characters made visible
-- (a log holds whatever a model or a command wrote).
local function short(text, n)
  n = n or 110
  local s = tostring(text == nil and "" or text):gsub("%s+", " "):gsub("%c", function(c)
    return ("\\x%02x"):format(c:byte())
  end)
  if utf8.len(s) and utf8.len(s) > n then s = s:sub(1, utf8.offset(s, n) - 1) .. "…" end
  return s
end
M.short = short

local function num(v) return (math.type(v) and v == v and v ~= math.huge and v ~= -math.huge) and v or nil end

local function tokens(u)
  u = type(u) == "table" and u or {}
  return math.floor((num(u.input_tokens) or 0) + (num(u.output_tokens) or 0))
end

local function cost(u)
  if type(u) ~= "table" then return "" end
  local c = num(u.cost_usd)
  if c == nil or u.cost_known == false then
    return (", %d tokens, cost unknown"):format(tokens(u)) -- a model without a price: no guess
  end
  return (", %d tokens, $%.4f"):format(tokens(u), c)
end

local function first10(s) return tostring(s or ""):sub(1, 10) end

-- event -> { style, function(e) -> detail }
M.EVENTS = {
  session_start = { "bold", function(e) return ("%s machine, role %s"):format(short(e.machine), short(e.role)) end },
  session_resume = { "bold", function(e) return ("resumed at turn %s (%s)"):format(short(e.turn), short(e.state)) end },
  task = { "bold", function(e) return short(e.task) end },
  dispatch = { "cyan", function(e) return ("role %s: %s"):format(short(e.role), short(e.why)) end },
  turn_start = { "bold blue", function(e)
    return ("turn %d · %s · %d chars of context, %d kept"):format(e.turn, short(e.state),
      num(e.context_chars) or 0, num(e.working_memory) or 0)
  end },
  llm_request = { "dim", function(e) return short(e.provider) .. " " .. short(e.model) end },
  llm_retry = { "yellow", function(e)
    return ("retry after %s %s: %s"):format(short(e.reason), short(e.status or ""), short(e.error, 60))
  end },
  llm_error = { "red", function(e) return short(e.kind) .. ": " .. short(e.message) end },
  llm_response = { "dim", function(e)
    local d = ("%s · %d tokens · %.1fs"):format(short(e.stop_reason), tokens(e.usage), num(e.duration) or 0)
    if (num(e.attempts) or 1) > 1 then d = d .. (" · %d attempts"):format(e.attempts) end
    return d
  end },
  response = { "", function(e) return short(e.text) end },
  command = { "green", function(e) return (e.ok and "✓ " or "✗ ") .. short(e.cmd, 80) end },
  command_refused = { "yellow", function(e)
    return ("not executed in %s: %s"):format(short(e.state), short(e.cmd, 80))
  end },
  note = { "magenta", function(e) return ("[%s] %s"):format(short(e.id), short(e.content)) end },
  keep = { "magenta", function(e) return ("[%s] %s"):format(short(e.id), short(e.cmd)) end },
  validation = { "", function(e)
    if e.passed then return "passed (" .. short(e.why) .. ")" end
    return ("FAILED at %s (`%s`, %s) (%s)"):format(short(e.step), short(e.command, 50),
      e.timed_out and "timed out" or ("exit " .. short(e.exit)), short(e.why))
  end },
  validation_off = { "yellow", function(e)
    return ("off for this session: `%s` cannot run here"):format(short(e.command, 60))
  end },
  validation_waived = { "yellow", function(e) return "the user went on with " .. short(e.step) .. " failing" end },
  escalate = { "bold red", function(e) return "validation step " .. short(e.step) .. " still fails: ask the user" end },
  retry = { "yellow", function(e) return ("%s failed (attempt %s)"):format(short(e.step), short(e.attempt)) end },
  echo = { "yellow", function() return "the reply only repeated moss's own prompt" end },
  command_echoed = { "yellow", function(e)
    return "not run (copied from moss's prompt): " .. short(table.concat(e.cmds or {}, " "), 80)
  end },
  truncated = { "yellow", function(e) return "reply cut at the token limit " .. short(e.max_tokens) end },
  commands_dropped = { "yellow", function(e)
    return ("%s commands run, %s dropped (per-reply cap)"):format(short(e.kept), short(e.dropped))
  end },
  snapshot = { "dim", function(e) return first10(e.id) .. " " .. short(e.label) end },
  rollback = { "bold yellow", function(e)
    return ("restored %s: %d reverted, %d removed, %d not restored, %d left to others"):format(first10(e.id),
      #(e.reverted or {}), #(e.removed or {}), #(e.skipped or {}), #(e.conflicts or {}))
  end },
  rollback_done = { "bold yellow", function(e)
    return ("rolled back after %s kept failing"):format(short(e.step))
  end },
  turn_rolled_back = { "bold yellow", function(e)
    return ("turn %s was cut off; undone: %s"):format(short(e.turn), short(table.concat(e.paths or {}, ", "), 80))
  end },
  ask = { "cyan", function(e) return short(e.question, 60) .. " → " .. short(e.answer, 40) end },
  loop_detected = { "red", function(e) return "repeated: " .. short(e.cmd) end },
  done = { "bold green", function(e) return short(e.answer) end },
  compacted = { "bold magenta", function(e)
    return ("context compacted at turn %s: %d → %d characters (summary %d)"):format(short(e.turn),
      num(e.chars_before) or 0, num(e.chars_after) or 0, num(e.summary_chars) or 0)
  end },
  compact_failed = { "yellow", function(e) return "could not compact: " .. short(e.error, 80) end },
  child_start = { "cyan", function(e)
    return ("child %s (%s): %s"):format(short(e.child or e.id), short(e.role), short(e.task, 70))
  end },
  child_end = { "cyan", function(e)
    local changed = type(e.changed) == "table" and (", %d file(s) changed in its copy"):format(#e.changed) or ""
    return ("child %s ended %s%s"):format(short(e.child or e.id), short(e.reason), changed)
  end },
  child_isolated = { "cyan", function(e)
    return ("child %s works in its own copy: %s files (%s) in %.2fs"):format(short(e.child), short(e.files),
      short(e.strategy), num(e.seconds) or 0)
  end },
  child_merge = { "bold cyan", function(e)
    return ("merged child %s: %d applied, %d conflict(s)%s"):format(short(e.child), #(e.applied or {}),
      #(e.conflicts or {}), #(e.conflicts or {}) > 0 and (" (" .. short(M.paths(e.conflicts), 60) .. ")") or "")
  end },
  child_discard = { "cyan", function(e) return ("dropped child %s's copy"):format(short(e.child)) end },
  interrupt = { "yellow", function(e)
    return "stopped by " .. (e.by == "parent" and "its parent" or "a signal (Ctrl-C)")
  end },
  entry_failed = { "red", function(e) return ("%s entry failed: %s"):format(short(e.entry), short(e.error)) end },
  session_end = { "bold", function(e)
    return ("%s after %s turns%s"):format(short(e.reason), short(e.turns), cost(e.usage))
  end },
}

local HIDDEN = { event = true, ts = true, session = true, parent = true }

-- Any other event: its fields as compact JSON.
local function raw(e)
  local t = moss.dict()
  for k, v in pairs(e) do if not HIDDEN[k] then t[k] = v end end
  local ok, s = pcall(moss.json.encode, t, { sort_keys = true })
  return short(ok and s or "?")
end

local function clock(ts)
  local ok, s = pcall(os.date, "%H:%M:%S", math.floor(ts))
  return ok and s or ""
end

--- The timeline of one session's log as table rows (time, event, detail).
function M.rows(events)
  local t0 = events[1] and num(events[1].ts)
  local rows = {}
  for _, e in ipairs(events) do
    local name = type(e.event) == "string" and e.event or "?"
    local spec = M.EVENTS[name]
    local style, detail = "dim", nil
    if spec then
      local ok, d = pcall(spec[2], e)
      if ok then style, detail = spec[1], d end
    end
    local ts = num(e.ts)
    local when = (ts and t0) and ("+%6.1fs"):format(ts - t0) or ""
    if name == "session_start" and ts then when = clock(ts) end
    rows[#rows + 1] = { time = when, event = short(name, 40), detail = detail or raw(e),
      _style = style ~= "" and style or nil }
  end
  return rows
end

-- The checkpoints of a session's children (ids ID-1, ID-2, ...), in order.
local function children_of(sid, all)
  local kids = {}
  for _, s in ipairs(all) do
    local n = s.id:match("^" .. sid:gsub("%p", "%%%0") .. "%-(%d+)$")
    if n then kids[#kids + 1] = { n = tonumber(n), s = s } end
  end
  table.sort(kids, function(a, b) return a.n < b.n end)
  return kids
end

function M.paths(list)
  local out = {}
  for _, x in ipairs(list or {}) do out[#out + 1] = type(x) == "table" and tostring(x.path) or tostring(x) end
  return table.concat(out, ", ")
end

--- Isolated children of a session, from its log: child id -> {changed, added, removed, state,
-- applied?, conflicts?} (state: "not merged", "merged", "discarded").
function M.isolation(events)
  local out = {}
  for _, e in ipairs(events) do
    local c = type(e.child) == "string" and e.child or nil
    if c and e.event == "child_isolated" then
      out[c] = out[c] or { state = "not merged" }
    elseif c and e.event == "child_end" and e.isolated then
      local st = type(e.patch_stat) == "table" and e.patch_stat or {}
      out[c] = out[c] or { state = "not merged" }
      out[c].changed = type(e.changed) == "table" and #e.changed or 0
      out[c].added, out[c].removed = num(st.added) or 0, num(st.removed) or 0
    elseif c and out[c] and e.event == "child_merge" then
      out[c].state, out[c].applied, out[c].conflicts = "merged", #(e.applied or {}), #(e.conflicts or {})
    elseif c and out[c] and e.event == "child_discard" then
      out[c].state = "discarded"
    end
  end
  return out
end

M.PATCH_SHOWN = 20000 -- characters of an isolated child's patch in the data (`moss ui` shows it)

--- Where an isolated child's patch is kept, if it changed anything.
function M.patch_file(id)
  local path = ".moss/agent/patches/" .. id .. ".patch"
  local ok, there = pcall(moss.fs.exists, path)
  return ok and there and path or nil
end

--- The patch an isolated child ended with (.moss/agent/patches/ID.patch), capped; nil if none.
function M.patch_of(id)
  local path = ".moss/agent/patches/" .. id .. ".patch"
  local ok, text = pcall(moss.fs.read, path)
  if not ok or type(text) ~= "string" then return nil end
  if #text > M.PATCH_SHOWN then
    text = text:sub(1, M.PATCH_SHOWN) .. "\n… (cut; the whole patch is in " .. path .. ")"
  end
  return text
end

--- M.isolation of session `sid`'s log ({} when it has none: a child's log may be gone).
function M.isolation_of(sid)
  local ok, events = pcall(moss.session.events, sid)
  return ok and M.isolation(events) or {}
end

--- One line about an isolated child's change and what became of it.
function M.isolation_text(iso)
  local change = iso.changed and ("%d file(s) +%d -%d"):format(iso.changed, iso.added, iso.removed) or "running"
  local state = iso.state
  if state == "merged" then state = ("merged: %d applied, %d conflict(s)"):format(iso.applied, iso.conflicts) end
  return ("isolated · %s · %s"):format(change, state)
end

local function label(s, iso)
  return ("%s %s · %s · %d turns%s"):format(s.id, short(s.role or "?"), short(M.reason(s)),
    num(s.turn) or 0, iso and (" · " .. M.isolation_text(iso)) or "")
end

--- Lines drawing the session's child agents as a tree (none when it has no children).
function M.tree(sid, all)
  local lines = {}
  local function add(id, prefix, depth)
    local kids = children_of(id, all)
    local iso = #kids > 0 and M.isolation_of(id) or {}
    for i, k in ipairs(kids) do
      local last = i == #kids
      lines[#lines + 1] = prefix .. (last and "└─ " or "├─ ") .. label(k.s, iso[k.s.id])
      local S_ok, S = pcall(moss.session.load, k.s.id)
      if S_ok and S.answer then
        lines[#lines + 1] = prefix .. (last and "   " or "│  ") .. "   " .. short(S.answer, 90)
      end
      local patch = iso[k.s.id] and M.patch_file(k.s.id)
      if patch then lines[#lines + 1] = prefix .. (last and "   " or "│  ") .. "   patch: " .. patch end
      if depth < 8 then add(k.s.id, prefix .. (last and "   " or "│  "), depth + 1) end
    end
  end
  add(sid, "", 0)
  if #lines == 0 then return lines end
  local me
  for _, s in ipairs(all) do if s.id == sid then me = s end end
  table.insert(lines, 1, me and label(me) or sid)
  return lines
end

--- The session's child agents as data (`moss ui` draws them as a nested list): each
-- {id, role, state, turns, answer?, children = {...}}, in order, 8 levels deep at most.
function M.nodes(sid, all, depth)
  depth = depth or 0
  local out = {}
  local kids = children_of(sid, all)
  local iso = #kids > 0 and M.isolation_of(sid) or {}
  for _, k in ipairs(kids) do
    local S_ok, S = pcall(moss.session.load, k.s.id)
    out[#out + 1] = { id = k.s.id, role = k.s.role or moss.json.null, state = M.reason(k.s),
      isolation = iso[k.s.id] and { text = M.isolation_text(iso[k.s.id]), state = iso[k.s.id].state,
        patch = M.patch_of(k.s.id) } or moss.json.null,
      turns = num(k.s.turn) or 0,
      answer = (S_ok and type(S.answer) == "string") and short(S.answer, 200) or moss.json.null,
      children = depth < 8 and M.nodes(k.s.id, all, depth + 1) or {} }
  end
  return out
end

--- The last validation that failed, if no later one passed: its step and output's tail, as
-- lines (the timeline's one-line row cannot hold the output).
function M.last_failure(events)
  local last
  for _, e in ipairs(events) do
    if e.event == "validation" then last = (not e.passed) and e or nil end
  end
  if not last then return {} end
  local lines = { ("last validation failed at step %s (`%s`, %s):"):format(short(last.step), short(last.command, 80),
    last.timed_out and "timed out" or ("exit " .. short(last.exit))) }
  for line in (tostring(last.output_tail or "") .. "\n"):gmatch("([^\n]*)\n") do
    lines[#lines + 1] = "  │ " .. short(line, 200)
  end
  return lines
end

--- A session's log records; a session this project does not have is named as such (kind
-- not_found), for the person who typed its id.
function M.events(sid)
  local ok, events = pcall(moss.session.events, sid)
  if ok then return events end
  if moss.error_kind(events) == "not_found" then
    moss.error("not_found", ("no session '%s' in this project (moss sessions list shows its sessions)"):format(sid), 0)
  end
  error(events, 0)
end

--- `moss sessions show ID`: the timeline, the last failed validation, then the tree of child
-- agents.
function M.show(sid)
  local events = M.events(sid)
  moss.ui.table(M.rows(events), { columns = { "time", "event", "detail" }, title = "session " .. sid })
  for _, line in ipairs(M.last_failure(events)) do print(line) end
  for _, line in ipairs(M.tree(sid, moss.session.list())) do print(line) end
  return 0
end

--- How a saved session ended, as its page says it once nothing runs it: {reason, text (the
-- reason for people), exit (the status `moss @agent` ends with for it, nil when not known),
-- turns, resume (the command that goes on with it)}; nil without a usable checkpoint.
function M.outcome(sid)
  local ok, S = pcall(moss.session.load, sid)
  if not ok or type(S) ~= "table" then return nil end
  local output = require("lib.machine.output")
  local reason = type(S.reason) == "string" and S.reason or (S.done and "ended" or "interrupted")
  local machine
  if type(S.machine) == "string" then
    local okm, m = pcall(require("lib.machine.extend").load, "machines", S.machine)
    machine = okm and m or nil
  end
  local okr, r = pcall(output.reason, reason, machine)
  local text, exit = okr and r.text or reason, okr and r.exit or nil
  if reason == "interrupted" then
    text, exit = "interrupted (Ctrl-C, or its process ended) before it finished; resumable as it is", 130
  elseif reason == "ended" then
    exit = nil
  end
  return { reason = reason, text = text, exit = exit == nil and moss.json.null or exit, turns = num(S.turn) or 0,
    resume = output.RESUME and (output.RESUME .. " " .. sid) or moss.json.null }
end

--- `moss sessions timeline ID` (`moss ui`'s session page): what `show` draws, as data:
-- {id, rows = [{time, event, detail, style}], last_failure = {lines}, tree = {lines},
-- children = M.nodes, outcome = M.outcome}.
function M.data_of(sid)
  local events = M.events(sid)
  local rows = M.rows(events)
  for _, r in ipairs(rows) do r.style, r._style = r._style, nil end
  local all = moss.session.list()
  return { id = sid, rows = rows, last_failure = M.last_failure(events),
    tree = M.tree(sid, all), children = M.nodes(sid, all), outcome = M.outcome(sid) or moss.json.null }
end

--- "42s", "7m", "3h", "2d": how long ago a Unix time was.
function M.ago(t)
  local d = os.time() - math.floor(t)
  if d < 120 then return d .. "s" elseif d < 7200 then return (d // 60) .. "m" end
  if d < 172800 then return (d // 3600) .. "h" end
  return (d // 86400) .. "d"
end

--- How a listed session stands: "running" while a moss process runs it (the host's fact,
-- `running`), else how it ended; one that did not end and that nothing runs was interrupted
-- (its process was killed before it could say so).
function M.reason(s)
  if s.error then return s.reason end
  if s.running then return "running" end
  return s.reason or (s.done and "ended" or "interrupted")
end

--- `moss sessions list`: one row per saved session; a corrupt checkpoint is listed, named
-- on stderr, and makes the exit status 2.
-- The fields a listing shows, with the type each has when present: one of another type (a
-- hand-edited file) makes the checkpoint unusable, listed as corrupt, not "running".
M.LISTED = { { "id", "string" }, { "task", "string" }, { "state", "string" }, { "machine", "string" },
  { "role", "string" }, { "reason", "string" }, { "turn", "integer" }, { "done", "boolean" } }

--- Nil, or why a listed session's fields are not a session's (the row as moss.session.list gives it).
function M.misshapen(s)
  local kinds = type(s.field_kinds) == "table" and s.field_kinds or {}
  for _, f in ipairs(M.LISTED) do
    local key, want = f[1], f[2]
    local v, got = s[key], kinds[key]
    if v ~= nil and got == nil then
      got = (want == "integer" and math.type(v) == "integer") and "integer" or type(v)
    end
    if got ~= nil and got ~= want and got ~= "null" then
      return ("%s is %s, not %s %s"):format(key, got, want == "integer" and "an" or "a", want)
    end
  end
end

--- The saved sessions as moss.session.list gives them, oldest first, with a checkpoint whose
-- listed fields are misshapen turned into a corrupt row (`error` says why).
function M.sessions()
  local out = {}
  for _, s in ipairs(moss.session.list()) do
    local why = not s.error and M.misshapen(s)
    if why then
      s = { id = s.id, mtime = s.mtime, running = s.running, state = "corrupt", reason = "corrupt",
        error = (".moss/agent/session-%s.json is not a usable checkpoint (%s); delete it to start fresh, or " ..
          "start a new session instead of resuming this one"):format(s.id, why) }
    end
    s.field_kinds = nil
    out[#out + 1] = s
  end
  return out
end

--- The fields of a session's row in the listing as data: the listed ones, and what the host
-- adds (`running`, `mtime`) or a corrupt one says (`error`). The host reads these and no
-- others: they are declared in host/api/events.lua (moss.events.session_row), and
-- tests/test_session_row.py holds this list to that declaration.
M.ROW = { "id", "running", "mtime", "error" }
for _, f in ipairs(M.LISTED) do if f[1] ~= "id" then M.ROW[#M.ROW + 1] = f[1] end end
-- and what an MCP client needs of one that ended or waits: its answer, or its questions
for _, k in ipairs({ "answer", "success", "progress", "questions", "detail" }) do M.ROW[#M.ROW + 1] = k end

--- The listing as data (`sessions json`: MCP list_sessions, `moss ui`): each session's row
-- (M.ROW), with a `reason` that says how a session that is not running stands (none while
-- it runs).
function M.data()
  local out = {}
  for _, s in ipairs(M.sessions()) do
    if not s.error then s.reason = not s.running and M.reason(s) or nil end
    local row = {}
    for _, k in ipairs(M.ROW) do row[k] = s[k] end
    out[#out + 1] = row
  end
  return out
end

--- `moss sessions list`: newest first (the last written to), as `git log` lists commits, so
-- `| head` shows the latest.
function M.list()
  local rows, corrupt = {}, {}
  local sessions = M.sessions()
  table.sort(sessions, function(a, b)
    local ta, tb = tonumber(a.mtime) or 0, tonumber(b.mtime) or 0
    if ta ~= tb then return ta > tb end
    return tostring(a.id) < tostring(b.id)
  end)
  for _, s in ipairs(sessions) do
    rows[#rows + 1] = { id = s.id, age = M.ago(s.mtime), turns = s.turn, state = s.state,
      reason = M.reason(s), task = short(s.task or "", 60) }
    if s.error then corrupt[#corrupt + 1] = s.error end
  end
  if #rows == 0 then moss.ui.print("no saved sessions", { style = "dim" }) return 0 end
  moss.ui.table(rows, { columns = { "id", "age", "turns", "state", "reason", "task" } })
  -- the good ones are listed; a corrupt one is an error to act on, not a silent row
  for _, e in ipairs(corrupt) do moss.ui.print("error: " .. e, { style = "red" }) end
  return #corrupt > 0 and 2 or 0
end

return M

---@meta moss
-- LuaLS type annotations for the `moss` global. Editors that use lua-language-server
-- (VS Code's Lua extension, Neovim's lua_ls) read these through .luarc.json, so `moss.`
-- completes and calls are type-checked. This file is never executed.

---@class moss.Error
---@field kind string      # stable word: usage, config, not_found, ambiguous, denied, budget, llm, timeout, interrupted, internal
---@field message string   # "moss.ns.fn: what went wrong"
---@field where string     # "file.lua:LINE: " of the caller, or ""

---@class moss
---@field args string[]            # words after `moss @NAME` (host options removed)
---@field root string              # the project root (nearest .moss/ or .git/ above cwd)
---@field config table             # merged .moss/config.toml over ~/.config/moss/config.toml; every field
---@field options moss.Options     # host options given on the command line
---@field trust moss.Trust         # whether the project's .moss/ content is in use (a copy)
---@field script string            # the name of the running script
---@field version string           # moss's version
moss = {}

---@class moss.Trust
---@field trusted boolean          # the project's scripts, commands, endpoints, widening settings are in use
---@field needed boolean           # the project's .moss/ holds anything that needs trust
---@field how string               # "nothing to trust" | "recorded" | "--trust" | "answered yes" | ""
---@field max_access string        # the user's [trust] max_access (default "edit"): cap for a project-chosen role
---@field project_keys string[]    # dotted config keys whose value came from .moss/config.toml
---@field ignored string[]         # what the project set that this run does not use, one line each

---@class moss.Options
---@field provider? string
---@field model? string
---@field record? string
---@field replay? string
---@field script? string
---@field max_cost? number
---@field max_tokens? integer
---@field memory_mb? integer
---@field timeout? number
---@field allow_full? boolean
---@field verbose? boolean

--- A table that converts to a dict / JSON object even when empty (`{}` alone becomes a list).
---@param t? table
---@return table
function moss.dict(t) end

--- Raise an error with a `kind` that `moss.error_kind` and `err.kind` report.
---@param kind string
---@param message string
---@param level? integer  # 1 = the caller of moss.error (default)
function moss.error(kind, message, level) end

--- The kind of an error value caught with pcall: a moss error's kind, or "lua".
---@param err any
---@return string
function moss.error_kind(err) end

--- string.format, for brevity.
---@param fmt string
---@return string
function moss.fmt(fmt, ...) end

---@class moss.ui
moss.ui = {}

--- Print a message for people on stderr (stdout is for answers).
---@param text string
---@param opts? {style?: string}  # a rich style such as "bold red"
function moss.ui.print(text, opts) end

--- A one-line progress/status message on stderr.
---@param text string
function moss.ui.status(text) end

--- Whether stderr is an interactive terminal.
---@return boolean
function moss.ui.is_terminal() end

--- Whether a person can answer questions (stdin is a terminal, or MOSS_ASSUME_TTY=1).
---@return boolean
function moss.ui.interactive() end

--- Ask the user; nil when nobody can answer.
---@param question string
---@param opts? {choices?: string[]}
---@return string|nil
function moss.ui.ask(question, opts) end

--- A y/N question; false when nobody can answer.
---@param question string
---@return boolean
function moss.ui.confirm(question) end

--- Rows on stdout: a rich table on a terminal, tab-separated otherwise.
---@param rows table[]
---@param opts? {columns?: string[], title?: string}
function moss.ui.table(rows, opts) end

--- One JSON line on stdout (stream-json).
---@param event table
function moss.ui.event(event) end

--- A live status line on stderr until live_stop(): a spinner, `text`, seconds since it
--- started and the tokens an LLM reply has streamed so far. Calling it again retitles it and
--- restarts its clock. False (and nothing shown) when stderr is not a terminal or NO_COLOR is set.
---@param text string
---@return boolean
function moss.ui.live(text) end

--- Clear the live status line; true when one was showing (an LLM reply was then counted on
--- it, not printed).
---@return boolean
function moss.ui.live_stop() end

---@class moss.Usage
---@field input_tokens integer
---@field output_tokens integer
---@field cache_read_tokens integer
---@field cache_write_tokens integer
---@field cost_usd number|nil

---@class moss.ChatResult
---@field text string
---@field stop_reason string   # end_turn, max_tokens, stop_sequence
---@field model string
---@field provider string
---@field usage moss.Usage
---@field max_tokens integer    # the reply limit sent, after the caps of docs/llm.md (window, max_output_tokens)

---@class moss.ChatRequest
---@field messages? {role: "user"|"assistant", content: string}[]
---@field prompt? string        # shorthand for one user message
---@field system? string
---@field model? string
---@field provider? string
---@field max_tokens? integer
---@field stop? string|string[]
---@field temperature? number
---@field label? string which part of a machine asks (sent as the X-Moss-Label header)

---@class moss.llm
moss.llm = {}

--- One model call (streams to stderr on a terminal). Errors: config, budget, llm, timeout.
---@param request moss.ChatRequest
---@return moss.ChatResult
function moss.llm.chat(request) end

--- Session totals (usage keys plus calls, cost_known).
---@return moss.Usage
function moss.llm.usage() end

--- nil, or which budget is spent.
---@return string|nil
function moss.llm.budget() end

--- The provider the next call would use, resolved now: with nothing configured, a local
--- OpenAI-compatible server found running (Ollama, llama.cpp, LM Studio, vLLM) is chosen and
--- stderr says which. Raises kind "config" (saying what was tried) when there is none, so a
--- script can fail before its first turn.
--- context_window: [llm] context_window, else what a local server says it holds (asked once
--- per session), else the known window of the model (tokens), else nil.
---@return {name: string, model: string?, base_url: string?, is_local: boolean, detected: string?, context_window: integer?}
function moss.llm.provider() end

---@class moss.code
moss.code = {}

--- A tree (".", a directory), a skeleton (a file), numbered lines ("path:A-B") or a symbol ("path/Symbol").
---@param target string
---@param opts? {depth?: integer, max_chars?: integer}
---@return string
function moss.code.view(target, opts) end

--- ripgrep, grouped by file, each hit with its enclosing symbol.
---@param pattern string
---@param opts? {only?: string|string[], limit?: integer, ignore_case?: boolean, max_chars?: integer}
---@return string
function moss.code.search(pattern, opts) end

---@class moss.RunResult
---@field stdout string
---@field stderr string
---@field code integer|nil
---@field timed_out boolean
---@field truncated boolean
---@field duration number
---@field sandbox string   # bwrap-ro, bwrap-project or none
---@field cmd string
---@field git? string[]     # git metadata the command created or changed (undone where possible)

---@class moss.shell
moss.shell = {}

--- sh -c CMD under the session's access level, with a scrubbed environment (env adds to it; LD_* refused).
---@param cmd string
---@param opts? {timeout?: number, cwd?: string, max_chars?: integer, stdin?: string, env?: table<string, string>}
---@return moss.RunResult
function moss.shell.run(cmd, opts) end

---@alias moss.AccessLevel "read-only"|"read-shell"|"edit"|"full"

---@class moss.access
moss.access = {}
---@param level moss.AccessLevel
---@return moss.AccessLevel
function moss.access.set(level) end
---@return moss.AccessLevel
function moss.access.get() end
---@return moss.AccessLevel[]
function moss.access.levels() end

---@class moss.fs
moss.fs = {}
---@param path string
---@return string
function moss.fs.read(path) end
---@param path string
---@param text string
function moss.fs.write(path, text) end
---@param path string
---@return boolean
function moss.fs.exists(path) end

---@class moss.EditSpec
---@field target string                 # "path/Symbol" or "path"
---@field action "delete"|"replace"|"insert"|"text"|"create"|"append"|"prepend"
---@field content? string
---@field position? "before"|"after"
---@field old? string                   # for action "text"

---@class moss.EditResult
---@field files string[]
---@field changes {path: string, diff: string, added: integer, removed: integer, target: string, action: string}[]
---@field diff string
---@field syntax_warning? string

---@class moss.edit
moss.edit = {}
---@param specs moss.EditSpec|moss.EditSpec[]
---@return moss.EditResult
function moss.edit.preview(specs) end
--- All or nothing; needs access edit or full.
---@param specs moss.EditSpec|moss.EditSpec[]
---@return moss.EditResult
function moss.edit.apply(specs) end

---@class moss.session
moss.session = {}
---@param id string
---@param state table
---@return string path
function moss.session.save(id, state) end
---@param id? string   # nil = the latest
---@return table
function moss.session.load(id) end
---@return {id: string, mtime: number, turn: integer, state: string, reason: string|nil, task: string}[]
function moss.session.list() end
---@param id string
---@param event string
---@param data? table
function moss.session.log(id, event, data) end
---@param id string
---@param opts? {role?: string}  the agent's role, shown to agents waiting for its locks
function moss.session.bind(id, opts) end
---@return {id: string, path: string, events: integer, mtime: number}[]
function moss.session.logs() end
---@param id string
---@return table[]
function moss.session.events(id) end

---@class moss.ShadowNotCaptured
---@field path string
---@field reason "too_large"|"over_total"|"unreadable"|"special"
---@field detail string

---@class moss.ShadowSkipped
---@field path string          # directories end with "/"
---@field reason "too_large"|"over_total"|"unreadable"|"special"|"not_backed_up"|"not_empty"|"obstructed"|"failed"
---@field detail string

---@class moss.ShadowConflict
---@field path string
---@field session? string      # nil: changed outside any recorded write
---@field reason string

---@class moss.shadow
moss.shadow = {}
---@param label string
---@return string id
function moss.shadow.snapshot(label) end
---@param label string
---@return string write_id  # also a snapshot id
function moss.shadow.begin_write(label) end
---@param write_id string
---@return {id: string, post: string, changed: string[], not_captured: moss.ShadowNotCaptured[]}
function moss.shadow.end_write(write_id) end
---@param id string
---@return {reverted: string[], removed: string[], restored: string[], skipped: moss.ShadowSkipped[], conflicts: moss.ShadowConflict[], backup: string, scope: "session"|"all"}
function moss.shadow.restore(id) end
---@return {id: string, label: string, time: number, files: integer}[]
function moss.shadow.list() end
---@param id string
---@param paths? string[]
---@return string
function moss.shadow.diff(id, paths) end
---@param id string
---@return {modified: string[], added: string[], deleted: string[]}
function moss.shadow.changed(id) end

---@class moss.json
---@field null table   # encodes as JSON null (nil cannot sit in a table)
moss.json = {}
---@param value any
---@param opts? {indent?: integer, sort_keys?: boolean}
---@return string
function moss.json.encode(value, opts) end
---@param text string
---@param opts? {ordered?: boolean}  # ordered: objects remember key order (moss.json.keys)
---@return any
function moss.json.decode(text, opts) end
---An object's keys in source order when decoded with {ordered=true}; sorted keys otherwise.
---@param t table
---@return string[]
function moss.json.keys(t) end
---Whether `t` was decoded (with {ordered=true}) from a JSON object rather than an array.
---@param t table
---@return boolean
function moss.json.is_object(t) end

---@class moss.scripts
moss.scripts = {}
---@param folder string
---@return {name: string, module: string, origin: string, path: string, overrides: string[]}[]
function moss.scripts.list(folder) end

--- Run read-only primitives side by side: { {"code.view", "src"}, ... }.
---@param calls table[]
---@return {ok: boolean, value?: any, error?: string, kind?: string}[]
function moss.parallel(calls) end

--- A fresh, unique session id (not from math.random, which --seed makes repeatable).
---@return string
function moss.session.new_id() end

---@class moss.MemoryEntry
---@field kind "facts"|"preferences"|"decisions"
---@field text string
---@field line integer
---@field file string

---@class moss.memory
moss.memory = {}

--- Remember across sessions: one bullet in .moss/memory/<kind>.md.
---@param text string
---@param opts? {kind?: "facts"|"preferences"|"decisions"}
---@return {kind: string, text: string, duplicate: boolean}
function moss.memory.memorize(text, opts) end

--- Memories sharing words with the query, best first.
---@param query string
---@param opts? {limit?: integer}
---@return moss.MemoryEntry[]
function moss.memory.recall(query, opts) end

--- Remove memory lines containing the text; returns how many.
---@param text string
---@return integer
function moss.memory.forget(text) end

--- Every memory.
---@return moss.MemoryEntry[]
function moss.memory.all() end

--- Every memory file, whole (headings included).
---@return {kind: string, file: string, text: string}[]
function moss.memory.files() end

--- Replace a kind's whole file (atomically); with {dry_run=true} only compute the diff.
---@param kind string
---@param text string
---@param opts? {dry_run?: boolean}
---@return {file: string, changed: boolean, diff: string}
function moss.memory.write(kind, text, opts) end

---@class moss.store
moss.store = {}

--- A named JSON document from .moss/agent/store/<name>.json; an empty table if there is none.
---@param name string   # 1-64 letters, digits, '-' and '_'
---@return table
function moss.store.load(name) end

--- Replace the document `name` atomically (temp file, fsync, rename); returns the file's path.
---@param name string
---@param data table
---@return string
function moss.store.save(name, data) end

---@class moss.mcp
moss.mcp = {}

---@class moss.McpServer
---@field name string
---@field transport "stdio"|"http"|"unusable"
---@field access "read-only"|"full"   # the access level its tools need
---@field description? string
---@field error? string               # why it is unusable (e.g. an untrusted project's)

---@class moss.McpTool
---@field name string
---@field description string          # control characters escaped, capped
---@field input_schema table          # {} when the server's was unusable or too large
---@field params string               # one line: {"path": string, "limit"?: integer}

---@class moss.McpResult
---@field text string                 # the content as text, capped (head and tail)
---@field is_error boolean            # the tool reported a failure
---@field chars integer               # the length before capping
---@field timed_out? boolean          # no answer within the server's timeout

--- The servers in [mcp.servers.NAME]; starts none of them.
---@return moss.McpServer[]
function moss.mcp.servers() end

--- The tools of one server (starts it on first use; needs the server's access level).
---@param server string
---@return moss.McpTool[]
function moss.mcp.tools(server) end

--- Call one tool with named arguments. Refused (kind "denied") below the server's access level.
---@param server string
---@param tool string
---@param args? table
---@param opts? {max_chars?: integer}
---@return moss.McpResult
function moss.mcp.call(server, tool, args, opts) end

---@class moss.Alert
---@field id string
---@field run_id string
---@field run_name string
---@field rule string                  # the rule's name, e.g. "loss is nan"
---@field severity "info"|"warning"|"critical"
---@field message string
---@field choices string[]
---@field status "pending"|"resolved"
---@field line string                  # the log line that raised it ("" when raised by hand)
---@field source "rule"|"manual"|"script"|"judge"  # who raised it
---@field duplicate? boolean           # from moss.runs.alert: the same message was already pending
---@field created_at number
---@field choice? string               # once resolved
---@field resolved_at? number
---@field run_status? string           # from moss.runs.resolve: the run's status afterwards

---@alias moss.RunStatus "queued"|"running"|"finished"|"failed"|"stopped"

---@class moss.Run
---@field id string
---@field name string
---@field cmd string
---@field workdir string               # relative to the project root
---@field status moss.RunStatus
---@field code? integer                # exit code (negative: killed by that signal)
---@field error? string                # why it failed or was stopped
---@field sandbox string               # bwrap-project, none, or ray
---@field executor "local"|"ray"
---@field ray? {address: string, submission_id: string, working_dir: string, num_cpus: number, num_gpus: number}
---@field results? string              # MOSS_RESULTS_DIR given to the run
---@field access string
---@field detached boolean
---@field created_at number
---@field started_at? number
---@field ended_at? number
---@field duration? number
---@field pid? integer
---@field timeout? number
---@field log string                   # .moss/agent/runs/<id>.log
---@field meta? any
---@field alert_rules table[]
---@field alerts moss.Alert[]
---@field git? string[]               # git metadata the run created or changed (undone where possible)

--- An alert rule; `pattern` (and "/REGEX/") is RE2 syntax: linear time, no backreferences or lookaround.
---@alias moss.AlertRule string|{pattern?: string, ignore_case?: boolean, metric?: string, op?: ">"|">="|"<"|"<=", threshold?: number, nan?: boolean, spike?: number, min_points?: integer, severity?: "info"|"warning"|"critical", message?: string, choices?: string[], name?: string, once?: boolean}

---@class moss.RunEvent
---@field type "run"|"alert"
---@field id string                    # the run id, or the alert id
---@field name? string                 # run events
---@field status string                # the run's new status, or the alert's
---@field previous? string             # run events: the status before
---@field code? integer
---@field error? string
---@field alert_id? string             # alert events
---@field run_id? string
---@field run_name? string
---@field severity? string
---@field message? string
---@field choices? string[]
---@field line? string
---@field git? string[]                # terminal run events: git metadata the run created or changed

---@class moss.runs
moss.runs = {}

--- Start a background run (sh -c CMD in its own process group; needs access edit or full).
---@param spec string|{cmd: string, name?: string, workdir?: string, alerts?: moss.AlertRule[], detach?: boolean, timeout?: number, meta?: any, env?: table<string, string>, executor?: "local"|"ray", address?: string, resources?: {num_cpus?: number, num_gpus?: number}, results?: string}
---@return moss.Run
function moss.runs.start(spec) end

--- Every run of the project, oldest first.
---@return moss.Run[]
function moss.runs.list() end

--- One run's record.
---@param id string
---@return moss.Run
function moss.runs.status(id) end

--- The last `chars` characters of a run's log (default 2000).
---@param id string
---@param chars? integer
---@return string
function moss.runs.log_tail(id, chars) end

--- Stop a run (SIGTERM to its group, SIGKILL after 2 s); its record once it ended.
---@param id string
---@return moss.Run
function moss.runs.stop(id) end

--- The next event (alerts first), or nil after `timeout` seconds (nil: wait until one comes).
---@param timeout? number
---@return moss.RunEvent|nil
function moss.runs.wait(timeout) end

--- Alerts, oldest first, optionally only one status or one run's.
---@param filter? {status?: "pending"|"resolved", run_id?: string}
---@return moss.Alert[]
function moss.runs.alerts(filter) end

--- Resolve a pending alert with one of its choices; "stop..." stops the run.
---@param alert_id string
---@param choice string
---@return moss.Alert
function moss.runs.resolve(alert_id, choice) end

--- Raise an alert on a run (a script's own check, the LLM judge); the same message already
--- pending on the run is returned with duplicate=true instead of a second alert.
---@param run_id string
---@param spec string|{message: string, severity?: "info"|"warning"|"critical", choices?: string[], source?: "script"|"judge"|"manual"}
---@return moss.Alert|{queued: true, run_id: string, message: string, severity: string}
function moss.runs.alert(run_id, spec) end


-- ---- child agents ------------------------------------------------------------------

---@class moss.SpawnSpec
---@field task string the child's task
---@field role? string a role under roles/ (default explorer)
---@field machine? string a machine under machines/ (default [agent] machine or v1)
---@field max_turns? integer
---@field access? "read-only"|"read-shell"|"edit"|"full" at most the parent's; the child's role is clamped to it
---@field auto_approve? "low"|"medium"|"high"
---@field context? string a note the child starts with
---@field spawn? boolean whether the child may itself use $(spawn)
---@field events? "stream-json" emit the child's events on stdout with its id
---@field resume? string re-attach a child of this session saved by an earlier run
---@field message? string with resume: a message for a finished child, which goes on

---@class moss.ChildResult
---@field answer string|nil
---@field success boolean
---@field reason string answered, max_turns, budget, loop, error, cancelled, ...
---@field turns integer
---@field usage moss.Usage
---@field session_id string the child's id, PARENT-N
---@field role string
---@field evidence string[] the working memory it kept, capped
---@field error? string for a failed child: "child ID failed: ..."

---@class moss.AgentHandle
---@field id string
local AgentHandle = {}
--- The result once the child ended; nil after `timeout` seconds.
---@param timeout? number
---@return moss.ChildResult|nil
function AgentHandle:wait(timeout) end
---@return "running"|"paused"|"done"|"failed"|"cancelled"
function AgentHandle:status() end
--- Stop at the next turn boundary (after its checkpoint) until resumed.
function AgentHandle:pause() end
--- Go on (a paused child; a finished one with a message starts again from its checkpoint).
---@param message? string
function AgentHandle:resume(message) end
--- Stop it (at once, or at its next turn boundary); its result says "cancelled".
function AgentHandle:cancel() end

--- Start a child agent in its own thread and Lua runtime; returns at once.
---@param spec moss.SpawnSpec
---@return moss.AgentHandle
function moss.spawn(spec) end

--- The first of `handles` to end, and its result; nil after `timeout` seconds.
---@param handles moss.AgentHandle[]
---@param timeout? number
---@return moss.AgentHandle|nil, moss.ChildResult|nil
function moss.wait_any(handles, timeout) end

--- Every handle's result, in order.
---@param handles moss.AgentHandle[]
---@param timeout? number
---@return moss.ChildResult[]
function moss.wait_all(handles, timeout) end

---@class moss.agents
moss.agents = {}
--- Start a child (what moss.spawn calls): its id.
---@param spec moss.SpawnSpec
---@return string
function moss.agents.start(spec) end
---@param id string
---@param timeout? number
---@return moss.ChildResult|nil
function moss.agents.wait(id, timeout) end
--- Index (1-based) and result of the first of `ids` to end; nil after `timeout`.
---@param ids string[]
---@param timeout? number
---@return integer|nil, moss.ChildResult|nil
function moss.agents.wait_any(ids, timeout) end
---@param id string
---@return string
function moss.agents.status(id) end
--- One child's {id, parent, role, status, task, turn, state, waiting, result}, or all of this tree's.
---@param id? string
---@return table
function moss.agents.info(id) end
---@param id string
---@return boolean
function moss.agents.pause(id) end
---@param id string
---@param message? string
---@return boolean
function moss.agents.resume(id, message) end
---@param id string
---@return boolean
function moss.agents.cancel(id) end
--- For a child's runner between turns: {} to go on, {message=} from its parent, {cancel=true}; blocks while paused.
---@param turn integer
---@param state string
---@return {message?: string, cancel?: boolean}
function moss.agents.boundary(turn, state) end
--- A child's progress event (live panel; child_* events in stream-json).
---@param event table
function moss.agents.progress(event) end
--- This agent: {id, parent, tree, role, max_access, child}.
---@return table
function moss.agents.self() end
--- The saved direct children of a session (this one by default), from their checkpoints.
---@param id? string
---@return table[]
function moss.agents.children(id) end

-- ---- locks -------------------------------------------------------------------------

---@class moss.LockHandle
---@field id integer
---@field target string
local LockHandle = {}
--- Let go (false if already released).
---@return boolean
function LockHandle:release() end

--- Lock a directory (`src/`), a file (`src/main.rs`) or a symbol (`src/main.rs/Cli/run`).
--- Waiters queue in order; after `timeout` seconds (default 30): nil, "locked by ID (role) since TIME".
---@param target string
---@param opts? {timeout?: number}
---@return moss.LockHandle|nil, string|nil
function moss.lock(target, opts) end

---@class moss.locks
moss.locks = {}
--- What moss.lock calls: a lock id, or nil and the holder.
---@param target string|string[]
---@param opts? {timeout?: number}
---@return integer|nil, string|nil
function moss.locks.acquire(target, opts) end
---@param id integer
---@return boolean
function moss.locks.release(id) end
--- Every lock held in this project, by this process and others: {targets, session, role, pid, since}.
---@return table[]
function moss.locks.list() end

---@class moss.inbox
---What the user says while a session works (docs/lua-api.md#mossinbox).
moss.inbox = {}
---@param session_id string
---@param opts? {offset?: integer, task?: string, terminal?: boolean}
---@return {offset: integer, listening: boolean, channels: string[]}
function moss.inbox.open(session_id, opts) end
---@param handler fun(records: table[], offset: integer): string|nil  # "interrupt" ends the wait
function moss.inbox.watch(handler) end
---@return {records: table[], offset: integer}
function moss.inbox.read() end
---@param session_id string
---@param text string
---@param opts? {source?: string}
---@return table
function moss.inbox.post(session_id, text, opts) end
---@return boolean
function moss.inbox.close() end
---Internal: the host's note that a handler is registered (moss.inbox.watch calls it).
---@param on boolean
function moss.inbox._watched(on) end

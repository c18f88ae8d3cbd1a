---@meta moss
-- GENERATED from host/api/declarations.lua by `python -m moss.api`: edit that file, not this one.
-- The moss.* API, declared once (host/api/declare.py reads it): each primitive's doc,
-- `---@param`s, `---@return` and `---@errors`, and the classes and aliases they use. The
-- argument checks every primitive runs, scripts/types/moss.lua (editor stubs, read through
-- .luarc.json) and the reference tables of docs/lua-api.md are made from this file:
-- `python -m moss.api` after an edit. An argument that does not fit its `---@param`
-- is a `usage` error naming it. Only the types at the top of a parameter are checked (that
-- a table came, not its fields). `---@errors` lists every kind the primitive can raise but
-- `interrupted` and `internal` (any primitive can): tests/test_api_docs.py follows its Python
-- through host/ (tests/errorreach.py) and fails on a kind it can raise that the list lacks.

--- Every kind of error a primitive or the runtime raises (`err.kind`, `moss.error_kind(err)`).
---@alias moss.ErrorKind
---| "usage"        # a primitive was called wrongly (bad argument), or a script asked for something that cannot be
---| "config"       # moss is not configured for this (e.g. no LLM provider), or a file it keeps is broken (a config file, a checkpoint)
---| "not_found"    # a path, symbol, session or module does not exist
---| "ambiguous"    # a name matches several things
---| "denied"       # refused by the access level, trust or path confinement
---| "io"           # a file, process or server moss needed could not be read, written or reached
---| "conflict"     # a change collides with one made meanwhile (an edit whose text moved, a restore)
---| "locked"       # another session holds the lock (after the wait)
---| "budget"       # an LLM cost or token budget is spent
---| "llm"          # the LLM call failed after retries
---| "timeout"      # a deadline passed
---| "stopped"      # the user spoke while a model call or a wait was in flight; the call was cancelled
---| "interrupted"  # the user pressed Ctrl-C (not catchable: re-raised)
---| "syntax"       # a Lua chunk did not compile
---| "memory"       # the script went over its memory limit ([lua] max_memory_mb)
---| "internal"     # a bug in moss: the log has the traceback; please report it
---| "lua"          # (moss.error_kind only) a plain Lua error, not a moss one

---@class moss.Error
---@field kind moss.ErrorKind
---@field message string   # "moss.ns.fn: what went wrong"
---@field where string     # "file.lua:LINE: " of the caller, or ""

---@class moss
---@field args string[]            # the words after `moss @NAME`, host options removed
---@field root string              # the project root (the nearest .moss/ or .git/ above the working directory)
---@field config table             # merged config: `.moss/config.toml` over `~/.config/moss/config.toml` (tables merge key by key, the project wins); every field, including ones only your scripts know
---@field options moss.Options     # the host options given on the command line (below)
---@field trust moss.Trust         # whether the project's `.moss/` content is in use, and what came from it (a copy: changing it changes nothing)
---@field script string            # the running script's name
---@field version string           # moss's version
moss = {}

---@class moss.Trust
---@field trusted boolean          # the project's trust-needing content (scripts, commands, endpoints, settings that widen access) is in use (also `true` when it has none)
---@field needed boolean           # the project's `.moss/` holds anything that needs trust
---@field how string               # `"nothing to trust"`, `"recorded"` (`moss trust`), `"--trust"` (this run), `"answered yes"`, or `""`
---@field max_access string        # the user's `[trust] max_access` (default `"edit"`): the most access a role the *project* chose should get
---@field project_keys string[]    # dotted config keys whose value in `moss.config` came from `.moss/config.toml` (`"agent.role"`, `"agent.max_turns"`, ...)
---@field ignored string[]         # one line per thing the project set that this run does not use (also shown on stderr)

--- The host options: taken out of any script's arguments (`--max-cost 0.5` or `--max-cost=0.5`;
--- a flag takes no value) before the script sees them, and given to it as `moss.options`.
--- tests/test_api_docs.py checks this list against the options the host parses (host/hostoptions.py).
---@class moss.Options
---@field provider? string         # --provider NAME: the LLM provider (anthropic, openai, ollama, ..., replay, script)
---@field model? string            # --model NAME: the model name
---@field base_url? string         # --base-url URL: send the LLM requests (and your key) to this endpoint instead
---@field record? string           # --record FILE: append every LLM request and response to a JSONL cassette
---@field replay? string           # --replay FILE: with --provider replay, answer from a cassette
---@field script? string           # --script FILE: with --provider script, answer a list of responses in order
---@field max_cost? number         # --max-cost USD: end cleanly once this much was spent
---@field max_tokens? integer      # --max-tokens N: end cleanly once this many tokens were used
---@field memory_mb? integer       # --memory-mb N: the Lua memory cap (default 256)
---@field timeout? number          # --timeout SECONDS: the LLM request timeout
---@field seed? integer            # --seed N: seed Lua's math.random (--record, replay and script imply 0)
---@field input_format? "text"|"stream-json"  # --input-format F: stream-json reads user, control and answer lines on stdin while the agent works (docs/events.md)
---@field allow_full? boolean      # --allow-full: permit the unrestricted `full` tool access level
---@field trust? boolean           # --trust: trust this project's .moss/ for this run only (e.g. CI on a checkout you vouch for)
---@field verbose? boolean         # --verbose: stream model output and show more detail
---@field include_partial? boolean # --include-partial: also write the model's text as it streams, as `partial` events (with --output-format stream-json)
---@field entry? string            # --entry NAME: call the script's entry NAME instead of `main` (docs/agent.md, the entry points)

--- mark a table as an object so it converts to `{}` even when empty
---@param t? table
---@return table
function moss.dict(t) end

--- raise a moss error of your own kind; `level` picks the line named (1 the caller, 0 none: for
--- configuration problems)
---@param kind string
---@param message string
---@param level? integer  # 1 = the caller of moss.error (default)
function moss.error(kind, message, level) end

--- the kind of any error value
---@param err any
---@return string
function moss.error_kind(err) end

--- `string.format`
---@param fmt string
---@return string
function moss.fmt(fmt, ...) end

---@class moss.ui
moss.ui = {}

--- a message on stderr (any value, shown as text); `style` is a rich style such as `"bold red"`
---
--- Errors: `usage`.
---@param text any
---@param opts? {style?: string}  # a rich style such as "bold red"
function moss.ui.print(text, opts) end

--- markdown for a person (a reply, an answer): on a terminal rendered by rich and wrapped to fit
--- after `gutter`, which starts every line; elsewhere (a pipe, NO_COLOR) the text as it is, each
--- line after `gutter`. On stderr, or on stdout with `stdout = true` (an answer)
---
--- Errors: `usage`.
---@param text string
---@param opts? {gutter?: string, stdout?: boolean}  # `gutter`: e.g. "  │ "
function moss.ui.markdown(text, opts) end

--- a one-line progress message on stderr (`› text`)
---
--- Errors: `usage`.
---@param text string
function moss.ui.status(text) end

--- whether stderr (or `stream` "stdout", where an answer goes) is a terminal
---
--- Errors: `usage`.
---@param stream? "stderr"|"stdout"
---@return boolean
function moss.ui.is_terminal(stream) end

--- whether a person can answer questions (stdin is a terminal, or `MOSS_ASSUME_TTY=1` for IDEs that
--- pipe answers)
---@return boolean
function moss.ui.interactive() end

--- ask the user; returns the answer line, or `nil` when nobody can answer (or no answer came
--- within `timeout` seconds); `silent` asks without printing the question again
---
--- Errors: `usage`.
---@param question string
---@param opts? {choices?: string[], timeout?: number, silent?: boolean}
---@return string|nil
function moss.ui.ask(question, opts) end

--- y/N question; `false` when nobody can answer
---
--- Errors: `usage`.
---@param question string
---@return boolean
function moss.ui.confirm(question) end

--- rows (tables) on stdout: a rich table on a terminal (a row's `_style` field, e.g. `"bold blue"`,
--- styles it), tab-separated otherwise
---
--- Errors: `usage`.
---@param rows table[]
---@param opts? {columns?: string[], title?: string}
function moss.ui.table(rows, opts) end

--- one JSON line on stdout (the `stream-json` format)
---
--- Errors: `usage`.
---@param event table
function moss.ui.event(event) end

--- a live status line at the bottom of the terminal until `live_stop()`: a spinner, `text`, the
--- seconds since it started, and the tokens an LLM reply has streamed so far (characters / 4, shown
--- as `~N tokens`, with the reply's last words); while it shows, streamed text is counted there
--- instead of printed. Calling it again retitles it and restarts its clock. `false`, and nothing
--- shown, when stderr is not a terminal or `NO_COLOR` is set (it redraws itself with escape
--- sequences); never on stdout
---
--- Errors: `usage`.
---@param text string
---@return boolean
function moss.ui.live(text) end

--- clear the status line; `true` when one was showing (so the caller prints the reply itself)
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
---@field quiet? boolean      # true: nothing of the reply is streamed to the screen (a classification, an aside: not the session's reply)

---@class moss.llm
moss.llm = {}

--- one model call; returns `{text, stop_reason, model, provider, usage={input_tokens,
--- output_tokens, cache_read_tokens, cache_write_tokens, cost_usd}, max_tokens}` (`max_tokens`: the
--- reply limit sent, after the caps of [llm.md](llm.md#reply-limits-and-the-servers-window)).
--- `messages` is a list of `{role=, content=}`; `prompt="..."` is a shorthand for one user message;
--- `label="explorer/evaluator"` is sent as the `X-Moss-Label` header (the runner labels each turn
--- `ROLE/STATE`; it never changes the prompt, so caching is unaffected)
---
--- Errors: `usage`, `config`, `budget`, `llm`, `timeout`, `stopped`.
---@param request moss.ChatRequest
---@return moss.ChatResult
function moss.llm.chat(request) end

--- session totals: the usage keys plus `calls`, `cost_known`
---@return moss.Usage
function moss.llm.usage() end

--- `nil`, or a sentence saying which budget (`--max-cost`, `--max-tokens`, `[llm] max_cost_usd`,
--- `max_total_tokens`) is spent
---@return string|nil
function moss.llm.budget() end

--- the provider the next call would use, resolved now: `{name, model, base_url, is_local, detected,
--- context_window}` (`context_window`: `[llm] context_window`, else what a local server says it
--- holds — asked once per session — else the known window of the model in tokens, else `nil`). With
--- no provider chosen by flag, config or key, a local OpenAI-compatible server found running is
--- used (`detected` names it: Ollama, llama.cpp, LM Studio, vLLM) and stderr says so; with none,
--- kind `config` naming the ports tried. `@agent` calls it before its first turn
---
--- Errors: `config`.
---@return {name: string, model: string?, base_url: string?, is_local: boolean, detected: string?, context_window: integer?}
function moss.llm.provider() end

---@class moss.code
moss.code = {}

--- `"."` or a directory: a .gitignore-aware tree ending in `N directories, M files`; a file: a
--- tree-sitter skeleton (signatures with `L<start>-<end>`, docstring summaries, enum variants and
--- fields); `path:A-B`: numbered lines; `path:N`: the symbol around line N; `path/Symbol`: that
--- symbol's source (when `path` is an existing file's exact path, always read this way, before any
--- fuzzy path match). A unique suffix finds a file (`llm.rs`); an ambiguous one lists candidates
--- (kind `ambiguous`). Binary and huge files get a one-line message. A file name with a control,
--- bidi or separator character shows it escaped (`\x0a`, `\u202e`), in every tool's output, so each
--- name stays one line. `compact`: what an agent's context gets: a skeleton's symbols by their first
--- line only, without docstring summaries, and a symbol's Python docstring cut to its first line,
--- each naming the `view` that shows what was left out
---
--- Errors: `usage`, `not_found`, `ambiguous`, `denied`, `config`.
---@param target string
---@param opts? {depth?: integer, max_chars?: integer, compact?: boolean}
---@return string
function moss.code.view(target, opts) end

--- ripgrep: hits grouped by file, each with its line number and enclosing symbol, then a total; a
--- bad regex is kind `usage`. `compact`: labels without line ranges, `(same)` for a hit in the symbol
--- of the one above, and at most 8 hits a file, then how many more and the search that lists them
---
--- Errors: `usage`, `not_found`, `config`.
---@param pattern string
---@param opts? {only?: string|string[], limit?: integer, ignore_case?: boolean, max_chars?: integer, compact?: boolean}
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
--- At access `edit` or `full` the command holds a lock on the project root while it runs, or on
--- `locks` (a path or a list: `{"src/"}`); waiting for it longer than `[agent] lock_timeout` is kind `locked`
---
--- Errors: `usage`, `not_found`, `denied`, `conflict`, `config`, `io`, `locked`.
---@param cmd string
---@param opts? {timeout?: number, cwd?: string, max_chars?: integer, stdin?: string, env?: table<string, string>, locks?: string|string[]}
---@return moss.RunResult
function moss.shell.run(cmd, opts) end

---@alias moss.AccessLevel "read-only"|"read-shell"|"edit"|"full"

---@class moss.access
moss.access = {}
--- Set the session's tool access level; a level above what this run may have (trust,
--- `--allow-full`) is refused (kind `denied`). Above your `[trust] max_access` it is refused
--- when `opts.chosen_by` names a config key that came from the project (kind `config`), and in a
--- session running a project file that replaces one of moss's own (kind `denied`).
---
--- Errors: `usage`, `denied`, `config`.
---@param level moss.AccessLevel
---@param opts? {chosen_by?: string, what?: string}  # the config key that chose the level, and what it chose ("role refactorer")
---@return moss.AccessLevel
function moss.access.set(level, opts) end
--- The session's tool access level now.
---@return moss.AccessLevel
function moss.access.get() end
--- Every access level, from the least to the most allowed.
---@return moss.AccessLevel[]
function moss.access.levels() end

---@class moss.fs
moss.fs = {}
--- a text file inside the project (relative to the root); binary and files over 2 MB refused, and
--- so are pipes, sockets, devices and symlink loops (kind `usage`)
---
--- Errors: `usage`, `not_found`, `denied`, `conflict`, `io`.
---@param path string
---@return string
function moss.fs.read(path) end
--- atomic write inside the project; needs access `edit` or `full`; the root, a directory, a pipe,
--- socket, device or symlink loop is refused (kind `usage`)
---
--- Errors: `usage`, `not_found`, `denied`, `conflict`.
---@param path string
---@param text string
function moss.fs.write(path, text) end
--- whether a path inside the project exists
---
--- Errors: `usage`.
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
---@field surfaces? moss.EditSurface[]  # preview only: what the batch does to each changed file's public items

---@class moss.SurfaceItem
---@field name string                   # qualified: "Point::scale", "Vec.push"
---@field text string                   # its declaration's head, normalised: "pub fn scale(x: i32) -> i32"
---@field sig string                    # what follows the name: "(x: i32) -> i32"

---@class moss.SurfaceChange
---@field name string
---@field before string                 # the head before the edit
---@field after string                  # and after it
---@field before_sig string
---@field after_sig string

---@class moss.EditSurface
---@field path string
---@field lang? string                  # the language read (nil: no parser, the textual fallback)
---@field how "tree-sitter"|"text"      # text: only exported names that disappear are reported
---@field removed moss.SurfaceItem[]
---@field changed moss.SurfaceChange[]
---@field added moss.SurfaceItem[]

---@class moss.edit
moss.edit = {}
--- Compute what `moss.edit.apply` would do, without writing: `{files, changes, diff,
--- syntax_warning?, surfaces}`; `surfaces` says, per changed file, which public items
--- (tree-sitter's reading of Python, Rust, JavaScript/TypeScript, Go, Lua, Java and C++;
--- host/tools/surface.py says what counts as public) the batch removed, changed or added.
---
--- Errors: `usage`, `not_found`, `ambiguous`, `denied`, `conflict`, `config`.
---@param specs moss.EditSpec|moss.EditSpec[]
---@return moss.EditResult
function moss.edit.preview(specs) end
--- All or nothing; needs access edit or full.
---
--- Errors: `usage`, `not_found`, `ambiguous`, `denied`, `conflict`, `locked`, `config`.
---@param specs moss.EditSpec|moss.EditSpec[]
---@return moss.EditResult
function moss.edit.apply(specs) end

---@class moss.session
moss.session = {}
--- write the checkpoint (any table; written through a JSON encoder, temp file + rename);
--- `final`: the session ended, so its whole checkpoint is rewritten now (no journal to replay)
---
--- Errors: `usage`, `denied`.
---@param id string
---@param state table
---@param opts? {final?: boolean}
---@return string path
function moss.session.save(id, state, opts) end
--- a checkpoint as a table (its `session_id` set to the id it was loaded under); no id = the
--- latest. A file that is not a JSON object (not UTF-8, not JSON, nested too deep, a link or a
--- pipe) is kind `config`, naming the file and how to start fresh; whether its fields have the
--- shape of a session is the caller's to check
---
--- Errors: `usage`, `not_found`, `denied`, `config`.
---@param id? string   # nil = the latest
---@return table
function moss.session.load(id) end
--- `{id, mtime, running, turn, state, reason, task, machine, role, done}` for each checkpoint, oldest
--- first: the checkpoint's own fields as saved, and `running`, whether a live moss process runs it
--- now (the host's fact); an unreadable one has `state` and `reason` `"corrupt"` and `error` saying why
---
--- Errors: `denied`, `config`.
---@return {id: string, mtime: number, running: boolean, turn: integer, state: string, reason: string|nil, task: string}[]
function moss.session.list() end
--- append one event line `{event, ts, ...data, session, parent}` (every line names its agent and
--- that agent's parent, `null` for a root); moss's own events are listed in
--- [events.md](events.md#the-session-log)
---
--- Errors: `usage`, `denied`.
---@param id string
---@param event string
---@param data? table
function moss.session.log(id, event, data) end
--- host-side events (LLM attempts, retries, snapshots, edits) go to this session's log from now on;
--- `role` names the agent to others waiting for its locks; `resume` is the command that goes on
--- with the session, which the host prints when Ctrl-C stops it (no script runs then)
---
--- Errors: `usage`.
---@param id string
---@param opts? {role?: string, resume?: string}  # the agent's role; the command that resumes the session
function moss.session.bind(id, opts) end
--- the logs; one log's events
---
--- Errors: `denied`.
---@return {id: string, path: string, events: integer, mtime: number}[]
function moss.session.logs() end
--- A session's log records, oldest first.
---
--- Errors: `usage`, `not_found`, `denied`.
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
--- capture the tree now; returns its id
---
--- Errors: `usage`, `not_found`, `denied`, `config`, `io`, `timeout`.
---@param label string
---@return string id
function moss.shadow.snapshot(label) end
--- capture before something that may write (an edit, a `moss.shell.run`); returns the write id,
--- itself a snapshot id. The bound session (`moss.session.bind`) owns what the write changes
---
--- Errors: `usage`, `not_found`, `denied`, `config`, `io`, `timeout`.
---@param label string
---@return string write_id  # also a snapshot id
function moss.shadow.begin_write(label) end
--- capture after it and record in the ownership journal which paths it changed. Returns `{id, post,
--- changed = {paths}, not_captured = {{path, reason, detail}}}`: `not_captured` are changed paths a
--- rollback cannot put back. Calling it twice returns the first result; a write never ended is
--- closed by the session's next `begin_write` or `restore`
---
--- Errors: `usage`, `not_found`, `ambiguous`, `denied`, `config`, `io`, `timeout`.
---@param write_id string
---@return {id: string, post: string, changed: string[], not_captured: moss.ShadowNotCaptured[]}
function moss.shadow.end_write(write_id) end
--- needs access `edit`. With a bound session that recorded writes: only the paths that session
--- changed in writes since `id`, each back to how it was before the session's first change to it. A
--- path another session (or a hand edit, or a command outside a write) changed after that is a
--- conflict: kept and reported. Without a session, or for a session that never called
--- `begin_write`: every path that differs from the capture. Returns `{reverted, removed, restored,
--- skipped = {{path, reason, detail}}, conflicts = {{path, session, reason}}, backup, scope =
--- "session"\|"all"}`. A child agent's writes count as its tree root's, so a parent's rollback
--- covers what its children changed and never another tree's
---
--- Errors: `usage`, `not_found`, `ambiguous`, `denied`, `config`, `io`, `locked`, `timeout`.
---@param id string
---@return {reverted: string[], removed: string[], restored: string[], skipped: moss.ShadowSkipped[], conflicts: moss.ShadowConflict[], backup: string, scope: "session"|"all"}
function moss.shadow.restore(id) end
--- snapshots (and write starts) oldest first; a unified diff / `{modified, added, deleted}` from a
--- capture to now
---
--- Errors: `not_found`, `denied`, `config`, `io`, `timeout`.
---@return {id: string, label: string, time: number, files: integer}[]
function moss.shadow.list() end
--- A unified diff of the tree (or `paths`) against snapshot `id`.
---
--- Errors: `usage`, `not_found`, `ambiguous`, `denied`, `config`, `io`, `timeout`.
---@param id string
---@param paths? string[]
---@return string
function moss.shadow.diff(id, paths) end
--- The paths changed since snapshot `id`, by kind.
---
--- Errors: `usage`, `not_found`, `ambiguous`, `denied`, `config`, `io`, `timeout`.
---@param id string
---@return {modified: string[], added: string[], deleted: string[]}
function moss.shadow.changed(id) end

---@class moss.json
---@field null table   # encodes as JSON null (nil cannot sit in a table)
moss.json = {}
--- A Lua value as JSON text (`moss.dict()` for an empty object).
---
--- Errors: `usage`.
---@param value any
---@param opts? {indent?: integer, sort_keys?: boolean}
---@return string
function moss.json.encode(value, opts) end
--- JSON text to Lua values (`null` as `moss.json.null`); invalid JSON or nesting deeper than 512
--- levels is kind `usage` naming the line and column.
---
--- Errors: `usage`.
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
--- The scripts under `folder` (e.g. "commands") in every root, project first: name, module, origin,
--- path, and what each overrides. With `untrusted`, an untrusted project's own files there come
--- after them, `trusted = false` (their names only: nothing of them is read before `moss trust`),
--- `overrides` naming what each would replace once trusted.
---
--- Errors: `usage`.
---@param folder string
---@param opts? {untrusted?: boolean}
---@return {name: string, module: string, origin: string, path: string, overrides: string[], trusted?: boolean}[]
function moss.scripts.list(folder, opts) end

--- `module` as the first root below `below` ("project", "user"; nil: below the root `require`
--- loads it from) has it: its compiled chunk, to call for the module, and that root's name; nil
--- when no lower root has it. How a project role or machine that `extends` the one of the same
--- name it overrides finds it (lib/machine/extend.lua).
---
--- Errors: `usage`, `denied`, `syntax`.
---@param module string
---@param below? string
---@return function? chunk, string? origin
function moss.scripts.below(module, below) end

--- Run read-only primitives side by side: { {"code.view", "src"}, ... }.
---
--- Errors: `usage`.
---@param calls table[]
---@return {ok: boolean, value?: any, error?: string, kind?: string}[]
function moss.parallel(calls) end

--- a fresh unique session id (8 characters without look-alikes)
---
--- Errors: `denied`.
---@return string
function moss.session.new_id() end

---@class moss.MemoryEntry
---@field kind "facts"|"preferences"|"decisions"
---@field text string
---@field line integer
---@field file string

---@class moss.memory
moss.memory = {}

--- append `- text (YYYY-MM-DD)` to the kind's file; `{kind, text, duplicate}`
---
--- Errors: `usage`, `denied`.
---@param text string
---@param opts? {kind?: "facts"|"preferences"|"decisions"}
---@return {kind: string, text: string, duplicate: boolean}
function moss.memory.memorize(text, opts) end

--- entries `{kind, text, line, file}` sharing words with the query, best first
---
--- Errors: `usage`, `denied`.
---@param query string
---@param opts? {limit?: integer}
---@return moss.MemoryEntry[]
function moss.memory.recall(query, opts) end

--- remove the lines containing `text`; how many
---
--- Errors: `usage`, `denied`.
---@param text string
---@return integer
function moss.memory.forget(text) end

--- every entry
---
--- Errors: `denied`.
---@return moss.MemoryEntry[]
function moss.memory.all() end

--- every memory file whole, headings included: `{kind, file, text}` (what `moss memory organize`
--- rewrites)
---
--- Errors: `denied`.
---@return {kind: string, file: string, text: string}[]
function moss.memory.files() end

--- replace the kind's whole file atomically; `{file, changed, diff}` (a unified diff); `dry_run =
--- true` writes nothing. Allowed at every access level, like `memorize`: `.moss/memory/` is the
--- agent's own
---
--- Errors: `usage`, `denied`.
---@param kind string
---@param text string
---@param opts? {dry_run?: boolean}
---@return {file: string, changed: boolean, diff: string}
function moss.memory.write(kind, text, opts) end

---@class moss.EvalTask
---@field id string
---@field kind "question"|"change"
---@field prompt string
---@field tags string[]
---@field commands boolean   # it has setup or check commands (project content: they need trust)
---@field tries integer      # the tries its suite gives it (a change; --tries overrides)
---@field exercise? {language: string, title: string, name: string, instructions: string, solution: string[], test: string[]} # an exercise folder's task: what its prompt is made of
---@field problem? string    # the task could not be read (an exercise's config): it runs as a suite error

---@class moss.EvalSuite
---@field name string
---@field path string        # what moss.eval.start's `suite` takes
---@field project boolean    # the suite is the project's content (its commands need trust)
---@field origin string      # "built-in" | "user" | "project" | "path"
---@field tasks moss.EvalTask[]

---@class moss.EvalAttempt
---@field key string         # unique in the eval; what --resume matches on
---@field task string        # a task id of the suite
---@field cell string        # the cell's name
---@field trial integer
---@field args string[]      # words for `moss @agent` before the prompt (--machine, --role, --model, ...)
---@field variant? string    # a folder laid over the copy's .moss/
---@field info? table        # kept in the attempt's row (the cell's dimensions)
---@field recordings? string[] # replaying: the keys whose cassette it may replay, the first found (default: its own key)
---@field max_cost? number     # this attempt's own budget (USD); the eval's, when less is left, wins
---@field max_tokens? integer  # likewise, in tokens
---@field prompt? string       # the agent's prompt (default: the task's)
---@field config? table        # config merged over the copy's .moss/config.toml for this attempt
---@field tries? integer       # tries the agent gets (a change): after a failed check its session is resumed with `retry`
---@field retry? {message: string, lines?: integer, chars?: integer} # {output}: the failed check's last `lines` lines (at most `chars`), {detail}: its one line

---@class moss.BatchTask
---@field id string          # unique in the batch (default task-N); the attempt's key
---@field repo string        # the repository folder (absolute, inside the batch file's folder)
---@field prompt string
---@field line integer       # where the task starts in the batch file
---@field machine? string
---@field role? string
---@field model? string
---@field provider? string
---@field max_turns? integer
---@field max_cost? number
---@field max_tokens? integer

---@class moss.Batch
---@field name string        # the file's name without its suffix
---@field path string        # what moss.eval.start's `suite` takes
---@field tasks moss.BatchTask[]

---@class moss.eval
moss.eval = {}

--- load a suite: a folder with suite.toml, a .toml file, or a name under scripts/eval/suites/
--- (project, user, then built-in folder, like any script)
---
--- Errors: `usage`, `denied`, `not_found`, `config`.
---@param spec string
---@return moss.EvalSuite
function moss.eval.suite(spec) end

--- load a batch file of agent tasks (`moss batch`): JSONL (one object a line) or TOML (`[[task]]`
--- tables), each task's repo inside the file's folder; a mistake is one line naming the file,
--- the line, the task and the field (kind config)
---
--- Errors: `usage`, `not_found`, `config`.
---@param path string
---@return moss.Batch
function moss.eval.batch(path) end

--- start the attempts (in parallel, `jobs` at once, under one budget): each in a fresh copy of its
--- task's repository in a temp folder, the agent a `moss @agent` subprocess there, then the check.
--- With `resume`, attempts already in `out`'s attempts.jsonl are skipped. A project suite's
--- commands are refused (`denied`) while the project is untrusted. `record`: a folder where each
--- attempt's agent writes its LLM cassette (`KEY.jsonl`, the key made a file name); `replay`: a
--- folder of such cassettes the agents answer from, offline (an attempt without one ends
--- `not_recorded`, one whose requests leave it `diverged`, with the row's `diverged` saying where).
---
--- Errors: `usage`, `denied`, `not_found`, `config`.
--- `file`: the results file (default `out`/attempts.jsonl; with it, `out` holds only the logs).
--- `retries`: an attempt that ends `infra_error` runs again up to that many times (its row's
--- `tries`, `retried`). `executor` "ray": each attempt a Ray job at `ray_address` asking for
--- `num_cpus` (docs/fleet.md). Every row carries the `patch` its agent made (host/tools/patch.py).
--- The live panel on a terminal starts with `title`; `tally` "cells" (default) shows each cell's
--- pass rate so far, "outcomes" counts the `outcome` each recorded verdict names (a batch's).
--- `check_timeout`: seconds each check command may take (default: the task's; an exercise's is its
--- language's, host/eval/languages.py). An exercise whose toolchain, library or prepared packages
--- are not here ends `not_run` (its `detail` says what is missing); one that could not be read
--- ends `suite_error`.
---@param opts {suite: string, attempts: moss.EvalAttempt[], out: string, file?: string, jobs?: integer, max_cost?: number, max_tokens?: integer, retries?: integer, resume?: boolean, keep?: boolean, keep_failed?: boolean, executor?: string, ray_address?: string, num_cpus?: number, title?: string, tally?: "cells"|"outcomes", meta?: table, record?: string, replay?: string, check_timeout?: number}
---@return {out: string, total: integer, skipped: integer, to_run: integer}
function moss.eval.start(opts) end

--- wait for the next attempt to end; its raw row (`key, task, cell, trial, kind, reason, exit,
--- success, answer, turns, tokens, cost, wall, session_id, log, check = {passed, detail, output?},
--- detail`; with tries, `max_tries` and `checks` (each try's {passed, detail})), or nil once all
--- ended (or the budget stopped the rest)
---
--- Errors: `usage`.
---@return table|nil
function moss.eval.next() end

--- the verdict on an ended attempt: `passed` true/false, or nil when it does not count; writes
--- its line to attempts.jsonl and removes its copy (kept with opts keep / keep_failed); the row.
--- `passed_on`: the try it passed on (pass@1 .. pass@N)
---
--- Errors: `usage`, `denied`.
---@param key string
---@param verdict {passed?: boolean, verdict?: string, outcome?: string, passed_on?: integer}
---@return table
function moss.eval.record(key, verdict) end

--- end the eval: `{out, file, rows (every line, earlier runs' too), stopped ("budget"|nil),
--- not_run, budget_cut (attempts the budget stopped), peak (most attempts at once), total, skipped}`
---
--- Errors: `usage`, `denied`, `not_found`, `config`.
---@return table
function moss.eval.finish() end

--- per cell: `{cell, attempts, n, passed, rate, ci_low, ci_high (95% Wilson), not_counted,
--- diverged, not_recorded (replaying), mean_turns, mean_tokens, mean_cost, p50_wall, p90_wall,
--- tries (the most any attempt had), pass_at = {{k, passed, rate, ci_low, ci_high}...} (k = 1..tries:
--- passed on try k or earlier)}`
---
--- Errors: `usage`.
---@param rows table[]
---@return table[]
function moss.eval.summary(rows) end

--- the rows of an attempts.jsonl or a batch's results file (or of the run folder holding one)
---
--- Errors: `usage`, `denied`, `not_found`, `config`.
---@param path string
---@return table[]
function moss.eval.read(path) end

--- the two-sided exact McNemar p-value for `b` pairs passed only in A and `c` only in B
---
--- Errors: `usage`.
---@param b integer
---@param c integer
---@return number
function moss.eval.mcnemar(b, c) end

--- make once what the checks of a folder of exercises need (host/eval/languages.py):
--- JavaScript's jest and babel from the npm registry into moss's cache (the one step of an eval
--- that reaches the network), Go's warm build cache, the C++ Catch main; one entry per language
---
--- Errors: `usage`, `not_found`, `config`, `io`.
---@param path string
---@return {language: string, ready: boolean, detail: string}[]
function moss.eval.prepare(path) end

--- how many CPUs this machine has
---@return integer
function moss.eval.cpus() end

--- write a self-contained HTML report (no JavaScript, nothing fetched: works offline) to `path`
--- (ending in .html; its folder must exist; replaced, never written through a link): `report`
--- is `{title, subtitle?, sections = {...}, notes? = {text...}}`, each section a table
--- `{title?, columns = {{key, label, numeric?}...}, rows = {{[key] = text}...}}` or a chart
--- `{title?, chart = {x_label, y_label, x_format ("usd"|"number"), points = {{label, x, y, low?,
--- high?, note?}...}}}` (y, low, high in 0..1: a rate and its interval); every text is escaped
---
--- Errors: `usage`, `not_found`, `denied`.
---@param path string
---@param report table
---@return {file: string}
function moss.eval.html(path, report) end

---@class moss.store
moss.store = {}

--- the document saved under `name`, or an empty table if there is none
---
--- Errors: `usage`, `denied`, `io`.
---@param name string   # 1-64 letters, digits, '-' and '_'
---@return table
function moss.store.load(name) end

--- replace the whole document atomically (temp file, fsync, rename); the file's path
---
--- Errors: `usage`, `denied`.
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

--- `{name, transport, access, description?, error?}` per configured server (`transport` is `stdio`,
--- `http` or `unusable`, with `error` saying why: an untrusted project's server, both or neither of
--- `command`/`url`); starts nothing
---@return moss.McpServer[]
function moss.mcp.servers() end

--- `{name, description, input_schema, params}` per tool; starts the server on first use. `params`
--- is a one-line summary (`{"path": string, "limit"?: integer}`)
---
--- Errors: `usage`, `not_found`, `denied`, `config`.
---@param server string
---@return moss.McpTool[]
function moss.mcp.tools(server) end

--- `{text, is_error, chars, timed_out?}`: the result's content as text, capped (head and tail). A
--- tool that fails returns `is_error = true` with its message; a call with no answer within
--- `timeout` is cancelled and returns `timed_out = true`
---
--- Errors: `usage`, `not_found`, `denied`, `config`.
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

--- start a run (a string is shorthand for `{cmd=}`); returns its record `{id, name, cmd, workdir,
--- status, code, sandbox, access, detached, created_at, started_at, ended_at, duration, pid, log,
--- error, meta, alerts, alert_rules}`. `workdir` is relative to the project; `timeout` (seconds)
--- stops it (status `stopped`); `meta` is any data kept with it; `env` adds variables to the
--- scrubbed environment, inside the sandbox (`MOSS_RUN_ID` and `PYTHONUNBUFFERED=1` are set; `LD_*`
--- is refused, kind `denied`). `git` (record and terminal event) lists git metadata the run
--- created, which moss undid
---
--- Errors: `usage`, `not_found`, `denied`, `conflict`, `config`, `io`.
---@param spec string|{cmd: string, name?: string, workdir?: string, alerts?: moss.AlertRule[], detach?: boolean, timeout?: number, meta?: any, env?: table<string, string>, executor?: "local"|"ray", address?: string, resources?: {num_cpus?: number, num_gpus?: number}, results?: string}
---@return moss.Run
function moss.runs.start(spec) end

--- every run of the project, oldest first
---@return moss.Run[]
function moss.runs.list() end

--- one run's record (kind `not_found` for an unknown id)
---
--- Errors: `usage`, `not_found`.
---@param id string
---@return moss.Run
function moss.runs.status(id) end

--- the last `chars` characters of its log
---
--- Errors: `usage`, `not_found`.
---@param id string
---@param chars? integer
---@return string
function moss.runs.log_tail(id, chars) end

--- SIGTERM to its process group, SIGKILL after 2 s; returns the record once it ended
---
--- Errors: `usage`, `not_found`.
---@param id string
---@return moss.Run
function moss.runs.stop(id) end

--- the next event, or `nil` after `timeout` seconds (`nil`: until there is one). Blocks without
--- polling the CPU; Ctrl-C ends it at once (exit 130). Events: `{type="run", id, name, status,
--- previous, code?, error?}` for every status change, `{type="alert", id, alert_id, run_id,
--- run_name, severity, message, choices, status, line}`; pending alert events come first
---
--- Errors: `usage`, `stopped`.
---@param timeout? number
---@return moss.RunEvent|nil
function moss.runs.wait(timeout) end

--- alerts, oldest first: `{id, run_id, run_name, rule, severity, message, choices, status, line,
--- created_at, choice?, resolved_at?}`; `status` is `pending` or `resolved`
---
--- Errors: `usage`.
---@param filter? {status?: "pending"|"resolved", run_id?: string}
---@return moss.Alert[]
function moss.runs.alerts(filter) end

--- resolve a pending alert with one of its choices (case-insensitive; another is kind `usage`); a
--- choice starting with `stop`, `kill` or `terminate` stops the run. Returns the alert plus
--- `run_status`. An alert of a run another live moss process watches is handed to that
--- process, which resolves it on its next tick (returns `{queued=true, id, run_id, choice}`)
---
--- Errors: `usage`, `not_found`.
---@param alert_id string
---@param choice string
---@return moss.Alert|{queued: true, id: string, run_id: string, choice: string}
function moss.runs.resolve(alert_id, choice) end

--- raise an alert yourself (a string is shorthand for `{message=}`); `source` is `script`, `judge`
--- or `manual`. The same message already pending on the run is not raised twice: that alert comes
--- back with `duplicate=true`. A run another live moss process watches gets it through its trigger
--- file (returns `{queued=true, run_id, message, severity}`)
---
--- Errors: `usage`, `not_found`.
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
---@field script? string the script the child runs (default "agent")
---@field entry? string the entry of that script the host calls with this spec (default "child"; docs/agent.md)
---@field isolate? boolean work in its own copy of the tree; its change comes back as `patch` and `changed`, for h:merge() or h:discard()

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
---@field status? "done"|"failed"|"cancelled" how the child's entry files it (default done)
---@field isolated? boolean it worked in its own copy of the tree (the fields below are the host's)
---@field patch? string its change as a unified diff against where it started (binary files named, deletions included; what .gitignore ignores left out)
---@field patch_cut? boolean the patch was longer than 256 KiB and is cut (it ends with a marker line)
---@field patch_stat? {files: integer, added: integer, removed: integer, binary: integer, bytes: integer}
---@field changed? string[] the paths it changed (added, modified, deleted)
---@field patch_error? string why its change could not be read
---@field merge_state? "merged"|"discarded"|"gone" (resumed) its copy is no more

---@class moss.MergeConflict
---@field path string
---@field reason string both changed, added in both, deleted by the child, deleted in the tree, refused, blocked, ...
---@field detail? string
---@field hunks? string[] the conflicting regions, marked <<<<<<< tree / ======= / >>>>>>> child, with the tree's line

---@class moss.MergeResult
---@field applied string[] paths that now hold the child's version (or a clean merge of both)
---@field conflicts moss.MergeConflict[] paths left as they are in the tree
---@field changed string[] every path the child changed
---@field snapshot string the snapshot taken before the merge (moss.shadow.restore undoes it)

---@class moss.AgentHandle
---@field id string
local AgentHandle = {}
--- The result once the child ended; nil after `timeout` seconds.
---
--- Errors: `usage`, `not_found`.
---@param timeout? number
---@return moss.ChildResult|nil
function AgentHandle:wait(timeout) end
--- Errors: `not_found`.
---@return "running"|"paused"|"done"|"failed"|"cancelled"
function AgentHandle:status() end
--- Stop at the next turn boundary (after its checkpoint) until resumed.
---
--- Errors: `not_found`.
function AgentHandle:pause() end
--- Go on (a paused child; a finished one with a message starts again from its checkpoint).
---
--- Errors: `usage`, `config`, `denied`, `not_found`, `io`, `timeout`.
---@param message? string
function AgentHandle:resume(message) end
--- Stop it (at once, or at its next turn boundary); its result says "cancelled".
---
--- Errors: `not_found`.
function AgentHandle:cancel() end
--- An isolated child's change merged into this agent's tree (three-way, against where it
--- started; a conflicting file is left as it is). A snapshot comes first; the copy is removed.
---
--- Errors: `usage`, `config`, `denied`, `not_found`, `locked`, `io`, `timeout`.
---@return moss.MergeResult
function AgentHandle:merge() end
--- Drop an isolated child's copy (its change is not merged).
---
--- Errors: `usage`, `not_found`.
---@return {discarded: boolean, bytes: integer}
function AgentHandle:discard() end

--- Start a child agent in its own thread and Lua runtime; returns at once.
---
--- Errors: `usage`, `config`, `denied`, `not_found`, `io`, `timeout`.
---@param spec moss.SpawnSpec
---@return moss.AgentHandle
function moss.spawn(spec) end

--- The first of `handles` to end, and its result; nil after `timeout` seconds.
---
--- Errors: `usage`, `not_found`.
---@param handles moss.AgentHandle[]
---@param timeout? number
---@return moss.AgentHandle|nil, moss.ChildResult|nil
function moss.wait_any(handles, timeout) end

--- Every handle's result, in order.
---
--- Errors: `usage`, `not_found`.
---@param handles moss.AgentHandle[]
---@param timeout? number
---@return moss.ChildResult[]
function moss.wait_all(handles, timeout) end

---@class moss.agents
moss.agents = {}
--- Start a child (what moss.spawn calls): its id.
---
--- Errors: `usage`, `config`, `denied`, `not_found`, `io`, `timeout`.
---@param spec moss.SpawnSpec
---@return string
function moss.agents.start(spec) end
--- Wait up to `timeout` seconds (none: until it ends) for a child; its result, or nil when it is
--- still running.
---
--- Errors: `usage`, `not_found`.
---@param id string
---@param timeout? number
---@return moss.ChildResult|nil
function moss.agents.wait(id, timeout) end
--- Index (1-based) and result of the first of `ids` to end; nil after `timeout`.
---
--- Errors: `usage`, `not_found`.
---@param ids string[]
---@param timeout? number
---@return integer|nil, moss.ChildResult|nil
function moss.agents.wait_any(ids, timeout) end
--- A child's state: running, paused, done, failed or cancelled.
---
--- Errors: `usage`, `not_found`.
---@param id string
---@return string
function moss.agents.status(id) end
--- One child's {id, parent, role, status, task, turn, state, waiting, started, result}, or all of
--- this tree's; an isolated child's also `isolated` = {state (working, merged, discarded), strategy,
--- files, bytes, seconds, home, whole (its copy complete), changed (how many paths it changed)}.
---
--- Errors: `usage`, `not_found`.
---@param id? string
---@return table
function moss.agents.info(id) end
--- Pause a child agent at its next turn boundary (it waits there until resumed).
---
--- Errors: `usage`, `not_found`.
---@param id string
---@return boolean
function moss.agents.pause(id) end
--- Let a paused child go on; `message` reaches it as a note from its parent.
---
--- Errors: `usage`, `config`, `denied`, `not_found`, `io`, `timeout`.
---@param id string
---@param message? string
---@return boolean
function moss.agents.resume(id, message) end
--- Cancel a child agent: it stops at its next turn boundary, its checkpoint says `cancelled`.
---
--- Errors: `usage`, `not_found`.
---@param id string
---@return boolean
function moss.agents.cancel(id) end
--- For a child's runner between turns: {} to go on, {message=} from its parent, {cancel=true}; blocks while paused.
---
--- Errors: `usage`.
---@param turn integer
---@param state string
---@return {message?: string, cancel?: boolean}
function moss.agents.boundary(turn, state) end
--- A child's progress event (live panel; child_* events in stream-json).
---
--- Errors: `usage`.
---@param event table
function moss.agents.progress(event) end
--- This agent: {id, parent, tree, role, max_access, child, isolated} (isolated: it works in its own copy of the tree).
---@return table
function moss.agents.self() end
--- The saved direct children of a session (this one by default), from their checkpoints.
---
--- Errors: `usage`, `config`, `denied`.
---@param id? string
---@return table[]
function moss.agents.children(id) end
--- Merge a finished isolated child's change into this agent's tree: a snapshot first, then a
--- three-way merge against where the child started, path by path; a conflicting path is left
--- as it is and reported with its hunks; never into .moss/ or .git. The copy is removed (with
--- conflicts too: their hunks and .moss/agent/patches/ID.patch hold the child's side). Only the
--- child's parent may merge it; another agent's child is a usage error naming its parent.
---
--- Errors: `usage`, `config`, `denied`, `not_found`, `locked`, `io`, `timeout`.
---@param id string
---@return moss.MergeResult
function moss.agents.merge(id) end
--- Drop a finished isolated child's copy without merging it: {discarded, bytes}. Only the
--- child's parent may drop it.
---
--- Errors: `usage`, `not_found`.
---@param id string
---@return {discarded: boolean, bytes: integer}
function moss.agents.discard(id) end

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
---
--- Errors: `usage`, `denied`.
---@param target string
---@param opts? {timeout?: number}
---@return moss.LockHandle|nil, string|nil
function moss.lock(target, opts) end

---@class moss.locks
moss.locks = {}
--- What moss.lock calls: a lock id, or nil and the holder.
---
--- Errors: `usage`, `denied`.
---@param target string|string[]
---@param opts? {timeout?: number}
---@return integer|nil, string|nil
function moss.locks.acquire(target, opts) end
--- Let go of a lock taken with `moss.locks.acquire`; false when it was not held.
---
--- Errors: `usage`.
---@param id integer
---@return boolean
function moss.locks.release(id) end
--- Every lock held in this project, by this process and others: {targets, session, role, pid, since}.
---@return table[]
function moss.locks.list() end

---@class moss.inbox
---What the user says while a session works (docs/lua-api.md#mossinbox).
moss.inbox = {}
--- listen for the session: it counts as running (`moss say` without an id finds the latest),
--- reading starts at `offset` (keep it in the checkpoint), and a terminal stdin is read in the
--- background (a typed line is acknowledged on the terminal when Enter is pressed). Returns
--- `{offset, listening, channels}`
---
--- Errors: `usage`, `denied`.
---@param session_id string
---@param opts? {offset?: integer, task?: string, terminal?: boolean}
---@return {offset: integer, listening: boolean, channels: string[]}
function moss.inbox.open(session_id, opts) end
--- the handler moss calls while it waits for the model or a shell command (every 0.2 s, when
--- something arrived); returning `"interrupt"` ends that wait: `moss.llm.chat` raises kind
--- `stopped` (a reply being streamed is cancelled, its connection closed), a shell command is
--- stopped. A `moss.llm.chat` the handler makes is not streamed to the screen
---@param handler fun(records: table[], offset: integer): string|nil  # "interrupt" ends the wait
function moss.inbox.watch(handler) end
--- `{records, offset}`: what arrived since the last read (kind `usage` before `moss.inbox.open`). A record is `{id, ts, source, type =
--- "user", text, acked?}` (`acked`: the terminal already said "got it" when it was typed) or
--- `{..., type = "control", action = "pause"\|"stop"\|"resume"}`
---
--- Errors: `usage`, `denied`.
---@return {records: table[], offset: integer}
function moss.inbox.read() end
--- put a message in a session's inbox (e.g. to a child agent)
---
--- Errors: `usage`, `denied`.
---@param session_id string
---@param text string
---@param opts? {source?: string}
---@return table
function moss.inbox.post(session_id, text, opts) end
--- stop listening; the session no longer counts as running
---@return boolean
function moss.inbox.close() end
--- internal: how `moss.inbox.watch` tells the host a handler is registered
---
--- Errors: `usage`.
---@param on boolean
function moss.inbox._watched(on) end

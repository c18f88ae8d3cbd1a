---@meta moss-events
-- The events moss writes, declared once (host/api/declare.py reads this file, as it reads
-- declarations.lua): the stream-json lines of `--output-format stream-json` and the records
-- of a session's log (.moss/agent/logs/ID.jsonl). `python -m moss.api` makes
-- docs/events.schema.json, the reference tables of docs/events.md and the stream-json events'
-- Python types (host/streamevents.py, what host/agentproc.py reads an agent's stream as) from it;
-- tests/test_api_docs.py fails when they are stale, tests/test_events.py when code under
-- host/ or scripts/ logs an event name not declared here (or a declared one is never logged)
-- and when a real session writes a field its block lacks.
--
-- Adding an event: a block under its heading below, as the others are,
--
--   --- when it is written (one line: it becomes the table's "when" and the schema's description)
--   ---@class moss.log.NAME            (a session-log record; moss.stream.NAME: a stream-json line)
--   ---@field name type                # what it is
--   ---@field other? type              # `?`: may be absent
--
-- then `python -m moss.api`. A stream-json event also needs its section (### `NAME`, an
-- example line) in docs/events.md. Renaming or removing one: change its block, rerun, and
-- for stream-json raise the schema version (docs/events.md, Versioning).
-- Types: string, integer, number, boolean, any, table, a literal (`1`, `"stop"`), a choice
-- (`"a"|"b"`), `T|nil` (may be null), `T[]`, and the helper types declared just below
-- (`moss.events.NAME`). A stream-json event's `type` field and a log record's `event`, `ts`,
-- `session` and `parent` are implied. In a log record a `?` field may also be null (the
-- host writes what it does not know as null).

-- ---- helper types ------------------------------------------------------------------------

--- a whole number, 0 or more
---@alias moss.events.count integer
---@schema {"type": "integer", "minimum": 0}

--- a turn number, from 1
---@alias moss.events.turn_number integer
---@schema {"type": "integer", "minimum": 1}

--- an amount, 0 or more
---@alias moss.events.amount number
---@schema {"type": "number", "minimum": 0}

--- a session id (never empty)
---@alias moss.events.id string
---@schema {"type": "string", "minLength": 1}

--- LLM usage totals
---@class moss.events.usage
---@field input_tokens? moss.events.amount
---@field output_tokens? moss.events.amount
---@field cache_read_tokens? moss.events.amount
---@field cache_write_tokens? moss.events.amount
---@field cost_usd? moss.events.amount
---@field cost_known? boolean
---@field calls? moss.events.amount

--- the last validation run of a session
---@class moss.events.validation
---@field passed boolean
---@field why? string
---@field turn? integer
---@field step? string
---@field command? string
---@field exit? integer
---@field timed_out? boolean
---@field output_tail? string          # the last 20 lines of output
---@field baseline? boolean
---@field rolled_back? boolean         # that failure led to a rollback
---@field waived? boolean
---@field cannot_run? boolean

--- one step of a role pipeline
---@class moss.events.step
---@field role string
---@field answer? string
---@field reason string
---@field turns? moss.events.count
---@field session_id? string
---@field questions? string
---@field progress? string

--- what every result carries
---@class moss.events.result_fields
---@field answer string|nil
---@field success boolean
---@field reason string                # an outcome of docs/agent.md: answered, max_turns, ..., or a machine's own
---@field turns? moss.events.count
---@field session_id? string
---@field usage? moss.events.usage
---@field role? string
---@field machine? string
---@field forced? boolean
---@field detail? string
---@field progress? string             # a checkpoint's progress
---@field questions? string            # a blocked session's questions
---@field error_kind? string           # a session that could not start: the error's kind
---@field validation? moss.events.validation
---@field steps? moss.events.step[]    # a pipeline's final result: one per step

-- ---- a saved session, as the agent script's `sessions` entry gives it to the host --------
-- (docs/agent.md, the entry points). The host reads a session through these and nothing else
-- (host/sessions/row.py): `moss ui`'s pages, `moss say`, MCP list_sessions and show_session.

--- a saved session as a listing gives it (`sessions json`: {"sessions": [row, ...]})
---@class moss.events.session_row
---@field id moss.events.id            # the session's id (a child's: PARENT-N)
---@field running boolean             # a live moss process runs it now (the host's fact, relayed)
---@field mtime? number                # when it was last saved (Unix time)
---@field task? string                 # what it was asked to do
---@field state? string                # its machine's state, or "corrupt"
---@field machine? string              # the machine it runs (scripts/machines/)
---@field role? string                 # the role it took last
---@field reason? string               # how one that is not running stands: answered, ..., interrupted, corrupt
---@field turn? integer                # the turn it reached
---@field done? boolean                # its script said it ended
---@field error? string                # a checkpoint moss cannot use: why, and what to do
---@field answer? string|nil           # its answer, once it answered (the last one it gave)
---@field success? boolean             # whether it ended answered (the outcome contract's `success`)
---@field progress? string             # what a checkpointed, blocked, stopped or paused session had done
---@field questions? string            # what it needs to hear to go on (answer it with a resume's message)
---@field detail? string               # what ended it, for an error, a budget or a stop

--- one row of a session's timeline, as `moss sessions show` draws it
---@class moss.events.timeline_row
---@field time string
---@field event string
---@field detail string
---@field style? string|nil            # how the row is drawn (a rich style)

--- how a saved session ended, once nothing runs it
---@class moss.events.session_outcome
---@field reason string
---@field text string                  # the reason for people
---@field exit integer|nil             # the status `moss @agent` ends with for it, when known
---@field turns integer
---@field resume string|nil            # the command that goes on with it

--- an isolated child's change and what became of it
---@class moss.events.child_isolation
---@field text string
---@field state string                 # not merged, merged, discarded
---@field patch? string                # its patch, capped

--- a child agent of a session, with its own children
---@class moss.events.session_child
---@field id moss.events.id
---@field role string|nil
---@field state string
---@field turns integer
---@field answer string|nil
---@field isolation moss.events.child_isolation|nil
---@field children table[]             # its own children, each a session_child

--- one session's page (`sessions timeline ID`): what `moss sessions show ID` draws, as data
---@class moss.events.session_timeline
---@field id moss.events.id
---@field rows moss.events.timeline_row[]
---@field last_failure string[]        # the last failed validation, if no later one passed, as lines
---@field tree string[]                # the child agents drawn as a tree, as lines
---@field children moss.events.session_child[]
---@field outcome moss.events.session_outcome|nil

-- ---- stream-json (one line each on stdout; docs/events.md) ---------------------------------

--- a session starts or resumes
---@class moss.stream.session_start
---@field schema 1                     # the schema version
---@field session_id moss.events.id
---@field task string
---@field machine string
---@field role string
---@field resumed boolean
---@field turn moss.events.count       # the turn it goes on from, 0 for a new session

--- before each LLM call
---@class moss.stream.turn
---@field turn moss.events.turn_number
---@field max_turns? moss.events.turn_number
---@field state string                 # the machine state about to call the model
---@field session_id moss.events.id

--- with `--include-partial`: each piece of the model's text as it streams
---@class moss.stream.partial
---@field text string
---@schema {"minLength": 1}
---@field label? string                # the request's ROLE/STATE

--- the model's whole reply for a turn
---@class moss.stream.assistant
---@field turn moss.events.turn_number
---@field state string
---@field text string

--- each `$(...)` command carried out
---@class moss.stream.command
---@field turn moss.events.count
---@field cmd string
---@field ok boolean
---@field refused? boolean             # the access level or the approval gate refused it
---@field output? string               # what the model sees next, capped

--- a notice for the user (e.g. what snapshots protect)
---@class moss.stream.info
---@field text string

--- a message from the user arrived while the agent worked
---@class moss.stream.input_received
---@field session_id string
---@field turn? moss.events.count
---@field id string
---@field source string                # terminal, say, stream-json, mcp, board (`moss ui`)
---@field text? string
---@field action? "pause"|"stop"|"resume"  # a control message's
---@field class "stop"|"pause"|"resume"|"related"|"unrelated"  # how the agent read it

--- the brief answer to a message that was not about the task
---@class moss.stream.aside
---@field session_id string
---@field question string
---@field answer string

--- a step of a role pipeline ended
---@class moss.stream.stage_result : moss.events.result_fields
---@field session_id string

--- the session ended (always the last line)
---@class moss.stream.result : moss.events.result_fields

--- a child agent (`events = "stream-json"`) started or resumed
---@class moss.stream.child_session_start
---@field session_id moss.events.id    # the child's id, PARENT-N
---@field parent string
---@field turn moss.events.count
---@field state? string
---@field role? string
---@field task? string

--- a child agent is about to call the model
---@class moss.stream.child_turn
---@field session_id moss.events.id
---@field parent string
---@field turn moss.events.turn_number
---@field state string

--- a child agent's whole reply for a turn
---@class moss.stream.child_assistant
---@field session_id moss.events.id
---@field parent string
---@field turn moss.events.turn_number
---@field state string
---@field text string

--- a command a child agent carried out
---@class moss.stream.child_command
---@field session_id moss.events.id
---@field parent string
---@field turn moss.events.count
---@field cmd string
---@field ok boolean
---@field refused? boolean

--- a child agent ended: its result
---@class moss.stream.child_result : moss.events.result_fields
---@field session_id moss.events.id
---@field parent string

-- ---- session log (.moss/agent/logs/ID.jsonl; each record also has event, ts, session, parent) ----

-- the session (scripts/lib/machine/runner.lua)

--- a new session starts
---@class moss.log.session_start
---@field session_id string
---@field root string
---@field machine string
---@field role? string

--- a saved session goes on
---@class moss.log.session_resume
---@field session_id string
---@field turn integer
---@field state string

--- the task a session works on
---@class moss.log.task
---@field task string
---@field machine string
---@field max_turns integer
---@field start string                 # the state it starts in
---@field role? string

--- before a turn's LLM call
---@class moss.log.turn_start
---@field turn integer
---@field state string
---@field context_chars integer
---@field working_memory integer
---@field pending integer

--- the model's reply of a turn
---@class moss.log.response
---@field turn integer
---@field state string
---@field text string

--- the reply stopped at its token limit
---@class moss.log.truncated
---@field turn integer
---@field max_tokens integer

--- the session answered
---@class moss.log.done
---@field answer string
---@field turn integer

--- the turn limit was reached
---@class moss.log.max_turns
---@field turn integer

--- several turns brought no new evidence
---@class moss.log.cycle_limit
---@field cycles integer
---@field turn integer

--- the session stopped on an error
---@class moss.log.error
---@field message string
---@field kind string

--- the session ended, written once, by the runner's `close` (lib/machine/runner.lua) on every
--- path: an answer, a limit, an error, and after Ctrl-C or a parent's cancel through the agent
--- script's `interrupted` entry (reason "interrupted" or "cancelled")
---@class moss.log.session_end
---@field reason string
---@field turns? integer
---@field answer? string|nil
---@field usage? moss.events.usage

--- (host) Ctrl-C or the parent stopped the session mid-turn; the agent script's `interrupted`
--- entry is called next (docs/agent.md, the entry points)
---@class moss.log.interrupt
---@field by "signal"|"parent"

--- (host) a child's entry raised instead of returning its result; the child failed
---@class moss.log.entry_failed
---@field entry? string|nil
---@field error string
---@field kind string

--- the context was summarised to fit
---@class moss.log.compacted
---@field chars_before integer
---@field summary_chars integer
---@field chars_after integer
---@field turn integer
---@field state string

--- the summary for a compaction failed; the session went on without it
---@class moss.log.compact_failed
---@field turn integer
---@field error string

-- commands (scripts/lib/machine/commands.lua, scripts/commands/)

--- a command carried out (or failed)
---@class moss.log.command
---@field cmd string
---@field ok boolean
---@field turn integer
---@field refused? boolean
---@field error? string
---@field output? string
---@field output_chars? integer
---@field state? string

--- a command the state does not allow
---@class moss.log.command_refused
---@field cmd string
---@field state string
---@field machine string
---@field turn integer

--- commands beyond the per-turn limit were dropped
---@class moss.log.commands_dropped
---@field kept integer
---@field dropped integer
---@field turn integer

--- the reply echoed commands from the prompt back
---@class moss.log.command_echoed
---@field cmds string[]
---@field turn integer

--- a reply that only echoed
---@class moss.log.echo
---@field turn integer
---@field commands integer             # how many commands the reply echoed
---@field count integer                # echo-only replies so far

--- the same command repeated: a warning
---@class moss.log.loop_warning
---@field cmd string
---@field count integer
---@field turn integer

--- the same command repeated too often: the session stops
---@class moss.log.loop_detected
---@field cmd string
---@field count integer
---@field turn integer

--- an answer the machine would not take
---@class moss.log.answer_rejected
---@field answer string
---@field turn integer

--- $(note): a note in working memory
---@class moss.log.note
---@field id string
---@field content string
---@field turn integer

--- $(keep): a result kept
---@class moss.log.keep
---@field id string
---@field cmd string
---@field turn integer

--- $(drop): a note or kept result dropped
---@class moss.log.drop
---@field id string
---@field found boolean
---@field turn integer

--- $(ask), or an escalation: a question put to the user
---@class moss.log.ask
---@field question string
---@field answer? string               # absent when no answer came
---@field turn integer

--- $(ask) with nobody to answer: the session is blocked
---@class moss.log.blocked_ask
---@field question string
---@field turn integer

--- $(checkpoint): progress saved
---@class moss.log.checkpoint
---@field progress? string
---@field questions? string

--- $(spawn): a child agent started
---@class moss.log.spawn
---@field child string
---@field role string
---@field task string
---@field turn integer
---@field isolated? boolean          # in its own copy of the tree

--- $(merge ID): an isolated child's change merged into this session's tree
---@class moss.log.merge
---@field child string
---@field applied string[]
---@field conflicts integer             # paths left as they were (the host's child_merge has them)
---@field turn integer

--- $(discard ID): an isolated child's copy dropped
---@class moss.log.discard
---@field child string
---@field turn integer

-- the coding agent (scripts/agent.lua, scripts/lib/agent/, scripts/roles/)

--- a role chosen for the task, and why
---@class moss.log.dispatch
---@field role string
---@field why string

--- the refactorer's scout child ended
---@class moss.log.scout
---@field child string
---@field reason string
---@field answer? string

--- an auditor's per-directory child ended
---@class moss.log.fan_out
---@field child string
---@field dir string
---@field reason string

--- a saved child was re-attached on resume
---@class moss.log.child_reattach
---@field child string
---@field ok boolean
---@field error? string

--- what validation runs, and where that came from
---@class moss.log.validation_config
---@field steps table[]
---@field source? string               # where the steps came from (none: no validation)
---@field on string                    # validate_on: edit, answer, never

--- a validation run
---@class moss.log.validation
---@field why string
---@field passed boolean
---@field step? string
---@field command? string
---@field exit? integer
---@field timed_out? boolean
---@field output_tail? string
---@field report? string
---@field turn integer

--- a validation step that cannot run was turned off
---@class moss.log.validation_off
---@field step string
---@field command string
---@field turn integer

--- the user went on past a failing validation (waived it)
---@class moss.log.validation_waived
---@field step? string                 # the failing step, when one failed
---@field turn integer

--- a write action begins (a snapshot before it)
---@class moss.log.action_start
---@field turn integer
---@field label string
---@field snapshot string

--- a write action ended: what it changed
---@class moss.log.action_done
---@field turn integer
---@field label string
---@field changed string[]
---@field not_captured table[]

--- after a failed validation: another attempt
---@class moss.log.retry
---@field step string
---@field attempt integer
---@field turn integer

--- after failed validations: the session asks for help
---@class moss.log.escalate
---@field step string
---@field turn integer

--- a failed step's changes were rolled back
---@class moss.log.rollback_done
---@field step string
---@field snapshot string
---@field reverted string[]
---@field removed string[]
---@field restored string[]
---@field skipped table[]
---@field conflicts table[]
---@field turn integer

--- a rollback after a failed step failed
---@class moss.log.rollback_failed
---@field step string
---@field snapshot string
---@field error string

--- a turn's changes were undone
---@class moss.log.turn_rolled_back
---@field turn integer
---@field snapshot string
---@field paths string[]
---@field skipped table[]
---@field conflicts table[]

--- undoing a turn's changes failed
---@class moss.log.turn_rollback_failed
---@field turn integer
---@field snapshot string
---@field error string

--- a message from the user arrived (as the stream-json event)
---@class moss.log.input_received
---@field id string
---@field source string
---@field text? string
---@field action? string
---@field class string
---@field how? string                  # how it was classified
---@field turn integer

--- the answer to a message that was not about the task
---@class moss.log.aside
---@field id string
---@field question string
---@field answer string

--- the session paused, as the user asked
---@class moss.log.paused
---@field turn integer

--- a paused session goes on
---@class moss.log.resumed
---@field turn integer
---@field message? string

-- tce and wild machines (scripts/lib/tce/, scripts/lib/wild/)

--- a tce state change
---@class moss.log.transition
---@field from string
---@field to string
---@field why string
---@field turn integer
---@field tokens? integer

--- a tce transition the machine does not allow
---@class moss.log.state_transition_invalid
---@field requested string
---@field turn integer

--- tce archived working-memory pages
---@class moss.log.paging
---@field archived integer
---@field keys string[]
---@field before integer
---@field after integer
---@field turn integer

--- the Wild Loop asks the model (kind: what for)
---@class moss.log.wild_prompt
---@field kind string
---@field turn integer
---@field alert? string
---@field run? string
---@field iteration? integer

--- the Wild Loop resolved an alert
---@class moss.log.wild_resolve
---@field alert string
---@field choice string
---@field ok boolean
---@field turn integer

--- a sweep of runs started
---@class moss.log.wild_sweep
---@field name string
---@field iteration integer
---@field total integer
---@field runs table[]
---@field turn integer

--- the Wild Loop waits for the next event of its runs, `going` of them not ended (once a turn)
---@class moss.log.wild_waiting
---@field turn integer
---@field sweep string
---@field going integer

--- the model promised a stage was done
---@class moss.log.wild_promise
---@field promise string
---@field stage string
---@field turn integer

--- a judge read a run's output
---@class moss.log.wild_judge
---@field run string
---@field alert boolean
---@field turn integer
---@field text string

-- the host (host/)

--- a primitive failed on a bug in moss
---@class moss.log.internal_error
---@field primitive string
---@field error string
---@field traceback string

--- moss.fs.write wrote a file
---@class moss.log.fs_write
---@field path string
---@field bytes integer

--- moss.edit.apply changed files
---@class moss.log.edit
---@field files string[]
---@field specs integer

--- moss.store.save
---@class moss.log.store_save
---@field name string
---@field entries integer

--- moss.memory.memorize
---@class moss.log.memorize
---@field kind string
---@field text string

--- moss.memory.forget
---@class moss.log.memory_forget
---@field pattern string
---@field removed integer

--- moss.memory.write
---@class moss.log.memory_write
---@field kind string
---@field chars integer

--- a snapshot (or a write's start) was captured
---@class moss.log.snapshot
---@field id string
---@field label string

--- a write ended: the paths it changed
---@class moss.log.write
---@field id string
---@field changed string[]
---@field not_captured table[]

--- moss.shadow.restore
---@class moss.log.rollback
---@field id string
---@field reverted string[]
---@field removed string[]
---@field restored string[]
---@field skipped table[]
---@field conflicts table[]
---@field scope string
---@field backup string

--- a command or a run created or changed git metadata
---@class moss.log.git_metadata
---@field notes string[]
---@field where? string
---@field cmd? string
---@field runs? string[]

--- an agent waits for a lock
---@class moss.log.lock_wait
---@field targets string[]
---@field for string
---@field blocker string

--- a lock wait timed out
---@class moss.log.lock_timeout
---@field targets string
---@field for string
---@field blocker string

--- a dead process's lock was taken over
---@class moss.log.lock_takeover
---@field targets string[]
---@field dead_pid integer
---@field dead_session? string
---@field why string

--- an LLM request is sent
---@class moss.log.llm_request
---@field provider string
---@field model string|nil            # null when the provider names none (script, replay)
---@field base_url? string
---@field messages integer             # how many
---@field chars integer
---@field max_tokens integer           # as sent, after the caps
---@field stream boolean
---@field window? integer              # the server's context window, when known
---@field system? string               # with --verbose
---@field messages_sent? table[]       # with --verbose
---@field base_url_source? string      # for an endpoint other than the provider's own: where it came from

--- an attempt of an LLM call
---@class moss.log.llm_attempt
---@field provider string
---@field model string|nil            # null when the provider names none (script, replay)
---@field attempt integer
---@field max_attempts integer

--- an LLM attempt failed and is retried
---@class moss.log.llm_retry
---@field provider string
---@field model string|nil            # null when the provider names none (script, replay)
---@field attempt integer
---@field reason string                # status, timeout, connection, cut
---@field status? integer
---@field error string
---@field delay number
---@field duration number
---@field streamed_chars? integer

--- an LLM call answered
---@class moss.log.llm_response
---@field provider string
---@field model string|nil            # null when the provider names none (script, replay)
---@field stop_reason string
---@field usage table
---@field attempts integer
---@field duration number
---@field chars integer                # the reply's length; its text is logged once, in the agent's `response` event

--- an LLM call failed
---@class moss.log.llm_error
---@field provider string
---@field model string|nil            # null when the provider names none (script, replay)
---@field kind string
---@field message string
---@field status? integer
---@field attempts? integer
---@field duration? number
---@field divergence? table           # replay: the request no recorded one answers, `{request (its number, from 1), entry (the nearest recorded, from 1), field, what (in words), recorded, now (excerpts), detail}`

--- a warning about an LLM call
---@class moss.log.llm_warning
---@field provider string
---@field model string|nil            # null when the provider names none (script, replay)
---@field message string

--- an MCP server started
---@class moss.log.mcp_start
---@field server string
---@field transport string
---@field seconds number

--- an MCP server's tools that were left out
---@class moss.log.mcp_tools_skipped
---@field server string
---@field names string[]
---@field count integer

--- an MCP tool call
---@class moss.log.mcp_call
---@field server string
---@field tool string
---@field ok boolean
---@field chars? integer
---@field seconds? number
---@field error? string

--- a run started
---@class moss.log.run_start
---@field run string
---@field name string
---@field cmd string
---@field sandbox? string
---@field workdir? string
---@field pid? integer
---@field executor? string
---@field submission_id? string
---@field address? string

--- a run was submitted to a Ray cluster
---@class moss.log.run_submit
---@field run string
---@field name string
---@field cmd string
---@field executor string
---@field submission_id string
---@field address string
---@field num_cpus? number
---@field num_gpus? number

--- a run's status changed
---@class moss.log.run_status
---@field run string
---@field name string
---@field status string
---@field code? integer
---@field error? string

--- a run left by another moss process was adopted
---@class moss.log.run_adopted
---@field run string
---@field name string
---@field executor string
---@field status string

--- a run raised an alert
---@class moss.log.run_alert
---@field run string
---@field alert string
---@field severity string
---@field message string
---@field source string

--- an alert was resolved
---@class moss.log.run_alert_resolved
---@field run string
---@field alert string
---@field choice string

--- watching a run failed for a while
---@class moss.log.run_monitor_error
---@field error string
---@field run? string
---@field tries? integer

-- child agents (host/api/agents.py, in the parent's log)

--- a child agent was started (or resumed)
---@class moss.log.child_start
---@field child string                 # its id, PARENT-N
---@field role? string
---@field task? string
---@field access? string
---@field resume? boolean
---@field isolated? boolean             # it works in its own copy of the tree

--- a parent waited for a child and got its result
---@class moss.log.child_result
---@field child string
---@field reason? string
---@field success? boolean

--- a child was asked to pause
---@class moss.log.child_pause
---@field child string

--- a paused child was let go on
---@class moss.log.child_resume
---@field child string
---@field message? string

--- a child was cancelled
---@class moss.log.child_cancel
---@field child string

--- a child agent's thread ended
---@class moss.log.child_end
---@field child string
---@field status string                # done, failed, cancelled
---@field reason? string
---@field turns? integer
---@field answer? string|nil
---@field error? string|nil
---@field usage? moss.events.usage
---@field isolated? boolean             # an isolated child: its change follows
---@field changed? string[]|nil         # the paths it changed
---@field patch_stat? table|nil         # {files, added, removed, binary, bytes} of its patch (.moss/agent/patches/ID.patch)

--- an isolated child's copy of the tree was made (host/tools/worktree/)
---@class moss.log.child_isolated
---@field child string
---@field strategy? string              # reflink, copy, hardlink (a reader's), hardlink-then-copy (a writer's: links, copied in the background), or several joined by +
---@field files? integer
---@field bytes? integer                # of the files copied
---@field seconds? number               # making the copy and recording its starting point
---@field skipped? table[]              # {path, reason}: a fifo, a device, an unreadable file
---@field home string                   # where the copy is (removed when merged or discarded)

--- an isolated child's change was merged into its parent's tree
---@class moss.log.child_merge
---@field child string
---@field applied string[]
---@field conflicts table[]             # {path, reason, detail?, hunks?}: left as they are in the tree
---@field snapshot string               # taken before the merge

--- an isolated child's copy was dropped unmerged
---@class moss.log.child_discard
---@field child string
---@field bytes integer                 # the bytes of its files (deleted in the background)

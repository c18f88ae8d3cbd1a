"""The stream-json events of `moss @agent --output-format stream-json` as Python types.

GENERATED from host/api/events.lua by `python -m moss.api`: edit that file, not this one.

One TypedDict per event, keyed by its `type` (`StreamEvent` is any of them, `EVENTS` each by
name), for the host's readers of an agent process's stream (host/agentproc.py), and one per
helper type, among them what the host reads of a saved session (`SessionRow`,
`SessionTimeline`: host/sessions/row.py). Read through host/typedjson.py, every field
but `type` is NotRequired whatever events.lua says, because that is all a reader can promise:
an agent script may leave a field out (a nil in Lua), and the reader leaves out a field whose
value is not of its declared type; a field that is there has its declared type.
"""

from typing import Any, Literal, NotRequired, TypedDict, Union

# LLM usage totals
Usage = TypedDict("Usage", {
    "input_tokens": NotRequired[float],
    "output_tokens": NotRequired[float],
    "cache_read_tokens": NotRequired[float],
    "cache_write_tokens": NotRequired[float],
    "cost_usd": NotRequired[float],
    "cost_known": NotRequired[bool],
    "calls": NotRequired[float],
})


# the last validation run of a session
Validation = TypedDict("Validation", {
    "passed": NotRequired[bool],
    "why": NotRequired[str],
    "turn": NotRequired[int],
    "step": NotRequired[str],
    "command": NotRequired[str],
    "exit": NotRequired[int],
    "timed_out": NotRequired[bool],
    "output_tail": NotRequired[str],  # the last 20 lines of output
    "baseline": NotRequired[bool],
    "rolled_back": NotRequired[bool],  # that failure led to a rollback
    "waived": NotRequired[bool],
    "cannot_run": NotRequired[bool],
})


# one step of a role pipeline
Step = TypedDict("Step", {
    "role": NotRequired[str],
    "answer": NotRequired[str],
    "reason": NotRequired[str],
    "turns": NotRequired[int],
    "session_id": NotRequired[str],
    "questions": NotRequired[str],
    "progress": NotRequired[str],
})


# what every result carries
ResultFields = TypedDict("ResultFields", {
    "answer": NotRequired[str | None],
    "success": NotRequired[bool],
    "reason": NotRequired[str],  # an outcome of docs/agent.md: answered, max_turns, ..., or a machine's own
    "turns": NotRequired[int],
    "session_id": NotRequired[str],
    "usage": NotRequired[Usage],
    "role": NotRequired[str],
    "machine": NotRequired[str],
    "forced": NotRequired[bool],
    "detail": NotRequired[str],
    "progress": NotRequired[str],  # a checkpoint's progress
    "questions": NotRequired[str],  # a blocked session's questions
    "error_kind": NotRequired[str],  # a session that could not start: the error's kind
    "validation": NotRequired[Validation],
    "steps": NotRequired[list[Step]],  # a pipeline's final result: one per step
})


# a saved session as a listing gives it (`sessions json`: {"sessions": [row, ...]})
SessionRow = TypedDict("SessionRow", {
    "id": NotRequired[str],  # the session's id (a child's: PARENT-N)
    "running": NotRequired[bool],  # a live moss process runs it now (the host's fact, relayed)
    "mtime": NotRequired[float],  # when it was last saved (Unix time)
    "task": NotRequired[str],  # what it was asked to do
    "state": NotRequired[str],  # its machine's state, or "corrupt"
    "machine": NotRequired[str],  # the machine it runs (scripts/machines/)
    "role": NotRequired[str],  # the role it took last
    "reason": NotRequired[str],  # how one that is not running stands: answered, ..., interrupted, corrupt
    "turn": NotRequired[int],  # the turn it reached
    "done": NotRequired[bool],  # its script said it ended
    "error": NotRequired[str],  # a checkpoint moss cannot use: why, and what to do
    "answer": NotRequired[str | None],  # its answer, once it answered (the last one it gave)
    "success": NotRequired[bool],  # whether it ended answered (the outcome contract's `success`)
    "progress": NotRequired[str],  # what a checkpointed, blocked, stopped or paused session had done
    "questions": NotRequired[str],  # what it needs to hear to go on (answer it with a resume's message)
    "detail": NotRequired[str],  # what ended it, for an error, a budget or a stop
})


# one row of a session's timeline, as `moss sessions show` draws it
TimelineRow = TypedDict("TimelineRow", {
    "time": NotRequired[str],
    "event": NotRequired[str],
    "detail": NotRequired[str],
    "style": NotRequired[str | None],  # how the row is drawn (a rich style)
})


# how a saved session ended, once nothing runs it
SessionOutcome = TypedDict("SessionOutcome", {
    "reason": NotRequired[str],
    "text": NotRequired[str],  # the reason for people
    "exit": NotRequired[int | None],  # the status `moss @agent` ends with for it, when known
    "turns": NotRequired[int],
    "resume": NotRequired[str | None],  # the command that goes on with it
})


# an isolated child's change and what became of it
ChildIsolation = TypedDict("ChildIsolation", {
    "text": NotRequired[str],
    "state": NotRequired[str],  # not merged, merged, discarded
    "patch": NotRequired[str],  # its patch, capped
})


# a child agent of a session, with its own children
SessionChild = TypedDict("SessionChild", {
    "id": NotRequired[str],
    "role": NotRequired[str | None],
    "state": NotRequired[str],
    "turns": NotRequired[int],
    "answer": NotRequired[str | None],
    "isolation": NotRequired[ChildIsolation | None],
    "children": NotRequired[list[list[Any] | dict[str, Any]]],  # its own children, each a session_child
})


# one session's page (`sessions timeline ID`): what `moss sessions show ID` draws, as data
SessionTimeline = TypedDict("SessionTimeline", {
    "id": NotRequired[str],
    "rows": NotRequired[list[TimelineRow]],
    "last_failure": NotRequired[list[str]],  # the last failed validation, if no later one passed, as lines
    "tree": NotRequired[list[str]],  # the child agents drawn as a tree, as lines
    "children": NotRequired[list[SessionChild]],
    "outcome": NotRequired[SessionOutcome | None],
})


# a session starts or resumes
SessionStart = TypedDict("SessionStart", {
    "type": Literal["session_start"],
    "schema": NotRequired[Literal[1]],  # the schema version
    "session_id": NotRequired[str],
    "task": NotRequired[str],
    "machine": NotRequired[str],
    "role": NotRequired[str],
    "resumed": NotRequired[bool],
    "turn": NotRequired[int],  # the turn it goes on from, 0 for a new session
})


# before each LLM call
Turn = TypedDict("Turn", {
    "type": Literal["turn"],
    "turn": NotRequired[int],
    "max_turns": NotRequired[int],
    "state": NotRequired[str],  # the machine state about to call the model
    "session_id": NotRequired[str],
})


# with `--include-partial`: each piece of the model's text as it streams
Partial = TypedDict("Partial", {
    "type": Literal["partial"],
    "text": NotRequired[str],
    "label": NotRequired[str],  # the request's ROLE/STATE
})


# the model's whole reply for a turn
Assistant = TypedDict("Assistant", {
    "type": Literal["assistant"],
    "turn": NotRequired[int],
    "state": NotRequired[str],
    "text": NotRequired[str],
})


# each `$(...)` command carried out
Command = TypedDict("Command", {
    "type": Literal["command"],
    "turn": NotRequired[int],
    "cmd": NotRequired[str],
    "ok": NotRequired[bool],
    "refused": NotRequired[bool],  # the access level or the approval gate refused it
    "output": NotRequired[str],  # what the model sees next, capped
})


# a notice for the user (e.g. what snapshots protect)
Info = TypedDict("Info", {
    "type": Literal["info"],
    "text": NotRequired[str],
})


# a message from the user arrived while the agent worked
InputReceived = TypedDict("InputReceived", {
    "type": Literal["input_received"],
    "session_id": NotRequired[str],
    "turn": NotRequired[int],
    "id": NotRequired[str],
    "source": NotRequired[str],  # terminal, say, stream-json, mcp, board (`moss ui`)
    "text": NotRequired[str],
    "action": NotRequired[Literal["pause", "stop", "resume"]],  # a control message's
    "class": NotRequired[Literal["stop", "pause", "resume", "related", "unrelated"]],  # how the agent read it
})


# the brief answer to a message that was not about the task
Aside = TypedDict("Aside", {
    "type": Literal["aside"],
    "session_id": NotRequired[str],
    "question": NotRequired[str],
    "answer": NotRequired[str],
})


# a step of a role pipeline ended
StageResult = TypedDict("StageResult", {
    "type": Literal["stage_result"],
    "answer": NotRequired[str | None],
    "success": NotRequired[bool],
    "reason": NotRequired[str],  # an outcome of docs/agent.md: answered, max_turns, ..., or a machine's own
    "turns": NotRequired[int],
    "session_id": NotRequired[str],
    "usage": NotRequired[Usage],
    "role": NotRequired[str],
    "machine": NotRequired[str],
    "forced": NotRequired[bool],
    "detail": NotRequired[str],
    "progress": NotRequired[str],  # a checkpoint's progress
    "questions": NotRequired[str],  # a blocked session's questions
    "error_kind": NotRequired[str],  # a session that could not start: the error's kind
    "validation": NotRequired[Validation],
    "steps": NotRequired[list[Step]],  # a pipeline's final result: one per step
})


# the session ended (always the last line)
Result = TypedDict("Result", {
    "type": Literal["result"],
    "answer": NotRequired[str | None],
    "success": NotRequired[bool],
    "reason": NotRequired[str],  # an outcome of docs/agent.md: answered, max_turns, ..., or a machine's own
    "turns": NotRequired[int],
    "session_id": NotRequired[str],
    "usage": NotRequired[Usage],
    "role": NotRequired[str],
    "machine": NotRequired[str],
    "forced": NotRequired[bool],
    "detail": NotRequired[str],
    "progress": NotRequired[str],  # a checkpoint's progress
    "questions": NotRequired[str],  # a blocked session's questions
    "error_kind": NotRequired[str],  # a session that could not start: the error's kind
    "validation": NotRequired[Validation],
    "steps": NotRequired[list[Step]],  # a pipeline's final result: one per step
})


# a child agent (`events = "stream-json"`) started or resumed
ChildSessionStart = TypedDict("ChildSessionStart", {
    "type": Literal["child_session_start"],
    "session_id": NotRequired[str],  # the child's id, PARENT-N
    "parent": NotRequired[str],
    "turn": NotRequired[int],
    "state": NotRequired[str],
    "role": NotRequired[str],
    "task": NotRequired[str],
})


# a child agent is about to call the model
ChildTurn = TypedDict("ChildTurn", {
    "type": Literal["child_turn"],
    "session_id": NotRequired[str],
    "parent": NotRequired[str],
    "turn": NotRequired[int],
    "state": NotRequired[str],
})


# a child agent's whole reply for a turn
ChildAssistant = TypedDict("ChildAssistant", {
    "type": Literal["child_assistant"],
    "session_id": NotRequired[str],
    "parent": NotRequired[str],
    "turn": NotRequired[int],
    "state": NotRequired[str],
    "text": NotRequired[str],
})


# a command a child agent carried out
ChildCommand = TypedDict("ChildCommand", {
    "type": Literal["child_command"],
    "session_id": NotRequired[str],
    "parent": NotRequired[str],
    "turn": NotRequired[int],
    "cmd": NotRequired[str],
    "ok": NotRequired[bool],
    "refused": NotRequired[bool],
})


# a child agent ended: its result
ChildResult = TypedDict("ChildResult", {
    "type": Literal["child_result"],
    "answer": NotRequired[str | None],
    "success": NotRequired[bool],
    "reason": NotRequired[str],  # an outcome of docs/agent.md: answered, max_turns, ..., or a machine's own
    "turns": NotRequired[int],
    "session_id": NotRequired[str],
    "usage": NotRequired[Usage],
    "role": NotRequired[str],
    "machine": NotRequired[str],
    "forced": NotRequired[bool],
    "detail": NotRequired[str],
    "progress": NotRequired[str],  # a checkpoint's progress
    "questions": NotRequired[str],  # a blocked session's questions
    "error_kind": NotRequired[str],  # a session that could not start: the error's kind
    "validation": NotRequired[Validation],
    "steps": NotRequired[list[Step]],  # a pipeline's final result: one per step
    "parent": NotRequired[str],
})


StreamEvent = Union[
    SessionStart,
    Turn,
    Partial,
    Assistant,
    Command,
    Info,
    InputReceived,
    Aside,
    StageResult,
    Result,
    ChildSessionStart,
    ChildTurn,
    ChildAssistant,
    ChildCommand,
    ChildResult,
]

EVENTS: dict[str, Any] = {
    "session_start": SessionStart,
    "turn": Turn,
    "partial": Partial,
    "assistant": Assistant,
    "command": Command,
    "info": Info,
    "input_received": InputReceived,
    "aside": Aside,
    "stage_result": StageResult,
    "result": Result,
    "child_session_start": ChildSessionStart,
    "child_turn": ChildTurn,
    "child_assistant": ChildAssistant,
    "child_command": ChildCommand,
    "child_result": ChildResult,
}

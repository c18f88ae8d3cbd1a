"""The scripted exploration for measurement 1: 30 steps over the standard library's asyncio.

Task: how does `asyncio.run()` drive a coroutine to completion (loop creation, task
scheduling, shutdown)? Each step asks for a different region or search, the way a
careful model would: a package listing, file skeletons, single symbols, line ranges and
text searches.

Each step is written once and rendered three ways:
- for moss: a $(view ...) / $(text-search ...) command;
- for mini-swe-agent: the equivalent shell command (ls, an outline grep, `sed -n` over the
  symbol's exact line range, `nl -ba | sed -n`, `grep -rn`), which shows the same source
  lines (moss adds a header and symbol labels; mini's template adds its own wrapper);
- for the "same outputs" control: the `moss view` / `moss text-search` CLI run as mini's
  shell command, so both agents see byte-identical tool output.

The moss model (`MossModel`) is a callable for tests/fakeapi.py. Like a good model it
keeps only a few results (5 of 30, and drops two of them later, reading their ids from
its context) and writes a one-line note per result. Its replies are the same text for
V1 and V2; only where they go differs (V2: explorer writes the command, evaluator keeps
and notes).
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

TASK = ("How does asyncio.run() drive a coroutine to completion? Explain event loop creation, "
        "how tasks are scheduled and stepped, and how shutdown works; cite file:line.")

# (kind, target or pattern, --only, thought, note). kind: tree | skeleton | symbol | lines | search
STEPS = [
    ("tree", "asyncio", None, "Start with the layout of the asyncio package.",
     "asyncio/ has runners.py (asyncio.run), base_events.py (the loop), tasks.py, futures.py, events.py."),
    ("skeleton", "asyncio/runners.py", None, "runners.py should define asyncio.run; look at its outline.",
     "runners.py: run() at L160-190 is a thin wrapper around the Runner context manager (L21-157)."),
    ("symbol", "asyncio/runners.py/run", None, "Read run() itself.",
     "run() refuses to start inside a running loop, then `with Runner(debug=debug) as runner: "
     "return runner.run(main)`."),
    ("symbol", "asyncio/runners.py/Runner/run", None, "Runner.run does the work; read it.",
     "Runner.run wraps the coroutine with loop.create_task and calls loop.run_until_complete(task); "
     "Ctrl-C cancels the main task."),
    ("symbol", "asyncio/runners.py/Runner/_lazy_init", None, "Where does the Runner get its loop?",
     "Runner._lazy_init makes the loop with events.new_event_loop() unless a loop_factory was given."),
    ("search", "def new_event_loop", "asyncio", "Find new_event_loop.",
     "new_event_loop is defined in events.py, as a module function and as a policy method."),
    ("symbol", "asyncio/events.py/new_event_loop", None, "Read the module-level new_event_loop.",
     "events.new_event_loop() = get_event_loop_policy().new_event_loop()."),
    ("symbol", "asyncio/events.py/BaseDefaultEventLoopPolicy", None, "The default policy decides the loop class.",
     "BaseDefaultEventLoopPolicy.new_event_loop returns self._loop_factory(); on Unix that is "
     "_UnixSelectorEventLoop."),
    ("skeleton", "asyncio/unix_events.py", None, "Check the Unix loop class.",
     "unix_events.py: _UnixSelectorEventLoop(selector_events.BaseSelectorEventLoop) adds signals and "
     "subprocesses."),
    ("skeleton", "asyncio/base_events.py", None, "The loop machinery is in base_events.py.",
     "base_events.py: BaseEventLoop has run_forever, run_until_complete, _run_once, call_soon, create_task."),
    ("symbol", "asyncio/base_events.py/BaseEventLoop/run_until_complete", None, "Read run_until_complete.",
     "run_until_complete wraps the argument in a future, adds _run_until_complete_cb as a done callback, "
     "then calls run_forever()."),
    ("symbol", "asyncio/base_events.py/BaseEventLoop/run_forever", None, "And run_forever.",
     "run_forever sets the running loop and calls _run_once() until _stopping is set."),
    ("symbol", "asyncio/base_events.py/BaseEventLoop/_run_once", None, "_run_once is one loop iteration.",
     "_run_once: timeout from the _scheduled heap, selector.select(timeout), _process_events, due timers "
     "into _ready, then run each ready Handle."),
    ("search", "def create_task", "asyncio", "Who creates tasks?",
     "create_task exists on BaseEventLoop, TaskGroup, AbstractEventLoop and as asyncio.create_task (tasks.py)."),
    ("symbol", "asyncio/base_events.py/BaseEventLoop/create_task", None, "Read the loop's create_task.",
     "BaseEventLoop.create_task builds tasks.Task(coro, loop=self) unless a task factory is set."),
    ("skeleton", "asyncio/tasks.py", None, "Outline of tasks.py.",
     "tasks.py: Task(futures._PyFuture) with __step and __wakeup; the C _asyncio.Task replaces it if present."),
    ("symbol", "asyncio/tasks.py/Task/__init__", None, "How does a new Task start?",
     "Task.__init__ schedules its first step: loop.call_soon(self.__step, context=self._context)."),
    ("symbol", "asyncio/tasks.py/Task/__step", None, "__step drives the coroutine.",
     "Task.__step sends None into the coroutine; a yielded future gets add_done_callback(self.__wakeup); "
     "StopIteration sets the result."),
    ("search", "_asyncio", "asyncio/tasks.py", "Is the pure-Python Task the one used?",
     "tasks.py imports _asyncio and rebinds Task = _CTask when the C accelerator exists."),
    ("symbol", "asyncio/futures.py/Future/set_result", None, "What happens when a future completes?",
     "Future.set_result stores the result, marks it FINISHED and calls __schedule_callbacks."),
    ("symbol", "asyncio/futures.py/Future/add_done_callback", None, "And how callbacks attach.",
     "add_done_callback schedules at once with call_soon if done, else appends to _callbacks."),
    ("symbol", "asyncio/events.py/Handle", None, "Handles are what the loop runs.",
     "events.Handle wraps callback+args+context; _run() calls it in the context and reports exceptions."),
    ("symbol", "asyncio/base_events.py/BaseEventLoop/call_soon", None, "call_soon feeds the ready queue.",
     "call_soon appends a Handle to self._ready (a deque); _run_once drains it."),
    ("symbol", "asyncio/selector_events.py/BaseSelectorEventLoop/_process_events", None,
     "How I/O events become callbacks.",
     "_process_events turns selector events into reader/writer Handles added to _ready."),
    ("symbol", "asyncio/runners.py/Runner/close", None, "Now shutdown: Runner.close.",
     "Runner.close: _cancel_all_tasks, shutdown_asyncgens, shutdown_default_executor, then loop.close()."),
    ("symbol", "asyncio/runners.py/_cancel_all_tasks", None, "Read _cancel_all_tasks.",
     "_cancel_all_tasks cancels every pending task and runs the loop until they finish (gather, "
     "return_exceptions=True)."),
    ("search", "def shutdown_asyncgens", None, "Where are async generators finalised?",
     "shutdown_asyncgens is defined only in base_events.py (plus the abstract one in events.py)."),
    ("symbol", "asyncio/base_events.py/BaseEventLoop/shutdown_asyncgens", None, "Read shutdown_asyncgens.",
     "shutdown_asyncgens calls aclose() on every tracked async generator and waits for them all."),
    ("symbol", "asyncio/base_events.py/BaseEventLoop/shutdown_default_executor", None,
     "And the default executor.",
     "shutdown_default_executor joins the default ThreadPoolExecutor from a helper thread."),
    ("symbol", "asyncio/base_events.py/BaseEventLoop/close", None, "Finally the loop's close().",
     "BaseEventLoop.close clears _ready and _scheduled and shuts the executor down without waiting."),
]

KEEP = {3, 4, 11, 13, 18}       # steps whose full output the moss model keeps
DROP = {12: 3, 19: 4}           # at step k's evaluation, drop the item kept at step v

ANSWER = (
    "asyncio.run (asyncio/runners.py:160) opens a Runner, whose _lazy_init creates a loop via "
    "events.new_event_loop() -> the policy's _UnixSelectorEventLoop. Runner.run wraps the coroutine in a Task "
    "(BaseEventLoop.create_task) and calls run_until_complete, which runs run_forever -> _run_once: select with "
    "a timeout from the timer heap, turn I/O events and due timers into Handles on the _ready deque and run them. "
    "A Task steps its coroutine in Task.__step (tasks.py:260), scheduled by call_soon, and resumes via "
    "Future.add_done_callback(__wakeup). Shutdown (Runner.close) cancels remaining tasks, finalises async "
    "generators, joins the default executor and closes the loop (base_events.py:663)."
)


def n_steps(quick: bool) -> int:
    return 8 if quick else len(STEPS)


# --------------------------------------------------------------------------- commands

def moss_command(step) -> str:
    kind, target, only, _, _ = step
    if kind == "search":
        return f'text-search "{target}"' + (f" --only {only}" if only else "") + " --limit 50"
    return f"view {target}"


def symbol_range(root: Path, target: str) -> tuple[str, int, int]:
    """(file, first, last line) of a symbol, from moss's own lookup, so that the shell
    equivalent prints exactly the same lines."""
    from moss.tools.view import view

    head = view(root, target).splitlines()[0]
    m = re.match(r"# (\S+?)/\S* \(L(\d+)-(\d+)\)", head)
    if not m:
        raise ValueError(f"no line range in {head!r}")
    path = target
    while not (root / path).is_file():
        path = path.rsplit("/", 1)[0]
    return path, int(m.group(2)), int(m.group(3))


def shell_command(step, root: Path) -> str:
    """The shell command a mini-swe-agent model would write for the same look."""
    kind, target, only, _, _ = step
    q = shlex.quote
    if kind == "tree":
        return f"ls {q(target)}"
    if kind == "skeleton":
        return f"grep -nE '^\\s*(class|def|async def) ' {q(target)}"
    if kind == "symbol":
        path, a, b = symbol_range(root, target)
        return f"sed -n '{a},{b}p' {q(path)}"
    if kind == "lines":
        path, rng = target.rsplit(":", 1)
        a, b = rng.split("-")
        return f"nl -ba {q(path)} | sed -n '{a},{b}p'"
    if kind == "search":
        return f"grep -rn --include='*.py' {q(target)} {q(only or '.')} | head -50"
    raise ValueError(kind)


def same_output_command(step, moss_bin: Path) -> str:
    """mini runs moss's own CLI in the form moss's agents are shown (`--compact`): byte-identical
    tool output (the control)."""
    kind, target, only, _, _ = step
    m = shlex.quote(str(moss_bin))
    if kind == "search":
        return f"{m} text-search {shlex.quote(target)}" + (f" --only {shlex.quote(only)}" if only else "") + \
            " --limit 50 --compact"
    return f"{m} view {shlex.quote(target)} --compact"


# --------------------------------------------------------------------------- the moss model

def _state(body) -> str:
    """The machine state that asked, from the label moss sends with each request (never
    from prompt wording, which users may edit)."""
    from fakeapi import state_of

    return state_of(body)


class MossModel:
    """A scripted model for moss V1 and V2, answering from what its context shows."""

    def __init__(self, steps: int):
        self.steps = steps
        self.explored = 0     # commands written so far
        self.judged = 0       # results evaluated so far
        self.calls: list[str] = []
        self.replies: list[str] = []
        self.errors: list[str] = []

    def __call__(self, body) -> str:
        text = self._reply(body)
        self.replies.append(text)
        return text

    def _reply(self, body) -> str:
        from fakeapi import last_user_text

        state = _state(body)
        self.calls.append(state)
        user = last_user_text(body)
        if state == "explorer":
            return self.explore()
        if state == "evaluator":
            return self.judge(user)
        # V1: judge the previous step's results (if any), then explore or answer
        judged = self.judge(user) if self.explored else ""
        if self.explored >= self.steps:
            return judged
        return (judged + "\n" if judged else "") + self.explore()

    def explore(self) -> str:
        step = STEPS[self.explored]
        self.explored += 1
        return f"{step[3]} $({moss_command(step)})"

    def judge(self, user: str) -> str:
        self.judged += 1
        k = self.judged
        step = STEPS[k - 1]
        expect = moss_command(step)
        if f"`{expect}`" not in user:
            self.errors.append(f"step {k}: result of `{expect}` not in the context")
        parts = []
        if k in KEEP:
            parts.append("$(keep 1)")
        if k in DROP:
            old = moss_command(STEPS[DROP[k] - 1])
            m = re.search(r"\[([a-z0-9]{4})\] `" + re.escape(old) + "`", user)
            if m:
                parts.append(f"$(drop {m.group(1)})")
            else:
                self.errors.append(f"step {k}: kept item `{old}` not found to drop")
        note = step[4].replace('"', "'").replace("(", "[").replace(")", "]")
        parts.append(f'$(note "{note}")')
        if k >= self.steps:
            parts.append(f"$(answer {ANSWER})")
        else:
            nxt = STEPS[k][3] if k < len(STEPS) else ""
            parts.append(f"Next: {nxt}")
        return " ".join(parts)


if __name__ == "__main__":  # print the three renderings, for a look
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    root = Path(sys.argv[1])
    for i, st in enumerate(STEPS, 1):
        print(f"{i:2d} moss: {moss_command(st)}\n   mini: {shell_command(st, root)}")

"""One attempt, as mechanism: what it is (``Spec``), how it is told to stop (``Control``), and the
checks around the agent (setup, ``fail_before``, the check after it).

An attempt is (task, cell, trial). Its agent runs as ``moss @agent`` in the attempt's copy; how
and where is an executor's job (host/eval/executors.py). The outcome is a plain dict, the
``raw`` result that ``moss.eval.next()`` hands to the policy (scripts/eval.lua), which decides
whether it passed:

    key, task, cell, trial, kind ("question" | "change", or "task": a batch task, no check),
    tries, retried (the runner's retries after infrastructure errors, host/eval/runner.py),
    reason      the agent's outcome (docs/agent.md), or "budget" / "interrupted" when the eval
                stopped it, or "setup_error" / "suite_error" / "infra_error" when it never ran;
                replaying (--replay): "not_recorded" (no cassette: not run) or "diverged" (the
                agent's requests left its recording; ``diverged`` says where, host/eval/cassettes.py)
    exit, success, answer, turns, usage {input_tokens, output_tokens, cost_usd, ...},
    tokens, cost, wall (seconds), session_id,
    check       {passed, detail} (absent when no check ran), detail (what went wrong),
    patch, patch_stat {files, added, removed, binary, bytes}, patch_cut
                what the agent did to the copy, a unified diff against the repository as given
                (host/tools/patch.py); absent when the agent never ran, ``patch_error`` when git
                could not make it
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..errors import MossError

CHECK_TIMEOUT = 60.0
OUTPUT_CHARS = 20000  # of a check's output read (head and tail, shell.run); rows keep its tail


@dataclass
class Spec:
    key: str
    task: Any                  # a suite Task (id, repo, prompt, check, commit, setup)
    cell: str                  # the cell's name
    trial: int
    args: list[str]            # the agent's words before the prompt (from the policy)
    variant: Path | None = None
    info: dict = field(default_factory=dict)  # the cell's dimensions, kept in the row
    max_cost: float | None = None   # this attempt's share of the eval's budget (what is left)
    max_tokens: int | None = None
    record: Path | None = None      # --record DIR: the agent's LLM cassette is written here
    replay: Path | None = None      # --replay DIR: the agent answers from this cassette
    prompt: str | None = None       # the policy's prompt for the task (default: the task's own)
    tries: int = 1                  # tries the agent gets: after a failed check, its session is resumed
    retry: dict | None = None       # with the policy's message {message ({output}, {detail}), lines, chars}
    check_timeout: float | None = None  # seconds each check command may take (default: the task's)
    config: dict | None = None      # the policy's config for the attempt, merged over the copy's


class Control:
    """How the runner stops an attempt that is running: ``stop(reason)`` remembers why and
    calls what the executor registered (``on_stop``) to make it end cleanly."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self._stopper: Callable[[], None] | None = None
        self._lock = threading.Lock()

    def on_stop(self, fn: Callable[[], None] | None) -> None:
        with self._lock:
            self._stopper = fn
            fire = fn is not None and self.reason is not None
        if fire and fn is not None:
            fn()

    def stop(self, reason: str) -> None:
        with self._lock:
            if self.reason is None:
                self.reason = reason
            fn = self._stopper
        if fn is not None:
            fn()

    @property
    def stopped(self) -> bool:
        return self.reason is not None


def run_commands(cmds: list[str], copy: Path, setup=None) -> tuple[bool, str]:
    """Run setup commands in the copy, sandboxed at ``edit``: (all exited 0, what failed)."""
    out = _run(cmds, copy, setup, timeout=CHECK_TIMEOUT, env={}, label="")
    return out["passed"], out["detail"]


def _run(cmds: list[str], copy: Path, setup, *, timeout: float, env: dict, label: str) -> dict:
    """{passed, detail, output}: `output` the failed command's output (its tail when long)."""
    from ..tools import shell

    for cmd in cmds:
        shown = label or cmd
        try:
            r = shell.run(cmd, root=copy, access="edit", timeout=timeout, max_chars=OUTPUT_CHARS, setup=setup,
                          env=env)
        except MossError as e:
            return {"passed": False, "detail": f"{shown}: {e.message}", "output": ""}
        if r["code"] != 0:
            output = "\n".join(s for s in (r["stdout"].rstrip(), r["stderr"].rstrip()) if s)
            tail = output.strip().splitlines()[-3:]
            why = f"timed out after {timeout:g} s" if r["timed_out"] else f"exit {r['code']}"
            return {"passed": False, "detail": f"{shown}: {why}" + (f" ({' / '.join(tail)})" if tail else ""),
                    "output": output}
    return {"passed": True, "detail": "", "output": ""}


def run_check(check, copy: Path, setup=None, *, timeout: float | None = None) -> dict:
    """A change's check commands in the copy, sandboxed at ``edit``: {passed, detail, output}, and
    ``not_run`` (why) when the output says this machine, not the solution, failed it (an
    exercise's tests that need a newer library than this machine has). An exercise's check gets
    its language's toolchain and caches (host/eval/languages.py) and its own timeout, unless the
    eval gives one (`timeout`)."""
    from ..tools.sandbox import Setup

    env: dict = {}
    if check.language:
        from . import languages

        cs = languages.check_setup(check.language, copy, setup)
        if cs.problem:  # the exercise as given could run (executors checked): the copy's change is the cause
            return {"passed": False, "detail": f"cannot run the tests: {cs.problem}", "output": ""}
        env = cs.env
        if cs.expose:
            base = setup or Setup()
            setup = Setup(env=base.env, expose=tuple(base.expose) + tuple(cs.expose), deny=base.deny)
    limit = timeout or check.timeout or CHECK_TIMEOUT
    out = _run(list(check.run), copy, setup, timeout=limit, env=env, label=check.label)
    if check.language:  # the check's private copy, as paths relative to the exercise
        from .languages import SCRATCH, environment_problem

        out["output"] = re.sub(re.escape(SCRATCH) + r"/[^/\s]+/", "", out["output"])
        why = None if out["passed"] else environment_problem(check.language, out["output"])
        if why:
            out.update(detail=f"not run: {why}", not_run=why)
    return out


def restore(task, copy: Path) -> str:
    """Put the task's given files (``check.restore``: an exercise's tests and build files) back
    into the copy as the suite has them, never writing through a link the agent left; "" or
    what could not be put back."""
    from ..tools import safefs

    names = getattr(task.check, "restore", ()) or ()
    if not names:
        return ""
    rel = names[0]
    try:
        with safefs.Tree(copy) as tree:
            for rel in names:
                src = Path(task.repo) / rel
                tree.write_atomic(rel, src.read_bytes(), mode=src.stat().st_mode & 0o777, sync=False)
    except (MossError, OSError) as e:
        return f"could not put the exercise's {rel} back as given: {getattr(e, 'message', e)}"
    return ""


def check(task, copy: Path, answer: str | None, setup=None, *, timeout: float | None = None) -> dict:
    """The task's check after the agent: {passed, detail} (and `output` when commands failed)."""
    from .suite import judge_answer

    c = task.check
    if c.run:
        why = restore(task, copy)
        if why:
            return {"passed": False, "detail": why, "output": ""}
        out = run_check(c, copy, setup, timeout=timeout)
        out["passed"] = bool(out["passed"])
        if out["passed"]:
            out.pop("output", None)  # a failed check's output is what a row keeps
        return out
    ok, why = judge_answer(c, answer)
    return {"passed": bool(ok), "detail": why}


def retry_prompt(retry: dict, check: dict) -> str:
    """The message a failed try's session gets: the policy's `message` (scripts/eval.lua
    M.retry; eval.start requires one for an attempt of more than one try) with {output} the tail
    of the check's output (its last `lines` lines, at most `chars` characters; all of it when
    the policy sets no cap) and {detail} its one line."""
    lines = max(1, int(retry.get("lines") or 1_000_000))
    chars = max(100, int(retry.get("chars") or 1_000_000))
    tail = "\n".join(str(check.get("output") or "").rstrip().splitlines()[-lines:])
    if len(tail) > chars:
        tail = "[...]\n" + tail[-chars:].split("\n", 1)[-1]
    message = str(retry["message"])
    # {detail} first: the output is the tests', and may hold any text
    return message.replace("{detail}", str(check.get("detail") or "")).replace("{output}", tail or "(no output)")


def has_check(task) -> bool:
    """Whether a task has a check at all (a batch task has none: its outcome is the agent's)."""
    c = getattr(task, "check", None)
    return c is not None and bool(c.run or c.answer is not None or c.regex is not None or c.number is not None)


def kind_of(task) -> str:
    """A task is a change when its check runs commands, a question when it compares the answer
    (docs/eval.md), and a batch task ("task") when it has no check."""
    if not has_check(task):
        return "task"
    return "change" if getattr(task.check, "run", None) else "question"


def safe_name(key: str) -> str:
    """An attempt's key as a file name: `task--cell--trial`, other characters than letters,
    digits and `.=-` as `_` (its session log, stderr and cassette are named so)."""
    return "".join(c if c.isalnum() or c in "._=-" else "_" for c in key.replace("|", "--"))


def base_row(spec: Spec) -> dict:
    row = {"key": spec.key, "task": spec.task.id, "cell": spec.cell, "trial": spec.trial,
           "kind": kind_of(spec.task), **{k: v for k, v in spec.info.items() if k not in ("key",)}}
    if spec.tries > 1 and row["kind"] == "change":
        row["max_tries"] = spec.tries  # the tries it was given (pass@1 .. pass@N, results.summary)
    return row


def spec_to_json(spec: Spec) -> dict:
    """A Spec as plain JSON (for an executor that runs the attempt elsewhere, e.g. in a Ray job);
    ``spec_from_json`` makes it again. Paths are strings; the task's check and solution plain dicts."""
    import dataclasses

    task = spec.task
    t = {"id": task.id, "repo": str(task.repo), "commit": task.commit, "prompt": task.prompt,
         "setup": list(task.setup), "tags": list(task.tags),
         "check": {**dataclasses.asdict(task.check), "run": list(task.check.run)},
         "solution": [dataclasses.asdict(r) for r in task.solution], "solution_answer": task.solution_answer,
         "exclude": list(getattr(task, "exclude", []) or []), "tries": task.tries, "problem": task.problem,
         "exercise": task.exercise}
    t["check"]["restore"] = list(task.check.restore)
    return {"key": spec.key, "task": t, "cell": spec.cell, "trial": spec.trial, "args": list(spec.args),
            "variant": str(spec.variant) if spec.variant is not None else None, "info": dict(spec.info),
            "max_cost": spec.max_cost, "max_tokens": spec.max_tokens,
            "record": str(spec.record) if spec.record is not None else None,
            "replay": str(spec.replay) if spec.replay is not None else None,
            "prompt": spec.prompt, "tries": spec.tries, "retry": spec.retry, "check_timeout": spec.check_timeout,
            "config": spec.config}


def spec_from_json(data: dict) -> Spec:
    from .suite import Check, Replacement, Task

    t = data["task"]
    c = dict(t.get("check") or {})
    check = Check(**{**c, "run": tuple(c.get("run") or ()), "restore": tuple(c.get("restore") or ())})
    task = Task(id=t["id"], repo=Path(t["repo"]), commit=t.get("commit") or "", prompt=t["prompt"],
                setup=list(t.get("setup") or []), tags=list(t.get("tags") or []), check=check,
                solution=[Replacement(**r) for r in t.get("solution") or []],
                solution_answer=t.get("solution_answer"), exclude=list(t.get("exclude") or []),
                tries=int(t.get("tries") or 1), problem=t.get("problem"), exercise=t.get("exercise"))

    def path(v):
        return Path(v) if v else None

    return Spec(key=data["key"], task=task, cell=data["cell"], trial=int(data["trial"]), args=list(data["args"]),
                variant=path(data.get("variant")), info=dict(data.get("info") or {}),
                max_cost=data.get("max_cost"), max_tokens=data.get("max_tokens"),
                record=path(data.get("record")), replay=path(data.get("replay")), prompt=data.get("prompt"),
                tries=int(data.get("tries") or 1), retry=data.get("retry"), check_timeout=data.get("check_timeout"),
                config=data.get("config"))

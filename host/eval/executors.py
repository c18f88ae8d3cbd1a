"""How an attempt is carried out, chosen by name: ``executor("local")`` runs it on this machine.

An executor gets a ``Spec`` (host/eval/attempt.py) and a ``Control`` and returns the raw
result dict described there; ``run`` blocks (the runner calls it from one of its worker
threads, at most ``-j`` at once) and must end soon after ``control.stop(reason)``, the agent
stopped cleanly (SIGINT: its session keeps its checkpoint). Everything around it is the
runner's and the same for every executor: the budget, the order, the JSONL file, the progress.

The two moss ships are named in ``EXECUTORS`` by their paths and imported when first chosen
(host/tools/registry.py): ``local`` below, and ``ray`` (host/eval/ray_executor.py: each attempt
a Ray job running the same ``moss @agent`` command in a copy made there). A new executor is a
subclass with a ``name``, made known with ``register(cls)``; ``moss eval --executor NAME``
then reaches it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from .. import agentproc
from ..errors import MossError
from ..llm.usage import total_tokens
from ..streamevents import Result
from ..tools.registry import Registry
from . import attempt as att
from ..tools import patch
from . import cassettes, copies, results

KILL_AFTER = 20.0  # seconds after SIGINT before a stopped agent's process group is killed
OUTPUT_KEPT = 4000  # characters of a failed check's output kept in its row (the tail)
# an agent that ended so gets no further try: its budget is spent, it was stopped, its model or
# script failed, or its replay left the recording
NO_RETRY = ("budget", "interrupted", "error", "diverged")

__all__ = ["AttemptExecutor", "LocalAttempts", "executor", "names", "register"]


class AttemptExecutor:
    """The interface. One instance per eval run; ``options`` are the run's (see Runner)."""

    name = ""

    def __init__(self, *, project_root: Path, project_trusted: bool, logs: Path, setup=None,
                 keep_copies: bool = False, env: dict | None = None):
        self.project_root = project_root
        self.project_trusted = project_trusted
        self.logs = logs              # where each attempt's session log and stderr are kept
        self.setup = setup            # the user's [sandbox] setup for check commands
        self.keep_copies = keep_copies
        self.env = dict(env if env is not None else os.environ)

    def expect(self, n: int) -> None:
        """Before the first attempt: how many the run means to start (an executor may prepare
        for them). Not a promise: a stop or the budget may end the run earlier."""

    def run(self, spec: att.Spec, control: att.Control) -> dict:
        raise NotImplementedError

    def cannot_run(self, task) -> dict | None:
        """{reason, detail} when the task cannot run at all here (nothing is copied, no agent
        starts): its exercise could not be read (a suite error), or its language's toolchain,
        a library it needs or JavaScript's prepared packages are not on this machine (not run)."""
        if getattr(task, "problem", None):
            return {"reason": "suite_error", "detail": task.problem}
        language = getattr(task.check, "language", "")
        if language:
            from . import languages

            why = languages.unavailable(language, Path(task.repo), self.env)
            if why:
                return {"reason": "not_run", "detail": f"not run: {why}"}
        return None

    def discard(self, row: dict) -> None:
        """A try the runner runs again (an infrastructure error): remove what it left (its copy)."""
        copies.remove(row.get("home"))

    def close(self) -> None:
        """The eval ended: release what the executor holds."""


EXECUTORS: Registry[type[AttemptExecutor]] = Registry("--executor", {
    "local": "moss.eval.executors:LocalAttempts",
    "ray": "moss.eval.ray_executor:RayAttempts",
})


def register(cls: type[AttemptExecutor]) -> type[AttemptExecutor]:
    """Make an AttemptExecutor subclass reachable by its ``name`` (also usable as a class decorator)."""
    EXECUTORS.register(cls.name, cls)
    return cls


def names() -> tuple[str, ...]:
    return EXECUTORS.names()


def executor(name: str) -> type[AttemptExecutor]:
    """The executor class called `name`; MossError(kind="usage") naming the known ones."""
    return EXECUTORS.get(name)


def sdk_apis(argv: list[str], cwd, env: dict) -> tuple[str, ...]:
    """The `api` of the provider the agent `python -m moss @agent ARGS` run in the copy `cwd`
    will use, resolved as it resolves it before its first turn (its flags, then its config,
    then `env`), so that its zygote imports that SDK and not the others. The copy's config is
    read through safefs (its setup commands ran there: no link is followed, no fifo waited on).
    Where the provider is not known here (none configured and a local server to look for, a
    config that does not parse) every SDK the zygote has: the agent then finds its own already
    imported, as before. A script that asks for another provider later imports that SDK itself,
    as a new interpreter does."""
    from .. import zygote
    from ..config import deep_merge, read_toml, user_config_file
    from ..hostoptions import split_host_options
    from ..llm.providers import resolve_provider

    try:
        words = [str(a) for a in argv]
        options, _ = split_host_options(words[words.index("@agent") + 1:])
        config = deep_merge(read_toml(user_config_file(env)), copies.read_config(Path(cwd)) if cwd else {})
        return (resolve_provider(config, options, env).api,)
    except (MossError, OSError, ValueError):
        return tuple(zygote.SDKS)


class LocalAttempts(AttemptExecutor):
    """Attempts on this machine: a copy under the temp folder, the agent as a subprocess in its
    own session (so a Ctrl-C at the terminal reaches only the eval, which stops each cleanly)."""

    name = "local"
    forked = True  # agents forked from a zygote (host/zygote.py); False: each a new interpreter
    # A zygote gets ready in ~1.9 s of CPU (moss and the anthropic SDK; ~0.6 s more with openai's);
    # a new interpreter runs a whole agent in ~2.2 s, a forked one in ~0.2 s (bench/m_fork.py):
    # one attempt costs about the same either way, each further one ~2 s less. A single attempt
    # runs as a new interpreter (no second process to start and stop for nothing).
    FORK_FROM = 2

    def __init__(self, **kw):
        super().__init__(**kw)
        self._forker = agentproc.Forker()
        self._few = False  # expect(): too few attempts for a zygote to pay for itself

    def expect(self, n: int) -> None:
        self._few = n < self.FORK_FROM

    def _start(self, argv: list[str], *, cwd: Path, env: dict, stderr) -> agentproc.AgentProcess:
        """The agent's process: forked from this run's zygote (which imported moss and the SDKs
        once, instead of once per attempt), or a new interpreter where it cannot be or where
        too few attempts run for the zygote to pay for itself (FORK_FROM)."""
        if not self.forked or self._few:
            return agentproc.start(argv, cwd=cwd, env=env, stderr=stderr, die_with_parent=True)
        return agentproc.start(argv, cwd=cwd, env=env, stderr=stderr, forker=self._forker,
                               apis=sdk_apis(argv, cwd, env))

    def close(self) -> None:
        self._forker.close()

    def run(self, spec: att.Spec, control: att.Control) -> dict:
        row = att.base_row(spec)
        if spec.replay is not None and not spec.replay.is_file():  # nothing to replay: not run at all
            row.update(reason="not_recorded", wall=0.0,
                       detail=f"not run: no recording of this attempt ({spec.replay} does not exist)")
            return row
        why = self.cannot_run(spec.task)
        if why is not None:
            row.update(wall=0.0, **why)
            return row
        start = time.monotonic()
        home = copies.new_home(spec.key)
        row["home"] = str(home)
        try:
            copy = copies.make(spec.task, home, project_root=self.project_root,
                               project_trusted=self.project_trusted, variant=spec.variant, overlay=spec.config)
            row["copy"] = str(copy)
            try:  # the repository as given, before setup: what the patch is taken against
                base: Path | None = patch.snapshot(copy, home)
            except (patch.PatchError, OSError) as e:
                base = None
                row["patch_error"] = str(e)
            self._attempt(spec, control, copy, row, base)
        except MossError as e:
            row.update(reason="infra_error", detail=e.message)
        except OSError as e:
            row.update(reason="infra_error", detail=f"{type(e).__name__}: {e}")
        row["wall"] = round(time.monotonic() - start, 3)
        return row

    def _ready(self, spec: att.Spec, control: att.Control, copy: Path, row: dict) -> bool:
        """The task's setup run and its fail_before check made in the copy: whether the agent
        may start (if not, the row says why)."""
        task = spec.task
        if task.setup:
            ok, why = att.run_commands(list(task.setup), copy, self.setup)
            if not ok:
                row.update(reason="setup_error", detail=f"setup failed: {why}")
                return False
        if task.check.run and task.check.fail_before:
            before = att.run_check(task.check, copy, self.setup, timeout=spec.check_timeout)
            if before["passed"]:
                row.update(reason="suite_error",
                           detail="the check already passes before the agent ran (fail_before)")
                return False
        if control.stopped:
            row.update(reason=control.reason or "interrupted")
            return False
        return True

    def _attempt(self, spec: att.Spec, control: att.Control, copy: Path, row: dict, base: Path | None) -> None:
        task = spec.task
        if not self._ready(spec, control, copy, row):
            return
        prompt, checks = spec.prompt or task.prompt, []
        tries = max(1, int(spec.tries or 1)) if att.kind_of(task) == "change" else 1
        for n in range(1, tries + 1):
            result = self._agent(spec, control, copy, row, prompt, resume=row.get("session_id") if n > 1 else None)
            if base is not None:  # what the agent did, taken before the check runs
                try:
                    row.update(patch.diff(copy, base))
                except (patch.PatchError, OSError) as e:
                    row["patch_error"] = str(e)
            if control.stopped:
                row.update(reason=control.reason or "interrupted")
                return
            if result is None or not att.has_check(task):
                break
            c = att.check(task, copy, result.get("answer"), self.setup, timeout=spec.check_timeout)
            if "output" in c:
                c["output"] = c["output"][-OUTPUT_KEPT:]
            if c.get("not_run"):  # this machine, not the agent, failed the check (host/eval/languages.py)
                row.update(reason="not_run", detail=c["detail"], check=c)
                break
            checks.append(c)
            row["check"] = c
            if c["passed"] or n == tries or row.get("exit") == 2 or row.get("reason") in NO_RETRY:
                break
            if _spent(spec, row):  # a later try's budget is what is left: none, so no try (not counted)
                row.update(reason="budget", detail=f"the budget was spent before try {n + 1} of {tries}")
                break
            if spec.retry is None:  # nothing to tell its session (eval.start requires it for tries > 1)
                break
            prompt = att.retry_prompt(spec.retry, c)
        if tries > 1:
            row["checks"] = [{k: v for k, v in c.items() if k != "output"} for c in checks]
        if spec.replay is not None and row.get("reason") != "diverged":  # as many requests as recorded?
            calls = (row.get("usage") or {}).get("calls")
            self._diverged(copy, spec.replay, row, calls if isinstance(calls, int) else None)

    @staticmethod
    def _diverged(copy: Path, cassette: Path, row: dict, calls: int | None) -> None:
        d = cassettes.divergence(copy, cassette, calls)
        if d is not None:
            row.update(reason="diverged", diverged=d, detail="replay diverged: " + cassettes.describe(d))

    def _agent(self, spec: att.Spec, control: att.Control, copy: Path, row: dict, prompt: str,
               resume: str | None = None) -> Result | None:
        """Run the agent in the copy (`resume`: a later try, the same session given `prompt`)."""
        argv = self._argv(spec, row, prompt, resume)
        safe = att.safe_name(spec.key)
        stderr_path = self.logs / f"{safe}.stderr"
        env = {k: v for k, v in self.env.items() if not k.startswith("MOSS_EVAL_")}
        with results.open_log(stderr_path) as err:
            agent = self._start(argv, cwd=copy, env=env, stderr=err)
            # Stopped (the budget, Ctrl-C): SIGINT to the agent alone, which stops its own commands
            # and saves its checkpoint; one that does not end (stuck where Ctrl-C cannot reach)
            # is killed KILL_AFTER s later.
            control.on_stop(lambda: agent.interrupt(group=False, kill_after=KILL_AFTER))
            result: Result | None = None
            sid = None
            for ev in agent.events():
                if ev["type"] == "session_start" and not sid:
                    sid = ev.get("session_id")
                elif ev["type"] == "result":
                    result = ev
            code = agent.wait()
            control.on_stop(None)
        row["exit"] = code
        row["stderr"] = str(stderr_path)
        for k in ("detail", "error_kind"):  # an earlier try's
            row.pop(k, None)
        if result is None:
            row.update(reason="infra_error", detail=f"the agent ended (exit {code}) without a result")
            return None
        sid = result.get("session_id") or sid
        _take_result(row, result, sid)
        if spec.replay is not None and not control.stopped:  # a request the recording could not answer
            self._diverged(copy, spec.replay, row, None)
        if sid:
            self._keep_log(copy, sid, safe, row)
        if row.get("reason") == "diverged":
            return None  # the replay could not go on as recorded: no check, the attempt says nothing
        return result

    @staticmethod
    def _argv(spec: att.Spec, row: dict, prompt: str, resume: str | None) -> list[str]:
        """The agent's command line for one try (`row`: what the tries before it spent)."""
        argv = agentproc.command("--output-format", "stream-json", "-n", "--trust", *spec.args)
        # a budget is per invocation: a later try gets what the earlier ones left
        if spec.max_cost is not None:
            argv += ["--max-cost", f"{max(spec.max_cost - float(row.get('cost') or 0.0), 0.0):.6f}"]
        if spec.max_tokens is not None:
            argv += ["--max-tokens", str(max(int(spec.max_tokens) - int(row.get("tokens") or 0), 1))]
        if spec.record is not None:
            if resume is None:
                spec.record.unlink(missing_ok=True)  # an attempt run again (--resume) records afresh
            argv += ["--record", str(spec.record)]  # a later try's requests are appended
        if spec.replay is not None:  # after the policy's words: the last --provider is the one used
            argv += ["--provider", "replay", "--replay", str(spec.replay)]
            row["replayed"] = str(spec.replay)
        if resume:
            argv += ["--resume", resume]
        return argv + ["--", prompt]

    def _keep_log(self, copy: Path, sid: str, safe: str, row: dict) -> None:
        """The session's log kept beside the eval's, out of the copy (which goes)."""
        log = copy / ".moss" / "agent" / "logs" / f"{sid}.jsonl"
        if log.is_file() and not log.is_symlink():
            kept = self.logs / f"{safe}.jsonl"
            results.write(kept, log.read_bytes())
            row["log"] = str(kept)


def _spent(spec: att.Spec, row: dict) -> bool:
    """Whether the attempt's cost or token budget is used up by its tries so far (a try given
    --max-cost 0 would run with no limit at all: 0 means none to the agent)."""
    return ((spec.max_cost is not None and float(row.get("cost") or 0.0) >= spec.max_cost)
            or (spec.max_tokens is not None and int(row.get("tokens") or 0) >= int(spec.max_tokens)))


def _take_result(row: dict, result: Result, sid: str | None) -> None:
    """The agent's `result` event into the attempt's row: outcome, answer, usage and spend."""
    usage = result.get("usage") or {}
    row.update(reason=result.get("reason"), success=bool(result.get("success")), answer=result.get("answer"),
               turns=result.get("turns"), usage=usage, session_id=sid,
               tokens=total_tokens(usage),
               cost=float(usage.get("cost_usd", 0.0) or 0.0))
    if result.get("detail"):
        row["detail"] = result["detail"]
    if result.get("error_kind"):
        row["error_kind"] = result["error_kind"]

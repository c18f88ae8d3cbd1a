"""moss.eval: the mechanism of `moss eval` (host/eval/); the policy is scripts/eval.lua.

The script loads a suite (``suite``) or a batch of agent tasks (``batch``, for ``moss batch``), expands it into attempts, starts them (``start``), takes
each as it ends (``next``) and says whether it passed (``record``, which writes its line and
removes its copy), then reads the summary (``finish``, ``summary``). ``read`` and ``mcnemar``
serve ``moss eval compare``; ``html`` writes the HTML report the policy laid out
(host/eval/report.py).

A suite inside the project (not moss's built-in one, not one in the user's own script folder)
is the project's content: its setup and check commands run only when the project is trusted,
like ``validate_commands``; ``start`` refuses them otherwise (kind ``denied``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import MossError
from .registry import primitive

if TYPE_CHECKING:
    from ..eval.session import EvalRun


def _inside(p: Path, d: Path) -> bool:
    try:
        p.resolve().relative_to(d.resolve())
        return True
    except ValueError:
        return False


def _task(t, kind: str) -> dict:
    """A suite task as the policy sees it (an exercise's facts for its prompt; a task that could
    not be read, its `problem`)."""
    out = {"id": t.id, "kind": kind, "prompt": t.prompt, "tags": list(t.tags),
           "commands": bool(t.check.run or t.setup), "tries": t.tries}
    if t.exercise:
        out["exercise"] = dict(t.exercise)
    if t.problem:
        out["problem"] = t.problem
    return out


# host/eval/ is imported by the functions that use it, not at the top: every script's start
# imports this module, and importing host/eval/ (with moss.llm, which it reaches) cost ~45 ms
# of CPU, a third of a plain `moss @NAME`'s (bench/m_startup.py)

def _suites(ctx) -> dict[str, Any]:
    """The suites and batches this run loaded, by the path moss.eval.suite (or batch) returned:
    (suite, whether it is the project's content)."""
    suites = ctx.services.get("eval_suites")
    if suites is None:
        suites = ctx.services["eval_suites"] = {}
    return suites


def _find_suite(ctx, spec: str) -> tuple[Path, str]:
    p = Path(spec).expanduser()
    if p.exists():
        return p.resolve(), ""
    if "/" not in spec and spec and ctx.runtime is not None:
        for root in ctx.runtime.roots.roots:
            cand = root.path / "eval" / "suites" / spec
            if (cand / "suite.toml").is_file():
                return cand.resolve(), root.name
            if cand.with_suffix(".toml").is_file():
                return cand.with_suffix(".toml").resolve(), root.name
    raise MossError(f"no suite {spec!r}: give a folder with suite.toml, a .toml file, or a suite name "
                    f"under scripts/eval/suites/ (e.g. builtin)", kind="not_found")


@primitive
def suite(ctx, spec):
    path, origin = _find_suite(ctx, str(spec))
    from ..eval import exercises, suite as suite_mod
    from ..eval.attempt import kind_of

    # a folder of exercises (the layout public polyglot benchmarks use), else moss's TOML suite
    s = exercises.load_exercises(path) if path.is_dir() and not (path / "suite.toml").exists() \
        and exercises.is_exercise_dir(path) else suite_mod.load_suite(path)
    where = Path(s.path).resolve()
    home = where if where.is_dir() else where.parent
    for t in s.tasks:  # a suite shares only what lies beside it (a cloned one must not copy ~/.ssh)
        if not _inside(Path(t.repo), home):
            raise MossError(f"suite {s.name}: task {t.id}'s repo {t.repo} is outside the suite's folder "
                            f"{home} (links followed); a task's repository must lie beside its suite", kind="denied")
    project = origin == "project" or (origin == "" and _inside(path, Path(ctx.root)))
    _suites(ctx)[str(path)] = (s, project)
    return {"name": s.name, "path": str(path), "project": project, "origin": origin or ("project" if project else "path"),
            "tasks": [_task(t, kind_of(t)) for t in s.tasks]}


@primitive
def batch(ctx, path):
    from ..eval.batch import load_batch

    b = load_batch(Path(str(path)).expanduser())
    _suites(ctx)[str(b.path)] = (b, False)  # its tasks run no commands: nothing of it needs trust
    return {"name": b.name, "path": str(b.path),
            "tasks": [{"id": t.id, "repo": str(t.repo), "prompt": t.prompt, "line": b.lines[t.id],
                       **b.options[t.id]} for t in b.tasks]}


@primitive
def start(ctx, opts):
    opts = dict(opts or {})
    if ctx.services.get("eval") is not None:
        raise MossError("eval.start: an eval is already running in this script", kind="usage")
    s, from_project = _suites(ctx).get(str(opts.get("suite")), (None, False))
    if s is None:
        raise MossError("eval.start: opts.suite must be the path moss.eval.suite returned", kind="usage")
    trusted = ctx.trust is not None and ctx.trust.trusted
    if from_project and not trusted and any(t.check.run or getattr(t, "setup", None) for t in s.tasks):
        raise MossError(f"the suite {s.path} is this project's content, and its setup and check commands "
                        f"run only once you trust the project: review it with `moss trust` (or pass --trust "
                        f"for this run)", kind="denied")
    if not opts.get("out"):
        raise MossError("eval.start: opts.out (the results folder) is required", kind="usage")
    from ..eval.session import EvalRun

    run = EvalRun(ctx, s, opts)
    ctx.services["eval"] = run  # the running eval; closed (its attempts stopped) if the script ends first
    return {"out": str(run.out), "total": run.total, "skipped": run.skipped,
            "to_run": run.total - run.skipped}


def _run(ctx) -> EvalRun:
    run = ctx.services.get("eval")
    if run is None:
        raise MossError("no eval is running: call moss.eval.start first", kind="usage")
    return run


@primitive
def next_(ctx):
    return _run(ctx).next()


@primitive
def record(ctx, key, verdict=None):
    return _run(ctx).record(str(key), dict(verdict or {}))


@primitive
def finish(ctx):
    out = _run(ctx).finish()
    ctx.services.pop("eval", None)
    return out


@primitive
def summary(ctx, rows):
    from ..eval import results

    return results.summary(list(rows or []))


@primitive
def read(ctx, path):
    from ..eval import results

    return results.read(Path(str(path)))


@primitive
def mcnemar(ctx, b, c):
    from ..eval import results

    return results.mcnemar_exact(int(b), int(c))


@primitive
def prepare(ctx, path):
    import sys

    from ..eval.exercises import prepare_folder

    if not isinstance(path, str) or not path:
        raise MossError("eval.prepare: give the folder of exercises", kind="usage")
    return prepare_folder(Path(path).expanduser(), log=lambda text: print(text, file=sys.stderr, flush=True))


@primitive
def cpus(ctx):
    return os.cpu_count() or 1


@primitive
def html(ctx, path, report):
    from ..eval import report as report_mod

    if not isinstance(path, str) or not path:
        raise MossError("eval.html: path must be a file name ending in .html", kind="usage")
    return {"file": report_mod.write(path, report if isinstance(report, dict) else {})}

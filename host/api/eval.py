"""moss.eval: the mechanism of `moss eval` (host/eval/); the policy is scripts/eval.lua.

The script loads a suite (``suite``), expands it into attempts, starts them (``start``), takes
each as it ends (``next``) and says whether it passed (``record``, which writes its line and
removes its copy), then reads the summary (``finish``, ``summary``). ``read`` and ``mcnemar``
serve ``moss eval compare``.

A suite inside the project (not moss's built-in one, not one in the user's own script folder)
is the project's content: its setup and check commands run only when the project is trusted,
like ``validate_commands``; ``start`` refuses them otherwise (kind ``denied``).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from ..errors import MossError


def _inside(p: Path, d: Path) -> bool:
    try:
        p.resolve().relative_to(d.resolve())
        return True
    except ValueError:
        return False


class _Eval:
    """One eval run of this process: the runner, the progress display, rows waiting for a verdict."""

    def __init__(self, ctx, suite, opts: dict):
        from ..eval import attempt as att
        from ..eval import executors, progress, results, runner
        from ..tools.sandbox import setup_from_config

        self.ctx = ctx
        self.out = Path(opts["out"]).resolve()
        self.keep, self.keep_failed = bool(opts.get("keep")), bool(opts.get("keep_failed"))
        resume = bool(opts.get("resume"))
        file = self.out / results.FILE
        if resume and not file.exists() and not (self.out / "run.json").exists():
            raise MossError(f"--resume: no eval in {self.out} (no attempts.jsonl, no run.json)", kind="not_found")
        if file.exists() and not resume:
            raise MossError(f"{self.out} already holds eval results: pass --resume {self.out} to go on with them, "
                            f"or another --out", kind="usage")
        (self.out / "logs").mkdir(parents=True, exist_ok=True)
        before = results.read(file) if file.exists() else []
        done = results.finished(before)
        tasks = {t.id: t for t in suite.tasks}
        specs, seen = [], set()
        for a in opts.get("attempts") or []:
            if not isinstance(a, dict) or not isinstance(a.get("key"), str):
                raise MossError("eval.start: each attempt needs a string key", kind="usage")
            if a["key"] in seen:
                raise MossError(f"eval.start: attempt {a['key']!r} appears twice", kind="usage")
            seen.add(a["key"])
            task = tasks.get(a.get("task"))
            if task is None:
                raise MossError(f"eval.start: no task {a.get('task')!r} in suite {suite.name}", kind="usage")
            if a["key"] in done:
                continue
            variant = a.get("variant") or None
            specs.append(att.Spec(key=a["key"], task=task, cell=str(a.get("cell") or "default"),
                                  trial=int(a.get("trial") or 1), args=[str(w) for w in a.get("args") or []],
                                  variant=Path(variant).resolve() if variant else None,
                                  info=dict(a.get("info") or {})))
        self.total = len(seen)
        self.skipped = self.total - len(specs)
        counted = [r for r in done.values() if r["key"] in seen]
        trust = ctx.trust
        cls = executors.executor(opts.get("executor") or "local")
        self.executor = cls(project_root=Path(ctx.root), project_trusted=bool(trust is None or trust.trusted),
                            logs=self.out / "logs", setup=setup_from_config(ctx.user_config, ctx.config))
        self.progress = progress.Progress(self.total, title=str(opts.get("title") or f"eval {suite.name}"),
                                          done=len(counted))
        for r in counted:
            self.progress.seed(r)
        self.runner = runner.Runner(specs, self.executor, jobs=int(opts.get("jobs") or 1),
                                    max_cost=opts.get("max_cost"), max_tokens=opts.get("max_tokens"),
                                    spent_cost=sum(float(r.get("cost") or 0) for r in counted),
                                    spent_tokens=sum(int(r.get("tokens") or 0) for r in counted),
                                    progress=self.progress)
        self.waiting: dict[str, dict] = {}
        meta = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "suite": str(suite.path),
                "args": list(ctx.args), "attempts": self.total, **(opts.get("meta") or {})}
        from ..tools import safefs

        safefs.replace_file(self.out / ("run.json" if not resume else "resume.json"), json.dumps(meta, indent=2) + "\n")
        self.runner.start()

    def next(self):
        try:
            row = self.runner.next()
        except KeyboardInterrupt:
            self.close()
            raise
        if row is None:
            return None
        self.waiting[row["key"]] = row
        return row

    def record(self, key: str, verdict: dict) -> dict:
        from ..eval import copies, results

        row = self.waiting.pop(key, None)
        if row is None:
            raise MossError(f"eval.record: no ended attempt {key!r} waits for a verdict", kind="usage")
        passed = verdict.get("passed")
        row["passed"] = passed if isinstance(passed, bool) else None
        if verdict.get("verdict"):
            row["verdict"] = str(verdict["verdict"])
        home = row.pop("home", None)
        copy = row.pop("copy", None)
        if isinstance(row.get("answer"), str) and len(row["answer"]) > 2000:
            row["answer"] = row["answer"][:2000] + " [cut]"
        keep = self.keep or (self.keep_failed and row["passed"] is False)
        row["kept"] = copy if keep and copy else None
        if not keep:
            copies.remove(home)
        results.append(self.out, row)
        self.progress.ended(row)
        return row

    def finish(self) -> dict:
        from ..eval import results

        for key in list(self.waiting):  # ended, never judged: recorded as not counted
            self.record(key, {})
        self.progress.close()
        self.executor.close()
        rows = results.read(self.out) if (self.out / results.FILE).exists() else []
        return {"out": str(self.out), "file": str(self.out / results.FILE), "rows": rows,
                "stopped": self.runner.stop_reason, "not_run": self.runner.not_started, "peak": self.runner.peak,
                "total": self.total, "skipped": self.skipped}

    def close(self) -> None:
        """Ctrl-C or the script ended early: stop what runs (their attempts go again on --resume),
        remove their copies, put the display away."""
        from ..eval import copies

        if self.runner.stop_reason is None:
            self.runner.stop("interrupted")
        for row in self.runner.drain():
            if not self.keep:
                copies.remove(row.get("home"))
        for row in self.waiting.values():
            copies.remove(row.get("home"))
        self.waiting.clear()
        self.progress.close()
        self.executor.close()


def functions(ctx):
    from ..eval import loader, results
    from ..eval.attempt import kind_of

    suites: dict[str, Any] = {}
    state: dict = {}

    def find_suite(spec: str) -> tuple[Path, str]:
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

    def suite(spec):
        path, origin = find_suite(str(spec))
        s = loader.load_suite(path)
        project = origin == "project" or (origin == "" and _inside(path, Path(ctx.root)))
        s.from_project = project
        suites[str(path)] = s
        return {"name": s.name, "path": str(path), "project": project, "origin": origin or ("project" if project else "path"),
                "tasks": [{"id": t.id, "kind": kind_of(t), "prompt": t.prompt, "tags": list(t.tags),
                           "commands": bool(t.check.run or t.setup)} for t in s.tasks]}

    def start(opts):
        opts = dict(opts or {})
        if state.get("run") is not None:
            raise MossError("eval.start: an eval is already running in this script", kind="usage")
        s = suites.get(str(opts.get("suite")))
        if s is None:
            raise MossError("eval.start: opts.suite must be the path moss.eval.suite returned", kind="usage")
        trusted = ctx.trust is None or ctx.trust.trusted
        if getattr(s, "from_project", False) and not trusted and any(t.check.run or t.setup for t in s.tasks):
            raise MossError(f"the suite {s.path} is this project's content, and its setup and check commands "
                            f"run only once you trust the project: review it with `moss trust` (or pass --trust "
                            f"for this run)", kind="denied")
        if not opts.get("out"):
            raise MossError("eval.start: opts.out (the results folder) is required", kind="usage")
        run = _Eval(ctx, s, opts)
        state["run"] = run
        ctx.services["eval"] = run
        return {"out": str(run.out), "total": run.total, "skipped": run.skipped,
                "to_run": run.total - run.skipped}

    def _run() -> _Eval:
        run = state.get("run")
        if run is None:
            raise MossError("no eval is running: call moss.eval.start first", kind="usage")
        return run

    def next_():
        return _run().next()

    def record(key, verdict=None):
        return _run().record(str(key), dict(verdict or {}))

    def finish():
        run = _run()
        out = run.finish()
        state["run"] = None
        ctx.services.pop("eval", None)
        return out

    def summary(rows):
        return results.summary(list(rows or []))

    def read(path):
        return results.read(Path(str(path)))

    def mcnemar(b, c):
        return results.mcnemar_exact(int(b), int(c))

    def cpus():
        return os.cpu_count() or 1

    return {"eval.suite": suite, "eval.start": start, "eval.next": next_, "eval.record": record,
            "eval.finish": finish, "eval.summary": summary, "eval.read": read, "eval.mcnemar": mcnemar,
            "eval.cpus": cpus}

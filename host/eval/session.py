"""One eval run of a moss process, as ``moss.eval`` drives it (host/api/eval.py): the attempts
still to run (those a resume finds finished are skipped), the runner and its executor, the
progress display, and the ended attempts waiting for the policy's verdict. ``record`` writes an
attempt's line and removes its copy; ``close`` (Ctrl-C, or a script that ended early) stops what
runs, so its attempts run again on ``--resume``."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from ..errors import MossError
from . import attempt as att
from . import cassettes, copies, executors, progress, results, runner


class EvalRun:
    """One eval run of this process: the runner, the progress display, rows waiting for a verdict."""

    def __init__(self, ctx, suite, opts: dict):
        from ..llm.providers import key_variables
        from ..tools.sandbox import setup_from_config

        self.ctx = ctx
        cls = executors.executor(opts.get("executor") or "local")
        self.out = Path(os.path.abspath(opts["out"]))  # not resolved: a link under .moss/ is refused, not followed
        # the results file: OUT/attempts.jsonl, or the file `file` names (a batch's -o) with its
        # logs in OUT beside it
        self.file = Path(os.path.abspath(opts["file"])) if opts.get("file") else self.out / results.FILE
        self.logs = self.out if opts.get("file") else self.out / "logs"
        self.keep, self.keep_failed = bool(opts.get("keep")), bool(opts.get("keep_failed"))
        self.record_dir, self.replay_dir = _folder(opts.get("record")), _folder(opts.get("replay"))
        self._check_cassettes()
        resume = bool(opts.get("resume"))
        file = self.file
        self._check_results(resume, bool(opts.get("file")))
        results.mkdir(self.logs)
        results.mkdir(file.parent)
        if self.record_dir is not None:
            results.mkdir(self.record_dir)
        before = results.read(file) if file.exists() else []
        done = results.finished(before)
        specs, seen = self._specs(suite, opts, done)
        for variant in sorted({str(sp.variant) for sp in specs if sp.variant is not None}):
            copies.variant_entries(Path(variant))  # a link out of a variant folder: refused before any attempt
        self.total = len(seen)
        self.skipped = self.total - len(specs)
        counted = [r for r in done.values() if r["key"] in seen]
        trust = ctx.trust
        self.executor = cls(project_root=Path(ctx.root), project_trusted=bool(trust is not None and trust.trusted),
                            logs=self.logs, setup=setup_from_config(ctx.user_config, keys=key_variables(ctx.config)))
        prepare = getattr(self.executor, "prepare", None)  # an executor with options of its own (ray)
        if prepare is not None:
            prepare(self.out, opts)
        tally = opts.get("tally") or "cells"
        if tally not in ("cells", "outcomes"):
            raise MossError(f"eval.start: tally must be \"cells\" or \"outcomes\", got {tally!r}", kind="usage")
        self.progress = progress.Progress(self.total, title=str(opts.get("title") or f"eval {suite.name}"),
                                          done=len(counted), tally=tally, cells=_cell_order(opts))
        for r in counted:
            self.progress.seed(r)
        self.runner = runner.Runner(specs, self.executor, jobs=int(opts.get("jobs") or 1),
                                    max_cost=opts.get("max_cost"), max_tokens=opts.get("max_tokens"),
                                    spent_cost=sum(float(r.get("cost") or 0) for r in counted),
                                    spent_tokens=sum(int(r.get("tokens") or 0) for r in counted),
                                    progress=self.progress, retries=_number(opts, "retries", int) or 0)
        self.waiting: dict[str, dict] = {}
        self.budget_cut = 0  # attempts of this run that ended for the budget (they run again on --resume)
        meta = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "suite": str(suite.path),
                "args": list(ctx.args), "attempts": self.total,
                "record": str(self.record_dir) if self.record_dir else None,
                "replay": str(self.replay_dir) if self.replay_dir else None, **(opts.get("meta") or {})}
        results.write(self.out / ("run.json" if not resume else "resume.json"), json.dumps(meta, indent=2) + "\n")
        self.runner.start()

    def _check_cassettes(self) -> None:
        if self.replay_dir is not None and not self.replay_dir.is_dir():
            raise MossError(f"--replay {self.replay_dir}: no such folder (give the folder an eval's --record wrote)",
                            kind="not_found")
        if self.record_dir is not None and self.record_dir == self.replay_dir:
            raise MossError(f"--record and --replay name the same folder {self.record_dir}: recording would "
                            f"replace the cassettes being replayed; record into another folder", kind="usage")

    def _check_results(self, resume: bool, own_file: bool) -> None:
        """--resume needs results to go on with; without it, results already there are not
        written over. `own_file`: a batch's -o names the results file."""
        file = self.file
        if resume and not file.exists() and not (self.out / "run.json").exists():
            if own_file:
                raise MossError(f"--resume: no results at {file}", kind="not_found")
            raise MossError(f"--resume: no eval in {self.out} (no attempts.jsonl, no run.json)", kind="not_found")
        if file.exists() and not resume:
            if own_file:
                raise MossError(f"{file} already holds results: pass --resume to go on with them, or another -o",
                                kind="usage")
            raise MossError(f"{self.out} already holds eval results: pass --resume {self.out} to go on with them, "
                            f"or another --out", kind="usage")

    def _specs(self, suite, opts: dict, done: dict) -> tuple[list[att.Spec], set[str]]:
        """The attempts the policy asked for, each checked: those still to run, and every key."""
        tasks = {t.id: t for t in suite.tasks}
        check_timeout = _number(opts, "check_timeout", float) or None
        specs: list[att.Spec] = []
        seen: set[str] = set()
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
                                  info=dict(a.get("info") or {}),
                                  max_cost=_number(a, "max_cost", float), max_tokens=_number(a, "max_tokens", int),
                                  record=cassettes.file_for(self.record_dir, a["key"]) if self.record_dir else None,
                                  replay=self._recording(a) if self.replay_dir else None,
                                  prompt=str(a["prompt"]) if a.get("prompt") else None,
                                  tries=_tries(a), retry=_retry(a, _tries(a)), check_timeout=check_timeout,
                                  config=_config(a.get("config"))))
        return specs, seen

    def _recording(self, a: dict) -> Path:
        """The cassette an attempt replays: the first of its `recordings` (keys; default its own)
        that is in the replay folder, else its own (missing: the attempt is not run)."""
        assert self.replay_dir is not None
        keys = [str(k) for k in a.get("recordings") or [] if k] or [a["key"]]
        for k in keys:
            f = cassettes.file_for(self.replay_dir, k)
            if f.is_file():
                return f
        return cassettes.file_for(self.replay_dir, keys[0])

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
        row = self.waiting.pop(key, None)
        if row is None:
            raise MossError(f"eval.record: no ended attempt {key!r} waits for a verdict", kind="usage")
        passed = verdict.get("passed")
        row["passed"] = passed if isinstance(passed, bool) else None
        if verdict.get("verdict"):
            row["verdict"] = str(verdict["verdict"])
        if verdict.get("outcome"):
            row["outcome"] = str(verdict["outcome"])
        on = verdict.get("passed_on")
        if row["passed"] is True and isinstance(on, int | float) and not isinstance(on, bool) and on >= 1:
            row["passed_on"] = int(on)  # the try it passed on (--tries)
        home = row.pop("home", None)
        copy = row.pop("copy", None)
        if isinstance(row.get("answer"), str) and len(row["answer"]) > 2000:
            row["answer"] = row["answer"][:2000] + " [cut]"
        keep = self.keep or (self.keep_failed and row["passed"] is False)
        row["kept"] = copy if keep and copy else None
        if not keep:
            copies.remove(home)
        results.append_to(self.file, row)
        if row.get("reason") == "budget":
            self.budget_cut += 1
        self.progress.ended(row)
        return row

    def finish(self) -> dict:
        for key in list(self.waiting):  # ended, never judged: recorded as not counted
            self.record(key, {})
        self.progress.close()
        self.executor.close()
        rows = results.read(self.file) if self.file.exists() else []
        return {"out": str(self.out), "file": str(self.file), "rows": rows,
                "stopped": self.runner.stop_reason or ("budget" if self.budget_cut else None), "not_run": self.runner.not_started, "peak": self.runner.peak,
                "total": self.total, "skipped": self.skipped, "budget_cut": self.budget_cut}

    def close(self) -> None:
        """Ctrl-C or the script ended early: stop what runs (their attempts go again on --resume),
        remove their copies, put the display away."""
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


def _cell_order(opts: dict) -> list[str]:
    """The cells of the attempts in the matrix's order (each attempt's `info.cell_index`, then
    the order they come in), for the live panel."""
    place: dict[str, float] = {}
    for i, a in enumerate(opts.get("attempts") or []):
        if not isinstance(a, dict):
            continue
        info = a.get("info")
        index = info.get("cell_index") if isinstance(info, dict) else None
        rank = index if isinstance(index, int) and not isinstance(index, bool) else len(opts["attempts"]) + i
        cell = str(a.get("cell") or "default")
        place[cell] = min(place.get(cell, rank), rank)
    return sorted(place, key=lambda c: place[c])


def _number(table: dict, key: str, kind):
    """An attempt's (or the run's) optional number: None, or a number >= 0 of `kind`."""
    v = table.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float) or v < 0:
        raise MossError(f"eval.start: {key} must be a number >= 0, got {v!r}", kind="usage")
    return kind(v)


def _tries(a: dict) -> int:
    from .suite import MAX_TRIES

    v = a.get("tries", 1)
    if isinstance(v, bool) or not isinstance(v, int | float) or v != int(v) or not 1 <= v <= MAX_TRIES:
        raise MossError(f"eval.start: attempt {a.get('key')!r}: tries must be a whole number from 1 to {MAX_TRIES}, "
                        f"got {v!r}", kind="usage")
    return int(v)


def _config(v) -> dict | None:
    if v is None or v == {}:
        return None
    if not isinstance(v, dict):
        raise MossError("eval.start: an attempt's config must be a table (merged over its copy's config)",
                        kind="usage")
    return v


def _retry(a: dict, tries: int) -> dict | None:
    """The policy's retry message: {message, lines, chars} (host/eval/attempt.py retry_prompt).
    An attempt with more than one try needs one: what a session is told is the policy's."""
    v = a.get("retry")
    if v is None:
        if tries > 1:
            raise MossError(f"eval.start: attempt {a.get('key')!r} has {tries} tries but no retry = {{message = "
                            f"...}}: what its session is told after a failed check", kind="usage")
        return None
    if not isinstance(v, dict) or not isinstance(v.get("message"), str):
        raise MossError("eval.start: an attempt's retry must be a table with a message", kind="usage")
    out = {"message": v["message"]}
    for k in ("lines", "chars"):
        n = v.get(k)
        if n is not None:
            if isinstance(n, bool) or not isinstance(n, int | float) or n < 1:
                raise MossError(f"eval.start: retry.{k} must be a number >= 1, got {n!r}", kind="usage")
            out[k] = int(n)
    return out


def _folder(value) -> Path | None:
    return Path(os.path.abspath(os.path.expanduser(str(value)))) if value else None

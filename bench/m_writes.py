"""writes: what a write costs the snapshot store, one write after another (as a reply of edits).

Every write an agent makes is wrapped in two shadow captures (host/tools/shadow/): one before,
which the write's rollback goes back to, and one after, which records what it changed. A file
just written is "racy" for 3 s (its lstat cannot yet prove it unchanged), so the capture before
the next write used to hand it to `git update-index` again. Now that capture hashes such a file
itself (`Capturing._still_indexed`) and starts no git process when the bytes are the indexed ones.

- tree: 2,000 small files in 40 folders (a fresh copy per variant, each with its own store).
- a round: 30 writes to 30 different files, each `begin_write`, the file rewritten,
  `end_write`; per write: the wall time and the git processes started.
- "hash check" is this tree; "git for racy files" is the same code with the check switched off
  (what the capture did before), taking turns round after round (common.interleaved).
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from common import Settings, fmt_s, interleaved

NAME = "writes"
WRITES = 30


def _tree(root: Path) -> None:
    for d in range(40):
        folder = root / f"pkg{d:02}"
        folder.mkdir(parents=True)
        for f in range(50):
            (folder / f"mod{f:02}.py").write_text(f"# module {d}.{f}\nVALUE = {d * 100 + f}\n")


def run(s: Settings) -> dict:
    from moss.tools.shadow import Shadow
    from moss.tools.shadow.capture import Capturing

    checked = Capturing._still_indexed
    base = Path(tempfile.mkdtemp(prefix="moss-bench-writes-"))
    stores, spawned = {}, {"n": 0}
    for name in ("hash check", "git for racy files"):
        root = base / name.replace(" ", "-")
        _tree(root)
        stores[name] = Shadow(root)
        stores[name].snapshot("start")
    real_run = subprocess.run

    def counting(*a, **k):
        spawned["n"] += 1
        return real_run(*a, **k)

    rounds = {"n": 0}
    procs: dict = {name: [] for name in stores}

    def job(name: str):
        def go():
            sh = stores[name]
            Capturing._still_indexed = checked if name == "hash check" else (lambda *a: False)
            subprocess.run, spawned["n"] = counting, 0
            try:
                rounds["n"] += 1
                for i in range(WRITES):
                    w = sh.begin_write("w")
                    (sh.root / f"pkg{i % 40:02}" / f"mod{i % 50:02}.py").write_text(f"VALUE = {rounds['n']}\n")
                    sh.end_write(w)
            finally:
                subprocess.run = real_run
                Capturing._still_indexed = checked
            procs[name].append(spawned["n"])
        return go

    t = interleaved({name: job(name) for name in stores}, 3 if s.quick else 7)
    return {"variants": {name: {"per_write": t[name]["median"] / WRITES, "git_per_write": max(procs[name]) / WRITES}
                         for name in stores}}


def tables(res: dict) -> list[dict]:
    after, before = res["variants"]["hash check"], res["variants"]["git for racy files"]
    rows = [[name, fmt_s(r["per_write"]), f"{r['git_per_write']:.1f}"] for name, r in res["variants"].items()]
    rows.append(["hash check / git for racy files", f"{after['per_write'] / before['per_write']:.2f}×",
                 f"{after['git_per_write'] / before['git_per_write']:.2f}×"])
    return [{"title": f"writes: {WRITES} writes in a row on a 2,000-file tree, per write (median of the rounds)",
             "columns": ["capture", "time per write", "git processes per write"], "rows": rows}]


def summary_rows(res: dict) -> list[list[str]]:
    after, before = res["variants"]["hash check"], res["variants"]["git for racy files"]
    return [["writes: a write's two captures, hash check / git for racy files",
             f"{after['per_write'] / before['per_write']:.2f}×",
             f"{fmt_s(after['per_write'])} vs {fmt_s(before['per_write'])} per write"]]

"""13. Isolated children: what a child's own copy of a 20,000-file tree costs, against a child
that shares the tree, and the disk it takes.

The tree: 20,000 files in 400 folders (`make_tree`: sizes from 200 B to 16 KB, about 4 KB on
average, 73 MB; a fixed seed, so every run has the same tree), a mid-sized repository. A root
script (moss.run.build, as `moss @NAME` builds it) at `edit` has taken its first snapshot of
the tree, as a writing session's start does. Then, round after round, taking turns:

- shared: `moss.spawn` of a child at `edit` that takes its first snapshot (what a writing
  child's session does before anything else) and ends;
- isolated: the same child with `isolate = true`. `moss.spawn` returns once the copy is laid
  out (reflinks or hard links); meanwhile a thread takes the parent's snapshot (whose objects
  the copy's starting point borrows), replaces the links by copies and records the starting
  point ("copy whole": from the spawn until then). The child takes no start snapshot (its
  first write's is its start), and its first write's snapshot waits for the copy to be whole
  ("first write's snapshot taken", from the spawn). When the child ends its patch is
  computed; then `h:discard()`;
- isolated reader: `isolate = true, access = "read-shell"`: a child that can never write
  keeps the hard links.

Before each, the parent takes a snapshot with nothing changed, and after it another: links
made and removed change the files' ctimes, so that one reads the tree again ("the parent's
snapshot before → after"). Each phase is timed apart: `spawn` (until moss.spawn returns), the
child's first snapshot (from its own log: a mark before, the snapshot's record after), the
`wait`, the discard (and the copy's deletion, which it leaves to a thread). "Start" is spawn + start snapshot: what a writing child costs before its
first model call. Beside them, the same rounds of `copy.make` making a writer's copy whole up
front (what a copy costs without links first). The disk a copy takes is counted in blocks of
the inodes only it holds (a hard-linked file counts 0), and the file system is probed for
reflinks (FICLONE).
"""

from __future__ import annotations

import json
import os
import random
import statistics
import tempfile
import threading
import time
from pathlib import Path

from common import Settings

NAME = "isolate"
FILES, FOLDERS = 20_000, 400

# What a writing child's session does first (lib/agent/safety.lua): a snapshot at its start
# (a shared child; an isolated one leaves that to its first write), then, at its first write,
# the write's snapshot (an isolated child's waits until its copy is whole).
CHILD = """
return { child = function(spec)
  moss.session.bind(spec.id)
  moss.access.set(spec.max_access)
  if spec.max_access == "edit" then
    moss.session.log(spec.id, "bench_mark", {})
    if not moss.agents.self().isolated then moss.shadow.snapshot("start") end
    moss.session.log(spec.id, "bench_started", {})
    moss.shadow.end_write(moss.shadow.begin_write("the first write"))
  end
  return { answer = "ok", success = true, reason = "answered" }
end }
"""


def make_tree(root: Path) -> dict:
    """The 20,000-file tree (made once per work folder, reused after)."""
    stamp = root / ".moss" / "bench-tree"
    if stamp.exists():
        return json.loads(stamp.read_text())
    rng = random.Random(20_000)
    words = [f"name{i}" for i in range(500)]
    total = 0
    for i in range(FILES):
        d = root / f"pkg{i % FOLDERS // 20}" / f"mod{i % FOLDERS}"
        d.mkdir(parents=True, exist_ok=True)
        size = int(min(16_384, max(200, rng.lognormvariate(7.9, 0.8))))
        line = " ".join(rng.choice(words) for _ in range(8)) + "\n"
        text = (f"# file {i}\n" + line * (size // len(line) + 1))[:size]
        (d / f"f{i}.py").write_text(text)
        total += len(text)
    (root / ".moss" / "scripts").mkdir(parents=True, exist_ok=True)
    info = {"files": FILES, "folders": FOLDERS, "bytes": total}
    stamp.write_text(json.dumps(info))
    return info


def reflinks_work(where: Path) -> bool:
    import fcntl

    from moss.tools.worktree.copy import FICLONE

    with tempfile.TemporaryDirectory(dir=where) as d:
        a, b = Path(d) / "a", Path(d) / "b"
        a.write_bytes(b"x" * 4096)
        with open(a, "rb") as src, open(b, "wb") as dst:
            try:
                fcntl.ioctl(dst.fileno(), FICLONE, src.fileno())
                return True
            except OSError:
                return False


def _child_phases(root: Path, cid: str) -> tuple[float, float]:
    """(its start snapshot, until its first write's snapshot was taken), from its own log."""
    ev = [json.loads(ln) for ln in (root / ".moss/agent/logs" / f"{cid}.jsonl").read_text().splitlines()]
    mark = [e["ts"] for e in ev if e["event"] == "bench_mark"][-1]  # (ids start again each run: the last)
    started = next(e["ts"] for e in ev if e["event"] == "bench_started" and e["ts"] >= mark)
    written = next(e["ts"] for e in ev if e["event"] == "write" and e["ts"] >= mark)
    return started - mark, written - mark


def _timed(rt, fn, *args) -> tuple[float, object]:
    t0 = time.perf_counter()
    got = rt.call(fn, *args)
    return time.perf_counter() - t0, got


def run(s: Settings) -> dict:
    from moss.run import build
    from moss.tools.worktree import homes

    root = s.work / "isolate-tree"
    root.mkdir(parents=True, exist_ok=True)
    info = make_tree(root)
    (root / ".moss" / "scripts" / "benchchild.lua").write_text(CHILD)
    os.environ.setdefault("XDG_CACHE_HOME", str(s.work / "cache"))
    ctx, rt = build("bench", [], {"trust": True}, root=root)  # its own .moss/scripts (the child), vouched for
    rt.execute('moss.session.bind("isobench"); moss.access.set("edit")', "=setup")
    snap = rt.load('moss.shadow.snapshot("the parent")', "=snap")
    first_capture, _ = _timed(rt, snap)  # a writing session's start
    spawn = rt.load("""
        local isolate, access = ...
        H = moss.spawn { task = "bench", script = "benchchild", isolate = isolate, access = access }
        return H.id
    """, "=spawn")
    wait = rt.load("local r = H:wait() return r.success", "=wait")
    discard = rt.load("return H:discard().bytes", "=discard")
    modes = {"shared": (False, "edit"), "isolated": (True, "edit"), "isolated reader": (True, "read-shell")}
    keys = ("spawn", "snapshot", "first write", "whole", "wait", "discard", "removed", "parent before",
            "parent after")
    times: dict[str, dict[str, list[float]]] = {m: {k: [] for k in keys} for m in modes}
    disk: dict[str, int] = {}
    strategy: dict[str, str] = {}
    rounds = s.reps(5, 2)
    for r in range(rounds + 1):  # the first round warms up (the bwrap probe, imports)
        for mode, (isolate, access) in modes.items():
            got: dict[str, float] = {}
            got["parent before"], _ = _timed(rt, snap)  # settled: nothing changed since the last one
            t0 = time.perf_counter()
            cid = rt.call(spawn, isolate, access)
            got["spawn"] = time.perf_counter() - t0
            cid = cid.decode() if isinstance(cid, bytes) else cid
            wt = ctx.tree.children[cid].worktree
            if wt is not None:
                wt.wait_ready()
                got["whole"] = time.perf_counter() - t0
            got["wait"], ok = _timed(rt, wait)
            assert ok, f"the {mode} child failed"
            if access == "edit":
                got["snapshot"], got["first write"] = _child_phases(root, cid)
                got["first write"] += got["spawn"]
            if wt is not None:
                disk[mode] = homes.disk_use(wt.tree)
                disk[mode + " start"] = homes.disk_use(wt.home / "patch.git")
                strategy[mode] = (wt.record.get("copy") or {}).get("strategy", "?")
                got["discard"], _ = _timed(rt, discard)
                t0 = time.perf_counter()
                for t in threading.enumerate():  # the copy's deletion, in the background
                    if t.name == "moss-copy-removal":
                        t.join()
                got["removed"] = got["discard"] + time.perf_counter() - t0
            got["parent after"], _ = _timed(rt, snap)  # the links came and went: ctimes changed
            if r:
                for k, v in got.items():
                    times[mode][k].append(v)
    ctx.tree.close()
    full = _full_copies(root, s.work, rounds)
    med = {m: {k: statistics.median(v) if v else 0.0 for k, v in t.items()} for m, t in times.items()}
    start = {m: med[m]["spawn"] + med[m]["snapshot"] for m in modes}
    return {"tree": info, "rounds": rounds, "first_capture_s": first_capture, "median": med, "start": start,
            "extra_start_s": start["isolated"] - start["shared"], "disk": disk, "strategy": strategy,
            "reflinks": reflinks_work(root), "full_copy_s": statistics.median(full["seconds"]),
            "full_copy_disk": full["disk"], "all": {**{m: {k: [round(x, 3) for x in v] for k, v in t.items()}
                                                       for m, t in times.items()}, "full copy": full["seconds"]}}


def _full_copies(root: Path, work: Path, rounds: int) -> dict:
    """What the copy a writer gets would cost made whole up front (no links first): the
    mechanism alone (copy.make), the same number of rounds."""
    import shutil

    from moss.tools.worktree import copy, homes

    out: dict = {"seconds": [], "disk": 0}
    for _ in range(rounds):
        dest = Path(tempfile.mkdtemp(dir=work)) / "tree"
        t0 = time.perf_counter()
        copy.make(root, dest, may_write=True, defer=False)
        out["seconds"].append(time.perf_counter() - t0)
        out["disk"] = homes.disk_use(dest)
        shutil.rmtree(dest.parent)
    return out


def tables(res: dict) -> list[dict]:
    med, start, tree = res["median"], res["start"], res["tree"]
    mb = 1e6

    def sec(v: float) -> str:
        return f"{v:.2f} s" if v else "—"

    rows = [[m, sec(med[m]["spawn"]), sec(med[m]["snapshot"]), f"{start[m]:.2f} s", sec(med[m]["first write"]),
             sec(med[m]["whole"]), sec(med[m]["wait"]),
             f"{sec(med[m]['discard'])} ({sec(med[m]['removed'])})" if med[m]["discard"] else "—",
             f"{med[m]['parent before']:.2f} → {med[m]['parent after']:.2f} s"]
            for m in ("shared", "isolated", "isolated reader")]
    disk = res["disk"]
    return [{"title": f"13. Isolated children on a tree of {tree['files']:,} files ({tree['bytes'] / mb:.0f} MB): "
                      f"median of {res['rounds']} rounds, the three taking turns",
             "columns": ["child", "moss.spawn", "its start snapshot", "start (both)", "first write's snapshot taken",
                         "copy whole", "wait (+ patch)", "discard (deleted, in the background)",
                         "the parent's snapshot before → after"],
             "rows": rows + [["isolated start − shared start", "", "", f"{res['extra_start_s']:+.2f} s", "", "", "", "",
                              ""],
                             ["(a writer's copy made whole up front instead: copy.make alone)",
                              f"{res['full_copy_s']:.2f} s", "", "", "", "", "", "", ""]]},
            {"title": "13b. Disk a copy takes once whole (blocks only the copy holds)",
             "columns": ["copy", "how", "disk"],
             "rows": [["isolated (may write)", res["strategy"].get("isolated", "?"),
                       f"{disk.get('isolated', 0) / mb:.1f} MB"],
                      ["isolated reader (never writes)", res["strategy"].get("isolated reader", "?"),
                       f"{disk.get('isolated reader', 0) / mb:.1f} MB"],
                      ["its starting point (patch.git, borrowing the parent's shadow objects)", "",
                       f"{disk.get('isolated start', 0) / mb:.2f} MB"],
                      ["a copy made whole up front", "copy", f"{res['full_copy_disk'] / mb:.1f} MB"],
                      ["the tree's bytes", "", f"{tree['bytes'] / mb:.1f} MB"],
                      ["reflinks (copy-on-write) on this file system", "yes" if res["reflinks"] else "no (not supported)",
                       ""]]}]


def summary_rows(res: dict) -> list[list[str]]:
    return [["isolate: starting an isolated child / a shared one, 20,000 files",
             f"{res['extra_start_s']:+.2f} s", f"{res['start']['isolated']:.2f} s vs {res['start']['shared']:.2f} s "
             f"(target: at most +1 s); copy {res['disk'].get('isolated', 0) / 1e6:.0f} MB "
             f"({res['strategy'].get('isolated', '?')}), reader {res['disk'].get('isolated reader', 0) / 1e6:.1f} MB"]]

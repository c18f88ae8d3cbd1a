#!/usr/bin/env python
"""moss benchmarks: moss against the agents users would pick instead, side by side, in ratios.

    python bench/run.py                 # everything (about 8 minutes on 2 cores)
    python bench/run.py --quick         # a smoke run (under a minute)
    python bench/run.py --only context,bridge
    python bench/run.py --only polyglot --polyglot CHECKOUT   # the polyglot benchmark, whole (~1 h)
    python bench/run.py --markdown out.md

Run it with the python of moss's environment (the one whose `moss` command is measured).
mini-swe-agent lives in a separate venv (bench/requirements.txt): --peer-python PATH,
$MOSS_BENCH_PEER_PYTHON, or bench/.venv. Without it the peer columns are left out.

Benchmarks are not tests: nothing here fails on a number. See bench/README.md.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import REPO, Settings, find_peer_python, loadavg, stdlib_tree, tree_stats

MEASUREMENTS = ["context", "overhead", "long", "coldstart", "memory", "tools", "bridge", "spawn", "isolate", "runs",
                "eval", "fleet", "startup", "fork", "grammar", "writes", "polyglot"]
MODULES = {name: f"m_{name}" for name in MEASUREMENTS}


def machine() -> dict:
    mem = ""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "memory": mem, "cpu": cpu or platform.processor(),
            "os": f"{platform.system()} {platform.release()}", "python": platform.python_version()}


def versions(s: Settings) -> dict:
    import lupa

    import moss

    out = {"moss": moss.__version__, "lupa": getattr(lupa, "__version__", "?")}
    try:
        out["moss_commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                                            text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "host", "scripts"], cwd=REPO,
                               capture_output=True, text=True).stdout.strip()
        if dirty:
            out["moss_commit"] += " + uncommitted changes in host/ or scripts/"
    except OSError:
        pass
    if s.peer_python:
        r = subprocess.run([str(s.peer_python), "-c", "import importlib.metadata as m; "
                            "print(m.version('mini-swe-agent'), m.version('litellm'))"],
                           capture_output=True, text=True)
        if r.returncode == 0 and r.stdout.split():
            out["mini-swe-agent"], out["litellm"] = r.stdout.split()[:2]
    return out


def render(console, table: dict) -> None:
    from rich.table import Table

    t = Table(title=table["title"], title_justify="left", header_style="bold")
    for i, c in enumerate(table["columns"]):
        t.add_column(c, justify="left" if i == 0 else "right")
    for row in table["rows"]:
        t.add_row(*row)
    console.print(t)


def markdown(table: dict) -> str:
    lines = [f"**{table['title']}**", "", "| " + " | ".join(table["columns"]) + " |",
             "|" + "|".join("---" if i == 0 else "---:" for i in range(len(table["columns"]))) + "|"]
    for row in table["rows"]:
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a fast smoke run: fewer turns and repetitions")
    ap.add_argument("--only", metavar="NAME[,NAME]", help="run only these: " + ", ".join(MEASUREMENTS))
    ap.add_argument("--peer-python", metavar="PATH", help="python of a venv with mini-swe-agent")
    ap.add_argument("--baseline-moss", metavar="PATH",
                    help="another install's moss command (e.g. main's), whose text-search the tools "
                         "measurement times in the same rounds: before and after side by side")
    ap.add_argument("--work", metavar="DIR", default=None, help="scratch directory (default: $TMPDIR/moss-bench)")
    ap.add_argument("--polyglot", metavar="DIR", help="polyglot: a checkout of the polyglot benchmark "
                                                     "(default $MOSS_BENCH_POLYGLOT; without it, polyglot is skipped)")
    ap.add_argument("--markdown", metavar="FILE", help="also write the tables as Markdown")
    ap.add_argument("--json", metavar="FILE", help="also write the raw figures as JSON")
    args = ap.parse_args(argv)

    from rich.console import Console

    console = Console(highlight=False, width=None if sys.stdout.isatty() else 200)
    names = MEASUREMENTS
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        bad = [n for n in names if n not in MEASUREMENTS]
        if bad:
            ap.error(f"unknown measurement {', '.join(bad)}; choose from {', '.join(MEASUREMENTS)}")
    s = Settings(quick=args.quick, peer_python=find_peer_python(args.peer_python))
    if args.work:
        s.work = Path(args.work).resolve()
    if args.polyglot:
        s.polyglot = Path(args.polyglot).resolve()
    if args.baseline_moss:
        s.baseline_moss = Path(args.baseline_moss).resolve()
        if not s.baseline_moss.is_file():
            ap.error(f"--baseline-moss {args.baseline_moss}: no such file")
    s.work.mkdir(parents=True, exist_ok=True)
    if not s.moss_bin.exists():
        console.print(f"[red]no moss command next to {s.moss_python}; run this with moss's python[/]")
        return 2
    if s.peer_python is None:
        console.print("[yellow]mini-swe-agent not found (--peer-python, $MOSS_BENCH_PEER_PYTHON or bench/.venv; "
                      "see bench/README.md): peer columns are left out[/]")

    started = time.time()
    root = stdlib_tree(s)
    header = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"), **machine(),
              "versions": versions(s), "tree": {"path": str(root), "source": str(Path(os.__file__).parent),
                                                **tree_stats(root)},
              "command": "python bench/run.py" + (" " + " ".join(argv if argv is not None else sys.argv[1:])
                                                  if (argv or sys.argv[1:]) else ""),
              "quick": s.quick, "load_start": loadavg()}
    v = header["versions"]
    console.print(f"[bold]moss bench[/] {header['date']} · {header['nproc']} CPUs · {header['memory']} · "
                  f"Python {header['python']} · moss {v.get('moss')} ({v.get('moss_commit', '?')}) · "
                  f"mini-swe-agent {v.get('mini-swe-agent', 'absent')}")
    console.print(f"tree: {root} ({header['tree']['files']:,} files, {header['tree']['bytes'] / 1e6:.0f} MB, "
                  f"copy of {header['tree']['source']})\n")

    results, all_tables, summary = {}, [], []
    for name in names:
        mod = importlib.import_module(MODULES[name])
        console.print(f"[dim]running {name}...[/]")
        t0 = time.time()
        try:
            res = mod.run(s)
        except Exception as e:  # a benchmark that breaks reports and the others still run
            console.print(f"[red]{name} failed: {e}[/]")
            traceback.print_exc()
            s.notes.append(f"{name} failed: {e.__class__.__name__}: {str(e)[:200]}")
            continue
        res["seconds"] = round(time.time() - t0, 1)
        results[name] = res
        for table in mod.tables(res):
            render(console, table)
            all_tables.append(table)
        summary += mod.summary_rows(res)
        console.print()

    summary_table = {"title": "Summary: ratios taken in this run (below 1×: moss needs less)",
                     "columns": ["measurement", "ratio", "detail"], "rows": summary}
    if summary:
        render(console, summary_table)
    for n in s.notes:
        console.print(f"[yellow]note:[/] {n}")
    header["seconds"] = round(time.time() - started, 1)
    header["load_end"] = loadavg()
    console.print(f"[dim]{header['seconds']} s in all; load average {header['load_start']} at the start, "
                  f"{header['load_end']} at the end; scratch files in {s.work}[/]")

    out_json = Path(args.json) if args.json else s.work / "results.json"
    out_json.write_text(json.dumps({"header": header, "results": results, "summary": summary, "notes": s.notes},
                                   indent=1, default=str))
    if args.markdown:
        parts = [f"- date: {header['date']}", f"- machine: {header['nproc']} CPUs ({header['cpu']}), "
                 f"{header['memory']} memory, {header['os']}; load average {header['load_start']} at the start, "
                 f"{header['load_end']} at the end", f"- Python {header['python']}; versions: "
                 + ", ".join(f"{k} {v}" for k, v in header["versions"].items()),
                 f"- tree: copy of {header['tree']['source']} ({header['tree']['files']:,} files, "
                 f"{header['tree']['bytes'] / 1e6:.0f} MB)", f"- command: `{header['command']}` "
                 f"({header['seconds']} s)", ""]
        parts += [markdown(summary_table)] if summary else []
        parts += [markdown(t) for t in all_tables]
        parts += [f"- note: {n}" for n in s.notes]
        Path(args.markdown).write_text("\n".join(parts) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

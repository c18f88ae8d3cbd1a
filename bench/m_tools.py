"""4. Tools on a large tree (the stdlib copy, tests included).

Round 3 (the structure cache on disk, host/tools/structcache.py): every text-search row is
timed three ways in the same rounds — warm (a cache file the warm-up round filled: a
repository searched before), cold (a new empty cache file each time: the first search in
a fresh checkout; it parses and writes the cache) and off (MOSS_STRUCTURE_CACHE=off: the
old one-shot path, labels of the shown lines only, nothing written). In-process, "search()"
is cold the same way, "new process, warm disk" clears the in-memory symbols but keeps the
disk cache, and "again" keeps both. The cache lives under the bench's work directory.

text-search: `moss text-search PATTERN` against plain `rg` over the same files (the same
ripgrep binary moss uses, with moss's walk flags so both search the same file set), both
as commands (what a user types; moss's figure includes Python start-up, so `moss --help` is
timed in the same rounds and the "CLI − start-up" ratio subtracts it: what the search
command itself adds over moss's start-up, against `rg -n`) and in-process
(`moss.tools.search.search` against a subprocess running the same rg): the in-process
ratio is what moss's grouping, sorting and enclosing-symbol labels cost, on a first look
(symbol cache cleared). "again" is the same search repeated in the same process, a
session coming back to the same files: search() caches their symbols. "bare parse of the
hit files" parses, with tree-sitter alone, the files holding the first 100 matches: the
part of a first look that labels cannot do without. The CLI keeps
nothing in memory (one shot); with the structure cache on it reads every hit file's entry in
one query, extracts the whole structure of the files that have none (in forked worker
processes when they hold 128 KB or more: on a loaded machine those gain nothing, on an idle
one they share the parse between the cores) and stores them in one transaction; with it off
it labels only the shown lines. moss's own modules are byte-compiled first, as a pip install does (the
environment may set PYTHONDONTWRITEBYTECODE, which would make every moss command
compile them from source, about 25 ms for text-search).

In each round the in-process jobs come first, then `rg -n --sort path`, then the commands the
ratios are made of: a command run right after the bench's own in-process parses takes about
10 ms more (measured in the same run with either install in that place: the one there was
the slower), so that place holds the one figure no ratio uses. Before this order the warm
text-search had it, which put about 0.5 on its ratio against an `rg -n` of 20 ms.

The warm comparison (text-search with a warm cache, the baseline's, `moss --help` and `rg -n`)
is also timed in rounds of its own, WARM_REPS of them, away from the parse-heavy cold jobs,
each run's CPU time (user + system of the command and its children, from wait4) kept beside
its wall time: on a loaded machine the median of 5 walls moves by tens of ms, and CPU time
is what a command costs whatever else runs. The summary's warm row is from these rounds.

view: `moss view FILE` (a skeleton) and `moss view FILE/Symbol` of the five largest .py
files, against a bare tree-sitter parse of the same bytes (tree_sitter + tree_sitter_python,
no moss code): the ratio is what moss's symbol extraction, formatting and (for FILE/Symbol)
path and symbol lookup cost. moss caches outlines per file within a process; the
in-process figures clear that cache before each repetition (a first look, as in the CLI),
and the view rows run with the structure cache off (a parse, as recorded before round 3).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from pathlib import Path

from common import Settings, command, fmt_s, interleaved, moss_env, stdlib_tree

NAME = "tools"

PATTERNS = ["def __init__", "NotImplementedError", r"class \w+Error\(", r"asyncio\.run\(", "TODO|FIXME|XXX"]


def largest_py(root: Path, n: int) -> list[Path]:
    files = [p for p in root.rglob("*.py") if ".moss" not in p.parts and p.is_file()]
    return sorted(files, key=lambda p: -p.stat().st_size)[:n]


def hit_sources(root: Path, rg_json: list[str], limit: int) -> list[tuple[bytes, str]]:
    """The bytes and language of each file holding one of the first `limit` matches (the
    hits search() shows and labels): what a bare tree-sitter parse for their labels reads."""
    import json

    from moss.tools import treesitter

    out = subprocess.run(rg_json, cwd=root, capture_output=True, text=True).stdout
    paths: list[str] = []
    shown = 0
    for line in out.splitlines():
        ev = json.loads(line)
        if ev["type"] == "match" and shown < limit:
            shown += 1
            path = ev["data"]["path"]["text"]
            if not paths or paths[-1] != path:
                paths.append(path)
    got = []
    for rel in paths:
        src = (root / rel).read_bytes()
        lang = treesitter.language_for(root / rel, src)
        if lang:
            got.append((src, lang))
    return got


WARM_REPS = 15


def timed(cmd: list[str], cpu: list[float], *, env: dict, cwd: Path, check: bool = True):
    """A job for `interleaved`: run a command, output discarded; returns its wall time and
    appends its CPU time (user + system, its children included) to `cpu`."""
    def job() -> float:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        if check and p.returncode != 0:
            raise RuntimeError(f"{' '.join(map(str, cmd))} exited {p.returncode}")
        cpu.append(ru.ru_utime + ru.ru_stime)
        return wall
    return job


def warm_rounds(s: Settings, pat: str, root: Path, rg_cmd: list[str], env: dict, warm_env: dict,
                base_env: dict) -> dict:
    """The warm comparison in rounds of its own (see the module's doc): {job: summary, with
    "cpu_median"}; the first round (the warm-up) is left out of both figures."""
    jobs = {"moss": [str(s.moss_bin), "text-search", pat], "help": [str(s.moss_bin), "--help"], "rg": rg_cmd}
    envs = {"moss": warm_env, "help": env, "rg": env}
    if s.baseline_moss:
        jobs["base"] = [str(s.baseline_moss), "text-search", pat]
        envs["base"] = base_env
    cpu: dict[str, list[float]] = {k: [] for k in jobs}
    got = interleaved({k: timed(c, cpu[k], env=envs[k], cwd=root, check=k != "rg") for k, c in jobs.items()},
                      s.reps(WARM_REPS, 3))
    for k in jobs:
        got[k]["cpu_median"] = statistics.median(cpu[k][1:])
        got[k]["cpu_samples"] = [round(x, 6) for x in cpu[k][1:]]
    return got


def run(s: Settings) -> dict:
    from moss.tools import treesitter
    from moss.tools.resolve import RG_WALK_FLAGS, rg_binary
    from moss.tools.search import search
    from moss.tools.view import view

    import compileall

    import moss

    compileall.compile_dir(str(Path(moss.__file__).parent), quiet=1)
    root = stdlib_tree(s)
    rg = rg_binary()
    reps = s.reps(5, 2)
    env = moss_env()
    res = {"reps": reps, "warm_reps": s.reps(WARM_REPS, 3), "rg": rg, "search": [], "view": []}

    # The structure cache (host/tools/structcache.py) in the work tree, never the user's:
    # "warm" rows use one file that the warm-up round fills; "cold" rows a new empty file
    # each time (a first search in a fresh checkout, nothing seen before).
    caches = s.work / "structure-cache"
    if caches.exists():
        import shutil
        shutil.rmtree(caches)
    caches.mkdir(parents=True)
    warm_db = str(caches / "warm.sqlite3")
    fresh = iter(range(1_000_000))
    warm_env = {**env, "MOSS_STRUCTURE_CACHE": warm_db}
    # --baseline-moss: its warm rows use a cache file of their own (its entries are its own);
    # its modules are byte-compiled as this install's are (above), into a folder of the bench's
    # own (PYTHONPYCACHEPREFIX, written by the warm-up round), so the other install is not
    # written to and neither side compiles source on every run
    base_vars = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    base_vars["PYTHONPYCACHEPREFIX"] = str(s.work / "baseline-pycache")
    base_env = {**base_vars, "MOSS_STRUCTURE_CACHE": str(caches / "baseline-warm.sqlite3")}
    os.environ["MOSS_STRUCTURE_CACHE"] = warm_db

    def cold_cli(cmd: list[str], base: dict | None = None):
        def job() -> float:
            e = {**(base or env), "MOSS_STRUCTURE_CACHE": str(caches / f"cold-{next(fresh)}.sqlite3")}
            t0 = time.perf_counter()
            subprocess.run(cmd, env=e, cwd=root, stdout=subprocess.DEVNULL, check=True)
            return time.perf_counter() - t0
        return job

    def cold_fn(pat: str):
        def job() -> float:
            os.environ["MOSS_STRUCTURE_CACHE"] = str(caches / f"cold-{next(fresh)}.sqlite3")
            treesitter.clear_caches()
            try:
                t0 = time.perf_counter()
                search(root, pat, limit=100, max_chars=0)
                return time.perf_counter() - t0
            finally:
                os.environ["MOSS_STRUCTURE_CACHE"] = warm_db
        return job

    for pat in PATTERNS[: 2 if s.quick else None]:
        rg_cmd = [rg, "-n", *RG_WALK_FLAGS, "-e", pat, "--", "."]
        moss_rg = [rg, "--json", "--sort", "path", *RG_WALK_FLAGS, "-e", pat, "--", "."]
        hits = subprocess.run([rg, "--count-matches", "--no-filename", *RG_WALK_FLAGS, "-e", pat, "--", "."],
                              cwd=root, capture_output=True, text=True).stdout
        n_hits = sum(int(line) for line in hits.split() if line.isdigit())
        sources = hit_sources(root, moss_rg, 100)
        row = {"pattern": pat, "matches": n_hits, **interleaved({
            # in-process jobs first, then the one command no ratio uses (see the module's doc)
            "fn_moss": cold_fn(pat),
            "fn_moss_disk": lambda pat=pat: (treesitter.clear_caches(), search(root, pat, limit=100, max_chars=0)),
            "fn_moss_again": lambda pat=pat: search(root, pat, limit=100, max_chars=0),
            "fn_rg_json_sorted": lambda cmd=moss_rg: subprocess.run(cmd, cwd=root, capture_output=True),
            "fn_parse_hits": lambda src=sources: [treesitter.parse(b, lang) for b, lang in src],
            "cli_rg_sorted": command([rg, "-n", "--sort", "path", *RG_WALK_FLAGS, "-e", pat, "--", "."], env=env,
                                     cwd=root, check=False),
            "cli_moss": command([str(s.moss_bin), "text-search", pat], env=warm_env, cwd=root),
            "cli_moss_cold": cold_cli([str(s.moss_bin), "text-search", pat]),
            "cli_moss_nocache": command([str(s.moss_bin), "text-search", pat],
                                        env={**env, "MOSS_STRUCTURE_CACHE": "off"}, cwd=root),
            **({"cli_base": command([str(s.baseline_moss), "text-search", pat], env=base_env, cwd=root),
                "cli_base_cold": cold_cli([str(s.baseline_moss), "text-search", pat], base_vars)}
               if s.baseline_moss else {}),
            "cli_help": command([str(s.moss_bin), "--help"], env=env, cwd=root),
            "cli_rg": command(rg_cmd, env=env, cwd=root, check=False),
        }, reps)}
        row["hit_files"] = len(sources)
        row["warm"] = warm_rounds(s, pat, root, rg_cmd, env, warm_env, base_env)
        res["search"].append(row)

    off_env = {**env, "MOSS_STRUCTURE_CACHE": "off"}
    os.environ["MOSS_STRUCTURE_CACHE"] = "off"  # view rows: a first look parses, as recorded before
    import tree_sitter
    import tree_sitter_python

    parser = tree_sitter.Parser(tree_sitter.Language(tree_sitter_python.language()))
    for path in largest_py(root, 2 if s.quick else 5):
        rel = path.relative_to(root).as_posix()
        src = path.read_bytes()
        syms, _ = treesitter.outline(path)
        last = syms[-1] if syms else None
        target = f"{rel}/{last.path}" if last else None

        def cold_view(t=rel):
            treesitter.clear_caches()
            return view(root, t, max_chars=0)

        def cold_symbol(t=target):
            treesitter.clear_caches()
            return view(root, t, max_chars=0)

        jobs = {"parse": lambda src=src: parser.parse(src), "fn_view": cold_view,
                "fn_view_warm": lambda rel=rel: view(root, rel, max_chars=0),
                "cli_view": command([str(s.moss_bin), "view", rel], env=off_env, cwd=root)}
        if target:
            jobs["fn_symbol"] = cold_symbol
            jobs["cli_symbol"] = command([str(s.moss_bin), "view", target], env=off_env, cwd=root)
        row = {"file": rel, "bytes": len(src), "lines": src.count(b"\n"), "symbol": target,
               "view_chars": len(view(root, rel, max_chars=0)), **interleaved(jobs, reps)}
        res["view"].append(row)
    # What the CLI pays before doing anything (for reading the CLI columns).
    res["cli_floor"] = interleaved({"floor": command([str(s.moss_python), "-c", "pass"], env=env)}, reps)["floor"]
    os.environ.pop("MOSS_STRUCTURE_CACHE", None)
    if s.baseline_moss:
        res["baseline"] = str(s.baseline_moss)
    return res


def tables(res: dict) -> list[dict]:
    rows = []
    for r in res["search"]:
        rows.append([r["pattern"], f"{r['matches']:,}",
                     fmt_s(r["cli_moss"]["median"]), fmt_s(r["cli_help"]["median"]), fmt_s(r["cli_rg"]["median"]),
                     f"{r['cli_moss']['median'] / r['cli_rg']['median']:.1f}×", f"{_cli_net(r):.2f}×",
                     fmt_s(r["cli_moss_cold"]["median"]), f"{_cli_net(r, 'cli_moss_cold'):.2f}×",
                     fmt_s(r["cli_moss_nocache"]["median"]), f"{_cli_net(r, 'cli_moss_nocache'):.2f}×",
                     fmt_s(r["fn_moss"]["median"]), fmt_s(r["fn_rg_json_sorted"]["median"]),
                     f"{r['fn_moss']['median'] / r['fn_rg_json_sorted']['median']:.2f}×",
                     fmt_s(r["fn_moss_disk"]["median"]), fmt_s(r["fn_moss_again"]["median"]),
                     f"{fmt_s(r['fn_parse_hits']['median'])} ({r['hit_files']})",
                     f"{r['fn_parse_hits']['median'] / r['fn_rg_json_sorted']['median']:.2f}×",
                     fmt_s(r["cli_rg_sorted"]["median"])])
    if any("cli_base" in r for r in res["search"]):
        rows_b = [[r["pattern"], fmt_s(r["cli_base"]["median"]), f"{_cli_net(r, 'cli_base'):.2f}×",
                   fmt_s(r["cli_moss"]["median"]), f"{_cli_net(r):.2f}×",
                   fmt_s(r["cli_base_cold"]["median"]), f"{_cli_net(r, 'cli_base_cold'):.2f}×",
                   fmt_s(r["cli_moss_cold"]["median"]), f"{_cli_net(r, 'cli_moss_cold'):.2f}×",
                   fmt_s(r["cli_help"]["median"]), fmt_s(r["cli_rg"]["median"])] for r in res["search"]]
        extra = [{"title": f"4. text-search before (--baseline-moss {res.get('baseline', '?')}) and after, the same "
                           f"rounds: (text-search − moss --help) / rg -n", "columns": [
                              "pattern", "before, warm", "ratio", "after, warm", "ratio", "before, cold", "ratio",
                              "after, cold", "ratio", "moss --help", "rg -n"], "rows": rows_b}]
    else:
        extra = []
    if all("warm" in r for r in res["search"]):
        base = all("base" in r["warm"] for r in res["search"])
        rows_w = []
        for r in res["search"]:
            w = r["warm"]
            row = [r["pattern"]]
            if base:
                row += [fmt_s(w["base"]["median"]), f"{_warm_net(w, 'base'):.2f}×", f"{_warm_net(w, 'base', True):.2f}×"]
            row += [fmt_s(w["moss"]["median"]), f"{_warm_net(w):.2f}×", f"{_warm_net(w, 'moss', True):.2f}×",
                    fmt_s(w["help"]["median"]), fmt_s(w["rg"]["median"]),
                    f"{w['moss']['cpu_median'] * 1e3:.1f} / {w['help']['cpu_median'] * 1e3:.1f} / "
                    f"{w['rg']['cpu_median'] * 1e3:.1f} ms"]
            rows_w.append(row)
        cols = ["pattern"] + (["before, warm", "ratio", "CPU ratio"] if base else []) + [
            "after, warm" if base else "text-search, warm", "ratio", "CPU ratio", "moss --help", "rg -n",
            "CPU: text-search / --help / rg"]
        extra.append({"title": f"4. text-search with a warm cache in rounds of its own (median of "
                               f"{res.get('warm_reps', '?')}): (text-search − moss --help) / rg -n, by wall "
                               f"time and by CPU time (children included)", "columns": cols, "rows": rows_w})
    t1 = {"title": f"4. text-search over the stdlib copy (median of {res['reps']}; moss shows the first 100 "
                   f"matches, rg prints all)",
          "columns": ["pattern", "matches", "moss text-search (warm cache)", "moss --help", "rg -n", "CLI ratio",
                      "CLI − start-up ratio, warm", "text-search, cold cache", "− start-up ratio, cold",
                      "text-search, cache off", "− start-up ratio, off", "search() in-process, cold",
                      "rg --json --sort path", "in-process ratio", "search() new process, warm disk",
                      "search() again",
                      "bare parse of the hit files (files)", "parse ratio", "rg -n --sort path"], "rows": rows}
    rows2 = []
    for r in res["view"]:
        p = r["parse"]["median"]
        rows2.append([r["file"], f"{r['bytes'] / 1e3:,.0f} KB", fmt_s(p), fmt_s(r["fn_view"]["median"]),
                      f"{r['fn_view']['median'] / p:.1f}×", fmt_s(r["fn_view_warm"]["median"]),
                      fmt_s(r["fn_symbol"]["median"]) if "fn_symbol" in r else "—",
                      f"{r['fn_symbol']['median'] / p:.1f}×" if "fn_symbol" in r else "—",
                      fmt_s(r["cli_view"]["median"]),
                      fmt_s(r["cli_symbol"]["median"]) if "cli_symbol" in r else "—"])
    t2 = {"title": f"4. view of the largest .py files vs a bare tree-sitter parse (in-process, outline cache "
                   f"cleared; CLI includes start-up, floor {fmt_s(res['cli_floor']['median'])})",
          "columns": ["file", "size", "parse", "view FILE", "÷ parse", "view FILE (cached)", "view FILE/Symbol",
                      "÷ parse", "CLI view FILE", "CLI view FILE/Symbol"], "rows": rows2}
    return [t1, *extra, t2]


def _cli_net(r: dict, key: str = "cli_moss") -> float:
    """(moss text-search − moss --help) / rg -n, medians of the same rounds."""
    return (r[key]["median"] - r["cli_help"]["median"]) / r["cli_rg"]["median"]


def _warm_net(w: dict, key: str = "moss", cpu: bool = False) -> float:
    """(text-search − moss --help) / rg -n in the warm rounds, by wall or CPU medians."""
    f = "cpu_median" if cpu else "median"
    return (w[key][f] - w["help"][f]) / w["rg"][f]


def summary_rows(res: dict) -> list[list[str]]:
    s = res["search"]
    v = res["view"]
    geo = lambda xs: statistics.geometric_mean(xs)  # noqa: E731
    out = [
        ["tools: moss text-search / rg -n (CLI, geo-mean)",
         f"{geo([r['cli_moss']['median'] / r['cli_rg']['median'] for r in s]):.1f}×", f"{len(s)} patterns"],
        ["tools: (moss text-search − moss --help) / rg -n, warm structure cache (CLI, geo-mean)",
         f"{geo([max(_cli_net(r), 0.01) for r in s]):.2f}×", "start-up subtracted; target ≤ 1.5×"],
        *([["tools: the same, warm, in rounds of their own (geo-mean of medians)",
            f"{geo([max(_warm_net(r['warm']), 0.01) for r in s]):.2f}×",
            f"{res.get('warm_reps', '?')} rounds a pattern, away from the cold jobs"],
           ["tools: the same by CPU time (children included), warm rounds",
            f"{geo([max(_warm_net(r['warm'], cpu=True), 0.01) for r in s]):.2f}×",
            "what a command costs whatever else runs"]]
          if all("warm" in r for r in s) else []),
        *([["tools: baseline (--baseline-moss) warm, own rounds",
            f"{geo([max(_warm_net(r['warm'], 'base'), 0.01) for r in s]):.2f}×",
            f"by CPU: {geo([max(_warm_net(r['warm'], 'base', True), 0.01) for r in s]):.2f}×"]]
          if all("base" in r.get("warm", {}) for r in s) else []),
        ["tools: the same, cold structure cache (first search, fresh checkout)",
         f"{geo([max(_cli_net(r, 'cli_moss_cold'), 0.01) for r in s]):.2f}×", "target ≤ 3×"],
        ["tools: the same, structure cache off (labels of the shown lines only)",
         f"{geo([max(_cli_net(r, 'cli_moss_nocache'), 0.01) for r in s]):.2f}×", "what the cold row pays extra"],
        *([["tools: baseline (--baseline-moss) warm, same rounds",
             f"{geo([max(_cli_net(r, 'cli_base'), 0.01) for r in s]):.2f}×", "before, for the warm row above"],
           ["tools: baseline (--baseline-moss) cold, same rounds",
            f"{geo([max(_cli_net(r, 'cli_base_cold'), 0.01) for r in s]):.2f}×", "before, for the cold row above"]]
          if all("cli_base" in r for r in s) else []),
        ["tools: search() / rg --json --sort path (in-process, cold, geo-mean)",
         f"{geo([r['fn_moss']['median'] / r['fn_rg_json_sorted']['median'] for r in s]):.2f}×",
         "formatting + symbol labels + cache writes"],
        ["tools: search() in a new process, warm disk / rg --json --sort path (geo-mean)",
         f"{geo([r['fn_moss_disk']['median'] / r['fn_rg_json_sorted']['median'] for r in s]):.2f}×",
         "symbols read from the structure cache"],
        ["tools: search() again / rg --json --sort path (in-process, geo-mean)",
         f"{geo([r['fn_moss_again']['median'] / r['fn_rg_json_sorted']['median'] for r in s]):.2f}×",
         "symbols cached by the first"],
        ["tools: bare tree-sitter parse of the files with shown hits / rg --json --sort path (geo-mean)",
         f"{geo([r['fn_parse_hits']['median'] / r['fn_rg_json_sorted']['median'] for r in s]):.2f}×",
         "what a first search's labels cannot go below"],
        ["tools: view FILE / tree-sitter parse (geo-mean)",
         f"{geo([r['fn_view']['median'] / r['parse']['median'] for r in v]):.1f}×", f"{len(v)} largest files"],
    ]
    sym = [r["fn_symbol"]["median"] / r["parse"]["median"] for r in v if "fn_symbol" in r]
    if sym:
        out.append(["tools: view FILE/Symbol / tree-sitter parse (geo-mean)", f"{geo(sym):.1f}×",
                    "includes path resolution"])
    return out

"""The evaluation pages: each eval under ``.moss/eval/`` as its per-cell table and its
pass-rate-vs-cost chart, and a comparison of two with the flipped tasks linked to their
attempts' session logs; each batch under ``.moss/batch/`` as `moss batch status`'s table with
its patches.

The statistics are moss eval's own, not re-done here: ``results.summary`` (rates and Wilson
intervals), ``report.chart_svg`` (the HTML report's chart, escaped there), and the comparison
is the eval script's (`moss eval compare A B --json`, run as a child process: which attempts
pair up and what counts as worse is its policy). Files are read through moss.storage under
the project's ``.moss/`` (results.read), never through a link; a run folder's name and an
attempt's log name are checked before they become a path.
"""

from __future__ import annotations

import re
import stat
from pathlib import Path

from .. import storage
from ..errors import MossError
from ..eval import report, results
from ..eval.attempt import safe_name
from .html import Html, esc, join, render, tag
from .sessions import moss_json

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._=-]{0,200}$")


def check_name(name: str, what: str) -> str:
    if not isinstance(name, str) or not NAME.match(name) or ".." in name:
        raise MossError(f"bad {what} {name!r}: letters, digits and ._=- only", kind="usage")
    return name


def eval_dir(root: Path) -> Path:
    return Path(root) / ".moss" / "eval"


def runs(root: Path) -> list[str]:
    """The eval run folders that hold results, newest name first."""
    d = eval_dir(root)
    out = [n for n in storage.listed(d) if NAME.match(n) and storage.lstat(d / n / results.FILE) is not None]
    return sorted(out, reverse=True)


def rows_of(root: Path, run: str) -> list[dict]:
    return results.read(eval_dir(root) / check_name(run, "eval run") / results.FILE)


def pct(v) -> str:
    return "-" if v is None else f"{100 * v:.0f}%"


def num(v, fmt: str) -> str:
    return "-" if v is None else fmt.format(v)


def cells_table(cells: list[dict]) -> Html:
    body = []
    for c in cells:
        body.append(Html("<tr>") + join(tag("td", v) for v in (
            c["cell"], f"{c['passed']}/{c['n']}", pct(c["rate"]), f"{pct(c['ci_low'])} – {pct(c['ci_high'])}",
            c["not_counted"], num(c["mean_turns"], "{:.1f}"), num(c["mean_tokens"], "{:,.0f}"),
            num(c["mean_cost"], "${:.4f}"), num(c["p50_wall"], "{:.1f}s"), num(c["p90_wall"], "{:.1f}s"))) + Html("</tr>"))
    return render("cells_table", rows=join(body))


def chart(cells: list[dict]) -> Html:
    """report.chart_svg, the HTML report's chart (every label escaped there)."""
    points = [{"label": c["cell"], "x": c["mean_cost"], "y": c["rate"],
               "low": c["ci_low"] if c["n"] else None, "high": c["ci_high"] if c["n"] else None,
               "note": None if c["n"] else "no counted attempts"} for c in cells]
    svg, notes = report.chart_svg({"title": "pass rate against cost", "x_label": "mean cost per counted attempt (USD)",
                                   "y_label": "pass rate (bars: 95% Wilson interval)", "x_format": "usd",
                                   "points": points})
    return Html(svg) + join(tag("p", n, class_="note") for n in notes)


def attempts_table(run: str, rows: list[dict]) -> Html:
    body = []
    for r in results.finished(rows).values():
        name = safe_name(str(r.get("key")))
        link = tag("a", "log", href=f"/evals/{run}/logs/{name}")
        passed = r.get("passed")
        body.append(Html("<tr>") + join(tag("td", v) for v in (
            r.get("task"), r.get("cell"), r.get("trial"), "passed" if passed is True else "failed" if passed is False
            else "not counted", r.get("reason"), num(r.get("cost"), "${:.4f}"))) + tag("td", link) + Html("</tr>"))
    return render("attempts_table", rows=join(body))


def results_file(root: Path, name: str, kind: str = "eval") -> Path:
    """An eval run's attempts.jsonl, or (kind "batch") a batch's results file."""
    if kind == "batch":
        return batch_dir(root) / (check_name(name, "batch") + ".jsonl")
    return eval_dir(root) / check_name(name, "eval run") / results.FILE


async def compare(root: Path, a: str, b: str | None, kind: str = "eval", cell: str | None = None) -> dict:
    """`moss eval compare` (--json) of run a against run b (or a's two cells; `cell`: that cell
    of each), eval runs or (kind "batch") batches: its verdict, the flips, and which cell is A
    and which is B."""
    files = [str(results_file(root, x, kind)) for x in ([a, b] if b else [a])]
    data, lines = await moss_json(root, ["eval", "compare", *files, "--json", *(["--cell", cell] if cell else [])],
                                  "moss eval compare", "usage")
    m = re.match(r"^A = (.*), B = (.*)$", lines[0]) if len(lines) > 1 else None
    if m:
        cell_a, cell_b = m.group(1), m.group(2)
    elif cell:
        cell_a = cell_b = cell
    else:
        cell_a = next((c["cell"] for c in results.summary(results.read(Path(files[0])))), "")
        cell_b = next((c["cell"] for c in results.summary(results.read(Path(files[-1])))), "")
    data["cells"] = (cell_a, cell_b)
    return data


def flip_links(root: Path, a: str, b: str | None, cells: tuple[str, str], flips: list, kind: str = "eval") -> Html:
    """Each flipped "TASK trial N" with links to A's and B's attempt logs (a batch's: its
    task's log)."""
    items = []
    for f in flips:
        m = re.match(r"^(.*) trial (\d+)$", str(f))
        if not m:
            items.append(tag("li", f))
            continue
        task, trial = m.group(1), m.group(2)
        if kind == "batch":
            href_a, href_b = f"/batches/{a}/logs/{safe_name(task)}", f"/batches/{b or a}/logs/{safe_name(task)}"
        else:
            href_a = f"/evals/{a}/logs/{safe_name(f'{task}|{cells[0]}|{trial}')}"
            href_b = f"/evals/{b or a}/logs/{safe_name(f'{task}|{cells[1]}|{trial}')}"
        items.append(Html("<li>") + tag("span", f"{task} trial {trial} ") +
                     tag("a", "A's session", href=href_a) + Html(" · ") +
                     tag("a", "B's session", href=href_b) + Html("</li>"))
    return Html("<ul>") + join(items) + Html("</ul>") if items else tag("p", "none")


def money(v) -> str:
    return f"${v:.4f}" if isinstance(v, (int, float)) and not isinstance(v, bool) else "-"


def log_records(root: Path, run: str, name: str, batch: bool = False) -> list[dict]:
    """An eval attempt's session log (RUN/logs/NAME.jsonl), or a batch task's
    (.moss/batch/RUN.logs/NAME.jsonl)."""
    if batch:
        path = batch_dir(root) / (check_name(run, "batch") + ".logs") / (check_name(name, "task") + ".jsonl")
    else:
        path = eval_dir(root) / check_name(run, "eval run") / "logs" / (check_name(name, "attempt") + ".jsonl")
    return storage.objects(storage.read_text(path, 64 << 20))


# ---- batches (`moss batch`) ---------------------------------------------------------------------
# A batch's results file is eval-shaped JSONL (docs/batch.md): `moss batch` writes it, by
# default, to .moss/batch/RUN_ID.jsonl, each task's session log in RUN_ID.logs/ beside it. A
# file written elsewhere with -o is not looked for.
def batch_dir(root: Path) -> Path:
    return Path(root) / ".moss" / "batch"


def batches(root: Path) -> list[str]:
    """The batch results files under .moss/batch/ (their names without .jsonl), newest first."""
    d = batch_dir(root)
    out = []
    for n in storage.listed(d):
        name = n[:-len(".jsonl")] if n.endswith(".jsonl") else ""
        st = storage.lstat(d / n) if name and NAME.match(name) else None
        if st is not None and stat.S_ISREG(st.st_mode):
            out.append(name)
    return sorted(out, reverse=True)


def batch_rows(root: Path, name: str) -> list[dict]:
    """Each task's last line, in the tasks file's order (its `place`), as `moss batch status`
    shows them."""
    path = batch_dir(root) / (check_name(name, "batch") + ".jsonl")
    if storage.lstat(path) is None:
        raise MossError(f"no batch {name!r} in .moss/batch/", kind="not_found")
    latest: dict[str, tuple[int, dict]] = {}
    for i, row in enumerate(results.read(path)):
        key = str(row.get("key") or row.get("id") or i)
        latest[key] = (latest[key][0] if key in latest else i, row)

    def place(item: tuple[int, dict]):
        p = item[1].get("place")
        return (0, p, item[0]) if isinstance(p, int) and not isinstance(p, bool) else (1, 0, item[0])
    return [row for _, row in sorted(latest.values(), key=place)]


def patch_size(row: dict) -> str:
    """The patch column of `moss batch status` (scripts/batch.lua's patch_size)."""
    s = row.get("patch_stat")
    if row.get("patch") is None or not isinstance(s, dict):
        return "error" if row.get("patch_error") else "-"
    files = s.get("files") or 0
    if files == 0:
        return "none"
    text = f"{files} file{'' if files == 1 else 's'} +{s.get('added') or 0} -{s.get('removed') or 0}"
    if s.get("binary"):
        text += f" ({s['binary']} binary)"
    return text + (" (cut)" if row.get("patch_cut") else "")


def batch_table(name: str, rows: list[dict]) -> Html:
    """task, outcome, turns, tokens, cost, patch (its size; the diff itself opens under it,
    escaped, monospace) and the task's session log."""
    body = []
    for r in rows:
        key = str(r.get("key") or "")
        log = safe_name(key) if key else ""
        link = (tag("a", "log", href=f"/batches/{name}/logs/{log}")
                if key and NAME.match(log) and r.get("log") else Html(""))
        size = patch_size(r)
        patch = r.get("patch")
        cell = (Html('<details class="patch"><summary>') + size + Html("</summary>")
                + tag("pre", patch, class_="patch") + Html("</details>")) if isinstance(patch, str) and patch else (
            tag("span", size + (f": {r['patch_error']}" if r.get("patch_error") else "")))
        outcome = str(r.get("outcome") or "-")
        tokens = r.get("tokens")
        body.append(Html(f'<tr class="outcome-{esc(re.sub(r"[^a-z]+", "-", outcome))}">') + join(
            tag("td", v) for v in (
                r.get("id") or r.get("task"), outcome, r.get("turns") if r.get("turns") is not None else "-",
                f"{tokens:,}" if isinstance(tokens, int) else "-", money(r.get("cost"))))
            + tag("td", cell, class_="patch") + tag("td", link) + Html("</tr>"))
    return render("batch_table", rows=join(body))

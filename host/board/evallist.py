"""The Evaluations page: one row per eval and one per batch, newest first, sortable.

An eval's row: when it started, its suite, its cells with each one's pass rate, how many
attempts ended of how many it has, what they cost, and a link that compares it with the
previous run of the same suite (per cell both runs have, when they have several: `moss eval
compare --cell`). A batch's row: when, its tasks file, tasks, their outcomes, cost, and the
same link to its previous batch of that tasks file. The rates are `results.summary`'s, as
`moss eval report` computes them; when a run started and its suite come from the `run.json`
moss eval wrote beside its results (for a batch, in its logs folder).
"""

from __future__ import annotations

import calendar
import json
import time
from pathlib import Path

from .. import storage
from ..eval import results
from .evals import batch_dir, batch_rows, batches, eval_dir, money, pct, runs
from .html import Html, esc, join, render, tag

MAX_META = 1 << 20
_cache: dict[str, tuple[tuple | None, dict]] = {}  # results file -> (its size and mtime, its row)


def _meta(path: Path) -> dict:
    try:
        data = json.loads(storage.read_text(path, MAX_META))
    except (OSError, ValueError, storage.UnsafePath):
        return {}
    return data if isinstance(data, dict) else {}


def _when(meta: dict, name: str, results_file: Path) -> float | None:
    """When a run started: its run.json's `started` (UTC), else its name's YYYYMMDD-HHMMSS
    (how moss names runs, UTC), else its results file's time."""
    for text, fmt in ((meta.get("started"), "%Y-%m-%dT%H:%M:%SZ"), (name[:15], "%Y%m%d-%H%M%S")):
        if isinstance(text, str):
            try:
                return float(calendar.timegm(time.strptime(text, fmt)))
            except ValueError:
                pass
    st = storage.lstat(results_file)
    return st.st_mtime if st is not None else None


def _suite_name(path) -> str:
    """A suite's (or tasks file's) short name: its file's stem, or its folder's name."""
    if not isinstance(path, str) or not path:
        return "?"
    p = Path(path)
    if p.suffix in (".toml", ".jsonl", ".json"):
        return p.parent.name if p.stem == "suite" else p.stem
    return p.name


def _cached(key: Path, build) -> dict:
    st = storage.lstat(key)
    stamp = (st.st_size, st.st_mtime_ns) if st is not None else None
    hit = _cache.get(str(key))
    if hit is not None and hit[0] == stamp:
        return hit[1]
    out = build()
    _cache[str(key)] = (stamp, out)
    return out


def eval_row(root: Path, run: str) -> dict:
    """An eval's row as data: name, when, suite (name and path), cells ({cell, passed, n,
    rate}), ended attempts, total, cost."""
    folder = eval_dir(root) / run
    file = folder / results.FILE

    def build() -> dict:
        meta = _meta(folder / "run.json")
        try:
            rows = results.read(file)
        except Exception:  # a file that is not results: listed as empty, its page says why
            rows = []
        cells = results.summary(rows)
        done = results.finished(rows).values()
        return {"name": run, "when": _when(meta, run, file), "suite": _suite_name(meta.get("suite")),
                "suite_path": str(meta.get("suite") or ""),
                "cells": [{k: c[k] for k in ("cell", "passed", "n", "rate")} for c in cells],
                "ended": len(done), "total": meta.get("attempts") if isinstance(meta.get("attempts"), int) else None,
                "cost": sum(float(r.get("cost") or 0) for r in done)}
    return _cached(file, build)


def batch_row(root: Path, name: str) -> dict:
    """A batch's row as data: name, when, its tasks file, tasks, outcome counts, cost."""
    file = batch_dir(root) / (name + ".jsonl")

    def build() -> dict:
        meta = _meta(batch_dir(root) / (name + ".logs") / "run.json")
        try:
            rows = batch_rows(root, name)
        except Exception:  # listed as empty; its page says what is wrong
            rows = []
        counts: dict[str, int] = {}
        for r in rows:
            o = str(r.get("outcome") or "-")
            counts[o] = counts.get(o, 0) + 1
        return {"name": name, "when": _when(meta, name, file), "suite": _suite_name(meta.get("suite")),
                "suite_path": str(meta.get("suite") or ""), "tasks": len(rows), "outcomes": counts,
                "total": meta.get("attempts") if isinstance(meta.get("attempts"), int) else None,
                "cost": sum(float(r.get("cost") or 0) for r in rows)}
    return _cached(file, build)


def _newest_first(items: list[dict]) -> list[dict]:
    return sorted(items, key=lambda r: (r["when"] or 0, r["name"]), reverse=True)


def _previous(items: list[dict]) -> dict[str, dict]:
    """name -> the run before it of the same suite (items newest first)."""
    out: dict[str, dict] = {}
    for i, r in enumerate(items):
        earlier = next((o for o in items[i + 1:] if o["suite_path"] and o["suite_path"] == r["suite_path"]), None)
        if earlier is not None:
            out[r["name"]] = earlier
    return out


def _when_cell(r: dict, href: str) -> Html:
    t = r["when"]
    text = time.strftime("%Y-%m-%d %H:%M", time.localtime(t)) if t else "?"
    return Html(f'<td data-sort="{esc(int(t or 0))}">') + tag("a", text, href=href, title=r["name"]) + Html("</td>")


def _td(text, sort=None, cls: str | None = None) -> Html:
    attrs = (f' data-sort="{esc(sort)}"' if sort is not None else "") + (f' class="{esc(cls)}"' if cls else "")
    return Html(f"<td{attrs}>") + text + Html("</td>")


def _compare_links(a: str, b: str, cells_a: list[str], cells_b: list[str], kind: str) -> Html:
    """Links comparing run `a` (the earlier) with `b`: one, or one per cell both have."""
    base = f"/evals/compare?a={a}&b={b}" + ("&kind=batch" if kind == "batch" else "")
    if len(cells_a) == 1 and len(cells_b) == 1:
        return tag("a", f"with {a}", href=base, class_="compare")
    shared = [c for c in cells_b if c in cells_a]
    if not shared:
        return tag("span", "no cell in common with the last run", class_="note")
    from urllib.parse import quote

    return tag("span", f"with {a}: ") + join(
        tag("a", c, href=f"{base}&cell={quote(c, safe='')}", class_="compare") + Html(" ") for c in shared)


def evals_table(root: Path) -> Html:
    items = _newest_first([eval_row(root, n) for n in runs(root)])
    if not items:
        return render("empty", text="no evaluations in .moss/eval/ yet (moss eval ...)")
    before = _previous(items)
    body = []
    for r in items:
        cells = r["cells"]
        counted = sum(c["n"] for c in cells)
        rates = join(Html('<div class="cell-rate">') + tag("span", c["cell"], class_="cell") + " "
                     + tag("b", pct(c["rate"])) + f" ({c['passed']}/{c['n']})" + Html("</div>") for c in cells)
        prev = before.get(r["name"])
        compare = (_compare_links(prev["name"], r["name"], [c["cell"] for c in prev["cells"]],
                                  [c["cell"] for c in cells], "eval") if prev else tag("span", "first of its suite",
                                                                                      class_="note"))
        attempts = f"{r['ended']}" if r["total"] in (None, r["ended"]) else f"{r['ended']} of {r['total']}"
        body.append(Html(f'<tr data-run="{esc(r["name"])}">') + _when_cell(r, f"/evals/{r['name']}")
                    + Html(f'<td title="{esc(r["suite_path"])}">') + r["suite"] + Html("</td>")
                    + _td(len(cells), len(cells), "num")
                    + _td(rates, f"{sum(c['passed'] for c in cells) / counted:.4f}" if counted else "-1", "rates")
                    + _td(attempts, r["ended"], "num") + _td(money(r["cost"]), f"{r['cost']:.6f}", "num")
                    + _td(compare) + Html("</tr>"))
    return render("evals_table", rows=join(body))


def batches_table(root: Path) -> Html:
    items = _newest_first([batch_row(root, n) for n in batches(root)])
    if not items:
        return render("empty", text="no batches in .moss/batch/ yet (moss batch TASKS ...)")
    before = _previous(items)
    body = []
    for r in items:
        outcomes = ", ".join(f"{n} {o}" for o, n in r["outcomes"].items()) or "none yet"
        done = r["outcomes"].get("done", 0)
        prev = before.get(r["name"])
        compare = (_compare_links(prev["name"], r["name"], ["default"], ["default"], "batch") if prev
                   else tag("span", "first of its tasks file", class_="note"))
        tasks = f"{r['tasks']}" if r["total"] in (None, r["tasks"]) else f"{r['tasks']} of {r['total']}"
        body.append(Html(f'<tr data-batch="{esc(r["name"])}">') + _when_cell(r, f"/batches/{r['name']}")
                    + Html(f'<td title="{esc(r["suite_path"])}">') + r["suite"] + Html("</td>")
                    + _td(tasks, r["tasks"], "num")
                    + _td(outcomes, f"{done / r['tasks']:.4f}" if r["tasks"] else "-1")
                    + _td(money(r["cost"]), f"{r['cost']:.6f}", "num") + _td(compare) + Html("</tr>"))
    return render("batches_table", rows=join(body))

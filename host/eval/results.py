"""An eval's results: one JSONL line per attempt, read back for resume, and the statistics.

``attempts.jsonl`` in the run's folder gets a line as each attempt ends (one write each, so a
killed eval leaves whole lines). A line whose ``reason`` says the eval itself stopped the
attempt (``budget``, ``interrupted``) is not finished: ``--resume`` runs that attempt again;
every other line is, and is skipped.

The statistics are plain arithmetic, the same whatever the policy: a pass rate with its 95%
Wilson interval (right at 0% and 100% and for small n, where the normal approximation is not),
means, nearest-rank percentiles, and the exact McNemar test on paired results.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from .. import storage
from ..errors import MossError
from ..tools import safefs

FILE = "attempts.jsonl"
UNFINISHED = ("budget", "interrupted")
Z95 = 1.959963984540054
MAX_READ = 1 << 30


# ---- the files: under a project's .moss/ (the default) from its held root, never through a
# link the repository planted there (moss.storage); elsewhere (an --out you chose) by name.
def _moss(path: Path) -> bool:
    return ".moss" in Path(path).parts


def mkdir(path: Path) -> None:
    if _moss(path):
        storage.ensure_dir(Path(path))
    else:
        Path(path).mkdir(parents=True, exist_ok=True)


def write(path: Path, data: str | bytes) -> None:
    if _moss(path):
        storage.write_atomic(Path(path), data)
    else:
        safefs.replace_file(path, data)


def append(out: Path, row: dict) -> None:
    append_to(Path(out) / FILE, row)


def append_to(path: Path, row: dict) -> None:
    """One row as one line at the end of the results file `path` (one write: a kill leaves whole lines)."""
    line = (json.dumps(row, ensure_ascii=False, default=str) + "\n").encode("utf-8")
    path = Path(path)
    if _moss(path):
        storage.append_bytes(path, line)
    else:
        safefs.append_file(path, line)


def open_log(path: Path):
    """A log file kept open for a process to write to (an attempt's stderr), appended to."""
    if _moss(path):
        return storage.open_append(Path(path))
    return open(path, "a", encoding="utf-8")


def _read_text(path: Path) -> str:
    if _moss(path):
        return storage.read_text(path, MAX_READ)
    return path.read_text(encoding="utf-8")


def read(path: Path) -> list[dict]:
    """The rows of a results file (or of the run folder holding one); a torn last line is skipped."""
    path = Path(path)
    if path.is_dir():
        path = path / FILE
    if not path.is_file():
        raise MossError(f"no eval results at {path}", kind="not_found")
    rows, other = [], 0
    for line in _read_text(path).splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            other += 1
            continue  # the line being written when the eval was killed
        if isinstance(row, dict) and "key" in row:
            rows.append(row)
        else:
            other += 1
    if not rows and other:
        raise MossError(f"{path} holds no attempt rows of moss eval ({other} other lines): give an "
                        f"attempts.jsonl or the run folder holding one", kind="config")
    return rows


def finished(rows: list[dict]) -> dict[str, dict]:
    """The attempts a resume skips: key -> its last row."""
    out: dict[str, dict] = {}
    for row in rows:
        if row.get("reason") in UNFINISHED:
            out.pop(row["key"], None)
        else:
            out[row["key"]] = row
    return out


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    if n <= 0:
        return 0.0, 1.0
    p = k / n
    d = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / d
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, centre - half), min(1.0, centre + half)


def percentile(values: list, q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of `values`; None when there are none."""
    vs = sorted(v for v in values if v is not None)
    if not vs:
        return None
    rank = max(1, math.ceil(q / 100 * len(vs)))
    return vs[rank - 1]


def _mean(values) -> float | None:
    vs = [v for v in values if isinstance(v, (int, float))]
    return sum(vs) / len(vs) if vs else None


def summary(rows: list[dict]) -> list[dict]:
    """One entry per cell, in the matrix's order (the rows' `cell_index`: the order the cells
    were given in; then the order cells first appear): counted attempts (passed true or
    false; null ones are infrastructure or budget ends and are listed apart), passes, the rate
    and its interval, mean turns/tokens/cost and p50/p90 wall time over the counted ones; with
    --replay, the attempts that diverged from their recording and those that had none."""
    cells: dict[str, list[dict]] = {}
    place: dict[str, float] = {}
    for row in finished(rows).values():
        cell = str(row.get("cell"))
        cells.setdefault(cell, []).append(row)
        index = row.get("cell_index")
        if isinstance(index, int) and not isinstance(index, bool):
            place[cell] = min(place.get(cell, math.inf), index)
    out = []
    for cell, rs in sorted(cells.items(), key=lambda kv: place.get(kv[0], math.inf)):  # stable: first seen
        counted = [r for r in rs if isinstance(r.get("passed"), bool)]
        k, n = sum(1 for r in counted if r["passed"]), len(counted)
        lo, hi = wilson(k, n)
        tries = max([int(r.get("max_tries") or 1) for r in rs] + [1])
        out.append({
            "tries": tries, "pass_at": pass_at(counted, tries),
            "cell": cell, "attempts": len(rs), "n": n, "passed": k, "rate": (k / n) if n else None,
            "ci_low": lo, "ci_high": hi, "not_counted": len(rs) - n,
            "diverged": sum(1 for r in rs if r.get("reason") == "diverged"),
            "not_recorded": sum(1 for r in rs if r.get("reason") == "not_recorded"),
            "mean_turns": _mean(r.get("turns") for r in counted),
            "mean_tokens": _mean(r.get("tokens") for r in counted),
            "mean_cost": _mean(r.get("cost") for r in counted),
            "p50_wall": percentile([r.get("wall") for r in counted], 50),
            "p90_wall": percentile([r.get("wall") for r in counted], 90),
        })
    return out


def passed_on(row: dict) -> int | None:
    """The try a row passed on (1 for a row from before --tries), or None."""
    if row.get("passed") is not True:
        return None
    n = row.get("passed_on")
    return int(n) if isinstance(n, int) and n >= 1 else 1


def pass_at(counted: list[dict], tries: int) -> list[dict]:
    """pass@k for k = 1..tries, as the benchmark's leaderboard scores: the share of counted
    attempts whose check passed on try k or earlier, each {k, passed, rate, ci_low, ci_high}."""
    out = []
    n = len(counted)
    for k in range(1, tries + 1):
        p = sum(1 for r in counted if (passed_on(r) or tries + 1) <= k)
        lo, hi = wilson(p, n)
        out.append({"k": k, "passed": p, "rate": (p / n) if n else None, "ci_low": lo, "ci_high": hi})
    return out


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value: b pairs passed only in A, c only in B; under no
    difference each discordant pair goes either way with probability 1/2."""
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)

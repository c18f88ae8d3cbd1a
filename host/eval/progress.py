"""What a person sees while an eval or a batch runs, on stderr: on a terminal a live panel,
a status line as wide as the terminal (attempts ended of the total, how many run now, the
spend) and, for an eval, per cell the pass rate so far; for a batch (`tally="outcomes"`) the
status line counts the outcomes the policy named instead (done, failed, infrastructure, ...).
Piped, one plain line per attempt as it ends. stdout stays for the summary (a table, or JSON)."""

from __future__ import annotations

import sys
import threading


def _fmt_tokens(n: float) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else f"{int(n)}"


class Progress:
    def __init__(self, total: int, *, title: str = "eval", done: int = 0, live: bool | None = None,
                 stream=None, tally: str = "cells", cells: list[str] | None = None):
        self.stream = stream or sys.stderr
        self.total = total
        self.done = done
        self.active: set[str] = set()  # attempts an executor runs now (not those ended and being judged)
        self.tally = tally  # "cells": pass rates per cell; "outcomes": the count of each outcome
        self.outcomes: dict[str, int] = {}
        self.tokens = 0
        self.cost = 0.0
        self.title = title
        self.cells: dict[str, list[int]] = {c: [0, 0] for c in cells or []}  # cell -> [passed, counted], in order
        self._lock = threading.Lock()
        self.live = self.stream.isatty() if live is None else live
        self._live = None
        if self.live:
            from rich.console import Console
            from rich.live import Live

            self._live = Live(self._render(), console=Console(file=self.stream), refresh_per_second=4,
                              transient=False)
            self._live.start()

    def seed(self, row: dict) -> None:
        """A row from before a resume: it counts in the cells' rates and the spend."""
        with self._lock:
            self._count(row)

    @property
    def running(self) -> int:
        return len(self.active)

    def started(self, key: str) -> None:
        with self._lock:
            self.active.add(key)
        self._refresh()

    def stopped(self, key: str) -> None:
        """The attempt's run ended (its row waits for the policy's verdict): it runs no more."""
        with self._lock:
            self.active.discard(key)
        self._refresh()

    def ended(self, row: dict) -> None:
        with self._lock:
            self.active.discard(str(row.get("key")))
            self.done += 1
            self._count(row)
            line = self._line(row)
        if self._live is None:
            print(line, file=self.stream, flush=True)
        self._refresh()

    def note(self, text: str) -> None:
        if self._live is not None:
            self._live.console.print(text, markup=False, highlight=False)
        else:
            print(text, file=self.stream, flush=True)

    def close(self) -> None:
        if self._live is not None:
            self._refresh()
            self._live.stop()
            self._live = None

    # ---- inside ------------------------------------------------------------------------
    def _count(self, row: dict) -> None:
        self.tokens += row.get("tokens") or 0
        self.cost += row.get("cost") or 0.0
        if row.get("outcome"):
            self.outcomes[str(row["outcome"])] = self.outcomes.get(str(row["outcome"]), 0) + 1
        c = self.cells.setdefault(str(row.get("cell")), [0, 0])
        if isinstance(row.get("passed"), bool):
            c[1] += 1
            c[0] += 1 if row["passed"] else 0

    def _spend(self) -> str:
        return f"{_fmt_tokens(self.tokens)} tokens, ${self.cost:.4f}"

    def _line(self, row: dict) -> str:
        if row.get("outcome"):  # a batch task: its outcome as the policy named it
            bits = [str(row.get("reason")), f"{row.get('turns') or 0} turns", f"{row.get('wall') or 0:.1f}s"]
            return (f"[{self.done}/{self.total}] {row.get('task')}: {row['outcome']} ({', '.join(bits)}) · "
                    f"spent {self._spend()}")
        verdict = {True: "pass", False: "FAIL", None: "not counted"}[row.get("passed")]
        bits = [str(row.get("reason")), f"{row.get('turns') or 0} turns", f"{row.get('wall') or 0:.1f}s"]
        why = f": {' '.join(str(row['verdict']).split())[:300]}" if row.get("passed") is not True and row.get("verdict") \
            else ""  # a fail or an attempt not counted says why (the check timed out, a toolchain is missing)
        return (f"[{self.done}/{self.total}] {row.get('task')} · {row.get('cell')} · trial {row.get('trial')}: "
                f"{verdict} ({', '.join(bits)}) · spent {self._spend()}{why}")

    def status(self) -> str:
        """The status line: what ran of what, what runs now, what it cost."""
        if self.tally == "outcomes":
            counts = ", ".join(f"{n} {o}" for o, n in self.outcomes.items())
            ended = f"{self.done}/{self.total} ended" + (f": {counts}" if counts else "")
        else:
            ended = f"{self.done}/{self.total} attempts done"
        return f"{self.title} · {ended} · {self.running} running · spent {self._spend()}"

    def _render(self):
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        line = Text(self.status())  # as wide as the terminal (a table title wraps to the table)
        if self.tally == "outcomes" or not self.cells:
            return line
        t = Table(box=None, padding=(0, 2, 0, 0), pad_edge=False)
        t.add_column("  cell")
        t.add_column("passed", justify="right")
        t.add_column("rate so far", justify="right")
        for cell, (k, n) in self.cells.items():
            t.add_row(f"  {cell}", f"{k}/{n}", f"{100 * k / n:.0f}%" if n else "-")
        return Group(line, t)

    def _refresh(self) -> None:
        if self._live is not None:
            with self._lock:
                self._live.update(self._render())

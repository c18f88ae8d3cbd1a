"""The one table renderer: rich on a terminal, tab-separated lines otherwise.

Cells are text, never rich markup, and control sequences are shown as visible escapes, so a
file name or a model's words cannot restyle (or hide) a row or drive the terminal.
"""

from __future__ import annotations

import sys
from typing import Iterable, Sequence


def table(columns: Sequence[str], rows: Iterable[Sequence], *, title: str | None = None,
          styles: dict | None = None, row_styles: Sequence | None = None, fold: bool = False):
    """A rich Table of `rows` (sequences of cells, None shown empty) under `columns`.
    `styles` maps a column to its style; `row_styles[i]` styles row i."""
    from rich.table import Table
    from rich.text import Text

    from .ui import sanitize

    t = Table(box=None, header_style="bold", title=title, title_justify="left", pad_edge=False)
    for col in columns:
        t.add_column(str(col), style=(styles or {}).get(col), overflow="fold" if fold else "ellipsis")
    for i, row in enumerate(rows):
        t.add_row(*(Text(sanitize("" if c is None else str(c))) for c in row),
                  style=row_styles[i] if row_styles else None)
    return t


def show(columns: Sequence[str], rows: Iterable[Sequence], *, title: str | None = None,
         styles: dict | None = None, row_styles: Sequence | None = None, file=None) -> None:
    """Print a table: rich when `file` (stdout) is a terminal, else a header line and one
    tab-separated line per row, for scripts and pipes."""
    file = file or sys.stdout
    rows = [["" if c is None else str(c) for c in row] for row in rows]
    if not file.isatty():
        file.write("\t".join(map(str, columns)) + "\n")
        for row in rows:
            file.write("\t".join(c.replace("\t", " ").replace("\n", " ") for c in row) + "\n")
        file.flush()
        return
    from rich.console import Console

    Console(file=file, soft_wrap=True).print(table(columns, rows, title=title, styles=styles,
                                                   row_styles=row_styles, fold=True))

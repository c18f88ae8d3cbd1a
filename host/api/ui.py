"""moss.ui: messages and status lines for people, on stderr."""

from __future__ import annotations

from .. import ui


def functions(ctx):
    def print_(text, opts=None):
        opts = opts or {}
        style = opts.get("style") if isinstance(opts, dict) else None
        ui.console().print(ui.escape(str(text)), style=style)

    def status(text):
        c = ui.console()
        if c.is_terminal:
            c.print(f"[dim]›[/] {ui.escape(str(text))}")
        else:
            c.print(f"› {text}", markup=False)

    def is_terminal():
        return ui.console().is_terminal

    return {"ui.print": print_, "ui.status": status, "ui.is_terminal": is_terminal}

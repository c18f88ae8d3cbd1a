"""moss.ui: messages and status lines for people, on stderr."""

from __future__ import annotations

import sys

from .. import ui
from ..errors import MossError
from .registry import primitive


@primitive
def print_(ctx, text, opts=None):
    opts = opts or {}
    style = opts.get("style") if isinstance(opts, dict) else None
    ui.console().print(ui.escape(ui.sanitize(str(text))), style=style)


@primitive
def markdown(ctx, text, opts=None):
    opts = opts if isinstance(opts, dict) else {}
    ui.markdown(str(text), gutter=ui.sanitize(str(opts.get("gutter") or "")), stdout=bool(opts.get("stdout")))
    return True


@primitive
def status(ctx, text):
    text = ui.sanitize(str(text))
    if (not ui.stderr_is_tty() and "\t" not in text and text.count(":") < 2
            and not any(k in ctx.env for k in ("FORCE_TERMINAL", "TTY_COMPATIBLE", "FORCE_COLOR"))):
        # what rich would print here, without a Console per line (~0.15 ms a turn): no
        # tab to expand, no :emoji: code to replace
        sys.stderr.write(f"› {text}\n")
        sys.stderr.flush()
        return
    c = ui.console()
    if c.is_terminal:
        c.print(f"[dim]›[/] {ui.escape(text)}")
    else:
        c.print(f"› {text}", markup=False)


@primitive
def is_terminal(ctx, stream=None):
    if stream == "stdout":  # where an answer goes: the same screen as stderr's lines, or a pipe
        return not ui.surely_not_terminal() and sys.stdout.isatty()
    if stream not in (None, "stderr"):
        raise MossError(f"moss.ui.is_terminal: stream must be \"stderr\" or \"stdout\", got {stream!r}",
                        kind="usage")
    return not ui.surely_not_terminal() and ui.console().is_terminal


@primitive
def interactive(ctx):
    return _interactive(ctx)


@primitive
def ask(ctx, question, opts=None):
    """Ask the user; nil when nobody can answer (stdin is not a terminal), or when
    `timeout` seconds pass without an answer (only while moss reads stdin in the
    background for the session's inbox)."""
    if not _interactive(ctx):
        return None
    import sys

    from .inbox import stdin_reader

    opts = opts or {}
    c = ui.console()
    area = ui.input_active()  # the input area shows the answer's prompt itself
    if not opts.get("silent"):  # a wait that asks again and again says it once
        c.print(f"[bold cyan]?[/] {ui.escape(ui.sanitize(str(question)))}")
        for i, choice in enumerate(opts.get("choices") or [], 1):
            c.print(f"  {i}. {ui.escape(ui.sanitize(str(choice)))}")
        if not area:
            c.print("[dim]answer>[/] ", end="")
    reader = stdin_reader()
    if reader is not None:  # one reader owns stdin: the next line answers this question
        timeout = opts.get("timeout")
        return reader.ask(float(timeout) if timeout else None,
                          prompt="› " if opts.get("silent") else "answer> ")
    line = sys.stdin.readline()
    if not line:
        return None
    return line.rstrip("\n")


@primitive
def confirm(ctx, question):
    answer = ask(ctx, question + " [y/N]")
    return bool(answer) and answer.strip().lower() in ("y", "yes")


@primitive
def event(ctx, data):
    """One JSON line on stdout (for --output-format stream-json)."""
    import json
    import sys

    if isinstance(data, dict):  # "type" first, the rest in a stable order
        data = {"type": data.get("type"), **{k: data[k] for k in sorted(data) if k != "type"}}
    sys.stdout.write(json.dumps(data, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()
    return True


@primitive
def table(ctx, rows, opts=None):
    """Rows (a list of tables) on stdout: a rich table on a terminal, tab-separated otherwise."""
    import sys

    opts = opts or {}
    rows = rows or []
    columns = opts.get("columns") or (list(rows[0].keys()) if rows else [])
    from ..tables import show

    styles = [r.get("_style") if isinstance(r.get("_style"), str) else None for r in rows]
    show(columns, [[r.get(k) for k in columns] for r in rows], title=opts.get("title"), file=sys.stdout,
         row_styles=styles if any(styles) else None)
    return True


@primitive
def live(ctx, text):
    """A live status line on stderr (spinner, text, seconds, tokens streamed) until
    live_stop(); false where it cannot show (not a terminal, NO_COLOR)."""
    return ui.live_start(str(text))


@primitive
def live_stop(ctx):
    return ui.live_stop()


def _interactive(ctx) -> bool:
    import os
    import sys

    if os.environ.get("MOSS_ASSUME_TTY") == "1" or ctx.options.get("input_format") == "stream-json":
        return True
    return bool(sys.stdin) and sys.stdin.isatty()

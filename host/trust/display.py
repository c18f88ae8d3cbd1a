"""Showing and asking: `moss trust`'s table of what a project brings (and, after a change,
what changed, with each script's diff), `moss trust --status`'s lines, the notice on stderr of
what a run ignores, and the y/N question.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from .diffs import show
from .judge import Trust
from .manifest import Item


def where(root: Path) -> str:
    """The project's path for messages: absolute, ~-contracted (never a bare ".")."""
    s = str(Path(root).resolve())
    home = os.path.expanduser("~")
    return "~" + s[len(home):] if home not in ("", "/") and s.startswith(home + os.sep) else s


def origin_lines(state: Trust) -> list[str]:
    """Untrusted after a change: one line per changed file, how it changed (edited here, or
    why moss takes it as arrived from elsewhere)."""
    if state.trusted:
        return []
    return [f"{rel}: {why}" for rel, why in sorted(state.origins.items())]


def render(state: Trust, console) -> None:
    """What the project adds, as a table; with a previous record, what changed since."""
    from ..tables import table
    from ..ui import escape

    here = where(state.root)
    changes = state.changes if not state.trusted else []
    if not state.manifest.needed:
        console.print(f"{escape(here)}: its .moss/ holds nothing that needs trust")
    elif changes:
        console.print(f"[bold]{escape(here)}[/]: changed since you trusted it "
                      f"({escape(str((state.record or {}).get('trusted_at', '?')))}):")
        console.print(table(("change", "kind", "item", "was", "now"),
                            [(c.what, c.item.kind, c.item.key, c.old.shown() if c.old else "",
                              c.new.shown() if c.new else "") for c in changes],
                            row_styles=[{"added": "green", "removed": "red"}.get(c.what, "yellow")
                                        for c in changes], fold=True))
        show(state, console)  # each changed script's diff, not only its hashes
    else:
        console.print(f"[bold]{escape(here)}[/] brings code to run and settings that route or widen:")
        console.print(table(("kind", "item", "value", "note"),
                            [(i.kind, i.key, i.shown(), i.note) for i in state.manifest.items], fold=True))
    for line in origin_lines(state):
        console.print(f"  {escape(line)}")
    for item in state.manifest.user_only:
        console.print(f"[dim]never used from a project: {escape(item.line())}[/]")
    if state.manifest.needed:
        status = f"trusted ({state.how})" if state.trusted else (
            "not trusted (changed since)" if state.record else "not trusted")
        console.print(f"status: {status}")


def status_line(state: Trust) -> str:
    here = where(state.root)
    if not state.manifest.needed:
        return f"{here}: nothing to trust"
    if state.trusted:
        return f"{here}: trusted ({len(state.manifest.items)} items, {state.how})"
    if state.record:
        return f"{here}: not trusted: changed since you trusted it ({len(state.changes)} changes)"
    return f"{here}: not trusted ({len(state.manifest.items)} items)"


def status_lines(state: Trust) -> list[str]:
    """`moss trust --status`: the status line; untrusted, one line for each thing that waits
    for trust (or, after a change, each change), and what a project may never set."""
    def row(i: Item, was: Item | None = None) -> str:
        text = f"{i.kind}: {i.key} = {i.shown()}" + (f" (was {was.shown()})" if was else "")  # whole values
        return text + (f" ({i.note})" if i.note else "")

    out = [status_line(state)]
    if not state.trusted:
        if state.changes:
            out += [f"  {c.what}: {row(c.item, c.old if c.what == 'changed' else None)}"
                    for c in state.changes]
        else:
            out += [f"  needs trust: {row(i)}" for i in state.manifest.items]
        out += [f"  {line}" for line in origin_lines(state)]
    out += [f"  never used from a project: {i.line()}" for i in state.manifest.user_only]
    return out


def stdin_interactive(env=os.environ) -> bool:
    """A person can answer: stdin is a terminal (MOSS_ASSUME_TTY=1 stands in for one in tests,
    as for every other question moss asks)."""
    if env.get("MOSS_ASSUME_TTY") == "1":
        return True
    return bool(sys.stdin) and sys.stdin.isatty()


def ask(console, question: str) -> bool:
    """A y/N question on the console; anything but y/yes (or end of input) is no."""
    console.print(f"[bold]{question}[/] \\[y/N] ", end="")  # escaped: the choices, not a rich tag
    try:
        answer = sys.stdin.readline()
    except (OSError, ValueError):
        answer = ""
    if not answer:
        console.print()
    return answer.strip().lower() in ("y", "yes")


def notice(state: Trust, console) -> None:
    """Say on stderr what the project set that this run ignores, and how to trust it."""
    from ..ui import escape

    if not state.ignored:
        return
    if not state.trusted:
        console.print(f"[yellow]untrusted project {escape(where(state.root))}:[/] "
                      f"running with built-in scripts and your own config; ignoring:")
    else:
        console.print("[yellow]ignored from the project's config:[/]")
    for line in state.ignored:
        console.print(f"  {escape(line)}", markup=True)
    if state.origins and not state.trusted:
        console.print("[yellow]changed since you trusted it:[/]")
        for line in origin_lines(state):
            console.print(f"  {escape(line)}")
    if not state.trusted:
        console.print("[dim]review and trust it: moss trust   (or pass --trust to trust it for one run, "
                      "e.g. in CI for a checkout you vouch for)[/]")

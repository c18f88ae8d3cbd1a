"""What changed in a trusted project's scripts, shown as diffs before you trust it again.

A trust record (record.py) pins each project script by its sha256; after a `git pull`
that alone would ask you to trust `sha256:04d6…` in place of `sha256:6b49…`. So that the
question shows the change itself, `record.keep` stores a copy of each trusted script beside
the record (``<record>.files/<sha256>``, up to MAX_COPY bytes a file, replaced at every grant,
only the current ones kept), and `show` prints, for each script changed since, the unified
diff from the trusted text to the file now: paged on a terminal (``$PAGER``, else ``less``
with ``LESS=FRX``, as git does), capped at MAX_FILE_LINES a file and MAX_LINES in all. A record
written before the copies existed gets the trusted text from git when HEAD held exactly that
content when it was trusted (moss asks git as host/tools/gitread.py does: nothing of the
repository runs).

Every line is shown through `text.visible`: a control or bidi character in a script is
written as its escape, so the diff reads as what the file holds.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys

from .judge import Trust
from .manifest import HASH_ONLY, read_regular
from .record import MAX_COPY, files_dir
from .text import visible

MAX_FILE_LINES = 200        # diff lines shown per file
MAX_LINES = 1000            # diff lines shown in all


def trusted_text(state: Trust, rel: str, sha: str, env=os.environ, view=None) -> bytes | None:
    """The content trusted as `sha` for `rel`: its kept copy, else HEAD's blob of the time
    when that was the same content; None when neither has it."""
    copy = files_dir(state.root, env) / sha
    try:
        data = copy.read_bytes() if copy.is_file() else None
    except OSError:
        data = None
    if data is not None and hashlib.sha256(data).hexdigest() == sha:
        return data
    local = (state.record or {}).get("local")
    entry = local.get("head", {}).get(rel) if isinstance(local, dict) and isinstance(local.get("head"), dict) else None
    if view is not None and isinstance(entry, str):
        data = view.blob(entry)
        if data is not None and hashlib.sha256(data).hexdigest() == sha:
            return data
    return None


def _lines(data: bytes) -> list[str] | None:
    if b"\0" in data:
        return None
    text = data.decode("utf-8", "replace")
    lines = text.split("\n")
    if text.endswith("\n") or not text:
        lines.pop()
    return [visible(line.expandtabs(4)) for line in lines]


def diffs(state: Trust, env=os.environ) -> list[tuple[str, list[str], str]]:
    """For each script changed since the record: (path, diff lines, note). The note says what
    could not be shown (no trusted copy, not text, a link)."""
    import difflib  # here, not at the top: every run imports this module, few show a diff

    out: list[tuple[str, list[str], str]] = []
    view = None
    for change in state.changes:
        old, new = change.old, change.new
        if change.item.kind != "script":
            continue
        rel = change.item.key
        if new is None:
            out.append((rel, [], "removed"))
            continue
        if not HASH_ONLY.fullmatch(new.value):
            out.append((rel, [], "a link or a file moss could not read: its value above is all there is"))
            continue
        now = read_regular(state.root / rel, 16 * MAX_COPY)
        before: bytes | None = b""
        if old is not None:
            if view is None:
                from ..tools.gitread import GitView

                view = GitView.open(state.root) or False
            before = trusted_text(state, rel, old.value, env, view or None) if HASH_ONLY.fullmatch(old.value) else None
        if now is None or hashlib.sha256(now).hexdigest() != new.value:
            out.append((rel, [], "changed again since moss looked, or too large to show"))
            continue
        if before is None:
            out.append((rel, [], "the trusted version is not at hand (no copy kept, not in git): only its hash"))
            continue
        a, b = _lines(before), _lines(now)
        if a is None or b is None:
            out.append((rel, [], f"not text ({len(now):,} bytes)"))
            continue
        lines = list(difflib.unified_diff(a, b, "trusted/" + rel if old else "/dev/null", "now/" + rel, lineterm=""))
        out.append((rel, lines, "" if lines else "no change in its text"))
    return out


def _styled(line: str):
    from rich.text import Text

    style = ("bold" if line.startswith(("+++", "---")) else "green" if line.startswith("+")
             else "red" if line.startswith("-") else "cyan" if line.startswith("@@") else None)
    return Text(line, style=style or "")


def show(state: Trust, console, env=os.environ) -> None:
    """The diffs of `state`'s changed scripts on `console`, capped; through a pager when a
    person reads them on a terminal and they do not fit on one screen."""
    from rich.text import Text

    found = diffs(state, env)
    if not found:
        return
    shown: list = []
    left = MAX_LINES
    for rel, lines, note in found:
        shown.append(Text(f"{rel}: {note}" if note else rel, style="bold" if not note else "dim"))
        if not lines:
            continue
        if left <= 0:
            shown.append(Text(f"  … its diff is not shown: over {MAX_LINES} lines of diffs already (read the "
                              f"file itself)", style="dim"))
            continue
        take = min(len(lines), MAX_FILE_LINES, left)
        shown += [_styled(line) for line in lines[:take]]
        left -= take
        if take < len(lines):
            shown.append(Text(f"… {len(lines) - take:,} more lines of this diff (read {rel} itself)", style="dim"))
    if _page(console, shown):
        return
    for t in shown:
        console.print(t)


def _page(console, lines: list) -> bool:
    """Print `lines` through the user's pager when stdin, stdout and the console are one
    person's terminal and they are taller than it; whether it did."""
    if not (console.is_terminal and sys.stdin.isatty() and sys.stdout.isatty()):
        return False
    if len(lines) <= max(5, console.height - 6):
        return False
    pager = os.environ.get("PAGER") or ("less" if shutil.which("less") else "")
    if not pager or pager == "cat":
        return False
    with console.capture() as cap:
        for t in lines:
            console.print(t)
    text = cap.get()
    try:
        p = subprocess.Popen(pager, shell=True, stdin=subprocess.PIPE,
                             env={**os.environ, "LESS": os.environ.get("LESS", "FRX")})
        p.communicate(text.encode("utf-8", "replace"))
    except OSError:
        return False
    return True

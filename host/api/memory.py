"""moss.memory: long-term memory in .moss/memory/*.md (plain Markdown, version controlled).

Each memory is one bullet line, `- text (YYYY-MM-DD)`, in `.moss/memory/KIND.md`. Which kinds
there are is policy (the $(memorize) command file maps its flags to facts, preferences and
decisions); the host takes any plain name. People edit the files by hand too; recall is word
matching over every file there, nothing hidden.

The files are read and written through moss.storage (moss.tools.safefs): a memory file that
is a link (to a host secret, say), a fifo or a device is never read nor written through.
Listings leave it out with a one-line warning; memorize, forget and write refuse it, naming
the file (kind "denied").
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from .. import storage
from ..errors import MossError
from ..storage import UnsafePath
from .registry import primitive

KIND_RE = re.compile(r"^[a-z][a-z0-9_-]{0,40}$")
BULLET = re.compile(r"^\s*[-*]\s+(.*\S)\s*$")
WORD = re.compile(r"[A-Za-z0-9_]{3,}")
MAX_FILE = 4 << 20  # a memory file larger than this is not one moss wrote


def memory_dir(root: Path) -> Path:
    return Path(root) / ".moss" / "memory"


def _file(root: Path, kind: str) -> Path:
    if not isinstance(kind, str) or not KIND_RE.match(kind):
        raise MossError(f"memory kind must be a plain lower-case name like facts or decisions; got {kind!r}",
                        kind="usage")
    return memory_dir(root) / f"{kind}.md"


def kinds(root: Path) -> list[str]:
    """The kinds that have a regular file: facts.md -> facts, ... (a link or anything else
    there is left out, with a warning)."""
    import stat

    d = memory_dir(root)
    out = []
    with storage.Skips(d) as skip:
        for name in storage.listed(d):
            if not name.endswith(".md") or not KIND_RE.match(name[:-3]):
                continue
            st = storage.lstat(d / name)
            if st is not None and stat.S_ISREG(st.st_mode):
                out.append(name[:-3])
            elif st is not None and not stat.S_ISDIR(st.st_mode):
                skip(d / name, "not a regular file (a link, a fifo or a device); moss does not read it")
    return out


def read(root: Path, kind: str) -> str | None:
    """The text of a kind's file, or None when it has none; UnsafePath for a link or a fifo."""
    try:
        return storage.read_text(_file(root, kind), MAX_FILE)
    except FileNotFoundError:
        return None


def entries(root: Path) -> list[dict]:
    out = []
    for kind in kinds(root):
        try:
            text = read(root, kind) or ""
        except UnsafePath as e:  # swapped for a link since it was listed
            storage.skipped(_file(root, kind), e)
            continue
        for n, line in enumerate(text.splitlines(), 1):
            m = BULLET.match(line)
            if m:
                out.append({"kind": kind, "text": m.group(1), "line": n, "file": f".moss/memory/{kind}.md"})
    return out


@primitive
def memorize(ctx, text, opts=None):
    text = " ".join(str(text or "").split())
    if not text:
        raise MossError("memorize needs some text", kind="usage")
    kind = (opts or {}).get("kind", "facts")
    p = _file(ctx.root, kind)
    old = read(ctx.root, kind)  # a planted link is refused here, before anything is written
    if old is None:
        old = f"# {kind.capitalize()}\n"
    if any(e["text"].startswith(text) for e in entries(ctx.root) if e["kind"] == kind):
        return {"kind": kind, "text": text, "duplicate": True}
    line = f"- {text} ({time.strftime('%Y-%m-%d')})\n"
    storage.write_atomic(p, old + ("" if old.endswith("\n") else "\n") + line)
    ctx.log("memorize", {"kind": kind, "text": text})
    return {"kind": kind, "text": text, "duplicate": False}


@primitive
def recall(ctx, query, opts=None):
    limit = int((opts or {}).get("limit", 5))
    words = {w.lower() for w in WORD.findall(str(query or ""))}
    scored = []
    for e in entries(ctx.root):
        have = {w.lower() for w in WORD.findall(e["text"])}
        score = len(words & have)
        if score:
            scored.append((score, e))
    scored.sort(key=lambda se: -se[0])
    return [e for _, e in scored[:limit]]


@primitive
def forget(ctx, pattern):
    pattern = str(pattern or "").lower()
    if not pattern:
        raise MossError("forget needs some text to match", kind="usage")
    removed = 0
    for kind in kinds(ctx.root):
        lines = (read(ctx.root, kind) or "").splitlines(keepends=True)
        keep = [ln for ln in lines if not (BULLET.match(ln) and pattern in ln.lower())]
        if len(keep) != len(lines):
            removed += len(lines) - len(keep)
            storage.write_atomic(_file(ctx.root, kind), "".join(keep))
    ctx.log("memory_forget", {"pattern": pattern, "removed": removed})
    return removed


@primitive
def all_(ctx):
    return entries(ctx.root)


@primitive
def files(ctx):
    """Every memory file, whole: [{kind, file, text}] (organising rewrites whole files)."""
    out = []
    for k in kinds(ctx.root):
        try:
            out.append({"kind": k, "file": f".moss/memory/{k}.md", "text": read(ctx.root, k) or ""})
        except UnsafePath as e:
            storage.skipped(_file(ctx.root, k), e)
    return out


@primitive
def write(ctx, kind, text, opts=None):
    """Replace a kind's whole file with `text` (atomically); {file, changed, diff}. With
    {dry_run=true} only the unified diff is computed."""
    import difflib

    p = _file(ctx.root, kind)
    text = str(text if text is not None else "")
    if text and not text.endswith("\n"):
        text += "\n"
    old = read(ctx.root, kind)
    exists, old = old is not None, old or ""
    rel = f".moss/memory/{kind}.md"
    shown = old if not old or old.endswith("\n") else old + "\n"  # a diff line per line
    diff = "".join(difflib.unified_diff(shown.splitlines(keepends=True), text.splitlines(keepends=True),
                                        "/dev/null" if not exists else f"a/{rel}", f"b/{rel}"))
    changed = old != text or not exists
    if changed and not (opts or {}).get("dry_run"):
        storage.write_atomic(p, text)
        ctx.log("memory_write", {"kind": kind, "chars": len(text)})
    return {"file": rel, "changed": changed, "diff": diff}

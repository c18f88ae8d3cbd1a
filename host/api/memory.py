"""moss.memory: long-term memory in .moss/memory/*.md (plain Markdown, version controlled).

Each memory is one bullet line, `- text (YYYY-MM-DD)`, in `.moss/memory/KIND.md`. Which kinds
there are is policy (the $(memorize) command file maps its flags to facts, preferences and
decisions); the host takes any plain name. People edit the files by hand too; recall is word
matching over every file there, nothing hidden.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from ..errors import MossError

KIND_RE = re.compile(r"^[a-z][a-z0-9_-]{0,40}$")
BULLET = re.compile(r"^\s*[-*]\s+(.*\S)\s*$")
WORD = re.compile(r"[A-Za-z0-9_]{3,}")


def memory_dir(root: Path) -> Path:
    return Path(root) / ".moss" / "memory"


def _file(root: Path, kind: str) -> Path:
    if not isinstance(kind, str) or not KIND_RE.match(kind):
        raise MossError(f"memory kind must be a plain lower-case name like facts or decisions; got {kind!r}",
                        kind="usage")
    return memory_dir(root) / f"{kind}.md"


def kinds(root: Path) -> list[str]:
    """The kinds that have a file: facts.md -> facts, ..."""
    d = memory_dir(root)
    return sorted(p.stem for p in d.glob("*.md") if KIND_RE.match(p.stem) and p.is_file()) if d.is_dir() else []


def entries(root: Path) -> list[dict]:
    out = []
    for kind in kinds(root):
        p = _file(root, kind)
        for n, line in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            m = BULLET.match(line)
            if m:
                out.append({"kind": kind, "text": m.group(1), "line": n, "file": f".moss/memory/{kind}.md"})
    return out


def write_atomic(path: Path, text: str) -> None:
    from ..tools.atomic import write_atomic as _write

    _write(path, text)


def functions(ctx):
    def memorize(text, opts=None):
        text = " ".join(str(text or "").split())
        if not text:
            raise MossError("memorize needs some text", kind="usage")
        kind = (opts or {}).get("kind", "facts")
        p = _file(ctx.root, kind)
        p.parent.mkdir(parents=True, exist_ok=True)
        old = p.read_text(encoding="utf-8") if p.exists() else f"# {kind.capitalize()}\n"
        if any(e["text"].startswith(text) for e in entries(ctx.root) if e["kind"] == kind):
            return {"kind": kind, "text": text, "duplicate": True}
        line = f"- {text} ({time.strftime('%Y-%m-%d')})\n"
        write_atomic(p, old + ("" if old.endswith("\n") else "\n") + line)
        ctx.log("memorize", {"kind": kind, "text": text})
        return {"kind": kind, "text": text, "duplicate": False}

    def recall(query, opts=None):
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

    def forget(pattern):
        pattern = str(pattern or "").lower()
        if not pattern:
            raise MossError("forget needs some text to match", kind="usage")
        removed = 0
        for kind in kinds(ctx.root):
            p = _file(ctx.root, kind)
            lines = p.read_text(encoding="utf-8").splitlines(keepends=True)
            keep = [ln for ln in lines if not (BULLET.match(ln) and pattern in ln.lower())]
            if len(keep) != len(lines):
                removed += len(lines) - len(keep)
                write_atomic(p, "".join(keep))
        ctx.log("memory_forget", {"pattern": pattern, "removed": removed})
        return removed

    def all_():
        return entries(ctx.root)

    def files():
        """Every memory file, whole: [{kind, file, text}] (organising rewrites whole files)."""
        return [{"kind": k, "file": f".moss/memory/{k}.md",
                 "text": _file(ctx.root, k).read_text(encoding="utf-8", errors="replace")} for k in kinds(ctx.root)]

    def write(kind, text, opts=None):
        """Replace a kind's whole file with `text` (atomically); {file, changed, diff}. With
        {dry_run=true} only the unified diff is computed."""
        import difflib

        p = _file(ctx.root, kind)
        text = str(text if text is not None else "")
        if text and not text.endswith("\n"):
            text += "\n"
        old = p.read_text(encoding="utf-8", errors="replace") if p.exists() else ""
        rel = f".moss/memory/{kind}.md"
        shown = old if not old or old.endswith("\n") else old + "\n"  # a diff line per line
        diff = "".join(difflib.unified_diff(shown.splitlines(keepends=True), text.splitlines(keepends=True),
                                            "/dev/null" if not p.exists() else f"a/{rel}", f"b/{rel}"))
        changed = old != text or not p.exists()
        if changed and not (opts or {}).get("dry_run"):
            p.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(p, text)
            ctx.log("memory_write", {"kind": kind, "chars": len(text)})
        return {"file": rel, "changed": changed, "diff": diff}

    return {"memory.memorize": memorize, "memory.recall": recall, "memory.forget": forget, "memory.all": all_,
            "memory.files": files, "memory.write": write}

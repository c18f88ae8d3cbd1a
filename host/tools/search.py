"""`search`: ripgrep over the project, each hit labelled with its enclosing symbol.

    src/workflow/llm.rs:
      12 (Provider/Anthropic L12): Anthropic,
      48 (Provider/default_model L45-62): Provider::Anthropic => "claude-sonnet-4-5",

    2 matches in 1 file

Files are searched the way `rg` would (hidden files included, .gitignore respected even
outside a git repository, .git skipped), grouped by path in sorted order. The pattern is
ripgrep's (Rust) regex syntax.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

from moss.errors import MossError
from moss.tools.caps import cap
from moss.tools.resolve import RG_WALK_FLAGS, list_files, rg_binary
from moss.tools.treesitter import innermost, language_for, outline

MAX_LINE_CHARS = 200            # a hit line longer than this is shown around the match
MAX_OUTLINE_BYTES = 2_000_000   # no enclosing symbol for larger files
TIMEOUT_S = 60.0
_GLOB_CHARS = set("*?[]{}!")


def _only_args(root: Path, only: list[str]) -> tuple[list[str], bool]:
    """ripgrep arguments for `--only` globs, and whether results must be re-checked
    against the ignore rules (rg's --glob overrides .gitignore; --type does not)."""
    args: list[str] = []
    names: list[str] = []
    recheck = False
    for g in only:
        g = g.strip()
        if not g:
            continue
        if g.startswith("!"):
            args += ["--glob", g]          # an exclusion never un-ignores anything
        elif "/" not in g.rstrip("/") and not g.endswith("/") and not (root / g).is_dir():
            names.append(g)                # a file-name glob: a ripgrep type keeps ignores
        else:
            if not (set(g) & _GLOB_CHARS) and (root / g.rstrip("/")).is_dir():
                g = g.rstrip("/") + "/**"  # a plain directory means everything under it
            args += ["--glob", g]
            recheck = True
    if names:
        for n in names:
            args += ["--type-add", f"mossonly:{n}"]
        args += ["--type", "mossonly"]
    return args, recheck


def _text(obj: dict) -> str:
    if "text" in obj:
        return obj["text"]
    import base64
    return base64.b64decode(obj.get("bytes", "")).decode("utf-8", "replace")


def _trim(line: str, start: int | None) -> str:
    """The hit's line without indentation; a long one is cut to a window around the
    match (`start` is ripgrep's byte offset of the match in the line)."""
    line = line.rstrip("\r\n")
    if start and len(line) > MAX_LINE_CHARS:
        start = len(line.encode("utf-8")[:start].decode("utf-8", "ignore"))
    stripped = line.lstrip()
    shift = len(line) - len(stripped)
    line = stripped.rstrip()
    if len(line) <= MAX_LINE_CHARS:
        return line
    at = max(0, (start or 0) - shift)
    begin = max(0, min(at - MAX_LINE_CHARS // 3, len(line) - MAX_LINE_CHARS))
    piece = line[begin:begin + MAX_LINE_CHARS]
    return ("…" if begin > 0 else "") + piece + ("…" if begin + MAX_LINE_CHARS < len(line) else "")


def search(root: Path, pattern: str, *, only: list[str] | None = None, limit: int = 100,
           ignore_case: bool = False, max_chars: int = 20000) -> str:
    """Search the project for `pattern` (a regex) and return hits grouped by file.

    `only` restricts the files searched to globs (`*.rs`, `src/**`, a directory, or
    `!tests/**` to exclude). At most `limit` hits are shown; the total line says how
    many there were. A bad regex raises MossError(kind="usage"); no match at all returns
    "No matches for <pattern>".
    """
    root = Path(root).resolve()
    if not root.is_dir():
        raise MossError(f"project root {root} is not a directory", kind="not_found")
    if not pattern:
        raise MossError("search needs a pattern", kind="usage")
    if isinstance(only, str):
        only = [only]
    limit = max(1, int(limit))
    glob_args, recheck = _only_args(root, only or [])
    cmd = [rg_binary(), "--json", "--sort", "path", *RG_WALK_FLAGS, *glob_args]
    if ignore_case:
        cmd.append("--ignore-case")
    cmd += ["-e", pattern, "--", "."]

    proc = subprocess.Popen(cmd, cwd=root, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    timer = threading.Timer(TIMEOUT_S, proc.kill)
    timer.start()
    errbuf: list[bytes] = []
    err_thread = threading.Thread(target=lambda: errbuf.append(proc.stderr.read()), daemon=True)
    err_thread.start()
    allowed: set[str] | None = set(list_files(root)) if recheck else None
    hits: list[tuple[str, int, str]] = []
    total = 0
    files_with: set[str] = set()
    summary = None
    try:
        for raw in proc.stdout:
            if raw.startswith(b'{"type":"match"'):
                msg = json.loads(raw)["data"]
                path = _text(msg["path"])
                path = path[2:] if path.startswith("./") else path
                path = path.replace(os.sep, "/")
                if allowed is not None and path not in allowed:
                    continue
                total += 1
                files_with.add(path)
                if len(hits) < limit:
                    subs = msg.get("submatches") or [{}]
                    hits.append((path, msg["line_number"], _trim(_text(msg["lines"]),
                                                                 subs[0].get("start"))))
            elif raw.startswith(b'{"type":"summary"'):
                summary = json.loads(raw)["data"]
        proc.wait()
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        err_thread.join(timeout=5)
    stderr = b"".join(errbuf).decode("utf-8", "replace").strip()
    timed_out = summary is None and proc.returncode not in (0, 1, 2)
    if summary is None and proc.returncode == 2 and not total:
        detail = stderr[4:] if stderr.startswith("rg: ") else stderr
        raise MossError(f"bad search pattern {pattern!r}: {detail or 'ripgrep failed'}",
                        kind="usage")
    if not total:
        where = f" in {', '.join(only)}" if only else ""
        note = " (search timed out)" if timed_out else ""
        return f"No matches for {pattern}{where}{note}\n"

    out: list[str] = []
    current = None
    syms_cache: dict[str, list] = {}
    for path, line, text in hits:
        if path != current:
            current = path
            out.append(f"{path}:")
        label = _enclosing(root, path, line, syms_cache)
        out.append(f"  {line} ({label}): {text}" if label else f"  {line}: {text}")
    out.append("")
    nfiles = len(files_with)
    line = (f"{total:,} {'match' if total == 1 else 'matches'} in {nfiles:,} "
            f"{'file' if nfiles == 1 else 'files'}")
    if total > len(hits):
        shown_files = len({p for p, _, _ in hits})
        line += (f" (showing the first {len(hits):,} in {shown_files:,} "
                 f"{'file' if shown_files == 1 else 'files'}: raise limit, or narrow "
                 "the pattern or the files with only)")
    if timed_out:
        line += f" (search stopped after {TIMEOUT_S:.0f}s; results are partial)"
    out.append(line)
    return cap("\n".join(out) + "\n", max_chars)


def _enclosing(root: Path, rel: str, line: int, cache: dict[str, list]) -> str | None:
    syms = cache.get(rel)
    if syms is None:
        syms = []
        path = root / rel
        try:
            if language_for(path) and path.stat().st_size <= MAX_OUTLINE_BYTES:
                syms = outline(path)[0]
        except (OSError, MossError, UnicodeDecodeError):
            syms = []
        cache[rel] = syms
    sym = innermost(syms, line)
    if sym is None:
        return None
    return f"{sym.path} {sym.lines}"

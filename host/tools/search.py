"""`search`: ripgrep over the project, each hit labelled with its enclosing symbol.

    src/workflow/llm.rs:
      12 (Provider/Anthropic L12): Anthropic,
      48 (Provider/default_model L45-62): Provider::Anthropic => "claude-sonnet-4-5",

    2 matches in 1 file

Files are searched the way `rg` would (hidden files included, .gitignore respected even
outside a git repository, .git skipped), grouped by path in sorted order. The pattern is
ripgrep's (Rust) regex syntax.

ripgrep walks and searches in parallel (its `--sort path` would make it single-threaded);
the hits are put in its sorted order here, keeping only what the first `limit` can need.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
from pathlib import Path
from typing import Iterator

from ..errors import MossError
from .caps import cap
from .resolve import RG_WALK_FLAGS, list_files, require_regular, rg_binary
from . import structcache
from .treesitter import around_lines, innermost, language_for, lite_entries, structure
from ..ui import visible_name

MAX_LINE_CHARS = 200            # a hit line longer than this is shown around the match
MAX_LINE_BYTES = 4096           # ripgrep prints at most this much of one matching line
WINDOW_BYTES = 1024             # a longer line is re-read from its file: this much of it
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
        if not (set(g) & _GLOB_CHARS):  # a plain name: a pipe or device is never searched
            require_regular(root / g.rstrip("/"), g, "search reads regular files only "
                            "(ripgrep skips pipes, sockets and devices)")
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


def _rg_reason(stderr: str) -> str:
    """ripgrep's complaint about a pattern, as one line about the pattern the user wrote. A
    parse error quotes ripgrep's own wrapping of it (`(?:foo()`) with a caret under that, and
    ends with the reason (`error: unclosed group`): the reason is what is kept."""
    detail = stderr[4:] if stderr.startswith("rg: ") else stderr
    if "regex parse error" in detail:
        reasons = [ln[len("error: "):].strip() for ln in detail.splitlines() if ln.startswith("error: ")]
        if reasons:
            return f"{reasons[-1]} (a regex: put \\ before ( [ {{ . * + ? | to match them as text)"
    return " ".join(detail.split()) or "ripgrep failed"


def search(root: Path, pattern: str, *, only: list[str] | None = None, limit: int = 100,
           ignore_case: bool = False, max_chars: int = 20000, keep: bool = True,
           compact: bool = False) -> str:
    """Search the project for `pattern` (a regex) and return hits grouped by file.

    `only` restricts the files searched to globs (`*.rs`, `src/**`, a directory, or
    `!tests/**` to exclude). At most `limit` hits are shown; the total line says how
    many there were. A bad regex raises MossError(kind="usage"); no match at all returns
    "No matches for <pattern>".

    Memory stays bounded whatever the files hold: ripgrep prints at most MAX_LINE_BYTES
    of a matching line, a longer line is re-read from its file as a WINDOW_BYTES piece
    around the match, and only the first `limit` hits are kept; the rest are counted.

    `keep`: extract and cache the symbols of each file with a shown hit (what a session
    wants: the next search or view of those files costs no parse). A one-shot caller
    passes False: only the shown lines' symbols are then looked for, which is cheaper
    once. The output is the same either way.

    `compact`: the form an agent's context gets. A label names the enclosing symbol without
    its line range, a hit in the same symbol as the one above says `(same)`, and a file
    shows at most COMPACT_PER_FILE hits, then how many more and the search that lists them
    (that file only, in the full form).
    """
    root = Path(root).resolve()
    if not root.is_dir():
        raise MossError(f"project root {root} is not a directory", kind="not_found")
    if not pattern:
        raise MossError("search needs a pattern", kind="usage")
    if isinstance(only, str):
        only = [only]
    limit = max(1, int(limit))
    try:
        glob_args, recheck = _only_args(root, only or [])
    except OSError as e:  # a glob the OS refuses as a name (too long)
        names = ", ".join(g if len(g) <= 60 else g[:59] + "…" for g in only or [])
        raise MossError(f"cannot search only {names}: {e.strerror or e}", kind="usage") from None
    # Plain lines (not --json, whose match messages repeat every submatch of a line and
    # cannot be capped): path NUL line:column:byte-offset:text, long lines omitted.
    cmd = [rg_binary(), "--no-config", "--no-heading", "--with-filename", "--line-number",
           "--column", "--byte-offset", "--null", "--color", "never",
           "--max-columns", str(MAX_LINE_BYTES), *RG_WALK_FLAGS, *glob_args]
    if ignore_case:
        cmd.append("--ignore-case")
    cmd += ["-e", pattern, "--", "."]

    proc = subprocess.Popen(cmd, cwd=root, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stderr is not None  # stderr=PIPE
    errors = proc.stderr
    killed = threading.Event()

    def kill() -> None:
        killed.set()
        proc.kill()

    timer = threading.Timer(TIMEOUT_S, kill)
    timer.start()
    errbuf: list[bytes] = []

    def drain_stderr() -> None:
        """Keep the start of ripgrep's messages (a regex error); read and drop the rest."""
        kept = 0
        for chunk in iter(lambda: errors.read(65536), b""):
            if kept < 64_000:
                errbuf.append(chunk)
                kept += len(chunk)

    err_thread = threading.Thread(target=drain_stderr, daemon=True)
    err_thread.start()
    allowed: set[str] | None = set(list_files(root)) if recheck else None
    first = _First(limit)
    total = 0
    files_with: set[str] = set()
    try:
        prev, path, skip = None, "", False
        match = _HIT.match
        for raw in _records(proc.stdout):
            name, nul, rest = raw.partition(b"\0")
            if not nul:
                continue  # a warning such as "binary file matches"
            if name != prev:  # a file's hits come together: its name is decoded once
                prev, path = name, _path_name(name)
                skip = allowed is not None and path not in allowed
            if skip:
                continue
            m = match(rest)
            if m is None:
                continue
            total += 1
            files_with.add(path)
            first.add(path, m)
        proc.wait()
    finally:
        timer.cancel()
        timer.join()  # gone, not only told to stop: workers are forked only with no other thread
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        err_thread.join(timeout=5)
    stderr = b"".join(errbuf).decode("utf-8", "replace").strip()
    timed_out = killed.is_set()
    if proc.returncode == 2 and not total and stderr:
        raise MossError(f"bad search pattern {pattern!r}: {_rg_reason(stderr)}", kind="usage")
    if not total:
        where = f" in {', '.join(only)}" if only else ""
        note = " (search timed out)" if timed_out else ""
        return f"No matches for {pattern}{where}{note}\n"

    hits: list[tuple[str, int, str]] = []
    line_starts: dict[str, list[int]] = {}
    for path, line_no, column, offset, text in first.hits():
        if _OMITTED.match(text):
            shown = _window(root, path, offset, column)
        else:
            shown = _trim(text.decode("utf-8", "replace"), column - 1)
        hits.append((path, line_no, shown))
        line_starts.setdefault(path, []).append(offset)
    out: list[str] = []
    current = None
    find = _no_symbol
    labels_of = _labeller(root, line_starts, keep)
    if compact:
        out = _compact_hits(hits, pattern, ignore_case, labels_of)
    for path, line, text in [] if compact else hits:
        if path != current:
            current = path
            out.append(f"{_shown_path(path)}:")
            find = labels_of(path)
        sym = find(line)
        out.append(f"  {line} ({sym[1]} {sym[2]}): {text}" if sym else f"  {line}: {text}")
    out.append("")
    nfiles = len(files_with)
    summary = (f"{total:,} {'match' if total == 1 else 'matches'} in {nfiles:,} "
               f"{'file' if nfiles == 1 else 'files'}")
    if total > len(hits):
        shown_files = len({p for p, _, _ in hits})
        summary += (f" (showing the first {len(hits):,} in {shown_files:,} "
                    f"{'file' if shown_files == 1 else 'files'}: raise limit, or narrow "
                    "the pattern or the files with only)")
    if timed_out:
        summary += f" (search stopped after {TIMEOUT_S:.0f}s; results are partial)"
    out.append(summary)
    return cap("\n".join(out) + "\n", max_chars)


COMPACT_PER_FILE = 8   # hits a file shows in the compact form before "… N more"


def _quoted(word: str) -> str:
    """`word` as one word of a moss command (lib/machine/parser.lua: no escapes inside single
    quotes; `\\` and `\"` inside double quotes)."""
    if "'" not in word:
        return f"'{word}'"
    return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _compact_hits(hits: list[tuple[str, int, str]], pattern: str, ignore_case: bool,
                  labels_of) -> list[str]:
    """The compact form of the hit lines (see `search`)."""
    out: list[str] = []
    per_file: dict[str, int] = {}
    for path, _, _ in hits:
        per_file[path] = per_file.get(path, 0) + 1
    current, find, prev, shown = None, _no_symbol, None, 0
    for path, line, text in hits:
        if path != current:
            if current is not None and per_file[current] > shown:
                _more(out, per_file[current] - shown, current, pattern, ignore_case)
            current, prev, shown = path, None, 0
            out.append(f"{_shown_path(path)}:")
            find = labels_of(path)
        if shown >= COMPACT_PER_FILE:
            continue
        shown += 1
        sym = find(line)
        label = None if sym is None else ("same" if prev is not None and sym[0] is prev else sym[1])
        prev = None if sym is None else sym[0]
        out.append(f"  {line} ({label}): {text}" if label else f"  {line}: {text}")
    if current is not None and per_file[current] > shown:
        _more(out, per_file[current] - shown, current, pattern, ignore_case)
    return out


def _more(out: list[str], n: int, path: str, pattern: str, ignore_case: bool) -> None:
    flag = " -i" if ignore_case else ""
    out.append(f"  … {n} more here: text-search {_quoted(pattern)} --only {_quoted(path)}{flag} --full")


def _path_key(path: str) -> tuple[bytes, ...]:
    """ripgrep's `--sort path` order: directory by directory, names compared as bytes."""
    return tuple(path.encode("utf-8", "surrogateescape").split(b"/"))


class _First:
    """The first `limit` hits in ripgrep's sorted order, from hits arriving file by file in
    any order (a file's own hits come in line order). Memory stays bounded: once the files
    kept hold more than twice `limit` hits, those past the first `limit` are dropped, and
    so is any later file that sorts after them."""

    def __init__(self, limit: int):
        self.limit = limit
        self.files: dict[str, list] = {}
        self.kept = 0
        self.cutoff: tuple[bytes, ...] | None = None  # files sorting after this are not needed
        self.keys: dict[str, tuple[bytes, ...]] = {}
        self.last_dropped: str | None = None  # a file sorting after the cutoff, seen last

    def add(self, path: str, m: re.Match) -> None:
        """Keep the hit `m` (`_HIT`'s match of a ripgrep line) in `path` if the first
        `limit` can need it."""
        got = self.files.get(path)
        if got is None:
            if path == self.last_dropped:
                return
            key = _path_key(path)
            if self.cutoff is not None and key > self.cutoff:
                self.last_dropped = path
                return
            got = self.files[path] = []
            self.keys[path] = key
        if len(got) < self.limit:
            got.append((path, int(m[1]), int(m[2]), int(m[3]), m[4]))
            self.kept += 1
            if self.kept > 2 * self.limit:
                self._prune()

    def _prune(self) -> None:
        order = sorted(self.files, key=self.keys.__getitem__)
        n = 0
        for i, path in enumerate(order):
            n += len(self.files[path])
            if n >= self.limit:
                self.cutoff = self.keys[path]
                for gone in order[i + 1:]:
                    self.kept -= len(self.files.pop(gone))
                    del self.keys[gone]
                return

    def hits(self) -> list[tuple]:
        out: list[tuple] = []
        for path in sorted(self.files, key=self.keys.__getitem__):
            out.extend(self.files[path][: self.limit - len(out)])
            if len(out) >= self.limit:
                break
        return out


_OMITTED = re.compile(rb"\[Omitted long line with \d+ match(?:es)?\]\r?\n?\Z")
_HIT = re.compile(rb"(\d+):(\d+):(\d+):(.*)\Z", re.S)


def _records(stream) -> Iterator[bytes]:
    """ripgrep's output lines, `path NUL line:column:offset:text`, where the path may hold a
    newline: a record ends at the first newline after its NUL, not at the first newline."""
    pending = b""
    for chunk in iter(lambda: stream.read1(65536), b""):
        pending += chunk
        start = 0
        while True:
            nul = pending.find(b"\0", start)
            end = pending.find(b"\n", nul + 1) if nul != -1 else -1
            if end == -1:
                break
            yield pending[start:end + 1]
            start = end + 1
        pending = pending[start:]
    if pending:
        yield pending


def _path_name(path: bytes) -> str:
    """A path as ripgrep printed it, spelled as list_files spells it."""
    name = path.decode("utf-8", "surrogateescape")
    name = name[2:] if name.startswith("./") else name
    return name.replace(os.sep, "/")


def _shown_path(path: str) -> str:
    return visible_name(path)  # one line whatever the name holds (a newline, ESC, U+202E)


def _window(root: Path, rel: str, offset: int, column: int) -> str:
    """A line too long for ripgrep to print: WINDOW_BYTES of it around the match, read
    from the file itself (so a 5 MB line costs a small read, not 5 MB of output)."""
    at = offset + max(column - 1, 0)
    begin = max(offset, at - WINDOW_BYTES // 3)
    try:
        with open(root / rel, "rb") as f:
            f.seek(begin)
            data = f.read(WINDOW_BYTES)
    except OSError:
        return "[a long line; it could not be read again]"
    cut = data.find(b"\n")
    ends = cut != -1
    if ends:
        data = data[:cut]
    text = data.decode("utf-8", "ignore")  # a window may split a character at either end
    piece = _trim(text, at - begin)
    if begin > offset and not piece.startswith("…"):
        piece = "…" + piece.lstrip()
    if not ends and not piece.endswith("…"):
        piece += "…"
    return piece


def _no_symbol(line: int) -> None:
    return None


def _labeller(root: Path, line_starts: dict[str, list[int]], keep: bool):
    """A function from a file (as ripgrep names it) to its label finder: line -> (the
    enclosing symbol, as an object that is the same for two lines in the same symbol, its
    qualified name, its lines `L12-40`) or None.

    A one-shot search (`keep` False) with the structure cache on reads every hit file's
    structure from the cache in one query and parses the rest together (in worker
    processes when there are many), storing them for the next process; nothing is built
    beyond the stored tuples. Otherwise each file's Symbols come from `_symbols_for`."""
    if not keep and structcache.cache_path() is not None:
        paths = {}
        for rel in line_starts:
            path = root / rel
            try:
                if path.stat().st_size <= MAX_OUTLINE_BYTES:
                    paths[rel] = path
            except OSError:
                pass
        try:
            raw = lite_entries(list(paths.values()), workers=True)
        except (MossError, UnicodeDecodeError):
            raw = {}

        def from_raw(rel: str):
            tops = raw.get(paths.get(rel))  # type: ignore[arg-type]
            return (lambda line: _raw_innermost(tops, line)) if tops else _no_symbol
        return from_raw

    def from_symbols(rel: str):
        syms = _symbols_for(root, rel, line_starts[rel], keep)
        if not syms:
            return _no_symbol

        def find(line: int):
            sym = innermost(syms, line)
            return None if sym is None else (sym, sym.path, sym.lines)
        return find
    return from_symbols


def _raw_innermost(tops: tuple, line: int):
    """`innermost` over symbols as the structure cache stores them (see lite_entries):
    (the symbol's tuple, its qualified name, its lines) or None."""
    best, level = None, tops
    names: list[str] = []
    try:
        while True:
            for s in level:
                start = s[3]
                if min(start, s[8] or start) <= line <= s[4]:
                    if not names and s[10]:
                        names.append(s[10])  # the container a flat definition belongs to
                    names.append(s[0])
                    best = s
                    level = s[11]
                    break
            else:
                break
    except (TypeError, IndexError):  # a shape no extractor makes: no label
        return None
    if best is None:
        return None
    a, b = best[3], best[4]
    return best, "/".join(names), (f"L{a}" if a == b else f"L{a}-{b}")


def _symbols_for(root: Path, rel: str, line_starts: list[int], keep: bool) -> list:
    """Symbols of a file enough to label the hits on the lines starting at `line_starts`
    (names and lines only: a label shows no signature)."""
    path = root / rel
    try:
        if language_for(path) and path.stat().st_size <= MAX_OUTLINE_BYTES:
            return structure(path) if keep else around_lines(path, line_starts)
    except (OSError, MossError, UnicodeDecodeError):
        pass
    return []

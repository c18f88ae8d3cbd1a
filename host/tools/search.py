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
import select
import time
from collections.abc import Callable
from pathlib import Path

try:  # the signal numbers without `signal`, whose enums cost a command 0.7 ms to build
    from _signal import SIGKILL, SIGPIPE, SIGXFSZ  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - another Python
    from signal import SIGKILL, SIGPIPE, SIGXFSZ

from ..errors import MossError
from .resolve import RG_WALK_FLAGS, list_files, require_regular, rg_binary

MAX_LINE_CHARS = 200            # a hit line longer than this is shown around the match
MAX_LINE_BYTES = 4096           # ripgrep prints at most this much of one matching line
WINDOW_BYTES = 1024             # a longer line is re-read from its file: this much of it
MAX_OUTLINE_BYTES = 2_000_000   # no enclosing symbol for larger files
TIMEOUT_S = 60.0
PAUSE_S = 0.002                 # the longest wait for ripgrep's output to gather (see _read_rg)
_READ = 65536                   # a pipe's size: one read takes all that can be there
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
    cmd, recheck = _rg_command(root, pattern, only or [], ignore_case)
    proc = _Rg(cmd, root)
    done = False
    try:
        _labelling()  # imported while ripgrep searches
        allowed: set[str] | None = set(list_files(root)) if recheck else None
        total, files_with, first, stderr, timed_out = _read_rg(proc, os.fsencode(root), allowed, limit)
        done = True
    finally:
        proc.close()
        if not done:  # interrupted: ripgrep is not left running
            proc.kill()
        proc.wait()
    if proc.returncode == 2 and not total and stderr:
        raise MossError(f"bad search pattern {pattern!r}: {_rg_reason(stderr)}", kind="usage")
    if not total:
        where = f" in {', '.join(only)}" if only else ""
        note = " (search timed out)" if timed_out else ""
        return f"No matches for {pattern}{where}{note}\n"

    hits, line_starts = _shown_hits(root, first)
    labels_of = _labeller(root, line_starts, keep)
    out = _compact_hits(hits, pattern, ignore_case, labels_of) if compact else _full_hits(hits, labels_of)
    out.append("")
    out.append(_summary(total, len(files_with), hits, timed_out))
    text = "\n".join(out) + "\n"
    if max_chars and 0 < max_chars < len(text):
        from .caps import cap

        text = cap(text, max_chars)
    return text


def _rg_command(root: Path, pattern: str, only: list[str], ignore_case: bool) -> tuple[list[str], bool]:
    """ripgrep's command line, and whether its hits must be checked against the project's files
    (a glob `only` cannot say to ripgrep alone: _only_args)."""
    try:
        glob_args, recheck = _only_args(root, only)
    except OSError as e:  # a glob the OS refuses as a name (too long)
        names = ", ".join(g if len(g) <= 60 else g[:59] + "…" for g in only)
        raise MossError(f"cannot search only {names}: {e.strerror or e}", kind="usage") from None
    # Plain lines (not --json, whose match messages repeat every submatch of a line and
    # cannot be capped): path NUL line:column:byte-offset:text, long lines omitted.
    cmd = [rg_binary(), "--no-config", "--no-heading", "--with-filename", "--line-number",
           "--column", "--byte-offset", "--null", "--color", "never",
           "--max-columns", str(MAX_LINE_BYTES), *RG_WALK_FLAGS, *glob_args]
    if ignore_case:
        cmd.append("--ignore-case")
    return cmd + ["-e", pattern, "--", "."], recheck


def _shown_hits(root: Path, first: _First) -> tuple[list[tuple[str, int, str]], dict[str, list[int]]]:
    """The hits shown, (path, line, text) with a long line's window around its match, and each
    file's hit lines' byte offsets (for their symbols)."""
    hits: list[tuple[str, int, str]] = []
    line_starts: dict[str, list[int]] = {}
    for path, line_no, column, offset, text in first.hits():
        if _OMITTED.match(text):
            shown = _window(root, path, offset, column)
        else:
            shown = _trim(text.decode("utf-8", "replace"), column - 1)
        hits.append((path, line_no, shown))
        line_starts.setdefault(path, []).append(offset)
    return hits, line_starts


def _full_hits(hits: list[tuple[str, int, str]], labels_of) -> list[str]:
    """Each file's name, then its hits, each labelled with its enclosing symbol and its lines."""
    out: list[str] = []
    current = None
    find = _no_symbol
    for path, line, text in hits:
        if path != current:
            current = path
            out.append(f"{_shown_path(path)}:")
            find = labels_of(path)
        sym = find(line)
        out.append(f"  {line} ({sym[1]} {sym[2]}): {text}" if sym else f"  {line}: {text}")
    return out


def _summary(total: int, nfiles: int, hits: list[tuple[str, int, str]], timed_out: bool) -> str:
    summary = (f"{total:,} {'match' if total == 1 else 'matches'} in {nfiles:,} "
               f"{'file' if nfiles == 1 else 'files'}")
    if total > len(hits):
        shown_files = len({p for p, _, _ in hits})
        summary += (f" (showing the first {len(hits):,} in {shown_files:,} "
                    f"{'file' if shown_files == 1 else 'files'}: raise limit, or narrow "
                    "the pattern or the files with only)")
    if timed_out:
        summary += f" (search stopped after {TIMEOUT_S:.0f}s; results are partial)"
    return summary


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
        """Keep the hit `m` (`_RECORD`'s match of a ripgrep line) in `path` if the first
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
            got.append((path, int(m[2]), int(m[3]), int(m[4]), m[5]))
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
# One line of ripgrep's output: path NUL line:column:byte-offset:text. A path may hold a
# newline: its first part is then left between two matches (see _name_start).
_RECORD = re.compile(rb"([^\0\n]*)\0(\d+):(\d+):(\d+):([^\n]*)\n")


class _Rg:
    """ripgrep running in `root`, its output and its messages each on a pipe.

    Started with os.posix_spawn when this process is already in `root` (the usual case: no
    `subprocess` to import, no fork of this process); else with subprocess, which can set
    the working directory ripgrep's paths and globs are relative to. Either way stdin is
    /dev/null and the signals Python ignores (SIGPIPE, SIGXFSZ) are ripgrep's defaults
    again, as subprocess does."""

    def __init__(self, cmd: list[str], root: Path):
        self.returncode: int | None = None
        self._popen = None
        self.out_fd, out_w = os.pipe()
        try:
            self.err_fd, err_w = os.pipe()
        except BaseException:
            os.close(self.out_fd)
            os.close(out_w)
            raise
        try:
            # (a pipe end at 0-2, when this process was started with one of those closed,
            # would not lose close-on-exec by being dup'ed onto itself: subprocess handles that)
            if min(out_w, err_w) > 2 and _is_cwd(root):
                self.pid = os.posix_spawn(cmd[0], cmd, os.environ, file_actions=[
                    (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                    (os.POSIX_SPAWN_DUP2, out_w, 1), (os.POSIX_SPAWN_DUP2, err_w, 2)],
                    setsigdef=(SIGPIPE, SIGXFSZ))
            else:
                import subprocess

                self._popen = subprocess.Popen(cmd, cwd=root, stdin=subprocess.DEVNULL,
                                               stdout=out_w, stderr=err_w)
                self.pid = self._popen.pid
        except BaseException:
            os.close(self.out_fd)
            os.close(self.err_fd)
            raise
        finally:
            os.close(out_w)
            os.close(err_w)
        try:  # readable once ripgrep has ended (Linux 5.3 and later)
            self.ended_fd: int | None = os.pidfd_open(self.pid)
        except (AttributeError, OSError):
            self.ended_fd = None

    def close(self) -> None:
        """Close this side of the pipes (ripgrep, if still writing, then stops)."""
        for fd in (self.out_fd, self.err_fd, self.ended_fd):
            if fd is not None:
                os.close(fd)

    def kill(self) -> None:
        if self.returncode is None:  # not yet waited for: the pid is still ripgrep's
            if self._popen is not None:
                self._popen.kill()
            else:
                os.kill(self.pid, SIGKILL)

    def wait(self) -> int:
        if self.returncode is None:
            if self._popen is not None:
                self.returncode = self._popen.wait()
            else:
                self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
        return self.returncode


def _is_cwd(root: Path) -> bool:
    try:
        here, there = os.stat("."), os.stat(root)
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def _read_rg(proc: _Rg, root: bytes, allowed: set[str] | None, limit: int):
    """Read ripgrep's output and its messages until it ends, killing it after TIMEOUT_S:
    (matching lines, files with one, the first `limit` hits (_First), the start of its
    messages, whether it was stopped). One thread: both pipes are polled."""
    records = _Records(root, allowed, limit)
    stderr, timed_out = _pump_rg(proc, records.feed)
    records.finish()
    return records.total, records.files_with, records.first, stderr, timed_out


class _Records:
    """ripgrep's output parsed as it comes: each record counted, its file noted, the first
    `limit` kept (_First); a hit outside `allowed` (when given) is not counted."""

    def __init__(self, root: bytes, allowed: set[str] | None, limit: int):
        self.root = root
        self.allowed = allowed
        self.first = _First(limit)
        self.files_with: set[str] = set()
        self.total = 0
        self.pending = b""   # an unfinished last record
        self.prev: bytes | None = None
        self.path, self.skip = "", False

    def feed(self, data: bytes) -> None:
        buf = self.pending + data if self.pending else data
        self.pending = buf[self._take(buf):]

    def finish(self) -> None:
        if self.pending:  # a last line without its newline (ripgrep stopped)
            self._take(self.pending + b"\n")
            self.pending = b""

    def _take(self, buf: bytes) -> int:
        """Take the whole records in `buf`; returns where the unfinished rest begins."""
        # the parse state in locals for the loop (it runs once per matching line)
        prev, path, skip, total = self.prev, self.path, self.skip, self.total
        allowed, root, files_with, add = self.allowed, self.root, self.files_with, self.first.add
        pos = 0
        for m in _RECORD.finditer(buf):
            name = m[1]
            at = m.start()
            if at != pos:
                name = _name_start(buf[pos:at], prev, name, root) + name
            pos = m.end()
            if name != prev:  # a file's hits come together: its name is decoded once
                prev, path = name, _path_name(name)
                skip = allowed is not None and path not in allowed
                if not skip:
                    files_with.add(path)
            if skip:
                continue
            total += 1
            add(path, m)
        self.prev, self.path, self.skip, self.total = prev, path, skip, total
        return pos


def _pump_rg(proc: _Rg, feed: Callable[[bytes], None]) -> tuple[str, bool]:
    """Read ripgrep's two pipes until both close, its output to `feed`, and kill it after
    TIMEOUT_S: (the start of its messages, whether it was stopped)."""
    out_fd, err_fd = proc.out_fd, proc.err_fd
    poller = select.poll()
    for fd in (out_fd, err_fd):
        poller.register(fd, select.POLLIN)
    open_fds = 2
    deadline: float | None = time.monotonic() + TIMEOUT_S
    timed_out = False
    errbuf: list[bytes] = []
    kept_err = 0
    # ripgrep writes a file's lines as it finishes the file: waking for each write would cost
    # this process more CPU than parsing them (and take it from ripgrep's threads). After a
    # small read it waits until ripgrep ends or PAUSE_S passed, whichever comes first, so
    # its output gathers in the pipe (a pipe holds 64 KB; a full read does not wait).
    ended = None
    if proc.ended_fd is not None:
        ended = select.poll()
        ended.register(proc.ended_fd, select.POLLIN)
    while open_fds:
        wait = None
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0:
                timed_out, deadline = True, None
                proc.kill()  # what it printed until now is still read, to the end of the pipes
                continue
        got = 0
        for fd, _ in poller.poll(None if wait is None else wait * 1000 + 1):
            data = os.read(fd, _READ)
            got = max(got, len(data))
            if not data:
                poller.unregister(fd)
                open_fds -= 1
            elif fd == out_fd:
                feed(data)
            elif kept_err < 64_000:  # the start of its messages (a regex error); the rest dropped
                errbuf.append(data)
                kept_err += len(data)
        if ended is not None and open_fds and 0 < got < _READ // 4:
            pause = PAUSE_S if wait is None else min(PAUSE_S, wait)
            if ended.poll(pause * 1000):
                ended = None  # ripgrep has ended: what is left in the pipes is read at once
    return b"".join(errbuf).decode("utf-8", "replace").strip(), timed_out


def _name_start(between: bytes, prev: bytes | None, rest: bytes, root: bytes) -> bytes:
    """What stands between two records of ripgrep's output (the next one's name ending in
    `rest`): the first lines of that name when it holds a newline, after any line that is
    no record. ripgrep's "PREV: WARNING: stopped searching binary file after match" about
    the file before is not part of the next name, unless a file of that whole name exists
    (a name made to look like the warning is shown as the name it is)."""
    nul = between.rfind(b"\0")
    if nul != -1:  # a line holding a NUL but not a record: it and all before it are not a name
        cut = between.find(b"\n", nul)
        between = between[cut + 1:] if cut != -1 else b""
    if prev is not None:
        warning = prev + b": WARNING: "
        while between.startswith(warning):
            cut = between.find(b"\n", len(warning))
            if cut == -1 or os.path.lexists(os.path.join(root, between + rest)):
                break
            between = between[cut + 1:]
    return between


def _path_name(path: bytes) -> str:
    """A path as ripgrep printed it, spelled as list_files spells it."""
    name = path.decode("utf-8", "surrogateescape")
    name = name[2:] if name.startswith("./") else name
    return name.replace(os.sep, "/")


def _labelling() -> None:
    """Import what labels the hits (the first time in a process: a few ms) and open the
    structure cache, while ripgrep searches: none of it is needed to start ripgrep."""
    from . import structcache, treesitter  # noqa: F401

    structcache.open_cache()


def _shown_path(path: str) -> str:
    """The path as one line whatever the name holds (a newline, ESC, U+202E): ui.visible_name.
    A name of printable ASCII has nothing to escape there, and is shown without importing ui
    (whose patterns take a command about 1 ms to compile)."""
    if path.isascii() and path.isprintable():
        return path
    from ..ui import visible_name

    return visible_name(path)


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
    from . import structcache
    from .treesitter import innermost, lite_entries

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
    from .treesitter import around_lines, language_for, structure

    path = root / rel
    try:
        if language_for(path) and path.stat().st_size <= MAX_OUTLINE_BYTES:
            return structure(path) if keep else around_lines(path, line_starts)
    except (OSError, MossError, UnicodeDecodeError):
        pass
    return []

"""What text search needs to label its hits: the symbols around some lines of one file
(`around_lines`), and the lite structure of many files at once (`lite_entries`, parsed in
forked workers when they are many).
"""

from __future__ import annotations

import marshal
import os
import threading
from pathlib import Path

from ...errors import MossError
from .. import structcache
from ..symbols import Symbol
from . import grammars
from .cache import lite_lookup, structure
from .common import Ctx
from .extract import LEADING_LANGS, build, extract_file
from .languages import LANGUAGES, language_for, query


# ------------------------------------------------------------ many files, for search labels

_FORK_BYTES = 128 * 1024   # parse in worker processes only when the files to parse hold this much
_WORKER_BYTES = 64 * 1024  # ... and at most one worker per this much
_MAX_WORKERS = 8


def lite_entries(paths: list[Path], workers: bool = False) -> dict[Path, tuple]:
    """The lite structure of each file, as the structure cache stores it: a tuple of
    symbol tuples (structcache's encoding: name, kind, signature, start line, end line,
    start byte, end byte, doc, doc start line, doc start byte, container, children), for
    labelling search hits without building Symbols. Entries already on disk are read in
    one query; the other files are parsed and all their entries stored in one
    transaction. With `workers`, in a process running no other thread, many files are
    parsed in forked worker processes at once (py-tree-sitter holds the GIL while it
    parses, so threads would not help). A file of no known language, whose grammar is not
    installed, or that cannot be read, is left out. Nothing is kept in memory (a one-shot
    search)."""
    todo = []
    for path in paths:
        lang = language_for(path)
        if lang is None:
            continue
        try:
            src = path.read_bytes()
        except OSError:
            continue
        chash = structcache.content_hash(src)
        todo.append((path, lang, src, chash, structcache.content_key(chash, lang, LANGUAGES[lang].module)))
    got = structcache.get_many([(t[4], t[3]) for t in todo], lite_ok=True)
    out: dict[Path, tuple] = {}
    misses = []
    for t in todo:
        hit = got.get(t[4])
        if hit is not None:
            out[t[0]] = hit[0]
        else:
            misses.append(t)
    usable = set()
    for lang in {t[1] for t in misses}:
        try:
            grammars.language(lang)  # a grammar package that is not installed: those files get no labels
            usable.add(lang)
        except MossError:
            pass
    misses = [t for t in misses if t[1] in usable]
    if not misses:
        return out
    made = _entries(misses, workers)
    for t, (raw, _) in zip(misses, made):
        out[t[0]] = raw
    structcache.put_many([(t[4], t[3], data, True) for t, (_, data) in zip(misses, made)])
    return out


def _entry(src: bytes, lang: str, chash: bytes) -> tuple[tuple, bytes]:
    """(symbol tuples, encoded cache entry) of one file's lite structure."""
    syms, _ = extract_file(src, lang, lite=True)
    raw = tuple(structcache.encode_symbol(s) for s in syms)
    return raw, structcache.encode_raw(raw, None, True, chash)


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _entries(jobs: list[tuple], workers: bool) -> list[tuple[tuple, bytes]]:
    """`_entry` of each job (path, lang, src, chash, key), in order; in forked workers
    when `workers` allows it and the work is large enough to gain from it."""
    total = sum(len(j[2]) for j in jobs)
    n = min(_cpus(), _MAX_WORKERS, len(jobs), 1 + total // _WORKER_BYTES)
    if not (workers and n > 1 and total >= _FORK_BYTES and hasattr(os, "fork")
            and threading.active_count() == 1):
        return [_entry(j[2], j[1], j[3]) for j in jobs]
    for lang in {j[1] for j in jobs}:  # load grammars and queries once, before forking
        query(lang)
        grammars.parser(lang)
    bins = _balanced(jobs, n)
    children = [_fork_worker(jobs, part) for part in bins[1:]]
    out: list = [None] * len(jobs)
    for i in bins[0]:
        out[i] = _entry(jobs[i][2], jobs[i][1], jobs[i][3])
    for pid, r in children:
        for i, data in _worker_entries(pid, r, len(jobs)):
            got = structcache.decode_raw(data, jobs[i][3])
            if got is not None:
                out[i] = (got[0], data)
    for i, o in enumerate(out):  # a worker that failed: its files, here
        if o is None:
            out[i] = _entry(jobs[i][2], jobs[i][1], jobs[i][3])
    return out


def _balanced(jobs: list[tuple], n: int) -> list[list[int]]:
    """The jobs' indexes in `n` bins of about equal source bytes, largest first."""
    bins: list[list[int]] = [[] for _ in range(n)]
    loads = [0] * n
    for i in sorted(range(len(jobs)), key=lambda i: -len(jobs[i][2])):
        k = loads.index(min(loads))
        bins[k].append(i)
        loads[k] += len(jobs[i][2])
    return bins


def _fork_worker(jobs: list[tuple], part: list[int]) -> tuple[int, int]:
    """(pid, read end) of a forked worker that parses `part` and sends (index, entry) pairs."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the worker: parse its part, send the entries, leave without cleanup
        code = 1
        try:
            os.close(r)
            data = marshal.dumps([(i, _entry(jobs[i][2], jobs[i][1], jobs[i][3])[1]) for i in part])
            view = memoryview(data)
            while view:
                view = view[os.write(w, view):]
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    return pid, r


def _worker_entries(pid: int, r: int, count: int) -> list[tuple[int, bytes]]:
    """What a worker sent, once it has exited; nothing when it failed (its files are
    parsed in this process instead) or sent anything but (index, entry) pairs."""
    chunks = []
    try:
        while True:
            chunk = os.read(r, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(r)
        _, status = os.waitpid(pid, 0)
    if status != 0:
        return []
    try:
        sent = marshal.loads(b"".join(chunks))
    except (ValueError, EOFError, TypeError):
        return []
    return [(i, data) for i, data in (sent if type(sent) is list else ())
            if type(i) is int and 0 <= i < count]


def around_lines(path: Path, line_starts: list[int]) -> list[Symbol]:
    """Lite symbols enough for `innermost` at the lines beginning at the byte offsets
    `line_starts`: every symbol that shares a byte with one of those lines, with its
    ancestors (a symbol containing a line shares its bytes, and so do its ancestors). The
    symbol query then runs on those lines only, and nothing is cached: for a one-shot
    search, where this costs about the parse alone against half as much again for the
    whole structure. A cached outline is used when there is one; for languages whose
    symbols may start above their node (a doc comment above a Rust fn), the whole
    file's `structure`. With the structure cache on disk (structcache.py) the whole
    structure is always extracted and kept there: the next process reads it."""
    if structcache.cache_path() is not None:
        return structure(path)
    path, lang, key, stamp, syms = lite_lookup(path)
    if syms is not None:
        return syms
    if lang in LEADING_LANGS:
        return structure(path)
    import tree_sitter as ts
    src = path.read_bytes()
    tree = grammars.parse(src, lang)
    root = tree.root_node
    symbol_query = query(lang)
    spans = []
    for start in sorted(set(line_starts)):
        nl = src.find(b"\n", start)
        end = len(src) if nl == -1 else nl + 1
        spans.append((start, end))
        # A decorator line is in a Python symbol (its outer node) but not in the node the
        # query captures: look at the decorated definition too.
        line = src[start:end]
        first = start + len(line) - len(line.lstrip())  # indentation belongs to the block
        for node in (root.descendant_for_byte_range(start, max(start, end - 1)),
                     root.descendant_for_byte_range(first, first) if first < end else None):
            while node is not None:
                if node.type == "decorated_definition":
                    inner = node.child_by_field_name("definition")
                    if inner is not None:
                        spans.append((inner.start_byte, inner.start_byte + 1))
                node = node.parent
    captured = []
    for a, b in spans:
        cursor = ts.QueryCursor(symbol_query)
        cursor.set_byte_range(a, b)
        captured.extend(cursor.captures(root).get("s", []))
    captured.sort(key=lambda n: (n.start_byte, -n.end_byte))
    return build(captured, Ctx(src, lang, lite=True), None)

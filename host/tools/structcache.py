"""The structure cache: each parsed file's symbols, kept on disk between processes.

What search labels, `view FILE/Symbol` lookups and skeletons need from a file — its
symbols (names, kinds, nesting, lines, bytes and, for a full outline, signatures and doc
summaries) and its module doc — is stored here after the first parse, so the next
process that looks at the same bytes (another `moss text-search`, a new session, a child
agent) reads them instead of parsing again.

- Where: `$XDG_CACHE_HOME/moss/structure.sqlite3` (default `~/.cache/moss/`), or
  `$MOSS_STRUCTURE_CACHE` (a file path; `off` disables the cache). Never inside a
  repository: nothing a repository ships is ever read as a cache entry.
- Key: a hash of the file's bytes, its language and the extractor's version (moss's
  version, this extractor's source and the grammar's files), so an entry can only be
  served for exactly the bytes it was made from by exactly this extractor. The row also
  holds the content hash, checked again on every read.
- Bound: `$MOSS_STRUCTURE_CACHE_MB` megabytes of entries (default 64); past it the least
  recently used entries are dropped (down to 80%).
- Concurrency: sqlite in WAL mode; each write (one search's entries together) is one
  transaction, a busy database is waited on briefly and then skipped (a cache write is
  never needed). Nothing waits for the disk (synchronous=OFF): it is a cache.
- Damage: an entry that does not decode is ignored (and replaced by the next store); a
  database file that is not one, or that sqlite finds malformed, is moved aside and made
  again; any other failure turns the cache off for this process. Nothing here raises into
  a search or a view.
- Clear: `moss cache clear`, or delete the file.
"""

from __future__ import annotations

try:  # hashlib's own BLAKE2, without hashlib: importing it loads OpenSSL (2-3 ms a command)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - a Python built without it
    from hashlib import blake2b
import atexit
import importlib.util
import marshal
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from .symbols import Symbol

DEFAULT_MB = 64
FORMAT = 2            # the entry encoding below; bump when it changes (2: BLAKE2b sums)
_TOUCH_EVERY_S = 3600  # a hit refreshes its entry's last use at most this often


def cache_path(env=os.environ) -> Path | None:
    """The cache file, or None when the cache is off."""
    override = env.get("MOSS_STRUCTURE_CACHE")
    if override:
        return None if override.strip().lower() in ("off", "0", "none") else Path(override)
    home = env.get("HOME") or os.path.expanduser("~")
    base = env.get("XDG_CACHE_HOME") or ""
    if not os.path.isabs(base):  # the XDG rule: a relative value is ignored
        base = os.path.join(home, ".cache")
    return Path(base) / "moss" / "structure.sqlite3"


def max_bytes(env=os.environ) -> int:
    raw = env.get("MOSS_STRUCTURE_CACHE_MB")
    try:
        mb = float(raw) if raw else DEFAULT_MB
    except ValueError:
        mb = DEFAULT_MB
    return max(0, int(mb * 1024 * 1024))


# ------------------------------------------------------------------------- versioning

_versions: dict[str, bytes] = {}
_vlock = threading.Lock()


def _extractor_version(lang: str, module: str) -> bytes:
    """moss's version, the extractor's source and the grammar package's files (names,
    sizes, mtimes): anything that can change what a parse yields changes the key."""
    with _vlock:
        v = _versions.get(lang)
    if v is not None:
        return v
    from .. import __version__
    h = blake2b(digest_size=16)
    h.update(f"{FORMAT}\0{__version__}\0{lang}\0".encode())
    here = Path(__file__).resolve().parent
    try:  # the extractor's code (the treesitter package and this module), as it is on disk
        names = sorted(f"treesitter/{e.name}" for e in os.scandir(here / "treesitter") if e.name.endswith(".py"))
    except OSError:
        names = []
        h.update(b"?")
    for name in [*names, "structcache.py"]:
        try:
            st = os.stat(here / name)
            h.update(f"{name}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
        except OSError:
            h.update(b"?")
    try:
        spec = importlib.util.find_spec(module)
        origin = spec.origin if spec is not None else None
        folder = Path(origin).parent if origin else None
        if folder is not None:
            for e in sorted(os.scandir(folder), key=lambda e: e.name):
                if e.is_file():
                    st = e.stat()
                    h.update(f"{e.name}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    except (ImportError, ValueError, OSError):
        h.update(b"no-grammar")
    v = h.digest()
    with _vlock:
        _versions[lang] = v
    return v


def content_key(chash: bytes, lang: str, module: str) -> bytes:
    """The entry key of bytes hashing to `chash` parsed as `lang` by this extractor."""
    return blake2b(chash, digest_size=20, key=_extractor_version(lang, module)).digest()


def content_hash(src: bytes) -> bytes:
    return blake2b(src, digest_size=32).digest()


# --------------------------------------------------------------------------- encoding
# An entry is a checksum (a 16-byte BLAKE2b of the rest) followed by a marshalled tuple: (FORMAT,
# content hash, lite, module doc, symbols), each symbol a 12-tuple ending with its
# children. The checksum is verified before anything is unmarshalled (marshal is not
# meant for damaged input), and the shape is checked while the symbols are rebuilt.

_SUM = 16


def encode_symbol(sym) -> tuple:
    return (sym.name, sym.kind, sym.signature, sym.start_line, sym.end_line, sym.start_byte,
            sym.end_byte, sym.doc, sym.doc_start_line, sym.doc_start_byte, sym.container,
            tuple(encode_symbol(c) for c in sym.children))


def encode(syms: list, doc: str | None, lite: bool, chash: bytes) -> bytes:
    return encode_raw(tuple(encode_symbol(s) for s in syms), doc, lite, chash)


def encode_raw(raw: tuple, doc: str | None, lite: bool, chash: bytes) -> bytes:
    """An entry from symbols already in their stored form (`encode_symbol`'s tuples)."""
    body = marshal.dumps((FORMAT, chash, lite, doc, raw))
    return blake2b(body, digest_size=_SUM).digest() + body


def _dec(raw: tuple, parent, Symbol) -> Any:
    if type(raw) is not tuple or len(raw) != 12:
        raise ValueError("not a symbol")
    sym = Symbol(*raw[:7], [], raw[7], parent, *raw[8:11])
    kids = raw[11]
    if kids:
        sym.children = [_dec(k, sym, Symbol) for k in kids]
    return sym


def decode_raw(data: bytes, chash: bytes) -> tuple[tuple, str | None, bool] | None:
    """(symbol tuples, module doc, lite) of an entry made from bytes hashing to `chash`,
    as stored: each symbol the 12-tuple `encode_symbol` makes. None for an entry that is damaged or
    was made from other bytes. The tuples' shape is checked by whoever walks them (`decode`
    rebuilds Symbols; search labels walk them as they are)."""
    try:
        if type(data) is not bytes or len(data) <= _SUM:
            return None
        body = data[_SUM:]
        if blake2b(body, digest_size=_SUM).digest() != data[:_SUM]:
            return None
        fmt, h, lite, doc, syms = marshal.loads(body)
        if fmt != FORMAT or h != chash or type(lite) is not bool or type(syms) is not tuple:
            return None
        if not (doc is None or type(doc) is str):
            return None
        return syms, doc, lite
    except (ValueError, TypeError, EOFError, RecursionError):
        return None


def decode(data: bytes, chash: bytes) -> tuple[list, str | None, bool] | None:
    """(symbols, module doc, lite) from an entry made from bytes hashing to `chash`; None
    for an entry that is damaged or was made from other bytes."""
    got = decode_raw(data, chash)
    if got is None:
        return None
    try:
        return [_dec(s, None, Symbol) for s in got[0]], got[1], got[2]
    except (ValueError, TypeError, RecursionError):
        return None


# ---------------------------------------------------------------------------- storage

_local = threading.local()
_disabled: set[str] = set()  # cache files that failed in this process


_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (key BLOB PRIMARY KEY, data BLOB NOT NULL,
    size INTEGER NOT NULL, used INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS entries_used ON entries(used);
CREATE TABLE IF NOT EXISTS total (id INTEGER PRIMARY KEY CHECK (id = 0), bytes INTEGER NOT NULL);
INSERT OR IGNORE INTO total VALUES (0, 0);
"""


_opened: list[sqlite3.Connection] = []  # every connection this process made, closed at exit


def _close_all() -> None:
    """Close this process's connections (atexit): the last close folds the write-ahead log
    into the file. A moss forked from a zygote ends without collecting them (host/zygote.py
    `_end`), which would leave every entry it wrote in the -wal file."""
    while _opened:
        try:
            _opened.pop().close()
        except sqlite3.Error:
            pass


def _open(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    conn = sqlite3.connect(str(path), timeout=2.0, isolation_level=None, check_same_thread=False)
    if not _opened:
        atexit.register(_close_all)
    _opened.append(conn)
    try:
        # A cache: nothing waits for the disk (making the file and each process's last
        # close would otherwise cost 10-40 ms of fsyncs). A crash of moss loses nothing; a
        # power loss can damage the file, which is then handled as damage (below).
        conn.execute("PRAGMA synchronous=OFF")
        _make(conn)
    except BaseException:
        conn.close()
        raise
    try:
        os.chmod(path, 0o600)
    except OSError:
        pass
    return conn


def _made(conn: sqlite3.Connection) -> bool:
    """Whether the file holds the cache's tables (its last statement ran): a read, not a write."""
    try:
        return conn.execute("SELECT bytes FROM total WHERE id = 0").fetchone() is not None
    except sqlite3.OperationalError as e:
        if "no such table" in str(e):
            return False
        raise


def _make(conn: sqlite3.Connection) -> None:
    """Make the cache's tables unless they are there. Two processes opening a new cache at once
    both try; switching the file to WAL fails at once ("database is locked", no busy wait) for
    the one that meets the other's lock. It looks again until the busy timeout (2 s) has passed,
    and usually finds the tables made: without this, 1 new cache in 4 opened by two processes
    at once was turned off in one of them."""
    deadline = time.monotonic() + 2.0
    while True:
        try:
            if not _made(conn):
                conn.execute("PRAGMA journal_mode=WAL")  # kept in the file from then on
                conn.executescript(_SCHEMA)
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.005)


def _damaged(e: sqlite3.Error) -> bool:
    """A database error that says the file is damaged (not locked, busy or unwritable)."""
    return isinstance(e, sqlite3.DatabaseError) and not isinstance(e, sqlite3.OperationalError)


def _set_aside(path: Path) -> sqlite3.Connection | None:
    """Move a damaged cache file aside and make a new one; None (the cache off for this
    process) if that fails too."""
    key = str(path)
    conns = getattr(_local, "conns", None) or {}
    old = conns.pop(key, None)
    if old is not None:
        try:
            old.close()
        except sqlite3.Error:
            pass
    try:
        os.replace(path, str(path) + ".corrupt")
        for extra in ("-wal", "-shm"):
            try:
                os.unlink(str(path) + extra)
            except FileNotFoundError:
                pass
        c = _open(path)
    except (OSError, sqlite3.Error):
        _disabled.add(key)
        return None
    _local.conns = conns
    conns[key] = c
    return c


def _conn(path: Path) -> sqlite3.Connection | None:
    key = str(path)
    if key in _disabled:
        return None
    conns = getattr(_local, "conns", None)
    if conns is None:
        conns = _local.conns = {}
    c = conns.get(key)
    if c is not None:
        return c
    try:
        c = _open(path)
    except sqlite3.DatabaseError as e:
        if not _damaged(e):  # locked, unwritable: not damage
            _disabled.add(key)
            return None
        return _set_aside(path)  # not a database: move it aside and start again
    except OSError:
        _disabled.add(key)
        return None
    conns[key] = c
    return c


def open_cache() -> None:
    """Open this thread's connection to the cache file now, if the cache is on and the file
    is there (a search does it while ripgrep runs: its lookup then does not wait for it)."""
    path = cache_path()
    if path is not None and path.exists():
        _conn(path)


def get(key: bytes, chash: bytes, lite_ok: bool) -> tuple[list, str | None, bool] | None:
    """The entry stored under `key`, if it is sound, made from bytes hashing to `chash`, and
    full (or `lite_ok`)."""
    got = get_many([(key, chash)], lite_ok, raw=False)
    return got.get(key)


_CHUNK = 500  # keys per SELECT (sqlite's limit on bound parameters is 999 in old builds)


def get_many(wanted: list[tuple[bytes, bytes]], lite_ok: bool, raw: bool = True) -> dict[bytes, tuple]:
    """The sound entries among `wanted` ((key, content hash) pairs), read in one query:
    {key: (symbols, module doc, lite)}, the symbols as stored (`decode_raw`) or, with
    `raw=False`, rebuilt as Symbols. Entries that are lite are left out unless `lite_ok`."""
    path = cache_path()
    if not wanted or path is None or not path.exists():
        return {}
    c = _conn(path)
    if c is None:
        return {}
    hashes = dict(wanted)
    keys = list(hashes)
    out: dict[bytes, tuple] = {}
    stale: list[bytes] = []
    now = int(time.time())
    try:
        for i in range(0, len(keys), _CHUNK):
            part = keys[i:i + _CHUNK]
            rows = c.execute("SELECT key, data, used FROM entries WHERE key IN (%s)"
                             % ",".join("?" * len(part)), part).fetchall()
            for k, data, used in rows:
                got = decode_raw(data, hashes.get(k, b""))
                if got is None or (got[2] and not lite_ok):
                    continue
                entry: tuple = got
                if not raw:
                    try:
                        entry = ([_dec(x, None, Symbol) for x in got[0]], got[1], got[2])
                    except (ValueError, TypeError, RecursionError):
                        continue
                out[k] = entry
                if now - int(used) > _TOUCH_EVERY_S:
                    stale.append(k)
        if stale:
            c.executemany("UPDATE entries SET used = ? WHERE key = ?", [(now, k) for k in stale])
    except sqlite3.Error as e:
        if _damaged(e):
            _set_aside(path)
    return out


def put(key: bytes, chash: bytes, syms: list, doc: str | None, lite: bool) -> None:
    """Store an entry (a lite one never replaces a full one), then evict the least recently
    used entries while the total is over the bound."""
    put_many([(key, chash, encode(syms, doc, lite, chash), lite)])


def put_many(entries: list[tuple[bytes, bytes, bytes, bool]]) -> None:
    """Store entries ((key, content hash, encoded entry, lite)) in one transaction: a lite
    entry never replaces a full one; then evict the least recently used entries while the
    total is over the bound."""
    path = cache_path()
    if path is None or not entries:
        return
    bound = max_bytes()
    entries = [e for e in entries if len(e[2]) <= bound]
    if not entries:
        return
    c = _conn(path)
    if c is None:
        return
    try:
        c.execute("BEGIN IMMEDIATE")
        try:
            keys = [e[0] for e in entries]
            old: dict[bytes, tuple[int, bytes]] = {}
            for i in range(0, len(keys), _CHUNK):
                part = keys[i:i + _CHUNK]
                for k, size, data in c.execute("SELECT key, size, data FROM entries WHERE key IN (%s)"
                                               % ",".join("?" * len(part)), part):
                    old[k] = (size, data)
            now = int(time.time())
            rows, delta = [], 0
            for key, chash, data, lite in entries:
                prev = old.get(key)
                if prev is not None and lite:
                    got = decode_raw(prev[1], chash)
                    if got is not None and not got[2]:
                        continue  # a full entry for these bytes is already there
                rows.append((key, data, len(data), now))
                delta += len(data) - (prev[0] if prev else 0)
                old[key] = (len(data), data)
            if rows:
                c.executemany("INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?)", rows)
                c.execute("UPDATE total SET bytes = bytes + ? WHERE id = 0", (delta,))
                total = c.execute("SELECT bytes FROM total WHERE id = 0").fetchone()[0]
                if total > bound:
                    _evict(c, total, bound * 8 // 10)
            c.execute("COMMIT")
        except BaseException:
            c.execute("ROLLBACK")
            raise
    except sqlite3.Error as e:
        if _damaged(e):
            _set_aside(path)


def _evict(c: sqlite3.Connection, total: int, goal: int) -> None:
    while total > goal:
        rows = c.execute("SELECT key, size FROM entries ORDER BY used, rowid LIMIT 64").fetchall()
        if not rows:
            total = 0
            break
        for k, size in rows:
            c.execute("DELETE FROM entries WHERE key = ?", (k,))
            total -= size
            if total <= goal:
                break
    c.execute("UPDATE total SET bytes = ? WHERE id = 0", (max(total, 0),))


def stats() -> tuple[Path | None, int, int]:
    """(cache file, entries, bytes of entries)."""
    path = cache_path()
    if path is None or not path.exists():
        return path, 0, 0
    c = _conn(path)
    if c is None:
        return path, 0, 0
    try:
        n, size = c.execute("SELECT COUNT(*), COALESCE(SUM(size), 0) FROM entries").fetchone()
        return path, int(n), int(size)
    except sqlite3.Error:
        return path, 0, 0


def clear() -> tuple[Path | None, int]:
    """Remove every entry; returns (cache file, entries removed)."""
    path, n, _ = stats()
    if path is None or not path.exists():
        return path, 0
    c = _conn(path)
    if c is not None:
        try:
            c.execute("BEGIN IMMEDIATE")
            c.execute("DELETE FROM entries")
            c.execute("UPDATE total SET bytes = 0 WHERE id = 0")
            c.execute("COMMIT")
            c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            c.execute("VACUUM")
        except sqlite3.Error:
            pass
    return path, n

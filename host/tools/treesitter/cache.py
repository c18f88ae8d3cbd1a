"""One file's symbols, kept in memory (by path, mtime and size) and in the structure cache
on disk (host/tools/structcache.py, by the file's bytes): `outline` and `structure`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path

from .. import structcache
from ..symbols import Symbol
from .extract import extract_file
from .languages import LANGUAGES, language_for


_lock = threading.Lock()
_CACHE_MAX = 512  # files; a session searching a project keeps returning to the same ones
# str(resolved path) -> ((mtime_ns, size), symbols, module doc, lite)
_cache: "OrderedDict[str, tuple[tuple[int, int], list[Symbol], str | None, bool]]" = OrderedDict()


def cached(path: Path, lite: bool) -> tuple[str, tuple[int, int], tuple | None]:
    """(key, stamp, the entry kept in memory for `path` or None); a full outline serves a
    `lite` ask too."""
    key = str(path.resolve())
    st = path.stat()
    stamp = (st.st_mtime_ns, st.st_size)
    with _lock:
        hit = _cache.get(key)
        if hit is not None and hit[0] == stamp and (lite or not hit[3]):
            _cache.move_to_end(key)
            return key, stamp, hit
    return key, stamp, None


def _store(key: str, stamp: tuple[int, int], syms: list[Symbol], doc: str | None, lite: bool) -> None:
    with _lock:
        old = _cache.get(key)
        if lite and old is not None and old[0] == stamp and not old[3]:
            return  # a full outline of the same file is already there
        _cache[key] = (stamp, syms, doc, lite)
        _cache.move_to_end(key)
        while len(_cache) > _CACHE_MAX:
            _cache.popitem(last=False)


def outline(path: Path, source: bytes | None = None) -> tuple[list[Symbol], str | None]:
    """(symbols, module doc summary) for a file; cached by path, mtime and size."""
    path = Path(path)
    lang = language_for(path, source)
    if lang is None:
        return [], None
    if source is not None:
        return extract_file(source, lang)
    key, stamp, hit = cached(path, lite=False)
    if hit is not None:
        return hit[1], hit[2]
    src = path.read_bytes()
    dkey, chash, got = disk_get(src, lang, lite_ok=False)
    if got is not None:
        _store(key, stamp, got[0], got[1], lite=False)
        return got[0], got[1]
    syms, doc = extract_file(src, lang)
    _store(key, stamp, syms, doc, lite=False)
    _disk_put(dkey, chash, syms, doc, lite=False)
    return syms, doc


def disk_get(src: bytes, lang: str, lite_ok: bool) -> tuple[bytes, bytes, tuple | None]:
    """(entry key, content hash, (symbols, module doc, lite) or None) from the structure
    cache on disk (host/tools/structcache.py) for these bytes."""
    module = LANGUAGES[lang].module
    chash = structcache.content_hash(src)
    dkey = structcache.content_key(chash, lang, module)
    return dkey, chash, structcache.get(dkey, chash, lite_ok)


def _disk_put(dkey: bytes, chash: bytes, syms: list[Symbol], doc: str | None, lite: bool) -> None:
    structcache.put(dkey, chash, syms, doc, lite)


def lite_lookup(path) -> tuple:
    """(path, language, cache key, stamp, symbols): the symbols are the cached lite ones, []
    for a file of no known language, or None when they must be extracted."""
    path = Path(path)
    lang = language_for(path)
    if lang is None:
        return path, None, None, None, []
    key, stamp, hit = cached(path, lite=True)
    return path, lang, key, stamp, (hit[1] if hit is not None else None)


def structure(path: Path) -> list[Symbol]:
    """The file's symbols with names, kinds, nesting and lines but empty signatures and no
    docs: enough for `innermost`, `Symbol.path`/`lines` and picking a symbol by name, for
    less than `outline` (no signature or doc text is built). Cached like `outline`;
    a cached full outline serves too. Never show a signature or doc taken from these."""
    path, lang, key, stamp, syms = lite_lookup(path)
    if syms is not None:
        return syms
    src = path.read_bytes()
    dkey, chash, got = disk_get(src, lang, lite_ok=True)
    if got is not None:
        _store(key, stamp, got[0], got[1], lite=got[2])
        return got[0]
    syms, _ = extract_file(src, lang, lite=True)
    _store(key, stamp, syms, None, lite=True)
    _disk_put(dkey, chash, syms, None, lite=True)
    return syms


def clear_caches() -> None:
    """Forget every cached outline (for measuring a first look)."""
    with _lock:
        _cache.clear()

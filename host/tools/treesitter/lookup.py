"""Finding symbols: one by its (trailing) qualified name, the innermost one at a line, and
what `view FILE/Symbol` needs to pick one for the least extraction.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable

from ...errors import MossError
from ..symbols import Symbol, walk_all
from .cache import cached, disk_get, outline
from .extract import complete_symbol, extract_file, extract_named
from .languages import language_for


def for_lookup(path: Path, src: bytes, query: str = "") -> tuple[list[Symbol], Callable[[Symbol], None]]:
    """Symbols of `path` (whose bytes are `src`) for picking one by name with `query`, and
    a function that fills in the signature and doc of the symbols the caller will show.

    A cached full outline is used as it is. Otherwise only the structure is extracted —
    of the symbols around the occurrences of the query's last name when they hold a
    match (what `pick_symbol` then chooses from, with their classes and same-named
    impls), else of the whole file (for the error's suggestions) — and the few symbols
    shown are completed from their nodes."""
    path = Path(path)
    lang = language_for(path, src)
    if lang is None:
        return [], lambda sym: None
    key, stamp, hit = cached(path, lite=False)
    if hit is not None:
        return hit[1], lambda sym: None
    got = disk_get(src, lang, lite_ok=False)[2]
    if got is not None:
        return got[0], lambda sym: None
    nodes: dict = {}
    want = [p for p in _SPLIT.split(query.strip()) if p]
    syms = extract_named(src, lang, want[-1], nodes) if want else None
    # match_symbols prefers exact-case matches, and those are all found around the
    # occurrences; case-insensitive ones are too when no case folding can change a
    # length or turn a non-ASCII letter into an ASCII one (ß, ſ, the Kelvin sign).
    exact = syms is not None and any(s.name == want[-1] and s.segments[-len(want):] == want
                                     for s in walk_all(syms))
    if syms is None or not (exact or (src.isascii() and query.isascii() and match_symbols(syms, query))):
        nodes.clear()
        syms, _ = extract_file(src, lang, lite=True, nodes=nodes)
    done: set[int] = set()

    def complete(sym: Symbol) -> None:
        got = nodes.get(id(sym))
        if got is not None and id(sym) not in done:
            done.add(id(sym))
            complete_symbol(sym, got[1], src, lang)

    return syms, complete


def symbols_of(path: Path, source: bytes | None = None) -> list[Symbol]:
    """The symbols defined in a file, nested (methods under classes/impls, fields and
    variants under structs/enums). Empty for a language we do not parse."""
    return outline(path, source)[0]


def innermost(symbols: list[Symbol], line: int,
              skip_kinds: tuple[str, ...] = ()) -> Symbol | None:
    """The smallest symbol whose lines (doc comments included) contain `line`, ignoring
    `skip_kinds`."""
    best = None
    level = symbols
    while True:
        for s in level:
            if min(s.start_line, s.doc_start_line or s.start_line) <= line <= s.end_line:
                if s.kind not in skip_kinds:
                    best = s
                level = s.children
                break
        else:
            return best


_SPLIT = re.compile(r"::|[/.:]")


def match_symbols(symbols: list[Symbol], query: str) -> list[Symbol]:
    """Symbols whose qualified path ends with `query`'s segments: exact-case matches if
    there are any, else case-insensitive ones."""
    want = [p for p in _SPLIT.split(query.strip()) if p]
    if not want:
        return []
    every = list(walk_all(symbols))
    for key in (lambda s: s, str.casefold):
        w = [key(x) for x in want]
        # The last segment is the symbol's own name: compare it before building paths.
        found = [s for s in every if key(s.name) == w[-1]
                 and [key(x) for x in s.segments[-len(w):]] == w]
        if found:
            return found
    return []


def pick_symbol(symbols: list[Symbol], query: str, where: str) -> Symbol:
    """Pick one symbol by trailing qualified name; see `find_symbol`."""
    want = [p for p in _SPLIT.split(query.strip()) if p]
    if not want:
        raise MossError("empty symbol name", kind="usage")
    found = match_symbols(symbols, query)
    if len(found) > 1:
        exact = [s for s in found if len(s.segments) == len(want)]
        if exact:
            found = exact
    if len(found) > 1:
        not_impl = [s for s in found if s.kind != "impl"]
        if not_impl:
            found = not_impl
    if len(found) == 1:
        return found[0]
    if found:
        lines = "\n".join(f"  {s.path} ({s.kind}, {s.lines})" for s in found[:20])
        raise MossError(f"{query} matches {len(found)} symbols in {where}; say which:\n{lines}",
                        kind="ambiguous", candidates=[s.path for s in found])
    import difflib  # an error's suggestions only

    every = list(walk_all(symbols))
    names = sorted({s.path for s in every})
    close = difflib.get_close_matches(query, names, n=6, cutoff=0.5)
    if not close:
        close = difflib.get_close_matches(want[-1], sorted({s.name for s in every}), n=6,
                                          cutoff=0.5)
    msg = f"no symbol {query} in {where}"
    if close:
        msg += "; did you mean: " + ", ".join(close)
    elif symbols:
        names_in_order = list(dict.fromkeys(s.path for s in symbols))  # an enum and its impls share a name
        msg += "; it defines: " + ", ".join(names_in_order[:20])
    else:
        msg += " (no symbols found)"
    raise MossError(msg, kind="not_found", suggestions=close)


def find_symbol(path: Path, dotted_or_slashed: str) -> Symbol:
    """The symbol named `dotted_or_slashed` in `path`: "Provider", "Agent/run",
    "Agent.run", "Provider::default_model". A trailing match is enough ("run" finds
    Agent/run when it is the only run); an exact-case match wins over a case-insensitive
    one, a full path over a trailing one, a type over its impl. Raises MossError
    not_found (with close names) or ambiguous (listing candidates)."""
    return pick_symbol(symbols_of(path), dotted_or_slashed, str(path))

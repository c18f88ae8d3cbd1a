"""Symbols with tree-sitter: which language a file is, its symbols, one of them by name.

`symbols_of(path)` returns the file's symbols as a nested list of `Symbol`s.
`find_symbol(path, "Agent/run")` picks one of them by its (trailing) qualified name.

One job per module: `grammars.py` (every grammar moss loads: the one place a Language or a
Parser is made), `languages.py` (the languages moss reads symbols of and their symbol
queries), `common.py` (what every extractor uses), one module per language family for what
its nodes are called (`python.py`, `rust.py`, `js.py`, `go.py`, `lua.py`), `extract.py` (a
file's symbols from its tree), `cache.py` (one file's symbols, in memory and in the
structure cache on disk), `labels.py` (what text search needs to label its hits),
`lookup.py` (finding a symbol by name or line). This module is their face.
"""

from __future__ import annotations

from ..symbols import Symbol, walk_all
from .cache import clear_caches, outline, structure
from .grammars import parse
from .labels import around_lines, lite_entries
from .languages import LANGUAGES, language_for, load_all, query
from .lookup import find_symbol, for_lookup, innermost, match_symbols, pick_symbol, symbols_of

__all__ = [
    "LANGUAGES", "Symbol", "around_lines", "clear_caches", "find_symbol", "for_lookup", "innermost",
    "language_for", "lite_entries", "load_all", "match_symbols", "outline", "parse", "pick_symbol", "query",
    "structure", "symbols_of", "walk_all",
]

"""Language registry and symbol extraction with tree-sitter.

`symbols_of(path)` returns the file's symbols as a nested list of `Symbol`s.
`find_symbol(path, "Agent/run")` picks one of them by its (trailing) qualified name.

One job per module: `languages.py` (the languages, their grammars, parsers and symbol
queries), `common.py` (what every extractor uses), one module per language family for
what its nodes are called (`python.py`, `rust.py`, `js.py`, `go.py`, `lua.py`),
`extract.py` (a file's symbols from its tree), `cache.py` (one file's symbols, in memory and
in the structure cache on disk), `labels.py` (what text search needs to label its hits),
`lookup.py` (finding a symbol by name or line). This module is their face.
"""

from __future__ import annotations

from ..symbols import Symbol, walk_all
from .cache import _disk_get, clear_caches, outline, structure
from .extract import _extract, module_doc
from .labels import around_lines, lite_entries
from .languages import LANGUAGES, LangSpec, _language, _parser, _query, language_for, load_all, parse
from .lookup import find_symbol, for_lookup, innermost, match_symbols, pick_symbol, symbols_of
from .python import _python_captures

__all__ = [
    "LANGUAGES", "LangSpec", "Symbol", "around_lines", "clear_caches", "find_symbol", "for_lookup", "innermost",
    "language_for", "lite_entries", "load_all", "match_symbols", "module_doc", "outline", "parse", "pick_symbol",
    "structure", "symbols_of", "walk_all",
    # used by the tests and the doctor until they import them from their modules
    "_disk_get", "_extract", "_language", "_parser", "_python_captures", "_query",
]

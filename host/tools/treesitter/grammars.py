"""Every tree-sitter grammar moss loads, and the one place a Language or a Parser is made.

Grammars come from the individual `tree-sitter-<lang>` wheels and are imported lazily:
importing this module costs nothing until a file of that language is parsed. Parsers are
per thread (a tree-sitter Parser is not thread-safe; child agents run in threads);
languages are shared. The symbol tools read the languages of languages.py; the public
surface (host/tools/surface.py) reads Java and C++ too.
"""

from __future__ import annotations

import importlib
import threading

from ...errors import MossError

# name -> (the grammar's package, its function returning the language)
GRAMMARS: dict[str, tuple[str, str]] = {
    "python": ("tree_sitter_python", "language"),
    "rust": ("tree_sitter_rust", "language"),
    "javascript": ("tree_sitter_javascript", "language"),
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx"),
    "go": ("tree_sitter_go", "language"),
    "lua": ("tree_sitter_lua", "language"),
    "java": ("tree_sitter_java", "language"),
    "cpp": ("tree_sitter_cpp", "language"),
}

_lock = threading.Lock()
_languages: dict[str, object] = {}
_local = threading.local()


def package(name: str) -> str:
    """The pip package of grammar `name` (tree-sitter-rust)."""
    return GRAMMARS[name][0].replace("_", "-")


def language(name: str):
    """The tree_sitter.Language of grammar `name`, loaded once; MossError (config) naming
    the package to install when it is not installed."""
    with _lock:
        lang = _languages.get(name)
        if lang is None:
            import tree_sitter as ts
            module, func = GRAMMARS[name]
            try:
                mod = importlib.import_module(module)
            except ImportError as e:  # pragma: no cover - depends on the install
                pkg = package(name)
                raise MossError(f"{name} support needs the `{pkg}` package "
                                f"(pip install {pkg})", kind="config") from e
            lang = ts.Language(getattr(mod, func)())
            _languages[name] = lang
        return lang


def parser(name: str):
    """This thread's tree_sitter.Parser for grammar `name`."""
    parsers = getattr(_local, "parsers", None)
    if parsers is None:
        parsers = _local.parsers = {}
    p = parsers.get(name)
    if p is None:
        import tree_sitter as ts
        p = parsers[name] = ts.Parser(language(name))
    return p


def parse(source: bytes, lang: str):
    """Parse `source` as `lang`; returns a tree_sitter.Tree."""
    return parser(lang).parse(source)

"""A named definition in a source file (`Symbol`), as tree-sitter's extractors make it
(treesitter/) and the structure cache stores it (structcache.py)."""

from __future__ import annotations

from typing import Iterator


class Symbol:
    """One named definition in a source file.

    Lines are 1-based and inclusive; bytes are 0-based offsets into the file, end
    exclusive. `start_*` include the symbol's own attributes/decorators; `doc_start_*`
    also include the doc comments above it (where they are outside the node).
    `container` names what a flat definition belongs to (Go method receiver type, Lua
    table of `function M.run`), so its qualified path reads `Agent/run` like a nested one.
    Compared by identity. (A plain class, not a dataclass: building one at import costs
    a millisecond of every `moss text-search`.)
    """

    __slots__ = ("name", "kind", "signature", "start_line", "end_line", "start_byte", "end_byte",
                 "children", "doc", "parent", "doc_start_line", "doc_start_byte", "container")

    def __init__(self, name: str, kind: str, signature: str, start_line: int, end_line: int,
                 start_byte: int, end_byte: int, children: list["Symbol"] | None = None,
                 doc: str | None = None, parent: "Symbol | None" = None, doc_start_line: int = 0,
                 doc_start_byte: int = 0, container: str | None = None):
        self.name = name
        self.kind = kind
        self.signature = signature
        self.start_line = start_line
        self.end_line = end_line
        self.start_byte = start_byte
        self.end_byte = end_byte
        self.children: list[Symbol] = [] if children is None else children
        self.doc = doc
        self.parent = parent
        self.doc_start_line = doc_start_line
        self.doc_start_byte = doc_start_byte
        self.container = container

    def __repr__(self) -> str:
        return (f"Symbol(name={self.name!r}, kind={self.kind!r}, signature={self.signature!r}, "
                f"start_line={self.start_line!r}, end_line={self.end_line!r}, start_byte={self.start_byte!r}, "
                f"end_byte={self.end_byte!r}, children={self.children!r}, doc={self.doc!r}, "
                f"doc_start_line={self.doc_start_line!r}, doc_start_byte={self.doc_start_byte!r}, "
                f"container={self.container!r})")

    @property
    def segments(self) -> list[str]:
        """Names from the outermost ancestor down to this symbol."""
        chain: list[str] = []
        s: Symbol | None = self
        top = self
        while s is not None:
            chain.append(s.name)
            top = s
            s = s.parent
        if top.container:
            chain.append(top.container)
        return chain[::-1]

    @property
    def path(self) -> str:
        """Qualified name, e.g. `Provider/default_model`."""
        return "/".join(self.segments)

    @property
    def lines(self) -> str:
        """`L12-40` (or `L12` for a one-line symbol)."""
        if self.start_line == self.end_line:
            return f"L{self.start_line}"
        return f"L{self.start_line}-{self.end_line}"

    def walk(self) -> Iterator["Symbol"]:
        yield self
        for c in self.children:
            yield from c.walk()


def walk_all(symbols: list[Symbol]) -> Iterator[Symbol]:
    for s in symbols:
        yield from s.walk()

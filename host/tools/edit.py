"""Edits: symbol-level, exact-text and whole-file changes, previewed or applied as one batch.

A spec is a plain dict (it usually comes from Lua):

    {"target": "src/llm.rs/Provider", "action": "delete"}
    {"target": "src/llm.rs/Provider", "action": "replace", "content": "<new code>"}
    {"target": "src/llm.rs/Provider", "action": "insert", "position": "before"|"after",
     "content": "<code>"}
    {"target": "README.md", "action": "text", "old": "exact old text", "content": "new"}
    {"target": "notes/new.md", "action": "create", "content": "..."}
    {"target": "path", "action": "append"|"prepend", "content": "..."}

`preview(root, specs)` computes the result without touching the disk; `apply(root, specs)`
computes the same and then writes it. Both return

    {"files": [changed paths], "diff": "<unified diff of every changed file>",
     "changes": [{"path", "diff", "added", "removed", "target", "action"}, ...],
     "syntax_warning": "src/x.rs: parse error near line N"}   # only when an edit broke a parse

and `preview` adds `surfaces`: per changed file, the public items the batch removed, changed
or added (moss.tools.surface.compare).

Targets. `path/Symbol[/Child]`: the path part is the longest prefix naming an existing file
(exactly, relative to the root: no fuzzy matching for edits), confined to the root by
`confine` (no `..` escape, no absolute path elsewhere, no symlink leading out, nothing in
`.git`). The rest is a symbol path as `view` shows it (`Provider/default_model`,
`Agent/run`). A bare file path with `replace` overwrites the file, with `delete` removes it,
with `insert` before/after means prepend/append. `text` on a symbol target searches only
inside that symbol.

Rules (chosen to be the least surprising for a model that just read `view` output):
- delete removes the symbol's whole lines, doc comments and attributes/decorators included,
  and then the blank lines it leaves: between two neighbours the larger of the two gaps is
  kept; at the start or end of a block or file the gap on the open side goes away.
- replace covers the item from the first leading part the new content itself begins with:
  content starting with a doc comment replaces doc comment + attributes + item; content
  starting with an attribute/decorator (`#[`, `@`) keeps the doc comment and replaces
  attributes + item; otherwise doc comment and attributes are kept and only the item is
  replaced. (To drop a decorator or doc comment, restate the head without it, or use
  `text`.) A trailing `,`/`;` that followed the item (struct field, enum variant) is kept.
- insert puts the content on its own lines (position defaults to "after"): before = above
  the symbol's doc comment and attributes, after = below its last line. The new item is
  separated from the symbol by as many blank lines as separate the symbol from its
  neighbouring symbol of the same sort (function/method, field, variant, ...) on that side,
  else on the other side; with no such neighbour, by 1 blank line (2 for top-level Python,
  0 for fields and variants).
- content for replace/insert is re-indented as a block: its common indentation is removed
  and the symbol's indentation put in front of every non-blank line. When the first line
  has no indentation but the others are indented as if copied from the file (deeper than
  the symbol, or a closing `}`/`end` at the symbol's level), the first line is taken to have
  lost its indentation. Multi-line string literals are re-indented too: use `text` to avoid.
- text: `old` must occur exactly once (else "not_found" naming the closest line, or
  "ambiguous" with the count and lines); content is inserted verbatim; "" deletes.
- create refuses an existing path (kind "conflict") and adds a final newline;
  append/prepend add the content on lines of its own.
- Several specs on one file apply in order, each to the result of the previous one.
- Line endings (a file whose every newline is CRLF stays CRLF), the trailing-newline
  convention and the file mode are preserved. Binary, non-UTF-8 and >2 MB files are refused.

apply() is all or nothing: every spec is computed in memory first (a failing spec raises
MossError naming its number and target, and nothing is written); the files are checked
unchanged on disk since they were read (kind "conflict"); then each is written through a
temp file and os.replace, and a failed write restores the files already written.

Every read and write goes through moss.tools.safefs from a held descriptor of the project
root, on the path `confine` resolved (a link inside the project that stays inside is followed
once, there): a folder swapped for a link after the check (another process, a background run)
fails the edit with a line naming the link, and nothing is read or written outside the
project. A file is replaced by a temp file made with O_EXCL and renamed within the same
folder descriptor.
"""

from __future__ import annotations

import difflib
import os
import re
import stat
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import MossError
from . import safefs, surface, treesitter
from .confine import confine
from .resolve import require_regular, resolve_path, special_kind

__all__ = ["preview", "apply", "MAX_BYTES"]

MAX_BYTES = 2 * 1024 * 1024
DIFF_CONTEXT = 2
ACTIONS = ("delete", "replace", "insert", "text", "create", "append", "prepend")
_NEEDS_CONTENT = {"replace", "insert", "text", "create", "append", "prepend"}
_KEYS = ("target", "action", "content", "position", "old")

_CLOSERS = ("}", ")", "]", "end")
_FLAT_KINDS = {"field", "variant"}


# ------------------------------------------------------------------------ public API

def preview(root: Path, specs: list[dict]) -> dict:
    """What `apply` would do, without writing anything; and, for the approval policy, what it
    changes in each file's public surface (`surfaces`: moss.tools.surface.compare)."""
    plan = _plan(root, specs)
    return {**_result(plan), "surfaces": [surface.compare(f.rel, f.initial, f.text) for f in plan.changed()]}


def apply(root: Path, specs: list[dict]) -> dict:
    """Apply every spec or none (see the module doc); returns what `preview` returns."""
    plan = _plan(root, specs)
    _commit(plan.changed())
    return _result(plan)


# ---------------------------------------------------------------------- data classes

@dataclass
class _Spec:
    number: int
    target: str
    action: str
    content: str | None = None
    position: str | None = None
    old: str | None = None
    symbol: str = ""  # the target after its file path ("" for the whole file)


@dataclass(eq=False)
class _File:
    """One file as the batch sees it. `text` is LF-normalized and ends with a newline
    unless empty; None means the file does not exist (not yet, or no longer)."""

    path: Path
    rel: str
    original: bytes | None
    tree: safefs.Tree
    mode: int | None = None
    eol: str = "\n"
    final_newline: bool = True
    initial: str | None = None
    text: str | None = None
    lang: str | None = None
    made_dirs: list[str] = field(default_factory=list)

    def existing(self) -> str:
        """The text of a file that exists: every edit but create is of a file
        `_locate_file` found."""
        assert self.text is not None
        return self.text

    def set(self, text: str | None) -> None:
        if text and not text.endswith("\n"):
            text += "\n"
        self.text = text

    def encoded(self) -> bytes | None:
        """The bytes to write: the file's own line endings and final-newline habit."""
        if self.text is None:
            return None
        out = self.text
        if not self.final_newline and out.endswith("\n"):
            out = out[:-1]
        if self.eol != "\n":
            out = out.replace("\n", self.eol)
        return out.encode("utf-8")

    @property
    def changed(self) -> bool:
        return self.encoded() != self.original


@dataclass
class _Span:
    """Where a symbol sits, as character offsets into the file's text."""

    doc: int          # first doc comment (or attribute, or the item when it has neither)
    attrs: int        # first attribute/decorator (or the item)
    item: int         # the item itself (`pub fn`, `def`, `class`, ...)
    end: int          # just past the item
    first: int        # start of the line holding `doc`
    after: int        # just past the line holding `end`
    own_lines: bool   # nothing but whitespace (and a trailing , or ;) shares those lines
    indent: str
    kind: str


class _Plan:
    """Every file the batch touches, loaded once, keyed by resolved path."""

    def __init__(self, root: Path):
        self.root = Path(os.path.realpath(os.fspath(root)))
        self.tree = safefs.tree(self.root)
        self.files: dict[Path, _File] = {}
        self.changes: list[dict] = []

    def file(self, path: Path) -> _File:
        f = self.files.get(path)
        if f is None:
            f = self.files[path] = _load(self, path)
        return f

    def exists(self, path: Path) -> bool:
        f = self.files.get(path)
        return f.text is not None if f is not None else os.path.lexists(path)

    def is_file(self, path: Path) -> bool:
        f = self.files.get(path)
        return f.text is not None if f is not None else path.is_file()

    def changed(self) -> list[_File]:
        return [f for f in self.files.values() if f.changed]


# ------------------------------------------------------------------------ the batch

def _plan(root: Path, specs) -> _Plan:
    """Run every spec in memory, in order; raise on the first one that fails."""
    if isinstance(specs, Mapping):
        specs = [specs]
    if not specs:
        raise MossError("no edits given: pass a list of {target, action, ...} specs",
                        kind="usage")
    plan = _Plan(root)
    for number, raw in enumerate(specs, 1):
        try:
            spec = _parse_spec(number, raw)
            f = _locate_file(plan, spec)
            before = f.text
            _run_spec(f, spec)
        except MossError as e:
            raise _in_spec(e, number, len(specs), raw) from e
        plan.changes.append(_change(f, before, spec))
    return plan


def _in_spec(err: MossError, number: int, total: int, raw) -> MossError:
    target = raw.get("target") if isinstance(raw, Mapping) else None
    action = raw.get("action") if isinstance(raw, Mapping) else None
    where = f"edit {number} of {total}"
    if target is not None:
        where += f" ({action} {target})"
    data = {**err.data, "spec": number, "target": target}
    return MossError(f"{where}: {err.message}\nNo file was changed.", kind=err.kind, **data)


def _parse_spec(number: int, raw) -> _Spec:
    """Check a spec's shape; returns it with newlines normalized to LF."""
    if not isinstance(raw, Mapping):
        raise MossError(f"a spec must be a table/dict, got {type(raw).__name__}", kind="usage")
    unknown = sorted(str(k) for k in raw if k not in _KEYS)
    if unknown:
        raise MossError(f"unknown key(s) {', '.join(unknown)}; a spec has: "
                        + ", ".join(_KEYS), kind="usage")
    target, action = raw.get("target"), raw.get("action")
    if not isinstance(target, str) or not target.strip():
        raise MossError("missing target (a path, or path/Symbol)", kind="usage")
    if action not in ACTIONS:
        raise MossError(f"action {action!r} is not one of: {', '.join(ACTIONS)}",
                        kind="usage")
    spec = _Spec(number, target.strip(), action)
    content = raw.get("content")
    if action in _NEEDS_CONTENT:
        if not isinstance(content, str):
            raise MossError(f"action {action} needs content (a string)", kind="usage")
        spec.content = _lf(content)
    elif content is not None:
        raise MossError(f"action {action} takes no content", kind="usage")
    position = raw.get("position")
    if action == "insert":
        position = "after" if position is None else position
        if position not in ("before", "after"):
            raise MossError(f"position must be 'before' or 'after', not {position!r} "
                            "(for the start or end of a file use prepend/append)",
                            kind="usage")
        spec.position = position
    elif position is not None:
        raise MossError(f"position is only for insert, not {action}", kind="usage")
    old = raw.get("old")
    if action == "text":
        if not isinstance(old, str) or old == "":
            raise MossError("action text needs old: the exact text to replace", kind="usage")
        spec.old = _lf(old)
    elif old is not None:
        raise MossError(f"old is only for action text, not {action}", kind="usage")
    return spec


def _given(value: str | None) -> str:
    """A spec field `_parse_spec` made sure of for the spec's action (content, old, position)."""
    assert value is not None
    return value


def _lf(s: str) -> str:
    return s.replace("\r\n", "\n")


def _run_spec(f: _File, spec: _Spec) -> None:
    if spec.action == "create":
        _create(f, spec)
    elif spec.symbol:
        _symbol_edit(f, spec.symbol, spec)
    else:
        _file_edit(f, spec)


def _change(f: _File, before: str | None, spec: _Spec) -> dict:
    diff = _diff(f.rel, before, f.text)
    added, removed = _count(diff)
    return {"path": f.rel, "diff": diff, "added": added, "removed": removed,
            "target": spec.target, "action": spec.action}


def _result(plan: _Plan) -> dict:
    changed = plan.changed()
    result = {
        "files": [f.rel for f in changed],
        "changes": plan.changes,
        "diff": "".join(_diff(f.rel, f.initial, f.text) for f in changed),
    }
    warnings = [w for w in (_syntax_warning(f) for f in changed) if w]
    if warnings:
        result["syntax_warning"] = "\n".join(warnings)
    return result


# ---------------------------------------------------------------------- targets

def _locate_file(plan: _Plan, spec: _Spec) -> _File:
    """The file a spec edits; sets `spec.symbol` to the rest of the target."""
    if spec.action == "create":
        return plan.file(_new_file_path(plan, spec.target))
    parts = spec.target.split("/")
    for k in range(len(parts), 0, -1):
        candidate = "/".join(parts[:k])
        if not candidate.strip():
            continue
        path = confine(plan.root, candidate, writing=True)
        if path not in plan.files:
            require_regular(path, candidate, "moss edits regular files only")
        if plan.is_file(path):
            spec.symbol = "/".join(p for p in parts[k:] if p)
            return plan.file(path)
    raise _no_file(plan, spec.target)


def _new_file_path(plan: _Plan, target: str) -> Path:
    path = confine(plan.root, target, writing=True)
    if path not in plan.files:
        require_regular(path, target, "moss edits regular files only")
    if plan.exists(path):
        what = "directory" if path.is_dir() else "file"
        raise MossError(f"{target} already exists (a {what}); create only makes new files "
                        "(use replace or text to change a file)", kind="conflict")
    parent = path.parent
    while parent != plan.root and not plan.exists(parent):
        parent = parent.parent
    if parent != plan.root and not parent.is_dir():
        raise MossError(f"cannot create {target}: {parent.relative_to(plan.root)} is "
                        f"{special_kind(parent) or 'a file'}",
                        kind="usage")
    return path


def _no_file(plan: _Plan, target: str) -> MossError:
    """not_found for a target with no existing file in front; suggest the real path."""
    parts = target.split("/")
    guess_len = next((i + 1 for i, p in enumerate(parts) if "." in p.strip(".")), len(parts))
    guess, rest = "/".join(parts[:guess_len]), "/".join(parts[guess_len:])
    msg = (f"no file at the start of {target!r}: an edit target is the exact path of an "
           "existing file relative to the project root, optionally followed by /Symbol")
    try:
        found = resolve_path(plan.root, guess)
        if found.is_file():
            rel = found.relative_to(plan.root).as_posix()
            msg += f"; did you mean {rel}{'/' + rest if rest else ''}?"
        elif found.is_dir():
            msg = f"{guess} is a directory; an edit target must name a file"
    except MossError as e:
        if e.kind in ("ambiguous", "not_found") and "\n" in e.message:
            msg += "; candidates:\n" + e.message.split("\n", 1)[1]
    return MossError(msg, kind="not_found")


# ------------------------------------------------------------------------ loading

def _load(plan: _Plan, path: Path) -> _File:
    """Read a file into a _File (or an absent one); refuse binary and oversized files."""
    rel = path.relative_to(plan.root).as_posix()
    try:
        fd = plan.tree.open(rel, os.O_RDONLY)
    except (FileNotFoundError, NotADirectoryError):
        return _File(path=path, rel=rel, original=None, tree=plan.tree,
                     lang=treesitter.language_for(path, b""))
    except IsADirectoryError:
        raise MossError(f"{rel} is not a regular file", kind="usage") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if st.st_size > MAX_BYTES:
            raise MossError(f"{rel} is {st.st_size:,} bytes; moss edits files up to "
                            f"{MAX_BYTES // (1024 * 1024)} MB", kind="usage")
        data = fh.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise MossError(f"{rel} grew past {MAX_BYTES // (1024 * 1024)} MB while it was read",
                        kind="usage")
    if b"\0" in data[:8192]:
        raise MossError(f"{rel} is a binary file; moss edits text files only", kind="usage")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise MossError(f"{rel} is not UTF-8 text; moss edits UTF-8 text files only",
                        kind="usage") from None
    crlf = data.count(b"\r\n")
    eol = "\r\n" if crlf and crlf == data.count(b"\n") else "\n"
    if eol != "\n":
        text = text.replace("\r\n", "\n")
    f = _File(path=path, rel=rel, original=data, tree=plan.tree, mode=stat.S_IMODE(st.st_mode), eol=eol,
              final_newline=not data or data.endswith(b"\n"),
              lang=treesitter.language_for(path, data))
    f.set(text)
    f.initial = f.text
    return f


# ------------------------------------------------------------------ whole-file edits

def _create(f: _File, spec: _Spec) -> None:
    f.set(spec.content)


def _file_edit(f: _File, spec: _Spec) -> None:
    action, text = spec.action, f.existing()
    if action == "insert":
        action = "prepend" if spec.position == "before" else "append"
    if action == "delete":
        f.set(None)
    elif action == "replace":
        f.set(spec.content)
    elif action == "append":
        f.set(text + _own_lines(_given(spec.content)))
    elif action == "prepend":
        f.set(_own_lines(_given(spec.content)) + text)
    elif action == "text":
        _exact_edit(f, spec, 0, len(text), f.rel)


def _own_lines(content: str) -> str:
    return content if not content or content.endswith("\n") else content + "\n"


# ---------------------------------------------------------------------- symbol edits

def _symbol_edit(f: _File, symbol: str, spec: _Spec) -> None:
    if f.lang is None:
        raise MossError(f"{f.rel} is not source code moss parses, so it has no symbol "
                        f"{symbol}; edit it with action text (old/content), or check the "
                        "path", kind="usage")
    if spec.action in ("create", "append", "prepend"):
        raise MossError(f"{spec.action} takes a file, not a symbol; to add code next to "
                        f"{symbol} use insert with position before/after", kind="usage")
    text = f.existing()
    data = text.encode("utf-8")
    syms = treesitter.symbols_of(f.path, data)
    sym = _pick(syms, symbol, f.rel)
    span = _symbol_span(text, data, f.lang, sym)
    if spec.action == "delete":
        f.set(_delete(text, span))
    elif spec.action == "replace":
        f.set(_replace(text, span, _given(spec.content), f.lang))
    elif spec.action == "insert":
        f.set(_insert(text, span, _given(spec.content), _given(spec.position), f.lang, sym, syms))
    elif spec.action == "text":
        _exact_edit(f, spec, span.doc, span.end, f"{f.rel}/{sym.path}")


def _pick(syms: list[treesitter.Symbol], query: str, rel: str) -> treesitter.Symbol:
    """One symbol; not_found lists the file's top-level symbols."""
    try:
        return treesitter.pick_symbol(syms, query, rel)
    except MossError as e:
        if e.kind != "not_found":
            raise
        top = list(dict.fromkeys(s.name for s in syms))
        msg = f"no symbol {query} in {rel}"
        close = e.data.get("suggestions") or []
        if close:
            msg += "; did you mean: " + ", ".join(close)
        msg += ("; its top-level symbols: " + ", ".join(top[:40]) if top
                else "; it defines no symbols")
        raise MossError(msg, kind="not_found", suggestions=close, symbols=top) from None


def _symbol_span(text: str, data: bytes, lang: str, sym: treesitter.Symbol) -> _Span:
    char = _char_offsets(text, data)
    doc = char(min(sym.doc_start_byte, sym.start_byte))
    end = char(sym.end_byte)
    first, after = _line_start(text, doc), _line_end(text, end)
    lead, tail = text[first:doc], text[end:after]
    own = not lead.strip() and tail.strip() in ("", ",", ";")
    return _Span(doc=doc, attrs=char(sym.start_byte), item=char(_item_start(data, lang, sym)),
                 end=end, first=first, after=after, own_lines=own,
                 indent=_indent(text[first:after]), kind=sym.kind)


def _char_offsets(text: str, data: bytes):
    if len(text) == len(data):
        return lambda b: b
    return lambda b: len(data[:b].decode("utf-8"))


def _item_start(data: bytes, lang: str, sym: treesitter.Symbol) -> int:
    """Byte where the item itself starts, after its attributes/decorators."""
    root = treesitter.parse(data, lang).root_node
    node = root.named_descendant_for_byte_range(sym.start_byte, sym.end_byte)
    if node is None:
        return sym.start_byte
    if node.start_byte == sym.start_byte and node.end_byte == sym.end_byte:
        if node.type == "decorated_definition":  # Python: decorators wrap the def
            inner = node.child_by_field_name("definition")
            return inner.start_byte if inner is not None else sym.start_byte
        return sym.start_byte
    for child in node.named_children:  # Rust: attributes are the item's siblings
        if child.end_byte == sym.end_byte and child.start_byte >= sym.start_byte:
            return child.start_byte
    return sym.start_byte


def _delete(text: str, span: _Span) -> str:
    if span.own_lines:
        return _tidy_gap(text[:span.first] + text[span.after:], span.first, span.indent)
    start, end = span.doc, span.end
    m = re.match(r"[ \t]*,[ \t]*", text[end:])
    if m:
        end += m.end()
    else:
        m = re.search(r",[ \t]*$", text[:start])
        if m:
            start = m.start()
    return text[:start] + text[end:]


def _replace(text: str, span: _Span, content: str, lang: str) -> str:
    if not content.strip():
        raise MossError("replace needs non-empty content (to remove the symbol use "
                        "action delete)", kind="usage")
    start = _replace_start(span, content, lang)
    if not span.own_lines:
        new = content.strip("\n")
        if text[span.end:].lstrip(" \t").startswith(",") and new.rstrip().endswith(","):
            new = new.rstrip()[:-1]
        return text[:start] + new + text[span.end:]
    line_start = _line_start(text, start)
    block = _reindent(content, span.indent)
    if text[line_start:start].strip():  # something else precedes it on that line
        line_start, block = start, block.lstrip(" \t")
    sep = text[span.end:span.after].strip()
    if sep and not block.rstrip().endswith(sep):
        block = block.rstrip("\n") + sep + "\n"
    return text[:line_start] + block + text[span.after:]


def _replace_start(span: _Span, content: str, lang: str) -> int:
    """See the module doc: the content's own head decides what it replaces."""
    head = next((line.strip() for line in content.split("\n") if line.strip()), "")
    spec = treesitter.LANGUAGES.get(lang)
    if spec and head.startswith(spec.doc_markers):
        return span.doc
    if spec and head.startswith(spec.attr_markers):
        return span.attrs
    return span.item


def _insert(text: str, span: _Span, content: str, position: str, lang: str,
            sym: treesitter.Symbol, syms: list[treesitter.Symbol]) -> str:
    if not span.own_lines:
        line = _line_no(text, span.doc)
        raise MossError(f"{sym.path} shares line {line} with other code, so there is no "
                        "line above or below it to insert on; use action text", kind="usage")
    block = _reindent(content, span.indent)
    if not block:
        raise MossError("insert needs non-empty content", kind="usage")
    prev, nxt = _neighbours(sym, syms)
    gap_before, gap_after = _gap(prev, sym), _gap(sym, nxt)
    if position == "before":
        gap = _first_known(gap_before, gap_after, _default_gap(lang, span))
        return text[:span.first] + block + "\n" * gap + text[span.first:]
    gap = _first_known(gap_after, gap_before, _default_gap(lang, span))
    return text[:span.after] + "\n" * gap + block + text[span.after:]


def _neighbours(sym: treesitter.Symbol, syms: list[treesitter.Symbol]):
    """The symbols just before and after `sym` in its block (None at either end)."""
    siblings = sym.parent.children if sym.parent is not None else syms
    i = next(k for k, s in enumerate(siblings) if s is sym)
    return (siblings[i - 1] if i > 0 else None,
            siblings[i + 1] if i + 1 < len(siblings) else None)


def _gap(upper: treesitter.Symbol | None, lower: treesitter.Symbol | None) -> int | None:
    """Lines between two neighbouring symbols of the same sort, else None."""
    if upper is None or lower is None or _sort(upper) != _sort(lower):
        return None
    top = min(lower.doc_start_line or lower.start_line, lower.start_line)
    return max(top - upper.end_line - 1, 0)


def _sort(sym: treesitter.Symbol) -> str:
    return "function" if sym.kind == "method" else sym.kind


def _first_known(*gaps: int | None) -> int:
    return next(g for g in gaps if g is not None)


def _default_gap(lang: str, span: _Span) -> int:
    if span.kind in _FLAT_KINDS:
        return 0
    return 2 if lang == "python" and not span.indent else 1


# ---------------------------------------------------------------------- layout helpers

def _line_start(text: str, pos: int) -> int:
    return text.rfind("\n", 0, pos) + 1


def _line_end(text: str, end: int) -> int:
    """Just past the newline ending the line that holds the character before `end`."""
    j = text.find("\n", max(end - 1, 0))
    return len(text) if j < 0 else j + 1


def _indent(line: str) -> str:
    return line[:len(line) - len(line.lstrip(" \t"))]


def _blanks_before(text: str, pos: int) -> tuple[int, int, str | None]:
    """Blank lines ending at line start `pos`: (count, where the run starts, the
    non-blank line above them or None at the start of the file)."""
    count = 0
    while pos > 0:
        start = text.rfind("\n", 0, pos - 1) + 1
        line = text[start:pos]
        if line.strip():
            return count, pos, line
        count, pos = count + 1, start
    return count, pos, None


def _blanks_after(text: str, pos: int) -> tuple[int, int, str | None]:
    """Blank lines starting at line start `pos`: (count, where the run ends, the
    non-blank line below them or None at the end of the file)."""
    count = 0
    while pos < len(text):
        j = text.find("\n", pos)
        end = len(text) if j < 0 else j + 1
        line = text[pos:end]
        if line.strip():
            return count, pos, line
        count, pos = count + 1, end
    return count, pos, None


def _sibling(line: str | None, indent: str) -> bool:
    """A neighbouring line at the symbol's level or deeper (not the block's opener or
    closer, not the start or end of the file)."""
    return line is not None and len(_indent(line)) >= len(indent)


def _tidy_gap(text: str, pos: int, indent: str) -> str:
    """Blank lines around the hole a deletion left at line start `pos`."""
    n_before, run_start, prev = _blanks_before(text, pos)
    n_after, run_end, nxt = _blanks_after(text, pos)
    open_before, open_after = not _sibling(prev, indent), not _sibling(nxt, indent)
    if open_before and open_after:
        return text[:run_start] + text[run_end:]
    if open_before:
        return text[:pos] + text[run_end:]
    if open_after:
        return text[:run_start] + text[pos:]
    cut = pos
    for _ in range(min(n_before, n_after)):
        cut = text.index("\n", cut) + 1
    return text[:pos] + text[cut:]


def _reindent(content: str, indent: str) -> str:
    """`content` as lines at `indent` (see the module doc), ending with a newline."""
    lines = content.split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        return ""
    if _lost_first_indent(lines, indent):
        lines[0] = indent + lines[0]
    body = textwrap.dedent("\n".join(lines)).split("\n")
    return "".join((indent + line if line.strip() else "") + "\n" for line in body)


def _lost_first_indent(lines: list[str], indent: str) -> bool:
    rest = [line for line in lines[1:] if line.strip()]
    if _indent(lines[0]) or not indent or not rest:
        return False
    least = min(len(_indent(line)) for line in rest)
    last = rest[-1]
    return least > len(indent) or (
        least == len(indent) == len(_indent(last)) and last.strip().startswith(_CLOSERS))


# -------------------------------------------------------------------- exact-text edit

def _exact_edit(f: _File, spec: _Spec, lo: int, hi: int, where: str) -> None:
    text, old = f.existing(), _given(spec.old)
    hits = _occurrences(text, old, lo, hi)
    if not hits:
        raise MossError(_no_match(text, old, lo, hi, where), kind="not_found")
    if len(hits) > 1:
        lines = [_line_no(text, i) for i in hits]
        shown = ", ".join(map(str, lines[:10])) + (", …" if len(lines) > 10 else "")
        raise MossError(f"old text occurs {len(hits)} times in {where} (lines {shown}); "
                        "include more surrounding text so it occurs once", kind="ambiguous",
                        count=len(hits), lines=lines)
    i = hits[0]
    f.set(text[:i] + _given(spec.content) + text[i + len(old):])


def _line_no(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _occurrences(text: str, old: str, lo: int, hi: int, limit: int = 100) -> list[int]:
    """Start offsets of `old` within text[lo:hi], overlapping ones included."""
    hits: list[int] = []
    i = text.find(old, lo, hi)
    while i >= 0 and len(hits) < limit:
        hits.append(i)
        i = text.find(old, i + 1, hi)
    return hits


_SPACES = re.compile(r"\s+")


def _no_match(text: str, old: str, lo: int, hi: int, where: str) -> str:
    """Say where the text nearly is: outside the symbol searched, the same lines with
    other whitespace, or else the closest line."""
    msg = f"old text not found in {where}"
    elsewhere = _occurrences(text, old, 0, len(text), limit=3)
    if elsewhere:
        at = ", ".join(str(_line_no(text, i)) for i in elsewhere)
        return msg + f"; it occurs outside it, at line {at}"
    first_line = _line_no(text, lo)
    lines = text[_line_start(text, lo):hi].split("\n")
    squeezed = [_SPACES.sub(" ", line).strip() for line in lines]
    want = [_SPACES.sub(" ", line).strip() for line in old.strip("\n").split("\n")]
    i = _squeezed_match(squeezed, want)
    if i is not None:
        return (msg + f"; it matches line {first_line + i} if indentation and spacing "
                "are ignored: copy the text exactly, whitespace included")
    target = next((w for w in want if w), "")
    close = difflib.get_close_matches(target, [s for s in squeezed if s], n=1, cutoff=0.4)
    if close:
        i = squeezed.index(close[0])
        msg += f"; the closest line is {first_line + i}: {lines[i].strip()[:160]}"
    return msg


def _squeezed_match(lines: list[str], want: list[str]) -> int | None:
    """Index of the first window of `lines` holding `want` (first line as a suffix,
    last as a prefix, a single line anywhere), all whitespace-squeezed."""
    n = len(want)
    for i in range(len(lines) - n + 1):
        window = lines[i:i + n]
        if n == 1:
            found = want[0] in window[0]
        else:
            found = (window[0].endswith(want[0]) and window[1:-1] == want[1:-1]
                     and window[-1].startswith(want[-1]))
        if found:
            return i
    return None


# -------------------------------------------------------------------- diffs, warnings

def _diff(rel: str, before: str | None, after: str | None) -> str:
    if before == after:
        return ""
    a = before.split("\n")[:-1] if before else []
    b = after.split("\n")[:-1] if after else []
    out = difflib.unified_diff(a, b, "/dev/null" if before is None else f"a/{rel}",
                               "/dev/null" if after is None else f"b/{rel}",
                               n=DIFF_CONTEXT, lineterm="")
    return "".join(line + "\n" for line in out)


def _count(diff: str) -> tuple[int, int]:
    lines = diff.split("\n")[2:]
    return (sum(1 for x in lines if x.startswith("+")),
            sum(1 for x in lines if x.startswith("-")))


def _syntax_warning(f: _File) -> str | None:
    """"path: parse error near line N" when the batch added parse errors to the file."""
    if f.lang is None or not f.text:
        return None
    errors = _parse_errors(f.text, f.lang)
    if not errors:
        return None
    before = len(_parse_errors(f.initial, f.lang)) if f.initial else 0
    if len(errors) <= before:
        return None
    return f"{f.rel}: parse error near line {errors[0]}"


def _parse_errors(text: str, lang: str, limit: int = 200) -> list[int]:
    """Lines (1-based) of the ERROR and MISSING nodes in a parse, in order."""
    root = treesitter.parse(text.encode("utf-8"), lang).root_node
    if not root.has_error:
        return []
    found: list[int] = []
    stack = [root]
    while stack and len(found) < limit:
        node = stack.pop()
        if node.is_error or node.is_missing:
            found.append(node.start_point[0] + 1)
            continue
        stack.extend(c for c in reversed(node.children) if c.has_error or c.is_missing)
    return found


# ------------------------------------------------------------------------- writing

def _commit(files: list[_File]) -> None:
    """Write every changed file, or restore the ones written if one write fails."""
    for f in files:
        _check_unchanged(f)
    done: list[_File] = []
    for f in files:
        try:
            _write(f)
        except (OSError, safefs.UnsafePath) as e:
            failed = _roll_back(done)
            note = ("the files already written were restored" if not failed else
                    "could not restore " + ", ".join(failed) + " (restore them by hand)")
            why = e.message if isinstance(e, MossError) else (e.strerror or str(e))
            raise MossError(f"writing {f.rel} failed ({why}); {note}",
                            kind="denied" if isinstance(e, MossError) else "io") from e
        done.append(f)


def _read_now(f: _File) -> bytes | None:
    """What is at the file's path now (None when nothing is), read without following a
    link anywhere on the way."""
    try:
        fd = f.tree.open(f.rel, os.O_RDONLY)
    except (FileNotFoundError, NotADirectoryError):
        return None
    with os.fdopen(fd, "rb") as fh:
        return fh.read(MAX_BYTES + 1)


def _check_unchanged(f: _File) -> None:
    try:
        now = _read_now(f)
    except safefs.UnsafePath as e:
        raise MossError(f"{f.rel} changed on disk while the edit was being prepared ({e.message}); "
                        "nothing was written", kind="conflict") from None
    except OSError:
        now = b""
    if now != f.original:
        raise MossError(f"{f.rel} changed on disk while the edit was being prepared; "
                        "nothing was written: view it again and redo the edit",
                        kind="conflict")


def _write(f: _File) -> None:
    data = f.encoded()
    if data is None:
        f.tree.unlink(f.rel, missing_ok=False)
        return
    if f.original is None:
        f.made_dirs = _make_parents(f)
    try:
        f.tree.write_atomic(f.rel, data, f.mode, create_dirs=False)
    except (OSError, safefs.UnsafePath):
        _remove_dirs(f.tree, f.made_dirs)
        raise


def _make_parents(f: _File) -> list[str]:
    """Create missing parent folders (never through a link); returns the ones made,
    deepest first."""
    made: list[str] = []
    parent = os.path.dirname(f.rel)
    while parent and f.tree.lstat(parent) is None:
        made.append(parent)
        parent = os.path.dirname(parent)
    for d in reversed(made):
        with f.tree.parent(d) as (dfd, name):
            os.mkdir(name, 0o755, dir_fd=dfd)
    return made


def _remove_dirs(tree: safefs.Tree, made: list[str]) -> None:
    """Remove folders `_make_parents` made (deepest first), if still empty."""
    for d in made:
        try:
            with tree.parent(d) as (dfd, name):
                os.rmdir(name, dir_fd=dfd)
        except (OSError, MossError):
            break


def _roll_back(done: list[_File]) -> list[str]:
    """Put back the originals of files already written; returns those that failed."""
    failed: list[str] = []
    for f in reversed(done):
        try:
            if f.original is None:
                f.tree.unlink(f.rel)
                _remove_dirs(f.tree, f.made_dirs)
            else:
                f.tree.write_atomic(f.rel, f.original, f.mode, create_dirs=False)
        except (OSError, MossError):
            failed.append(f.rel)
    return failed

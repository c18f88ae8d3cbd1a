"""`view`: what an agent sees when it looks at the project.

    view(root, ".")                 directory tree (.gitignore respected)
    view(root, "src/main.rs")       file skeleton: symbols, signatures, line ranges, docs
    view(root, "llm.rs")            fuzzy: the unique path ending in llm.rs
    view(root, "main.rs:10-40")     numbered lines (also `:10-` and `:10`)
    view(root, "llm.rs/Provider")   a symbol's source (also `file/Parent/child`)
    view(root, "Provider")          a symbol found anywhere, when no path matches

`depth` for a skeleton: 0 top-level symbols only, 1 (default) also their members
(methods, fields, enum variants), 2 one level more, -1 everything. For a tree: 0 or 1
fit the tree to a budget of lines, summarising deeper directories; -1 shows everything; 2
also lists each source file's top-level symbols.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from ..errors import MossError
from .caps import cap
from .resolve import (
    RG_WALK_FLAGS, list_files, require_regular, resolve_path, rg_binary,
)
from .treesitter import (
    LANGUAGES, Symbol, for_lookup, innermost, language_for, match_symbols, outline, pick_symbol,
    structure,
)
from ..ui import visible_name

MAX_OUTLINE_BYTES = 2_000_000      # larger files get a one-line message, not a skeleton
MAX_RANGE_BYTES = 64_000_000       # line ranges still work up to this size
HEAD_LINES = 40                    # lines shown for a file without symbols
TREE_BUDGET = 300                  # lines a tree may take before deeper levels fold
TREE_PER_DIR = 100                 # entries listed per directory before "… N more"
SYMBOL_WINDOW = 150                # `file:N` shows at most this many lines of a symbol
MAX_LINE_CHARS = 2000              # a longer single line is shortened in line views

_LINE_SPEC = re.compile(r"^(?P<path>.+?):L?(?P<a>\d+)(?:(?P<dash>-)L?(?P<b>\d+)?)?$")
def view(root: Path, target: str, *, depth: int = 1, max_chars: int = 20000,
         compact: bool = False) -> str:
    """Render `target` (a directory, file, `file:A-B`, `file:N`, `file/Symbol` or a bare
    symbol name) relative to project `root`. Raises MossError not_found / ambiguous /
    denied / usage with a message that says what to try instead.

    `compact`: the form an agent's context gets (what each token buys): a skeleton shows
    each symbol's first line only and no docstring summaries, a symbol's source keeps only
    the first line of its docstring; each says which command shows what it left out."""
    root = Path(root).resolve()
    if not root.is_dir():
        raise MossError(f"project root {root} is not a directory", kind="not_found")
    target = (target or ".").strip() or "."
    try:
        return cap(_view(root, target, depth, compact), max_chars)
    except OSError as e:  # a name the OS refuses (too long, ...), a file that vanished
        raise MossError(f"{_short(target)}: {e.strerror or e}", kind="usage") from None


def _short(text: str, n: int = 120) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


# --------------------------------------------------------------------------- dispatch

def _rel(root: Path, path: Path) -> str:
    rel = path.relative_to(root).as_posix()
    return rel if rel != "." else "."


def _shown(root: Path, path: Path) -> str:
    """_rel as shown: one line whatever the name holds (a newline, ESC, U+202E)."""
    return visible_name(_rel(root, path))


def _view(root: Path, target: str, depth: int, compact: bool = False) -> str:
    if target in (".", "./"):
        return _tree(root, root, depth)
    files: list[str] | None = None
    if not os.path.exists(root / target):  # False, not an error, for a name too long
        m = _LINE_SPEC.match(target)
        if m:
            path = resolve_path(root, m["path"], root_is_real=True)
            if path.is_dir():
                raise MossError(f"{m['path']} is a directory; line numbers need a file",
                                kind="usage")
            a = int(m["a"])
            if m["dash"]:
                b = int(m["b"]) if m["b"] else None
                return _range_view(root, path, a, b)
            return _line_view(root, path, a)
        found = _exact_file_and_symbol(root, target)
        if found is not None:
            return _symbol_view(root, *found, compact=compact, named=True)
        files = list_files(root)
    try:
        path = resolve_path(root, target, files=files, suggest=False, root_is_real=True)
    except MossError as err:
        if err.kind != "not_found" or err.data.get("loop"):
            raise
        return _fallback(root, target, depth, files, compact)
    if path.is_dir():
        return _tree(root, path, depth)
    return _skeleton(root, path, depth, compact, named=target.strip("/") == _rel(root, path))


def _exact_file_and_symbol(root: Path, target: str) -> tuple[Path, str] | None:
    """(file, symbol path) when `target` is an existing file's exact path followed by a
    symbol path (`src/llm.rs/Provider`), else None. An exact path wins over fuzzy
    matches, as in resolve_path; and this needs no listing of the project's files."""
    parts = [p for p in target.strip("/").split("/") if p]
    for i in range(len(parts) - 1, 0, -1):
        prefix = "/".join(parts[:i])
        lexical = os.path.normpath(root / prefix)
        if not (lexical + os.sep).startswith(str(root) + os.sep) or not os.path.isfile(lexical):
            continue
        path = resolve_path(root, prefix, suggest=False, root_is_real=True)  # exact: confinement, symlinks
        if path.is_file():
            return path, "/".join(parts[i:])
    return None


def _not_found(root: Path, target: str, files: list[str] | None) -> MossError:
    """The error to show for `target`, with "did you mean" suggestions (computed only now)."""
    try:
        resolve_path(root, target, files=files, root_is_real=True)
    except MossError as err:
        return err
    return MossError(f"{target}: no such file or directory", kind="not_found")


def _fallback(root: Path, target: str, depth: int, files: list[str] | None,
              compact: bool = False) -> str:
    """`file/Symbol`, `dir/Symbol` or a bare `Symbol` when no path matched."""
    parts = [p for p in target.strip("/").split("/") if p]
    for i in range(len(parts) - 1, 0, -1):
        prefix = "/".join(parts[:i])
        try:
            path = resolve_path(root, prefix, files=files, suggest=False, root_is_real=True)
        except MossError as e:
            if e.kind == "not_found" and not e.data.get("loop"):
                continue
            raise
        rest = "/".join(parts[i:])
        if not path.is_dir():
            require_regular(path, prefix, "view reads regular files and directories only")
        if path.is_file():
            return _symbol_view(root, path, rest, compact=compact)
        found = _symbol_search(root, rest, path, compact)
        if found is not None:
            return found
        err = _not_found(root, target, files)
        raise MossError(f"{err.message}\n(no symbol {rest} under {_shown(root, path)}/ either)",
                        kind="not_found", **err.data)
    found = _symbol_search(root, target, root, compact)
    if found is not None:
        return found
    err = _not_found(root, target, files)
    raise MossError(f"{err.message}\n(no symbol of that name either)", kind="not_found",
                    **err.data)


# --------------------------------------------------------------------------- reading

def _is_binary(data: bytes) -> bool:
    return b"\0" in data[:8192]


def _load(root: Path, path: Path, limit: int) -> tuple[str, bytes] | str:
    """(text, the bytes read), or a one-line message for a binary or oversized file."""
    rel = _shown(root, path)
    require_regular(path, rel, "view reads regular files only (reading it might never end)")
    size = path.stat().st_size
    if size > limit:
        return (f"# {rel}: {_human(size)}, too large to outline (limit "
                f"{_human(limit)}); use `{rel}:A-B` for lines or text-search")
    data = path.read_bytes()
    if _is_binary(data):
        return f"# {rel}: binary file ({size:,} bytes), not shown"
    try:
        return data.decode("utf-8"), data
    except UnicodeDecodeError:
        return f"# {rel}: binary or non-UTF-8 file ({size:,} bytes), not shown"


def _span(a: int, b: int) -> str:
    return f"L{a}" if a == b else f"L{a}-{b}"


def _human(n: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:,} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1000
    return str(n)


def _split_lines(text: str, upto: int | None = None) -> list[str]:
    """Lines split on \n only (as tree-sitter and ripgrep count them), \r dropped. With
    `upto`, only the first `upto` lines (a range near the top of a long file is not worth
    a string per line of the whole file)."""
    if upto is not None and upto >= 0:
        lines = text.split("\n", upto)
        if len(lines) > upto:
            del lines[upto:]  # the rest of the file, in one piece
        elif lines[-1] == "":
            lines.pop()
    else:
        lines = text.split("\n")
        if lines[-1] == "":
            lines.pop()
    if "\r" not in text:  # (most files: a C scan instead of a Python pass over every line)
        return lines
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _numbered(lines: list[str], first: int, width: int, mark: int | None = None) -> list[str]:
    out = []
    for i, line in enumerate(lines, start=first):
        if len(line) > MAX_LINE_CHARS:
            line = line[:MAX_LINE_CHARS] + f"… [+{len(line) - MAX_LINE_CHARS:,} chars]"
        sep = ">" if i == mark else "|"
        out.append(f"{i:>{width}} {sep} {line}".rstrip())
    return out


# --------------------------------------------------------------------------- skeleton

def _doc_line(lang: str, doc: str, module: bool = False) -> str:
    spec = LANGUAGES.get(lang)
    style = spec and (spec.module_doc_style if module else spec.doc_style)
    pre, post = style or ("# ", "")
    return f"{pre}{doc}{post}"


COMPACT_SIGNATURE = 100  # characters of a signature a compact skeleton shows


def _compact_signature(sig: str, lang: str) -> str:
    """A skeleton line's signature, compact: in Python without `def` and a method's `self`/
    `cls` (the nesting says it is a method), cut to COMPACT_SIGNATURE characters."""
    if lang == "python":
        sig = _PY_DEF.sub(r"\1", sig, count=1)
        sig = _PY_SELF.sub("(", sig, count=1)
        sig = _PY_TRAILING_COMMENT.sub(r"\1", sig)
    return sig if len(sig) <= COMPACT_SIGNATURE else sig[:COMPACT_SIGNATURE - 1].rstrip() + "…"


_PY_DEF = re.compile(r"^((?:@\S+ )*(?:async )?)def ")
_PY_TRAILING_COMMENT = re.compile(r"(\)(?:\s*->\s*[^:#]+)?):\s*#.*$")  # a comment after the ":"
_PY_SELF = re.compile(r"\((?:self|cls)(?:, |(?=\)))")


def _render_symbols(syms: list[Symbol], lang: str, level: int, depth: int,
                    out: list[str], compact: bool = False) -> None:
    """One line per symbol, `signature L<start>-<end>` and its docstring summary under it;
    `compact`: `signature L<start>` and no summary (a symbol's view shows both)."""
    for s in syms:
        ind = "  " * level
        line = (f"{ind}{_compact_signature(s.signature, lang)} L{s.start_line}" if compact
                else f"{ind}{s.signature} {s.lines}")
        expand = depth < 0 or level < depth
        if s.children and not expand and s.kind != "variant":
            line += f" (+{len(s.children)} more)"
        out.append(line)
        if s.doc and not compact:
            out.append(f"{ind}  {_doc_line(lang, s.doc)}")
        if s.children and expand:
            _render_symbols(s.children, lang, level + 1, depth, out, compact)


def _head(rel: str, lines: list[str], out: list[str]) -> None:
    shown = lines[:HEAD_LINES]
    out.extend(_numbered(shown, 1, len(str(len(shown)))))
    if len(lines) > HEAD_LINES:
        out.append(f"… {len(lines) - HEAD_LINES:,} more lines (view {rel}:"
                   f"{HEAD_LINES + 1}-{len(lines)})")


_MD_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def _markdown_outline(lines: list[str], depth: int) -> list[str]:
    heads: list[tuple[int, str, int]] = []  # level, title, line
    fence = None
    for i, line in enumerate(lines, 1):
        s = line.lstrip()
        if s.startswith("```") or s.startswith("~~~"):
            fence = None if fence and s.startswith(fence) else (fence or s[:3])
            continue
        if fence is None:
            m = _MD_HEADING.match(line)
            if m:
                heads.append((len(m[1]), m[2], i))
    out = []
    top = min((h[0] for h in heads), default=1)
    for k, (lvl, title, start) in enumerate(heads):
        end = len(lines)
        for lvl2, _, start2 in heads[k + 1:]:
            if lvl2 <= lvl:
                end = start2 - 1
                break
        rel_level = lvl - top
        if depth >= 0 and rel_level > depth + 1:
            continue
        rng = f"L{start}" if start == end else f"L{start}-{end}"
        out.append(f"{'  ' * rel_level}{'#' * lvl} {title} {rng}")
    return out


def _skeleton(root: Path, path: Path, depth: int, compact: bool = False, named: bool = False) -> str:
    """`named`: the target was the file's exact path, which a compact header need not repeat."""
    rel = _shown(root, path)
    loaded = _load(root, path, MAX_OUTLINE_BYTES)
    if isinstance(loaded, str):
        return loaded
    text, _ = loaded
    lines = _split_lines(text)
    if compact:
        out = [f"# {len(lines)} lines" if named else f"# {rel}, {len(lines)} lines"]
    else:
        out = [f"# {rel}", f"Lines: {len(lines)}"]
    if not lines:
        out.append("(empty file)")
        return "\n".join(out) + "\n"
    lang = language_for(path, text[:200].encode())
    if lang:
        syms, mdoc = outline(path)
        if mdoc:
            out.append(_doc_line(lang, mdoc, module=True))
        out.append("")
        if syms:
            _render_symbols(syms, lang, 0, depth, out, compact)
            if compact:
                out.append(f"(first lines{', methods without self' if lang == 'python' else ''}; "
                           f"`view {rel}/NAME` for one whole, `--full` for end lines and docstrings)")
        else:
            out.append("(no symbols; first lines:)")
            _head(rel, lines, out)
        return "\n".join(out) + "\n"
    if path.suffix.lower() in (".md", ".markdown", ".mdx"):
        heads = _markdown_outline(lines, depth)
        if heads:
            out.append("")
            out.extend(heads)
            return "\n".join(out) + "\n"
    out.append("")
    _head(rel, lines, out)
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------- lines and symbols

def _range_view(root: Path, path: Path, a: int, b: int | None) -> str:
    rel = _shown(root, path)
    loaded = _load(root, path, MAX_RANGE_BYTES)
    if isinstance(loaded, str):
        return loaded
    text, _ = loaded
    lines = _split_lines(text, b)
    n = len(lines)  # when the file goes on past line b, n == b: neither a clamp nor a note then
    if a < 1:
        a = 1
    if b is not None and b < a:
        raise MossError(f"{rel}:{a}-{b}: the range ends before it starts", kind="usage")
    if a > n:
        raise MossError(f"{rel}:{a}: past the end of the file ({n} lines)", kind="usage")
    asked_b = b
    b = n if b is None or b > n else b
    head = f"# {rel}:{a}-{b}"
    if asked_b is not None and asked_b > n:
        head += f" (file has {n} lines; asked for {a}-{asked_b})"
    out = [head] + _numbered(lines[a - 1:b], a, len(str(b)))
    return "\n".join(out) + "\n"


def _line_view(root: Path, path: Path, n: int) -> str:
    rel = _shown(root, path)
    loaded = _load(root, path, MAX_RANGE_BYTES)
    if isinstance(loaded, str):
        return loaded
    text, _ = loaded
    lines = _split_lines(text)
    total = len(lines)
    if n < 1 or n > total:
        raise MossError(f"{rel}:{n}: no such line (the file has {total} lines)", kind="usage")
    sym = None
    if language_for(path) and path.stat().st_size <= MAX_OUTLINE_BYTES:
        sym = innermost(structure(path), n, skip_kinds=("field", "variant"))
    if sym is not None:
        a, b = sym.doc_start_line, sym.end_line
        head = f"# {rel}:{n} in {sym.path} ({_span(a, b)})"
        if b - a + 1 > SYMBOL_WINDOW:
            a, b = max(a, n - SYMBOL_WINDOW // 2), min(b, n + SYMBOL_WINDOW // 2)
            head += f", showing {a}-{b}"
    else:
        a, b = max(1, n - 10), min(total, n + 10)
        head = f"# {rel}:{n} (not inside a symbol; lines {a}-{b})"
    return "\n".join([head] + _numbered(lines[a - 1:b], a, len(str(b)), mark=n)) + "\n"


def _lines_from(data: bytes, start_byte: int, count: int) -> list[str]:
    """`count` lines of a UTF-8 file from the one holding `start_byte`: what
    `_split_lines(text)[a - 1:a - 1 + count]` gives, without splitting the whole file."""
    begin = data.rfind(b"\n", 0, start_byte) + 1
    end = begin
    for _ in range(count):
        nl = data.find(b"\n", end)
        if nl == -1:
            end = len(data)
            break
        end = nl + 1
    return _split_lines(data[begin:end].decode("utf-8"))


def _symbol_source(root: Path, path: Path, sym: Symbol, all_syms: list[Symbol],
                   data: bytes, complete=None, compact: bool = False, asked: bool = False) -> str:
    """`data` is the file's (UTF-8) bytes; `complete(symbol)` fills in the signature of a
    symbol from `for_lookup` before it is shown. `compact`: no line for the enclosing symbol
    (the path names it), and a Python docstring cut to its first line (the cut lines named);
    with `asked` (the view named this file and symbol exactly) the header is its lines alone."""
    complete = complete or (lambda s: None)
    rel = _shown(root, path)
    a, b = sym.doc_start_line, sym.end_line
    out = [f"# {_span(a, b)}" if compact and asked else f"# {rel}/{sym.path} ({_span(a, b)})"]
    if sym.parent is not None and not compact:  # compact: the path names it; its view shows it
        complete(sym.parent)
        out.append(f"# in {sym.parent.signature} {sym.parent.lines}")
    if sym.kind != "impl":
        impls = [s for s in all_syms if s.kind == "impl" and s.name == sym.name
                 and s is not sym and sym.parent is None]
        if impls:
            for s in impls:
                complete(s)
            out.append("# also: " + "; ".join(f"{s.signature} {s.lines}" for s in impls))
    body = _lines_from(data, sym.doc_start_byte, b - a + 1)
    out.extend(_cut_docstring(body, a, sym.start_line, rel) if compact and path.suffix == ".py" else body)
    return "\n".join(out) + "\n"


_DOC_OPEN = re.compile(r"^\s*[rRuU]?(\"\"\"|''')")


def _cut_docstring(body: list[str], first: int, start: int, rel: str) -> list[str]:
    """`body` (lines from line `first`; the symbol's own start at `start`) with the lines of
    its docstring after its first line of text replaced by one line naming them (`… docstring
    L12-30 cut: view FILE:12-30`). Unchanged when the docstring takes a line or two."""
    i = start - first
    for j in range(i, min(i + 12, len(body))):  # the signature ends at a line ending with ":"
        if body[j].split("#", 1)[0].rstrip().endswith(":"):
            break
    else:
        return body
    k = j + 1
    m = _DOC_OPEN.match(body[k]) if k < len(body) else None
    if not m:
        return body
    quote = m.group(1)
    rest = body[k][m.end():]
    if quote in rest:
        return body  # a one-line docstring
    keep = k + (1 if rest.strip() else 2)  # quotes alone on their line: keep the summary under them
    end = next((e for e in range(k + 1, len(body)) if quote in body[e]), None)
    if end is None or end - keep < 1:  # a line or two is not worth a line saying so
        return body
    lo, hi = first + keep, first + end
    ind = body[k][: len(body[k]) - len(body[k].lstrip())]
    return body[:keep] + [f"{ind}… docstring L{lo}-{hi} cut: view {rel}:{lo}-{hi}"] + body[end + 1:]


def _symbol_view(root: Path, path: Path, query: str, compact: bool = False, named: bool = False) -> str:
    """`named`: `path` was given exactly, so a compact header need not repeat what was asked."""
    rel = _shown(root, path)
    loaded = _load(root, path, MAX_OUTLINE_BYTES)
    if isinstance(loaded, str):
        return loaded
    _, data = loaded
    if language_for(path) is None:
        raise MossError(f"{rel}: no symbols for this kind of file (no path {rel}/{query})",
                        kind="not_found")
    syms, complete = for_lookup(path, data, query)
    sym = pick_symbol(syms, query, rel)
    return _symbol_source(root, path, sym, syms, data, complete, compact,
                          asked=named and query.strip("/") == sym.path)


_SOURCE_GLOB = "*.{" + ",".join(sorted({e.lstrip(".") for s in LANGUAGES.values()
                                       for e in s.extensions})) + "}"
_SEARCH_FILES = 300


def _symbol_search(root: Path, query: str, scope: Path, compact: bool = False) -> str | None:
    """Find a symbol by name across source files under `scope`; None if there is none."""
    want = [p for p in re.split(r"::|[/.:]", query) if p]
    if not want or not re.fullmatch(r"[\w$#-]+", want[-1]):
        return None
    proc = subprocess.run(
        [rg_binary(), "-l", "--null", "-F", "-w", "-i", *RG_WALK_FLAGS, "--type-add",
         f"moss:{_SOURCE_GLOB}", "-t", "moss", "-e", want[-1], "--", _rel(root, scope)],
        cwd=root, stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    paths = sorted(p[2:] if p.startswith("./") else p  # NUL-separated: a name may hold a newline
                   for p in proc.stdout.decode("utf-8", "surrogateescape").split("\0") if p)
    hits: list[tuple[Path, Symbol, list[Symbol]]] = []
    for rel in paths[:_SEARCH_FILES]:
        path = root / rel
        try:
            if path.stat().st_size > MAX_OUTLINE_BYTES:
                continue
            syms = outline(path)[0]
        except OSError:
            continue
        hits.extend((path, s, syms) for s in match_symbols(syms, query))
    if not hits:
        return None
    # Same preferences as within one file: exact case, full path, a type over its impl.
    exact_case = [h for h in hits if h[1].segments[-len(want):] == want]
    hits = exact_case or hits
    full = [h for h in hits if len(h[1].segments) == len(want)]
    hits = full or hits
    not_impl = [h for h in hits if h[1].kind != "impl"]
    hits = not_impl or hits
    if len(hits) == 1:
        path, sym, syms = hits[0]
        loaded = _load(root, path, MAX_OUTLINE_BYTES)
        return loaded if isinstance(loaded, str) else _symbol_source(root, path, sym, syms, loaded[1],
                                                                     compact=compact)
    listing = "\n".join(f"  {_shown(root, p)}/{s.path} ({s.kind}, {s.lines})"
                        for p, s, _ in hits[:20])
    more = f"\n  … and {len(hits) - 20} more" if len(hits) > 20 else ""
    raise MossError(f"{query} matches {len(hits)} symbols; say which:\n{listing}{more}",
                    kind="ambiguous",
                    candidates=[f"{_rel(root, p)}/{s.path}" for p, s, _ in hits])


# ------------------------------------------------------------------------------ tree

class _Dir:
    __slots__ = ("dirs", "files")

    def __init__(self) -> None:
        self.dirs: dict[str, _Dir] = {}
        self.files: list[str] = []

    def counts(self) -> tuple[int, int]:
        d, f = len(self.dirs), len(self.files)
        for sub in self.dirs.values():
            sd, sf = sub.counts()
            d, f = d + sd, f + sf
        return d, f


def _build(files: list[str]) -> _Dir:
    top = _Dir()
    for f in files:
        node = top
        parts = f.split("/")
        for p in parts[:-1]:
            node = node.dirs.setdefault(p, _Dir())
        node.files.append(parts[-1])
    return top


def _sort_key(name: str) -> tuple[str, str]:
    return (name.casefold(), name)


def _entries(node: _Dir) -> tuple[list[tuple[str, _Dir]], list[str]]:
    """Sorted (collapsed name, dir) pairs and sorted file names of one directory."""
    dirs = []
    for name in sorted(node.dirs, key=_sort_key):
        sub = node.dirs[name]
        while len(sub.dirs) == 1 and not sub.files:  # collapse a/b/c chains
            (child, sub), = sub.dirs.items()
            name = f"{name}/{child}"
        dirs.append((name, sub))
    return dirs, sorted(node.files, key=_sort_key)


def _level_counts(top: _Dir) -> list[int]:
    counts: list[int] = []
    level = [top]
    while level:
        n, nxt = 0, list[_Dir]()
        for node in level:
            dirs, files = _entries(node)
            entries = len(dirs) + len(files)
            n += min(entries, TREE_PER_DIR) + (1 if entries > TREE_PER_DIR else 0)
            nxt.extend(sub for _, sub in dirs[:TREE_PER_DIR])
        counts.append(n)
        level = nxt
    return counts


def _plural(n: int, one: str, many: str) -> str:
    return f"{n:,} {one if n == 1 else many}"


def _tree(root: Path, directory: Path, depth: int) -> str:
    rel = _rel(root, directory)
    files = list_files(root, rel)
    if rel != ".":
        files = [f[len(rel) + 1:] for f in files if f.startswith(rel + "/")]
    head = f"# . ({visible_name(root.name)})" if rel == "." else f"# {visible_name(rel)}/"
    top = _build(files)
    ndirs, nfiles = top.counts()
    out = [head]
    if not files:
        out.append("(empty, or every file in it is ignored)")
    counts = _level_counts(top)
    if depth < 0:
        max_level = len(counts)
    else:
        max_level, total = 0, 0
        for i, c in enumerate(counts):
            total += c
            if total > TREE_BUDGET and i > 0:
                break
            max_level = i
    folded = max_level < len(counts) - 1
    show_symbols = depth >= 2 and len(files) <= 200

    def walk(node: _Dir, level: int, prefix: str) -> None:
        ind = "  " * level
        dirs, fnames = _entries(node)
        entries = [(n, d) for n, d in dirs] + [(n, None) for n in fnames]
        for name, sub in entries[:TREE_PER_DIR]:
            if sub is None:
                out.append(f"{ind}{visible_name(name)}")
                if show_symbols:
                    _file_symbols(directory / prefix / name, ind + "  ", out)
            elif level < max_level or depth < 0:
                out.append(f"{ind}{visible_name(name)}/")
                walk(sub, level + 1, f"{prefix}{name}/")
            else:
                d, f = sub.counts()
                inside = ", ".join(x for x in (_plural(d, "dir", "dirs") if d else "",
                                               _plural(f, "file", "files")) if x)
                out.append(f"{ind}{visible_name(name)}/ ({inside})")
        if len(entries) > TREE_PER_DIR:
            rest = entries[TREE_PER_DIR:]
            rd = sum(1 for _, s in rest if s is not None)
            out.append(f"{ind}… {len(rest):,} more ({_plural(rd, 'dir', 'dirs')}, "
                       f"{_plural(len(rest) - rd, 'file', 'files')})")

    walk(top, 0, "")
    out.append("")
    out.append(f"{_plural(ndirs, 'directory', 'directories')}, {_plural(nfiles, 'file', 'files')}")
    if folded:
        out.append(f"(deeper directories folded to fit; view one of them, e.g. `{visible_name(rel)}/DIR`, "
                   "to see inside)" if rel != "." else
                   "(deeper directories folded to fit; view one of them to see inside)")
    return "\n".join(out) + "\n"


def _file_symbols(path: Path, ind: str, out: list[str]) -> None:
    try:
        if not language_for(path) or path.stat().st_size > MAX_OUTLINE_BYTES:
            return
        syms = outline(path)[0]
    except (OSError, MossError):
        return
    for s in syms:
        out.append(f"{ind}{s.signature} {s.lines}")

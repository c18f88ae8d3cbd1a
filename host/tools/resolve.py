"""Path resolution for view and edit targets: confined to the project root, fuzzy.

`resolve_path(root, "llm.rs")` finds `crates/x/src/llm.rs` when that is the only file
whose trailing path components match; `_` and `-` (and letter case) are treated as equal
when nothing matches exactly. Files listed are those ripgrep would search: .gitignore'd
files are not candidates for a fuzzy match (an exact path always works).
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from pathlib import Path

from ..errors import MossError

_RG_CACHE: list[str] = []


def rg_binary() -> str:
    """Path of the ripgrep binary (the `ripgrep` wheel puts it next to python)."""
    if _RG_CACHE:
        return _RG_CACHE[0]
    for cand in (str(Path(sys.executable).parent / "rg"), None):
        if cand is None:  # not next to python (the `ripgrep` wheel's place): on PATH?
            import shutil

            cand = shutil.which("rg")
        if cand and os.access(cand, os.X_OK):
            _RG_CACHE.append(cand)
            return cand
    raise MossError(
        "ripgrep (rg) is not installed: install the `ripgrep` pip package "
        "(pip install 'ripgrep==14.1.0') or put rg on PATH",
        kind="config",
    )


# Flags shared by every walk: show hidden files, respect .gitignore even outside a git
# repository, never descend into .git.
# moss's own session files and snapshots are never part of the project the agent studies.
RG_WALK_FLAGS = ["--hidden", "--no-require-git", "--glob", "!.git", "--glob", "!.moss/agent/",
                 "--glob", "!.moss/shadow.git/", "--no-messages"]


def list_files(root: Path, sub: str = ".") -> list[str]:
    """Files under `root/sub` that are not ignored, as root-relative posix paths."""
    import subprocess  # here: `moss text-search` starts ripgrep without it (tools/search.py)

    root = Path(root)
    proc = subprocess.run(
        [rg_binary(), "--files", "--null", *RG_WALK_FLAGS, "--", sub],
        cwd=root, stdin=subprocess.DEVNULL, capture_output=True, timeout=60,
    )
    out = []
    # NUL-separated: a name may hold a newline (or \r, \x0c, U+2028 that splitlines cuts at)
    for raw in proc.stdout.decode("utf-8", "surrogateescape").split("\0"):
        if raw.startswith("./"):
            raw = raw[2:]
        if raw:
            out.append(raw.replace(os.sep, "/"))
    return out


_SPECIAL = ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket"),
            (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def special_kind(path: Path | str) -> str | None:
    """What `path` is when it is neither a regular file nor a directory ("a named pipe",
    "a socket", "a character device", "a block device", "a symlink loop"), else None
    (also for a path that does not exist). Reading a pipe or a device never ends, so
    every tool asks this before it opens a file."""
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        if e.errno == errno.ELOOP:
            return "a symlink loop"
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return next((name for test, name in _SPECIAL if test(mode)), "not a regular file")


def require_regular(path: Path | str, shown: str, what: str = "moss reads regular files only") -> None:
    """Raise MossError(kind="usage") naming `shown` when `path` is a pipe, socket, device
    or symlink loop."""
    kind = special_kind(path)
    if kind == "a symlink loop":
        raise MossError(f"{shown} is a symlink loop (it never leads to a file); {what}", kind="usage")
    if kind is not None:
        raise MossError(f"{shown} is {kind}, not a regular file; {what}", kind="usage")


def _resolve(path: Path, raw: str) -> Path:
    """path.resolve(), with a symlink loop (or a name the OS refuses) as a MossError."""
    try:
        return path.resolve()
    except (RuntimeError, OSError) as e:  # Python < 3.13 reports a loop as RuntimeError
        if isinstance(e, OSError) and e.errno != errno.ELOOP:
            raise MossError(f"{raw}: {e.strerror or e}", kind="not_found") from None
        raise MossError(f"{raw}: a symlink loop (it never leads to a file)", kind="not_found",
                        loop=True) from None


def _inside(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
        return True
    except ValueError:
        return False


def _norm(part: str) -> str:
    return part.casefold().replace("_", "-")


def _all_paths(files: list[str]) -> dict[str, bool]:
    """Every file and every directory holding one: path -> is_dir."""
    paths: dict[str, bool] = {}
    for f in files:
        paths[f] = False
        parts = f.split("/")
        for i in range(1, len(parts)):
            paths.setdefault("/".join(parts[:i]), True)
    return paths


def _describe(cands: list[tuple[str, bool]]) -> str:
    from ..ui import visible_name  # here: its patterns are compiled on import

    return "\n".join(f"  {visible_name(p)} ({'directory' if d else 'file'})" for p, d in cands)


def resolve_path(root: Path, target: str, *, dirs_only: bool | None = None,
                 files: list[str] | None = None, suggest: bool = True, root_is_real: bool = False) -> Path:
    """Resolve `target` to an existing path inside `root` and return it (absolute, real).

    Order: the exact path; else the unique path whose trailing components equal the
    target's; else the same ignoring case and treating `_` and `-` alike. A trailing `/`
    means "directory only". Raises MossError kind "denied" for anything outside root
    (`..`, an absolute path elsewhere, a symlink leading out), "ambiguous" listing the
    candidates, or "not_found" suggesting close matches (`suggest=False` skips that search,
    for callers that try other readings before showing an error). `files` may pass a
    listing from `list_files` to avoid walking the tree again. `root_is_real`: the caller
    resolved `root` already (Path.resolve, ~25 µs: an lstat per component).
    """
    root = root if root_is_real else Path(root).resolve()
    raw = (target or ".").strip()
    if dirs_only is None:
        dirs_only = raw.endswith("/") and raw not in ("/",)
    text = raw.rstrip("/") or raw

    given = Path(os.path.expanduser(text)) if text.startswith("~") else Path(text)
    lexical = Path(os.path.normpath(given if given.is_absolute() else root / given))
    if not _inside(lexical, root):
        raise MossError(f"{raw}: outside the project root {root}", kind="denied")
    if os.path.lexists(lexical):
        return _existing(lexical, root, raw, dirs_only)
    if given.is_absolute():
        raise MossError(f"{raw}: no such file or directory", kind="not_found")

    # Fuzzy: match trailing components against what ripgrep would list.
    want = [p for p in Path(text).as_posix().split("/") if p not in ("", ".")]
    if not want:
        return root
    paths = _all_paths(files if files is not None else list_files(root))
    if dirs_only:
        paths = {p: d for p, d in paths.items() if d}
    found = _by_tail(paths, want, root, raw)
    if found is not None:
        return found
    if not suggest:
        raise MossError(f"{raw}: no such file or directory", kind="not_found")
    raise _not_found(raw, text, want, paths)


def _existing(lexical: Path, root: Path, raw: str, dirs_only: bool) -> Path:
    """The path as given, which exists: real, and inside the project."""
    real = _resolve(lexical, raw)
    if not _inside(real, root):
        raise MossError(f"{raw}: a symlink leading outside the project root", kind="denied")
    if not real.exists():
        raise MossError(f"{raw}: a broken symlink", kind="not_found")
    if dirs_only and not real.is_dir():
        raise MossError(f"{raw}: not a directory", kind="not_found")
    return real


def _by_tail(paths: dict[str, bool], want: list[str], root: Path, raw: str) -> Path | None:
    """The one path whose trailing components are `want` (exactly, then loosely: `_norm`); None
    when none is; MossError "ambiguous" listing them when several are."""
    for key in (lambda s: s, _norm):
        # A path matches when its trailing components equal the target's: the path is
        # the target, or ends with "/" + the target (`_norm` works character by character,
        # so normalising the whole path normalises each component).
        tail = key("/".join(want))
        sub = "/" + tail
        found = [(p, d) for p, d in paths.items() if (k := key(p)) == tail or k.endswith(sub)]
        if len(found) == 1:
            real = _resolve(root / found[0][0], raw)
            if not _inside(real, root):
                raise MossError(f"{raw}: a symlink leading outside the project root",
                                kind="denied")
            return real
        if found:
            found.sort(key=lambda pd: (pd[0].count("/"), pd[0].casefold()))
            shown = found[:20]
            more = f"\n  … and {len(found) - 20} more" if len(found) > 20 else ""
            raise MossError(
                f"{raw} matches {len(found)} paths; say which:\n{_describe(shown)}{more}",
                kind="ambiguous", candidates=[p for p, _ in found],
            )
    return None


def _not_found(raw: str, text: str, want: list[str], paths: dict[str, bool]) -> MossError:
    """"No such file", suggesting paths whose last component is close, then whole-path matches."""
    last = _norm(want[-1])
    by_name: dict[str, list[str]] = {}
    for p in paths:
        by_name.setdefault(_norm(p.rsplit("/", 1)[-1]), []).append(p)
    import difflib  # an error's suggestions only: not on every search's import

    close = difflib.get_close_matches(last, list(by_name), n=5, cutoff=0.6)
    sugg = [p for name in close for p in sorted(by_name[name])]
    if len(sugg) < 5:
        extra = difflib.get_close_matches(_norm(text), [_norm(p) for p in paths], n=5, cutoff=0.6)
        lookup = {_norm(p): p for p in paths}
        sugg += [lookup[e] for e in extra if lookup[e] not in sugg]
    sugg = sugg[:8]
    msg = f"{raw}: no such file or directory"
    if sugg:
        msg += "; did you mean:\n" + _describe([(p, paths[p]) for p in sugg])
    return MossError(msg, kind="not_found", suggestions=sugg)

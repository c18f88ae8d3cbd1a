"""moss.fs: file reads and writes confined to the project root, checked against the access level."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import MossError
from .registry import primitive

MAX_READ = 2_000_000


@primitive
def read(ctx, path):
    from ..tools import safefs
    from ..tools.confine import confine
    from ..tools.resolve import require_regular

    p = confine(ctx.workdir, path, must_exist=True)
    if p.is_dir():
        raise MossError(f"{path} is a directory (use moss.code.view)", kind="usage")
    require_regular(p, str(path), "moss.fs.read reads regular files only")
    size = p.stat().st_size
    if size > MAX_READ:
        raise MossError(f"{path} is {size:,} bytes; moss.fs.read reads at most {MAX_READ:,}", kind="usage")
    # read what confine resolved, from the held root, never through a link swapped in since
    root = Path(os.path.realpath(ctx.workdir))
    data = safefs.tree(root).read_bytes(p.relative_to(root), MAX_READ)
    if b"\0" in data[:8192]:
        raise MossError(f"{path} looks binary; not read", kind="usage")
    return data.decode("utf-8", errors="replace")


@primitive
def write(ctx, path, text):
    from ..tools import safefs
    from ..tools.confine import confine
    from ..tools.resolve import require_regular
    from ..tools.sandbox import require_write
    from ..tools.worktree import wait_ready

    require_write(ctx.access, f"writing {path}")
    wait_ready(ctx.workdir, ctx.cancelled)
    p = confine(ctx.workdir, path, writing=True)
    root = Path(os.path.realpath(ctx.workdir))
    # The root or a folder is no file to write: writing "through" it would put a temp
    # file next to it, outside the project when it is the root.
    if p == root or p.is_dir():
        raise MossError(f"moss.fs.write needs a file path; {str(path)!r} is "
                        f"{'the project root' if p == root else 'a directory'}",
                        kind="usage")
    require_regular(p, str(path), "moss.fs.write replaces regular files only")
    # Written where confine resolved it, from the held root: folders made and walked
    # without following a link, a temp file made with O_EXCL and renamed in its folder.
    rel = p.relative_to(root)
    safefs.tree(root).write_atomic(rel, str(text), None, create_dirs=True)
    ctx.log("fs_write", {"path": str(rel), "bytes": len(str(text).encode())})
    return True


@primitive
def exists(ctx, path):
    from ..tools.confine import confine

    try:
        return confine(ctx.workdir, path).exists()
    except MossError:
        return False

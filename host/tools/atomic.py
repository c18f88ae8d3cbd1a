"""Kept for the modules that still import it (host/config.py, host/trust.py, host/tools/shadow.py):
`write_atomic` is moss.tools.safefs.replace_file, moss's one atomic writer (a temp file made
with O_EXCL in the same folder descriptor, fsync, a rename within it). New code imports
safefs; this module goes once those three do.
"""

from __future__ import annotations

from pathlib import Path

from ..tools.safefs import replace_file

__all__ = ["write_atomic"]


def write_atomic(path: Path, data: bytes | str, mode: int | None = None, *, sync_dir: bool = False) -> None:
    """Replace `path` with `data` (see safefs.replace_file): `mode` None keeps an existing
    file's permissions, a new file gets the umask's; `sync_dir` also makes the rename durable."""
    replace_file(path, data, mode, sync_dir=sync_dir)

"""A helper process that exchanges two names as fast as it can (renameat2 RENAME_EXCHANGE):
the race of a background run swapping a folder for a symlink while moss writes into it."""

from __future__ import annotations

import contextlib
import ctypes
import subprocess
import sys
import textwrap

import pytest

_SWAPPER = textwrap.dedent("""
    import ctypes, os, sys
    libc = ctypes.CDLL(None, use_errno=True)
    RENAME_EXCHANGE = 2
    a, b = (os.fsencode(x) for x in sys.argv[1:3])
    print("swapping", flush=True)
    while True:
        libc.renameat2(-100, a, -100, b, RENAME_EXCHANGE)
""")


@contextlib.contextmanager
def swapping(a, b):
    """Swap the names `a` and `b` in a loop until the block ends (skips the test on a libc
    without renameat2)."""
    if not hasattr(ctypes.CDLL(None), "renameat2"):
        pytest.skip("this libc has no renameat2 (glibc < 2.28)")
    swapper = subprocess.Popen([sys.executable, "-c", _SWAPPER, str(a), str(b)], stdout=subprocess.PIPE, text=True)
    try:
        assert swapper.stdout.readline().strip() == "swapping"
        yield
    finally:
        swapper.kill()
        swapper.wait()

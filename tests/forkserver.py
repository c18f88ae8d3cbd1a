"""`python -m moss` for tests, forked from a process that has already imported moss.

Most tests run moss the way its users do, as a new `python -m moss ...` process in a project.
Each such process used to spend most of its CPU importing: the anthropic SDK alone is 1.6 s of
CPU here, and the suite starts ~1,000 moss processes, ~370 of them agents that import an SDK
(bench/RESULTS.md, issue 24). So the tests' moss processes are forked from a zygote, one per
test worker: moss's own `host/zygote.py` (what `moss eval` starts its attempts with), here
with the CLI's modules preloaded too and kept in the worker's process group, as the children
of `subprocess.Popen` are. host/zygote.py says how a forked process is made the same as a new
one; tests/test_forkserver.py holds it to that.

What differs from a new interpreter, on purpose: the preloaded modules are imported already (a
test about what a moss process imports starts a fresh one: `fresh=True`, or any PYTHON*
variable that differs from the worker's). Everything else goes through `subprocess.Popen`:
other programs, other interpreters, a pass_fds/preexec_fn/user argument, a missing cwd, and
every process when MOSS_TEST_FORK=0 is set (the whole suite then runs as before, slower).
"""

from __future__ import annotations

import os
import subprocess
import threading

from moss import zygote as _zygote_mod

PRELOAD = (*_zygote_mod.PRELOAD, "moss.cli", "click", "rich.console")
ENABLED = os.environ.get("MOSS_TEST_FORK", "1") != "0"
ZygotePopen = _zygote_mod.ZygotePopen

_zygote: _zygote_mod.Zygote | None = None
_lock = threading.Lock()


def zygote() -> _zygote_mod.Zygote:
    """This worker's zygote, started on first use (it ends when the worker does)."""
    global _zygote
    with _lock:
        if _zygote is None or _zygote.broken or _zygote.proc.poll() is not None:
            _zygote = _zygote_mod.Zygote(dict(os.environ, PYTHONUNBUFFERED="1"), PRELOAD, own_session=False)
        return _zygote


def popen(argv: list, *, fresh: bool = False, **kw) -> subprocess.Popen:
    """`subprocess.Popen(argv, **kw)`, forked by the zygote when argv is `python -m moss ...`
    and nothing asks for a fresh interpreter."""
    if ENABLED and not fresh:
        return zygote().popen(argv, **kw)
    return subprocess.Popen(argv, **kw)


def run(argv: list, *, input=None, timeout=None, capture_output=False, fresh: bool = False,
        **kw) -> subprocess.CompletedProcess:
    """`subprocess.run` through `popen`."""
    if input is not None:
        kw["stdin"] = subprocess.PIPE
    if capture_output:
        kw["stdout"] = kw["stderr"] = subprocess.PIPE
    with popen(argv, fresh=fresh, **kw) as p:
        try:
            out, err = p.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            raise
        except BaseException:
            p.kill()
            raise
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)

"""Run a shell command under the session's access level.

`run(cmd, root=..., access=...)` runs ``sh -c cmd`` in its own process group, inside the
bubblewrap sandbox for read-shell and edit (see moss.tools.sandbox), plainly for full,
always with the scrubbed environment of `sandbox.command_env`. Below full, git metadata the
command creates or changes is undone and reported (see moss.tools.gitguard).
Both streams are captured separately, read incrementally (memory stays bounded however
much a command prints) and capped to `max_chars` each, keeping head and tail with a
marker saying how much was cut. A timeout kills the whole process group (SIGTERM, then
SIGKILL after 2 s) and keeps the output so far; `cancel()` is polled about every 0.1 s.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable

from ..errors import MossError
from .confine import confine
from . import caps, gitguard, procs
from .sandbox import Setup, bwrap_problem, check_env, check_level, command_plan

__all__ = ["run"]

POLL = 0.1          # seconds between cancel/timeout checks
KILL_GRACE = 2.0    # SIGTERM -> SIGKILL
LINGER = 1.0        # after the shell exits, how long to wait for pipes held by leftovers
READ_CHUNK = 65536


class _Capture:
    """Bytes of one stream: all of them up to a bound, then only head and tail."""

    def __init__(self, max_chars: int):
        # UTF-8 needs at most 4 bytes a character: keeping 4*max_chars bytes at each end
        # always holds enough to show max_chars characters. Below 256 KiB in all, the
        # whole output is kept so the cut can be counted exactly in characters.
        self.bound = max(4 * max_chars + 4, 1 << 17)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.bound - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > 2 * self.bound:
                del self.tail[: len(self.tail) - self.bound]

    def text(self, max_chars: int) -> tuple[str, bool]:
        if len(self.tail) > self.bound:
            del self.tail[: len(self.tail) - self.bound]
        if self.total == len(self.head) + len(self.tail):
            full = (self.head + self.tail).decode("utf-8", "replace")
            out = caps.cap(full, max_chars, head_share=0.5)
            return out, out is not full
        # Bytes in the middle were never kept: report the cut in bytes.
        head_text = self.head.decode("utf-8", "replace")
        tail_text = self.tail.decode("utf-8", "replace")
        keep = max_chars - len(caps.marker(self.total, "bytes")) - 2  # the marker's own line
        if keep <= 0:
            return head_text[:max_chars], True
        h, t = keep - keep // 2, keep // 2
        kept_h, kept_t = head_text[:h], (tail_text[-t:] if t else "")
        cut = max(
            0,
            self.total - len(kept_h.encode("utf-8", "replace"))
            - len(kept_t.encode("utf-8", "replace")),
        )
        return caps.join(kept_h, kept_t, cut, "bytes"), True


def _feed(pipe, data: bytes) -> None:
    try:
        pipe.write(data)
    except (BrokenPipeError, OSError, ValueError):
        pass
    finally:
        try:
            pipe.close()
        except (BrokenPipeError, OSError, ValueError):
            pass


def run(
    cmd: str,
    *,
    root: Path,
    access: str,
    cwd: str | None = None,
    timeout: float = 120,
    max_chars: int = 20000,
    env: dict | None = None,
    allow_full: bool = False,
    unsandboxed_ok: bool = False,
    cancel: Callable[[], bool] | None = None,
    stdin: str | None = None,
    setup: Setup | None = None,
    bind_as: Path | None = None,
) -> dict:
    """Run `cmd` with ``sh -c`` at access level `access`; see the module docstring.

    Returns {"stdout", "stderr", "code", "timed_out", "truncated", "duration", "sandbox",
    "cmd"}, plus "git" (sentences) when git metadata was created or changed. `code` is None
    when the command was killed for its timeout. `env` entries are added to (None removes
    from) the scrubbed environment; `setup` is what the user's own config adds to it.
    `bind_as`: the path the sandbox shows `root` at (an isolated child's copy is seen where
    the project is; without a sandbox, at `full`, the command runs in `root` itself).
    Raises MossError: "denied" (level refuses, sandbox missing or weak, cwd outside root,
    LD_* in env), "usage" (bad arguments), "interrupted" (cancel() returned True).
    """
    if not isinstance(cmd, str):
        raise MossError("run: the command must be a string", kind="usage")
    check_level(access)
    if timeout is None or not timeout > 0:
        raise MossError(f"run: timeout must be a positive number of seconds, got {timeout!r}",
                        kind="usage")
    if not isinstance(max_chars, int) or max_chars < 0:
        raise MossError(f"run: max_chars must be a non-negative integer, got {max_chars!r}",
                        kind="usage")
    extra_env = check_env(env, "run")
    if access == "read-only":
        # Refuse before touching anything else (no path checks, no probe).
        command_plan(cmd, access=access, root="", cwd="", allow_full=allow_full,
                     unsandboxed_ok=unsandboxed_ok)

    real_root = confine(root, ".", must_exist=True)
    workdir = confine(real_root, cwd if cwd not in (None, "") else ".", must_exist=True)
    if not workdir.is_dir():
        raise MossError(f"run: cwd {cwd!r} is not a directory", kind="usage")
    # Below full, git metadata is off limits; a read-only sandbox cannot touch it at all.
    guard = None
    if access == "edit" or (access == "read-shell" and bwrap_problem() is not None):
        guard = gitguard.guard_for(real_root)
    git_notes, protect = guard.before() if guard else ([], [])
    plan = command_plan(
        cmd,
        access=access,
        root=str(real_root),
        cwd=str(workdir),
        allow_full=allow_full,
        unsandboxed_ok=unsandboxed_ok,
        env=extra_env,
        setup=setup,
        protect=protect,
        bind_as=str(bind_as) if bind_as is not None else None,
    )
    sandbox = plan.sandbox

    start = time.monotonic()
    try:
        proc = procs.start(plan, cwd=str(workdir),
                           stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL)
    except OSError as exc:
        raise MossError(f"run: could not start {plan.argv[0]}: {exc}", kind="io") from exc

    feeder = None
    if stdin is not None:
        feeder = threading.Thread(
            target=_feed, args=(proc.stdin, stdin.encode("utf-8")), daemon=True
        )
        feeder.start()

    assert proc.stdout is not None and proc.stderr is not None  # procs.start: both pipes
    pipes = {proc.stdout.fileno(): proc.stdout, proc.stderr.fileno(): proc.stderr}
    out, err = _Capture(max_chars), _Capture(max_chars)
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, out)
    sel.register(proc.stderr, selectors.EVENT_READ, err)

    timed_out = False
    term_at: float | None = None      # when SIGTERM went to the group
    killed = False                    # SIGKILL sent
    exited_at: float | None = None    # when the shell (or bwrap) exited
    abandoned = False                 # stopped reading pipes held by leftovers
    deadline = start + timeout

    def stop_group() -> None:
        nonlocal term_at
        if term_at is None:
            term_at = time.monotonic()
            procs.signal_group(proc.pid, signal.SIGTERM)

    try:
        while sel.get_map():
            now = time.monotonic()
            if cancel is not None and cancel():
                stop_group()
                _finish(proc, term_at)
                if guard is not None:
                    git_notes += guard.check()  # undo even when interrupted
                raise MossError(
                    f"run interrupted: {cmd}",
                    kind="interrupted",
                    stdout=out.text(max_chars)[0],
                    stderr=err.text(max_chars)[0],
                    git=git_notes,
                )
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if not timed_out and exited_at is None and now >= deadline:
                timed_out = True
                stop_group()
            if term_at is not None and not killed and now >= term_at + KILL_GRACE:
                killed = True
                procs.signal_group(proc.pid, signal.SIGKILL)
            if exited_at is not None and now >= exited_at + LINGER and (
                term_at is None or killed or now >= term_at + KILL_GRACE
            ):
                # The command is over but something it started (outside our reach, or
                # detached in full mode) still holds the pipes: stop reading.
                abandoned = True
                break
            wait = POLL
            if not timed_out and exited_at is None:
                wait = max(0.0, min(POLL, deadline - now))
            for key, _ in sel.select(timeout=wait):
                try:
                    data = os.read(key.fd, READ_CHUNK)
                except OSError:
                    data = b""
                if data:
                    key.data.add(data)
                else:
                    sel.unregister(key.fileobj)
                    pipes[key.fd].close()
    finally:
        for key in list(sel.get_map().values()):
            sel.unregister(key.fileobj)
            pipes[key.fd].close()
        sel.close()

    code = _finish(proc, term_at)
    if guard is not None:
        git_notes += guard.check()
    if feeder is not None:
        feeder.join(timeout=1)
    duration = time.monotonic() - start

    stdout, cut_out = out.text(max_chars)
    stderr, cut_err = err.text(max_chars)
    if timed_out:
        note = f"[moss: command timed out after {timeout:g} s and was killed]"
        stderr = f"{stderr}\n{note}" if stderr else note
    elif abandoned:
        note = "[moss: background processes kept the output open; stopped reading]"
        stderr = f"{stderr}\n{note}" if stderr else note
    for line in git_notes:
        note = f"[moss: git metadata: {line}]"
        stderr = f"{stderr}\n{note}" if stderr else note
    result: dict[str, Any] = {
        "stdout": stdout,
        "stderr": stderr,
        "code": None if timed_out else code,
        "timed_out": timed_out,
        "truncated": cut_out or cut_err,
        "duration": round(duration, 3),
        "sandbox": sandbox,
        "cmd": cmd,
    }
    if git_notes:
        result["git"] = git_notes
    return result


def _finish(proc: subprocess.Popen, term_at: float | None) -> int | None:
    """Reap the process; if it was told to stop, make sure it does (SIGKILL on grace)."""
    if term_at is not None:
        remaining = max(0.0, term_at + KILL_GRACE - time.monotonic())
        try:
            return proc.wait(timeout=remaining)
        except subprocess.TimeoutExpired:
            procs.signal_group(proc.pid, signal.SIGKILL)
    try:
        return proc.wait(timeout=KILL_GRACE)
    except subprocess.TimeoutExpired:
        procs.signal_group(proc.pid, signal.SIGKILL)
        return proc.wait()

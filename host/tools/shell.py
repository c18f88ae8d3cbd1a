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
from .sandbox import Plan, Setup, bwrap_problem, check_env, check_level, command_plan

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
    extra_env = _checked_env(cmd, access, timeout, max_chars, env, allow_full, unsandboxed_ok)
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

    start = time.monotonic()
    proc, feeder = _start(plan, workdir, stdin)
    watch = _Watch(proc, max_chars, deadline=start + timeout)
    if not watch.pump(cancel):
        if guard is not None:
            git_notes += guard.check()  # undo even when interrupted
        raise MossError(
            f"run interrupted: {cmd}",
            kind="interrupted",
            stdout=watch.out.text(max_chars)[0],
            stderr=watch.err.text(max_chars)[0],
            git=git_notes,
        )
    code = _finish(proc, watch.term_at)
    if guard is not None:
        git_notes += guard.check()
    if feeder is not None:
        feeder.join(timeout=1)
    duration = time.monotonic() - start
    return _result(cmd, watch, code, git_notes, timeout=timeout, max_chars=max_chars, duration=duration,
                   sandbox=plan.sandbox)


def _checked_env(cmd, access: str, timeout, max_chars, env: dict | None, allow_full: bool,
                 unsandboxed_ok: bool) -> dict:
    """`run`'s arguments checked (MossError "usage" or "denied"); the environment entries to add."""
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
    return extra_env


def _start(plan: Plan, workdir: Path, stdin: str | None) -> tuple[subprocess.Popen, threading.Thread | None]:
    """The command's process group, and the thread writing `stdin` to it (None without stdin)."""
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
    return proc, feeder


class _Watch:
    """A running command's two pipes and its clocks: both streams read into captures until they
    close, the group stopped at the deadline (SIGTERM, then SIGKILL after KILL_GRACE), and the
    pipes given up LINGER after the shell exits when something it left behind holds them."""

    def __init__(self, proc: subprocess.Popen, max_chars: int, *, deadline: float):
        assert proc.stdout is not None and proc.stderr is not None  # procs.start: both pipes
        self.proc = proc
        self.deadline = deadline
        self.pipes = {proc.stdout.fileno(): proc.stdout, proc.stderr.fileno(): proc.stderr}
        self.out, self.err = _Capture(max_chars), _Capture(max_chars)
        self.sel = selectors.DefaultSelector()
        self.sel.register(proc.stdout, selectors.EVENT_READ, self.out)
        self.sel.register(proc.stderr, selectors.EVENT_READ, self.err)
        self.timed_out = False
        self.term_at: float | None = None      # when SIGTERM went to the group
        self.killed = False                    # SIGKILL sent
        self.exited_at: float | None = None    # when the shell (or bwrap) exited
        self.abandoned = False                 # stopped reading pipes held by leftovers

    def pump(self, cancel: Callable[[], bool] | None) -> bool:
        """Read until both pipes close or are given up: True. False when `cancel()` said so,
        the group then stopped and reaped. The pipes are closed either way."""
        try:
            while self.sel.get_map():
                now = time.monotonic()
                if cancel is not None and cancel():
                    self.stop_group()
                    _finish(self.proc, self.term_at)
                    return False
                if self._tick(now):
                    # The command is over but something it started (outside our reach, or
                    # detached in full mode) still holds the pipes: stop reading.
                    self.abandoned = True
                    break
                self._read(self._wait(now))
        finally:
            for key in list(self.sel.get_map().values()):
                self.sel.unregister(key.fileobj)
                self.pipes[key.fd].close()
            self.sel.close()
        return True

    def stop_group(self) -> None:
        if self.term_at is None:
            self.term_at = time.monotonic()
            procs.signal_group(self.proc.pid, signal.SIGTERM)

    def _tick(self, now: float) -> bool:
        """Note the exit, stop the group at the deadline, kill it after the grace: whether to
        give up the pipes now."""
        if self.exited_at is None and self.proc.poll() is not None:
            self.exited_at = now
        if not self.timed_out and self.exited_at is None and now >= self.deadline:
            self.timed_out = True
            self.stop_group()
        if self.term_at is not None and not self.killed and now >= self.term_at + KILL_GRACE:
            self.killed = True
            procs.signal_group(self.proc.pid, signal.SIGKILL)
        return self.exited_at is not None and now >= self.exited_at + LINGER and (
            self.term_at is None or self.killed or now >= self.term_at + KILL_GRACE
        )

    def _wait(self, now: float) -> float:
        if not self.timed_out and self.exited_at is None:
            return max(0.0, min(POLL, self.deadline - now))
        return POLL

    def _read(self, wait: float) -> None:
        for key, _ in self.sel.select(timeout=wait):
            try:
                data = os.read(key.fd, READ_CHUNK)
            except OSError:
                data = b""
            if data:
                key.data.add(data)
            else:
                self.sel.unregister(key.fileobj)
                self.pipes[key.fd].close()


def _result(cmd: str, watch: _Watch, code: int | None, git_notes: list[str], *, timeout: float,
            max_chars: int, duration: float, sandbox: str) -> dict:
    """`run`'s result: both streams capped, and moss's notes (timeout, abandoned pipes, git
    metadata undone) appended to stderr."""
    stdout, cut_out = watch.out.text(max_chars)
    stderr, cut_err = watch.err.text(max_chars)
    notes = []
    if watch.timed_out:
        notes.append(f"[moss: command timed out after {timeout:g} s and was killed]")
    elif watch.abandoned:
        notes.append("[moss: background processes kept the output open; stopped reading]")
    notes += [f"[moss: git metadata: {line}]" for line in git_notes]
    for note in notes:
        stderr = f"{stderr}\n{note}" if stderr else note
    result: dict[str, Any] = {
        "stdout": stdout,
        "stderr": stderr,
        "code": None if watch.timed_out else code,
        "timed_out": watch.timed_out,
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

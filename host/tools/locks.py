"""Locks on directories, files and symbols, shared by the agents of one process and by
every moss process working in the same project.

A target is a directory (`src/`, `.` for the whole project), a file (`src/main.rs`) or a
symbol (`src/main.rs/Cli/run`: the longest prefix naming an existing file is the file, the
rest the symbol path). Two targets conflict when
- one path is the other's directory or the same path, and
- on the same file, one of them is the whole file or one symbol path contains the other
  (`Cli` covers `Cli/run`; `Cli/run` and `Cli/new` do not conflict).

A *write* lock (kind "write") is the short lock an edit takes around the read-apply-write
of one file; it conflicts only with write locks of the same file, so two agents holding
symbol locks of one file still write it one after the other and neither change is lost.

Locks belong to an owner (an agent's session id): an owner never waits for itself.
Waiters queue in order: a request waits behind every earlier conflicting request of another
owner, so nobody starves. Waiting blocks on a condition variable; only a conflict with a
lock of *another process* is re-checked on a bounded poll (50 ms doubling to 500 ms).

Across processes every held lock is a file `.moss/agent/locks/<pid>-<n>.json` naming its
targets, owner pid, session, role and start time; a heartbeat thread touches the files of
live locks every few seconds. Creating one happens under an exclusive flock on
`.moss/agent/locks/.mutex`, after checking every other process's lock files. A lock whose
owner process is dead (or whose heartbeat stopped for `STALE_S`) is taken over: its file is
removed and the takeover reported through the `log` callback.

The folder is reached through moss.storage (moss.tools.safefs): a lock file that is a link, a
fifo or a device is skipped with a one-line warning (never read, so never a hang), a
`.mutex` that is a link is refused with an error naming it, and unknown keys in a lock file
are ignored (a newer moss may write more).

`MOSS_TEST_LOCKS=off` turns locking off (every acquire succeeds at once). It exists only so
the tests can show that they fail without locks; never set it otherwise.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Callable

from ..errors import MossError

HEARTBEAT_S = 5.0
MAX_TARGET = 4096  # characters of one lock target (a path and a symbol path)
MAX_LOCK_FILE = 1 << 20  # bytes of one lock file: a few targets
STALE_S = 30.0
POLL_MIN, POLL_MAX = 0.05, 0.5


@dataclass(frozen=True)
class Target:
    path: str  # relative, "/"-separated; "" is the project root
    symbol: str = ""  # "Cli/run"; "" for a whole file or directory
    kind: str = "target"  # or "write"

    def __str__(self) -> str:
        base = self.path or "."
        return f"{base}/{self.symbol}" if self.symbol else base

    def as_dict(self) -> dict:
        return {"path": self.path, "symbol": self.symbol, "kind": self.kind}


def _contains(outer: str, inner: str) -> bool:
    return outer == "" or inner == outer or inner.startswith(outer + "/")


def conflicts(a: Target, b: Target) -> bool:
    if a.kind != b.kind:
        return False
    if a.kind == "write":
        return a.path == b.path
    if a.path != b.path:
        return _contains(a.path, b.path) or _contains(b.path, a.path)
    if not a.symbol or not b.symbol:
        return True
    return _contains(a.symbol, b.symbol) or _contains(b.symbol, a.symbol)


def parse_target(root: Path, text: str, kind: str = "target") -> Target:
    """`src/`, `src/main.rs`, `src/main.rs/Cli/run` -> Target (confined to the root)."""
    if not isinstance(text, str) or not text.strip():
        raise MossError("a lock target is a path: a directory, a file or path/Symbol", kind="usage")
    raw = text.strip()
    if len(raw) > MAX_TARGET:
        raise MossError(f"a lock target is at most {MAX_TARGET} characters (this one has {len(raw)}): "
                        f"{raw[:60]}…", kind="usage")
    root = Path(root).resolve()
    p = Path(raw)
    if p.is_absolute():
        try:
            raw = str(p.resolve().relative_to(root)) if _exists(p) else str(p.relative_to(root))
        except ValueError:
            raise MossError(f"lock target {text!r} is outside the project", kind="denied") from None
    parts = [s for s in PurePosixPath(raw.replace("\\", "/")).parts if s not in ("", ".")]
    if ".." in parts:
        raise MossError(f"lock target {text!r} leaves the project", kind="denied")
    for i in range(1, len(parts) + 1):
        if _is_file(root.joinpath(*parts[:i])):
            return Target("/".join(parts[:i]), "/".join(parts[i:]), kind)
    return Target("/".join(parts), "", kind)


def _exists(p: Path) -> bool:
    try:
        return p.exists()
    except OSError:  # a name too long for the file system: nothing there
        return False


def _is_file(p: Path) -> bool:
    try:
        return p.is_file()
    except OSError:  # a symbol name longer than a file name may be (ENAMETOOLONG)
        return False


def _targets(data: dict) -> tuple:
    """The targets a lock file names; keys this moss does not know are ignored, and an
    entry that is not a target at all is left out."""
    out = []
    raw = data.get("targets")
    for t in raw if isinstance(raw, list) else []:
        if isinstance(t, dict) and isinstance(t.get("path"), str):
            symbol, kind = t.get("symbol", ""), t.get("kind", "target")
            out.append(Target(t["path"], symbol if isinstance(symbol, str) else "",
                              kind if kind in ("target", "write") else "target"))
    return tuple(out)


@dataclass
class Held:
    id: int
    targets: tuple
    owner: str
    role: str
    since: float
    file: Path | None = None
    pid: int = field(default_factory=os.getpid)

    def describe(self) -> str:
        return describe(self.owner, self.role, self.since, self.pid)


def describe(owner, role, since, pid=None) -> str:
    when = time.strftime("%H:%M:%S", time.localtime(since)) if since else "?"
    other = f", pid {pid}" if pid and pid != os.getpid() else ""
    return f"locked by {owner} ({role or 'agent'}{other}) since {when}"


@dataclass
class _Waiter:
    targets: tuple
    owner: str


class LockTimeout(MossError):
    def __init__(self, message: str, blocker: dict):
        super().__init__(message, kind="locked")
        self.blocker = blocker


def _alive(pid: int) -> bool:
    from .procs import alive

    return alive(pid)
    return True


class LockManager:
    """The locks of one project root in this process (one instance per root: `manager()`)."""

    def __init__(self, root: Path):
        self.root = Path(root).resolve()
        self.dir = self.root / ".moss" / "agent" / "locks"
        self._rel = ".moss/agent/locks"
        self._cond = threading.Condition()
        self._held: dict[int, Held] = {}
        self._queue: list[_Waiter] = []
        self._next = 0
        self._mutex_fd: int | None = None
        self._hb: threading.Thread | None = None
        self.host = socket.gethostname()

    @property
    def enabled(self) -> bool:
        return os.environ.get("MOSS_TEST_LOCKS", "").lower() != "off"

    # -- public ------------------------------------------------------------------------
    def acquire(self, targets, owner: str, role: str = "", timeout: float | None = 30.0,
                on_wait: Callable[[dict], None] | None = None,
                log: Callable[[str, dict], None] | None = None) -> Held:
        """Hold every target (all or none). Raises LockTimeout (kind "locked") after `timeout`
        seconds (None: wait as long as it takes). `on_wait(blocker)` is called once when the
        request has to queue; `log(event, data)` hears takeovers of dead processes' locks."""
        targets = tuple(targets)
        if not self.enabled:
            return Held(-1, targets, owner, role, time.time())
        waiter = _Waiter(targets, owner)
        deadline = None if timeout is None else time.monotonic() + max(0.0, float(timeout))
        announced = False
        poll = POLL_MIN
        with self._cond:
            self._queue.append(waiter)
        try:
            while True:
                with self._cond:
                    blocker = self._local_blocker(waiter)
                    external = blocker is None
                    if blocker is None:
                        claimed = self._claim_files(waiter, role, log)
                        if isinstance(claimed, Held):
                            self._queue.remove(waiter)
                            self._held[claimed.id] = claimed
                            self._start_heartbeat()
                            return claimed
                        blocker = claimed
                    now = time.monotonic()
                    if deadline is not None and now >= deadline:
                        raise LockTimeout(blocker["text"], blocker)
                    if not announced and on_wait is not None:
                        announced = True
                        self._cond.release()
                        try:
                            on_wait(blocker)
                        finally:
                            self._cond.acquire()
                        continue
                    wait = None if deadline is None else deadline - now
                    if external:
                        wait = poll if wait is None else min(wait, poll)
                        poll = min(poll * 2, POLL_MAX)
                    self._cond.wait(wait)
        finally:
            with self._cond:
                if waiter in self._queue:
                    self._queue.remove(waiter)
                    self._cond.notify_all()

    def release(self, held: Held | None) -> None:
        if held is None or held.id < 0:
            return
        with self._cond:
            if self._held.pop(held.id, None) is None:
                return
            if held.file is not None:
                try:
                    self._tree().unlink(f"{self._rel}/{held.file.name}")
                except (OSError, MossError):
                    pass
            self._cond.notify_all()

    def release_owner(self, owner: str) -> int:
        """Release everything `owner` holds (an agent that ended); how many."""
        with self._cond:
            mine = [h for h in self._held.values() if h.owner == owner]
        for h in mine:
            self.release(h)
        return len(mine)

    def held(self) -> list[dict]:
        """Every lock held in this project, by this process and by others."""
        out = []
        with self._cond:
            for h in self._held.values():
                out.append({"id": h.id, "targets": [str(t) for t in h.targets], "session": h.owner,
                            "role": h.role, "pid": h.pid, "since": h.since})
        for _path, data in self._files():
            if data.get("pid") != os.getpid():
                out.append({"id": None, "targets": [str(t) for t in _targets(data)],
                            "session": data.get("session"), "role": data.get("role"), "pid": data.get("pid"),
                            "since": data.get("since")})
        return out

    # -- internals ---------------------------------------------------------------------
    def _local_blocker(self, waiter: _Waiter) -> dict | None:
        for h in self._held.values():
            if h.owner != waiter.owner and _overlap(h.targets, waiter.targets):
                return {"session": h.owner, "role": h.role, "since": h.since, "pid": h.pid,
                        "text": h.describe(), "target": str(_first_overlap(h.targets, waiter.targets))}
        for w in self._queue:
            if w is waiter:
                break
            if w.owner != waiter.owner and _overlap(w.targets, waiter.targets):
                return {"session": w.owner, "role": "", "since": None, "pid": os.getpid(),
                        "text": f"queued behind {w.owner}", "target": str(_first_overlap(w.targets, waiter.targets))}
        return None

    def _tree(self):
        from . import safefs

        return safefs.tree(self.root)

    def _files(self):
        """(path, record) of every lock file; a link, a fifo or a device where one should be
        is skipped with a warning, never opened by name (no hang, no read of /dev/zero)."""
        from .. import storage

        t = self._tree()
        try:
            names = t.listdir(self._rel)
        except storage.UnsafePath as e:
            storage.skipped(self.dir, e)
            return
        with storage.Skips(self.dir) as skip:  # planted links and fifos: one line for the folder
            for name in names:
                if not name.endswith(".json"):
                    continue
                path = self.dir / name
                try:
                    data = json.loads(t.read_bytes(f"{self._rel}/{name}", MAX_LOCK_FILE))
                except storage.UnsafePath as e:
                    skip(path, e)
                    continue
                except (OSError, ValueError, MossError):
                    continue
                if isinstance(data, dict):
                    yield path, data

    def _claim_files(self, waiter: _Waiter, role: str, log) -> Held | dict:
        """Under the cross-process mutex: another process's conflicting lock, or ours, written."""
        mutex = self._ensure_dir()
        fcntl.flock(mutex, fcntl.LOCK_EX)
        try:
            me = os.getpid()
            for path, data in self._files():
                pid = data.get("pid")
                if pid == me and data.get("host") == self.host:
                    continue  # ours: the in-process table decides
                theirs = _targets(data)
                if not _overlap(theirs, waiter.targets):
                    continue
                stale = self._stale(path, data)
                if stale:
                    try:
                        self._tree().unlink(f"{self._rel}/{path.name}")
                    except (OSError, MossError):
                        pass
                    if log is not None:
                        log("lock_takeover", {"targets": [str(t) for t in theirs], "dead_pid": pid,
                                              "dead_session": data.get("session"), "why": stale})
                    continue
                return {"session": data.get("session"), "role": data.get("role"), "since": data.get("since"),
                        "pid": pid, "text": describe(data.get("session"), data.get("role"), data.get("since"), pid),
                        "target": str(_first_overlap(theirs, waiter.targets))}
            self._next += 1
            held = Held(self._next, waiter.targets, waiter.owner, role, time.time())
            held.file = self.dir / f"{me}-{held.id}.json"
            record = {"targets": [t.as_dict() for t in held.targets], "pid": me, "host": self.host,
                      "session": held.owner, "role": role, "since": held.since}
            # replaces whatever has this name (a planted link is replaced, never written through)
            self._tree().write_atomic(f"{self._rel}/{held.file.name}", json.dumps(record), create_dirs=False,
                                      sync=False)
            return held
        finally:
            fcntl.flock(mutex, fcntl.LOCK_UN)

    def _stale(self, path: Path, data: dict) -> str | None:
        pid = data.get("pid")
        if data.get("host") == self.host and isinstance(pid, int) and not _alive(pid):
            return f"process {pid} is gone"
        st = self._tree().lstat(f"{self._rel}/{path.name}")
        if st is None:
            return "released"
        age = time.time() - st.st_mtime
        if age > STALE_S:
            return f"no heartbeat for {age:.0f} s"
        return None

    def _ensure_dir(self) -> int:
        """The descriptor of the cross-process mutex file (made, with its folder, on first use)."""
        if self._mutex_fd is not None:
            return self._mutex_fd
        from ..storage import ensure_dir

        ensure_dir(self.dir)
        # a .mutex that is a link (even a dangling one) is refused, naming it: never created through
        self._mutex_fd = self._tree().open(f"{self._rel}/.mutex", os.O_RDWR | os.O_CREAT, 0o644)
        return self._mutex_fd

    def _start_heartbeat(self) -> None:
        if self._hb is not None and self._hb.is_alive():
            return
        self._hb = threading.Thread(target=self._heartbeat, name="moss-lock-heartbeat", daemon=True)
        self._hb.start()

    def _heartbeat(self) -> None:
        while True:
            time.sleep(HEARTBEAT_S)
            with self._cond:
                files = [h.file for h in self._held.values() if h.file is not None]
                if not files:
                    self._hb = None
                    return
            for f in files:
                try:
                    self._tree().touch(f"{self._rel}/{f.name}")
                except (OSError, MossError):
                    pass


def _overlap(a, b) -> bool:
    return any(conflicts(x, y) for x in a for y in b)


def _first_overlap(a, b):
    for x in a:
        for y in b:
            if conflicts(x, y):
                return x
    return a[0] if a else ""


_managers: dict[Path, LockManager] = {}
_managers_lock = threading.Lock()


def manager(root: Path) -> LockManager:
    key = Path(root).resolve()
    with _managers_lock:
        m = _managers.get(key)
        if m is None:
            m = _managers[key] = LockManager(key)
        return m

"""Where the copies of isolated children live, the record each one keeps, and cleaning up.

A copy's *home* is a private folder (mode 0700) outside the project:
``BASE/PROJECT-KEY/CHILD-ID/``, where BASE is the user's cache (``$XDG_CACHE_HOME/moss/copies``,
default ``~/.cache/moss/copies``) or, when only that is on the project's file system, the
system temp folder (``$TMPDIR/moss-copies-UID``): a copy on the project's file system can use
reflinks (or hard links, for a child that can never write). The project key is a hash of the
project's path, so a child's copy is found again by its id (a resumed tree) and a project's
copies are listed without reading anyone else's.

A home holds ``tree/`` (the copy the child works in), ``patch.git/`` (the starting point the
patch and the merge compare against) and ``moss-copy.json``: the project, the child, the moss
process that works in it (pid and start time) and how the copy was made. A copy whose process
is gone was left by a crash (or a run that ended with the child neither merged nor
discarded): ``stale`` lists those and ``remove`` deletes them (``moss sessions clean``). A
merged or dropped copy is renamed aside and deleted in the background (``remove_later``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tempfile
import time
from pathlib import Path

from ...errors import MossError
from .. import safefs

RECORD = "moss-copy.json"
TREE = "tree"
REMOVING = ".removing-"   # a home being deleted (remove_later)


def _bases(env=os.environ) -> list[Path]:
    """The folders copies may go in, the user's cache first."""
    home = env.get("HOME") or os.path.expanduser("~")
    cache = env.get("XDG_CACHE_HOME") or ""
    if not os.path.isabs(cache):  # the XDG rule: a relative value is ignored
        cache = os.path.join(home, ".cache")
    return [Path(cache) / "moss" / "copies", Path(tempfile.gettempdir()) / f"moss-copies-{os.geteuid()}"]


def project_key(project: Path) -> str:
    return hashlib.sha256(os.fsencode(str(project))).hexdigest()[:16]


def _private_dir(path: Path) -> bool:
    """Make `path` (and its parents) if missing; whether it is a real folder of ours that no
    one else can read or write (a folder planted in a shared temp folder is not used)."""
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError:
        return False
    return _is_private(path)


def _is_private(path: Path) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o077


def base_for(project: Path, env=os.environ) -> Path:
    """The base folder for `project`'s copies: the first usable one on the project's file
    system (so links and reflinks are possible), else the first usable one."""
    try:
        dev = os.stat(project).st_dev
    except OSError as e:
        raise MossError(f"cannot copy {project}: {e.strerror}", kind="io") from None
    usable = []
    for base in _bases(env):
        if not _private_dir(base):
            continue
        usable.append(base)
        if os.stat(base).st_dev == dev:
            return base
    if not usable:
        raise MossError("no private folder for a child's copy: neither the user's cache folder nor the "
                        "system temp folder could be used", kind="io")
    return usable[0]


def home_of(project: Path, cid: str, env=os.environ) -> Path | None:
    """The home of child `cid`'s copy of `project`, if one exists (in either base)."""
    key = project_key(project)
    for base in _bases(env):
        if not _is_private(base):
            continue
        home = base / key / cid
        try:
            if stat.S_ISDIR(os.lstat(home).st_mode):
                return home
        except OSError:
            continue
    return None


def new_home(project: Path, cid: str, env=os.environ) -> Path:
    """A fresh, empty home for child `cid` (an old one of the same id, left by a crash, is
    removed first: ids are never reused, so it can only be that child's own)."""
    old = home_of(project, cid, env)
    if old is not None:
        remove(old)
    home = base_for(project, env) / project_key(project) / cid
    if not _private_dir(home.parent):
        raise MossError(f"cannot make a private folder at {home.parent}", kind="io")
    home.mkdir(mode=0o700)
    return home


def write_record(home: Path, record: dict) -> None:
    safefs.replace_file(home / RECORD, json.dumps(record, indent=1, sort_keys=True) + "\n", 0o600)


def read_record(home: Path) -> dict | None:
    try:
        with safefs.Tree(home) as t:
            data = json.loads(t.read_bytes(RECORD, 64 * 1024))
    except (OSError, ValueError, MossError):
        return None
    return data if isinstance(data, dict) else None


def claim(home: Path, record: dict) -> dict:
    """`record` with this process as the one working in the copy (what `stale` checks)."""
    from ..procs import start_time

    return {**record, "pid": os.getpid(), "pid_start": start_time(os.getpid()), "claimed": round(time.time(), 3)}


def _held(record: dict | None) -> bool:
    from ..procs import alive_since

    return record is not None and alive_since(record.get("pid"), record.get("pid_start"))


def listing(project: Path | None = None, env=os.environ) -> list[dict]:
    """Every copy (of `project`, or of every project): {home, project, child, held, bytes?}."""
    out = []
    keys = None if project is None else {project_key(project)}
    for base in _bases(env):
        if not _is_private(base):
            continue  # (a folder someone else made or opened holds nothing of ours)
        try:
            groups = [g for g in os.listdir(base) if keys is None or g in keys]
        except OSError:
            continue
        for g in groups:
            try:
                children = os.listdir(base / g)
            except OSError:
                continue
            for cid in children:
                home = base / g / cid
                rec = read_record(home) or {}
                removing = REMOVING in cid  # its deletion was cut short: nobody's any more
                out.append({"home": str(home), "project": rec.get("project"),
                            "child": rec.get("child", cid.split(REMOVING)[0]),
                            "held": _held(rec) and not removing, "strategy": rec.get("strategy")})
    return out


def stale(project: Path | None = None, env=os.environ) -> list[dict]:
    """The copies no live moss process works in (left by a crash, or never merged)."""
    return [c for c in listing(project, env) if not c["held"]]


def remove(home: Path) -> int:
    """Delete a home (never following a link in it) and its copy's shadow-store record;
    the bytes it held (0 when it was already gone)."""
    home = Path(home)
    size = disk_use(home)
    _forget(home)
    shutil.rmtree(home, onerror=_writable_and_again)
    return size


def remove_later(home: Path) -> None:
    """Take a home out of use at once (renamed aside, in the same folder) and delete it in a
    thread of its own: deleting 20,000 copied files takes seconds that nobody should wait
    for. One a process did not finish deleting is listed as stale (`moss sessions clean`)."""
    import secrets
    import threading

    home = Path(home)
    _forget(home)
    aside = home.with_name(f"{home.name}{REMOVING}{secrets.token_hex(4)}")
    try:
        os.rename(home, aside)
    except OSError:
        return
    # not a daemon: a moss process that ends waits for it (an exit cut short leaves it stale)
    threading.Thread(target=shutil.rmtree, args=(aside,), kwargs={"onerror": _writable_and_again},
                     name="moss-copy-removal").start()


def _forget(home: Path) -> None:
    from ..shadow.owner import forget

    forget((home / TREE).resolve())


def _writable_and_again(func, path, exc_info) -> None:
    """rmtree met a folder it may not read or change (a read-only folder copied from the
    project): make it and its parent ours to change, never through a link, and try once more."""
    for p in (os.path.dirname(path), path):
        try:
            fd = os.open(p, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            os.fchmod(fd, 0o700)
        except OSError:
            pass
        finally:
            os.close(fd)
    try:
        if func is os.open or func is os.scandir:
            shutil.rmtree(path, ignore_errors=True)
        else:
            func(path)
    except OSError:
        pass


def disk_use(path: Path) -> int:
    """Bytes a folder's own blocks take (a block shared by hard links is counted once per
    inode; the other names of a hard-linked file outside the folder make it count 0)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for dirpath, dirs, files in os.walk(path):
        for name in dirs + files:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            key = (st.st_dev, st.st_ino)
            if key in seen:
                continue
            seen.add(key)
            if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                continue  # shares its blocks with a name outside (the project's file)
            total += st.st_blocks * 512
    return total

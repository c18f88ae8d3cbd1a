"""Shadow captures of the working tree, and who changed what since, outside the user's git.

A *capture* records the whole tree under ROOT at one moment as a commit in a private git
repository at ``ROOT/.moss/shadow.git``: every regular file (bytes and permission bits),
every symlink (its target, never followed), every directory (empty ones included), and
ignored files and files of nested repositories like any other. Left out: ``.moss/`` at
the root and anything named ``.git`` (never captured, never restored into). A file's
content is left out ("uncaptured", with its size, times and inode kept so a change is
still noticed) when it is larger than ``max_file_bytes``, when the capture already holds
``max_total_bytes`` (non-ignored files and files captured last time go first, then the
smallest), when it cannot be read, or when it is not a file (a fifo, a socket).

Every git command runs with ``GIT_DIR``, ``GIT_WORK_TREE`` and ``GIT_INDEX_FILE`` pointing
at the shadow repository, with system and global config switched off and a fixed author,
so the user's ``.git`` is never written and no user identity is needed. Captures are
incremental: the shadow index is git's stat cache, so an unchanged file is not re-read,
and a file whose lstat has not changed since git last read it (a few seconds after its
last change) is not even shown to git; identical contents are stored once.

Three ways to capture
    ``snapshot(label)``: a restore point (listed by ``list()``).
    ``begin_write(label)`` / ``end_write(id)``: brackets around anything that may write
    (an edit, a shell command). ``begin_write`` is a snapshot too (its id can be passed
    to ``restore``); ``end_write`` captures again and appends to an *ownership journal*
    (``.moss/shadow.git/moss-journal.jsonl``) which paths that write changed, by which
    session, with each path's entry before and after.

Restore
    ``restore(id)`` with no session: every path that differs from the capture is put
    back as it was (files, symlinks, executable and other permission bits, empty
    directories), created paths are removed. With a session (``session=``, the bound
    session id in Lua) that has recorded writes: only paths that session changed in
    writes after ``id``, each back to its state before the session's first change to
    it; a path another session (or anything outside recorded writes) changed after
    that is a *conflict*: reported, not overwritten.

    A restore never follows a symlink (every directory on the way is opened with
    ``O_NOFOLLOW``), never writes under ``.git`` or ``.moss/``, and first records the
    current tree as a *backup* (returned as ``"backup"``; ``restore(backup)`` undoes the
    restore). Content the backup does not hold (uncaptured now) is never overwritten or
    deleted. Whatever it cannot put back is listed in ``"skipped"`` as ``{path, reason,
    detail}``; ``reason`` is one of ``too_large``, ``over_total``, ``unreadable``,
    ``special`` (the old content was never captured), ``not_backed_up`` (the content
    there now is not captured, so it is kept), ``not_empty`` (a directory to remove
    holds something that is not being removed), ``obstructed`` (a parent is missing or
    is not a directory), ``failed`` (an OS error, or the path changed meanwhile).
    Directories are listed with a trailing ``/``.

The store is moss's own
    A repository can ship a ``.moss/shadow.git`` of its own, with links out of the project
    where moss writes (``info/exclude -> ~/.bashrc``) or a config that runs commands. moss
    uses only a store it made for this project: one holding its token (``moss-owner``,
    whose sha256 and that of the config git wrote are kept outside every repository, in
    ``$XDG_DATA_HOME/moss/shadow/``), and nothing but folders and regular files. Any
    other store is moved, never deleted, to ``.moss/agent/quarantine/`` with one warning
    line, and a new one is made. Every file moss itself reads or writes in the store goes
    through moss.tools.safefs (never through a link), and git runs against it with
    ``_SAFE_CONFIG`` on its command line, no system or global config, and no hooks.

Concurrency: every operation holds an exclusive ``flock`` on
``.moss/shadow.git/moss.lock``, so processes and threads using the same root take turns.
Writes of two sessions that overlap in time are both attributed to both sessions (git
cannot tell who wrote a byte); a rollback then reports those paths as conflicts.

The package, one job a module
    ``core``     the ``Shadow`` class: the public operations above
    ``capture``  walking the tree and feeding git's index: one capture of the tree
    ``journal``  the ownership journal: which write of which session changed what
    ``restore``  putting paths back, from descriptors, never through a link
    ``store``    the private repository on disk: its lock, making it, refs, objects,
                 storing and loading captures
    ``owner``    whether a store is moss's own (the owner record outside the project),
                 and setting aside one that is not
    ``git``      running git against the store only, with its safe settings
    ``model``    what a capture and its entries are, and the names the package shares
"""

from __future__ import annotations

from .core import Shadow
from .model import (BACKUPS_REF, DEFAULT_MAX_FILE, DEFAULT_MAX_TOTAL, FORMAT, MB, SNAPSHOTS_REF,
                    WRITES_REF)

__all__ = ["Shadow", "MB", "DEFAULT_MAX_FILE", "DEFAULT_MAX_TOTAL", "FORMAT", "SNAPSHOTS_REF",
           "BACKUPS_REF", "WRITES_REF"]

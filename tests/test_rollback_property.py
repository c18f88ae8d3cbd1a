"""Property tests for rollback: whatever a session does between a snapshot and a
rollback, the rollback brings the WHOLE tree back (bytes, symlink targets, permission
bits, empty directories), and when caps keep it from doing so, every path that still
differs is named in the result. Real git, real files; operations are applied directly
in Python between begin_write/end_write (fast), a few through a real sandboxed shell."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from moss.tools.shadow import Shadow

# Few names, so operations collide: a file becomes a directory, a directory a symlink,
# a rename lands on something that exists, a symlink points at a directory.
NAMES = ["a", "b", "d", "d/a", "d/e", "d/e/b", "x.log", ".env", "s"]
OUTSIDE = "@outside"            # stands for the absolute path of a directory outside
TARGETS = ["a", "d", "d/e", "e", "missing", "../a", OUTSIDE]
DATA = st.one_of(st.binary(max_size=24), st.sampled_from([b"", b"same\n", b"#!/bin/sh\n"]))
NAME = st.sampled_from(NAMES)

OPS = st.one_of(
    st.tuples(st.just("write"), NAME, DATA),
    st.tuples(st.just("append"), NAME, DATA),
    st.tuples(st.just("delete"), NAME),
    st.tuples(st.just("rename"), NAME, NAME),
    st.tuples(st.just("symlink"), NAME, st.sampled_from(TARGETS)),
    st.tuples(st.just("chmod"), NAME, st.sampled_from([0o755, 0o644, 0o600, 0o700])),
    st.tuples(st.just("ignore"), st.sampled_from(["*.log", ".env", "d/", "a", "d/e/b", "s"])),
    st.tuples(st.just("mkdir"), NAME),
)


def manifest(root: Path) -> dict:
    """Everything a person would notice under root (but .moss): path -> kind and bytes,
    link target or permission bits; empty directories included."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        for name in dirnames + filenames:
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            if rel == ".moss":
                continue
            full = os.path.join(dirpath, name)
            st_ = os.lstat(full)
            if stat.S_ISLNK(st_.st_mode):
                out[rel] = ("link", os.readlink(full))
            elif stat.S_ISDIR(st_.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st_.st_mode))
            else:
                with open(full, "rb") as f:
                    out[rel] = ("file", f.read(), stat.S_IMODE(st_.st_mode))
        dirnames[:] = [d for d in dirnames if not (rel_dir == "." and d == ".moss")
                       and not os.path.islink(os.path.join(dirpath, d))]
    return out


def _where(root: Path, rel: str, follow: bool) -> Path | None:
    """Where an operation on ``rel`` lands, as a real command would find it (through
    symlinks); None when that is outside the project or inside .moss."""
    full = root / rel
    real = Path(os.path.realpath(full)) if follow else \
        Path(os.path.realpath(full.parent)) / full.name
    if real == root or root not in real.parents:
        return None
    if real.relative_to(root).parts[0] in (".moss", ".git"):
        return None
    return real


def apply(root: Path, outside: Path, op: tuple) -> None:
    """Carry out one operation the way a shell command would; impossible ones (a write
    into a file, a rename over a non-empty directory) are no-ops, as they would fail."""
    kind, rel = op[0], (op[1] if len(op) > 1 else "")
    try:
        if kind in ("write", "append"):
            _write(root, rel, op[2], append=kind == "append")
        elif kind == "delete":
            _delete(root, rel)
        elif kind == "rename":
            src, dst = _where(root, rel, follow=False), _where(root, op[2], follow=False)
            if src is not None and dst is not None and os.path.lexists(src):
                os.rename(src, dst)
        elif kind == "symlink":
            p = _where(root, rel, follow=False)
            if p is not None and not os.path.lexists(p) and p.parent.is_dir():
                os.symlink(str(outside) if op[2] == OUTSIDE else op[2], p)
        elif kind == "chmod":
            p = _where(root, rel, follow=False)
            if p is not None and not p.is_symlink() and p.exists():
                os.chmod(p, op[2] | (0o700 if p.is_dir() else 0))
        elif kind == "ignore":
            with open(root / ".gitignore", "a") as f:
                f.write(op[1] + "\n")
        elif kind == "mkdir":
            p = _where(root, rel, follow=False)
            if p is not None and not os.path.lexists(p) and p.parent.is_dir():
                p.mkdir()
    except OSError:
        pass


def _write(root: Path, rel: str, data: bytes, *, append: bool) -> None:
    p = _where(root, rel, follow=True)
    if p is None or p.is_dir() or (append and not p.is_file()):
        return
    p.parent.mkdir(parents=True, exist_ok=True)
    with open(p, "ab" if append else "wb") as f:
        f.write(data)


def _delete(root: Path, rel: str) -> None:
    p = _where(root, rel, follow=False)
    if p is not None and os.path.lexists(p):
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink()


BASE = [("write", "a", b"alpha\n"), ("write", "d/a", b"inner\n"), ("mkdir", "d/e"),
        ("write", "x.log", b"log\n"), ("write", ".env", b"KEY=1\n"), ("chmod", ".env", 0o600),
        ("ignore", "*.log"), ("ignore", ".env")]


def reset(root: Path, outside: Path, setup: list) -> None:
    """An example's starting tree: the shadow repository is kept (warm, as in a long
    session), everything else is rebuilt."""
    for p in root.iterdir():
        if p.name == ".moss":
            continue
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink()
    for op in BASE + setup:
        apply(root, outside, op)


@pytest.fixture(scope="module")
def place(tmp_path_factory):
    base = Path(os.path.realpath(tmp_path_factory.mktemp("prop")))
    root, outside = base / "proj", base / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "keep.txt").write_text("outside the project\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_DATA_HOME", str(base / "data"))  # the store's ownership record, not in ~
        yield root, outside


def _writes(ops: list, cuts: list) -> list[list]:
    """Split the operations into consecutive writes (each a begin_write/end_write)."""
    edges = sorted({c % len(ops) for c in cuts} | {0}) + [len(ops)]
    return [ops[a:b] for a, b in zip(edges, edges[1:]) if b > a]


@pytest.mark.slow  # 200 examples: 71 s in the suite's run (issue 24)
@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(setup=st.lists(OPS, max_size=6), ops=st.lists(OPS, min_size=1, max_size=14),
       cuts=st.lists(st.integers(0, 13), max_size=2),
       session=st.sampled_from(["s1", None]))
def test_rollback_brings_back_the_whole_tree(place, setup, ops, cuts, session):
    root, outside = place
    sh = Shadow(root)
    reset(root, outside, setup)
    before, outside_before = manifest(root), manifest(outside)
    sid = sh.snapshot("before", session=session)
    for group in _writes(ops, cuts):
        w = sh.begin_write("ops", session=session)
        for op in group:
            apply(root, outside, op)
        sh.end_write(w)
    result = sh.restore(sid, session=session)
    assert manifest(root) == before
    assert manifest(outside) == outside_before
    assert result["skipped"] == [] and result["conflicts"] == []
    assert result["scope"] == ("session" if session else "all")


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(setup=st.lists(OPS, max_size=6), ops=st.lists(OPS, min_size=1, max_size=12))
def test_under_tiny_caps_every_path_left_different_is_named(place, setup, ops):
    """With caps small enough that some content is never captured, the rollback cannot
    be exact; it must still name every path it left different, and lose nothing it
    had not captured (so restoring its backup gives back the state before it)."""
    root, outside = place
    sh = Shadow(root, max_file_bytes=12, max_total_bytes=30)
    reset(root, outside, setup)
    before = manifest(root)
    sid = sh.snapshot("before")
    w = sh.begin_write("ops")
    for op in ops:
        apply(root, outside, op)
    sh.end_write(w)
    after_ops = manifest(root)
    result = sh.restore(sid)
    _all_named(before, manifest(root), result)
    # Undo with the backup: it holds everything the rollback replaced, so again only
    # paths it names may differ.
    undo = sh.restore(result["backup"])
    _all_named(after_ops, manifest(root), undo)


def _all_named(wanted: dict, now: dict, result: dict) -> None:
    """Every path where ``now`` differs from ``wanted`` is in ``result["skipped"]``
    (itself, or a directory it is in, or something inside it that kept it)."""
    named = {s["path"].rstrip("/") for s in result["skipped"]}
    for p in sorted(set(now) | set(wanted)):
        if now.get(p) != wanted.get(p):
            assert any(q == p or q.startswith(p + "/") or p.startswith(q + "/")
                       for q in named), (p, now.get(p), wanted.get(p), result["skipped"])


# ----------------------------------------------------- through a real sandboxed shell

SHELL_OPS = st.sampled_from([
    "mv d d2 && ln -s d2 d",
    "rm -rf d",
    "echo changed > a && chmod +x a",
    "printf 'KEY=lost' > .env",
    "mkdir -p new/empty/dir",
    "rmdir d/e",
    "echo a >> .gitignore && echo more >> a",
    "ln -sf /etc d/e/b",
    "mv a d/e/moved && ln -s d/e/moved a",
    "chmod 700 d && chmod 600 d/a",
])


@pytest.mark.needs_sandbox
@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(cmds=st.lists(SHELL_OPS, min_size=1, max_size=4))
def test_rollback_after_real_sandboxed_commands(place, cmds):
    from moss.tools import shell

    root, outside = place
    sh = Shadow(root)
    reset(root, outside, [])
    before = manifest(root)
    sid = sh.snapshot("before", session="s1")
    for cmd in cmds:
        w = sh.begin_write(cmd, session="s1")
        shell.run(cmd, root=root, access="edit", timeout=30)
        sh.end_write(w)
    result = sh.restore(sid, session="s1")
    assert manifest(root) == before
    assert result["skipped"] == [] and result["conflicts"] == []

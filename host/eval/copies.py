"""An attempt's fresh copy of a task's repository, with its own ``.moss/``.

The copy is made in a folder of its own under the system's temp folder, never in the user's
tree: the task's ``repo`` folder copied (links kept as links), or, when the task names a
``commit`` of a git repository, a clone with that commit checked out. Whatever ``.moss/`` the
repository brought is dropped; the copy's ``.moss/`` holds exactly:

1. the project's ``.moss/config.toml`` and ``.moss/scripts/``, only when the project is trusted
   (the content the user vouched for; otherwise the attempt runs moss's built-in scripts with
   the user's own config);
2. the cell's variant folder laid over it: its ``config.toml`` merged key by key over the
   project's, every other file put at the same path under ``.moss/`` (so ``scripts/roles/x.lua``
   replaces that role). The user named the variant on the command line: it is theirs, but a
   link in it is copied as a link only when it stays inside the variant folder; one that leaves
   it is refused (variant_entries), never followed to copy what it points at;
3. the policy's own config for the attempt, merged last (an exercise's agent runs with
   ``validate_on = "never"``: scripts/eval.lua ``M.agent_config``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import tomllib
from pathlib import Path

from ..errors import MossError
from ..tools import safefs

GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1"}


def new_home(key: str) -> Path:
    """A fresh folder for one attempt (its copy goes in ``repo/`` below it)."""
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in key)[:60]
    return Path(tempfile.mkdtemp(prefix=f"moss-eval-{safe}-"))


def make(task, home: Path, *, project_root: Path, project_trusted: bool, variant: Path | None,
         overlay: dict | None = None) -> Path:
    """Make the copy of `task`'s repository in `home` and return its path. `overlay`: the policy's
    config for this attempt, merged over everything else (scripts/eval.lua M.agent_config)."""
    from .suite import copy_repo

    dest = home / "repo"
    if task.commit and not (Path(task.repo) / ".git").exists():
        raise MossError(f"task {task.id}: commit {task.commit!r} given but {task.repo} is not a git repository",
                        kind="config")
    copy_repo(task, dest)  # links kept as links, `exclude` left out, a commit checked out with no hooks or filters
    moss_dir = dest / ".moss"
    if moss_dir.is_symlink() or moss_dir.is_file():
        moss_dir.unlink()
    elif moss_dir.exists():
        shutil.rmtree(moss_dir)
    moss_dir.mkdir()
    config: dict = {}
    if project_trusted:
        import stat

        config = read_config(project_root)
        with safefs.Tree(project_root) as tree:  # the project's own files: never through a planted link
            st = tree.lstat(".moss/scripts")
            if st is not None and stat.S_ISDIR(st.st_mode):
                shutil.copytree(Path(project_root) / ".moss" / "scripts", moss_dir / "scripts", dirs_exist_ok=True,
                                symlinks=True)
    if variant is not None:
        config = _overlay(Path(variant), moss_dir, config)
    if overlay:
        from ..config import deep_merge

        config = deep_merge(config, overlay)
    if config:
        import tomli_w

        safefs.replace_file(moss_dir / "config.toml", tomli_w.dumps(config))
    safefs.replace_file(moss_dir / ".gitignore", "*\n")
    return dest


def remove(home: Path | None) -> None:
    """Remove an attempt's folder (its copy included); a folder already gone is fine."""
    if home is not None and Path(home).exists():
        shutil.rmtree(home, ignore_errors=True)


def _overlay(variant: Path, moss_dir: Path, config: dict) -> dict:
    from ..config import deep_merge

    for rel, link in variant_entries(variant):
        if rel == Path("config.toml"):
            config = deep_merge(config, _toml(variant.resolve() / link if link is not None else variant / rel))
            continue
        # Written through the copy's .moss/ held open, never following a link on the way: the
        # project's scripts were copied with their links, and one of them (scripts/roles ->
        # a folder of the user's) must not carry the variant's file out of the attempt.
        with safefs.Tree(moss_dir) as tree:
            if link is not None:  # a link that stays inside the variant: the same link, inside the copy
                tree.unlink(rel)  # the project's file (or link) there is replaced, not written through
                with tree.parent(rel, create=True) as (dfd, name):
                    os.symlink(os.path.relpath(moss_dir / link, (moss_dir / rel).parent), name, dir_fd=dfd)
            else:
                tree.write_atomic(rel, safefs.Tree(variant).read_bytes(rel, 64 * 1024 * 1024), create_dirs=True)
    return config


def variant_entries(variant: Path) -> list[tuple[Path, Path | None]]:
    """(path in `variant`, None) for each regular file, (path, its target's path in `variant`)
    for each link, whose target must lie in the variant folder: a link that leaves it (a
    `scripts/notes.md` pointing at ~/.ssh/id_ed25519) would put a file from elsewhere into the
    attempt's `.moss/`, where the agent reads it. That, and anything that is neither a file, a
    folder nor a link (a fifo, a device), is refused, naming it."""
    if not variant.is_dir():
        raise MossError(f"--variant: {variant} is not a folder", kind="usage")
    real = variant.resolve()
    out: list[tuple[Path, Path | None]] = []
    for dirpath, dirs, files in os.walk(variant):
        for name in sorted(dirs + files):
            path = Path(dirpath) / name
            rel = path.relative_to(variant)
            if path.is_symlink():
                to = Path(os.path.realpath(path))
                if to != real and not to.is_relative_to(real):
                    raise MossError(f"--variant {variant}: {rel} is a link to {os.readlink(path)}, outside the "
                                    f"variant folder; moss copies nothing from outside it into an attempt (copy "
                                    f"the file into the variant, or remove the link)", kind="usage")
                out.append((rel, to.relative_to(real)))
            elif name in files and not path.is_file():
                raise MossError(f"--variant {variant}: {rel} is not a regular file, a folder or a link",
                                kind="usage")
            elif name in files:
                out.append((rel, None))
    return out


def _toml(path: Path) -> dict:
    return _parse_toml(path.read_text(encoding="utf-8", errors="replace"), path)


def read_config(root: Path) -> dict:
    """`root`'s .moss/config.toml, read without following a link or waiting on a fifo
    (safefs); {} when no regular file is there."""
    import stat

    with safefs.Tree(root) as tree:
        st = tree.lstat(".moss/config.toml")
        if st is None or not stat.S_ISREG(st.st_mode):
            return {}
        return _parse_toml(tree.read_text(".moss/config.toml"), Path(root) / ".moss/config.toml")


def _parse_toml(text: str, path: Path) -> dict:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise MossError(f"{path}: not valid TOML ({e})", kind="config") from None



"""Running git against the shadow store, and only there, with settings a repository cannot change.

Every command gets ``GIT_DIR``, ``GIT_WORK_TREE`` and ``GIT_INDEX_FILE`` of the store, no
inherited ``GIT_*`` variable, no system or global config, a fixed author, and
``_SAFE_CONFIG`` on its command line (which beats the store's own config file).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from ...errors import MossError

# Settings given on every command line. Command-line config beats the repository's own
# config file, so these hold even if .moss/shadow.git/config was tampered with: no
# filters, no line-ending conversion, no fsmonitor or hook program, no signing.
_SAFE_CONFIG = (
    "core.autocrlf=false",
    "core.safecrlf=false",
    "core.symlinks=true",
    "core.fileMode=true",
    "core.fsmonitor=false",
    "core.untrackedCache=false",
    "core.hooksPath=/dev/null",
    "core.attributesFile=/dev/null",
    "core.sparseCheckout=false",
    "core.splitIndex=false",
    "core.bare=false",
    "commit.gpgSign=false",
    "gc.autoDetach=false",
    "advice.addEmbeddedRepo=false",
    "advice.addIgnoredFile=false",
    "color.ui=false",
    "diff.noprefix=false",
    "diff.mnemonicPrefix=false",
    "diff.relative=false",
    "protocol.allow=never",
)

_AUTHOR = {
    "GIT_AUTHOR_NAME": "moss",
    "GIT_AUTHOR_EMAIL": "moss@localhost",
    "GIT_COMMITTER_NAME": "moss",
    "GIT_COMMITTER_EMAIL": "moss@localhost",
}


class Git:
    """The git plumbing of a store (its attributes are set by ``Store.__init__``)."""

    root: Path
    git_dir: Path
    _git_bin: str
    _env: dict[str, str]
    _excludes_file: str | None

    def _make_env(self) -> dict[str, str]:
        # Drop every inherited GIT_* variable (moss may run inside a git hook, where
        # GIT_DIR and GIT_INDEX_FILE point at the user's repository).
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("GIT_") or k == "GIT_EXEC_PATH"}
        env.update(_AUTHOR)
        env.update({
            "GIT_DIR": str(self.git_dir),
            "GIT_WORK_TREE": str(self.root),
            "GIT_INDEX_FILE": str(self.git_dir / "index"),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_ATTR_NOSYSTEM": "1",
            "GIT_NO_REPLACE_OBJECTS": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_PAGER": "cat",
        })
        return env

    def _cmd(self, args: tuple[str, ...]) -> list[str]:
        cmd = [self._git_bin]
        for c in _SAFE_CONFIG:
            cmd += ["-c", c]
        if self._excludes_file:
            cmd += ["-c", f"core.excludesFile={self._excludes_file}"]
        return cmd + list(args)

    def _git_bytes(self, *args: str, input: bytes | None = None, check: bool = True,
                   ok: tuple[int, ...] = (0,), env: dict | None = None
                   ) -> subprocess.CompletedProcess:
        try:
            proc = subprocess.run(self._cmd(args), input=input, capture_output=True,
                                  cwd=self.root, env=env or self._env)
        except OSError as e:
            raise MossError(f"shadow: cannot run git: {e}", kind="io") from e
        if check and proc.returncode not in ok:
            err = proc.stderr.decode(errors="replace").strip()
            raise MossError(f"shadow: git {args[0]} failed: {err}", kind="io",
                            returncode=proc.returncode)
        return proc

    def _git(self, *args: str, input: bytes | None = None, check: bool = True,
             env: dict | None = None) -> str:
        proc = self._git_bytes(*args, input=input, check=check, env=env)
        return os.fsdecode(proc.stdout) if check or proc.returncode == 0 else ""

    def _ref(self, ref: str) -> str | None:
        proc = self._git_bytes("rev-parse", "-q", "--verify", f"{ref}^{{commit}}",
                               check=False)
        return proc.stdout.decode().strip() if proc.returncode == 0 else None


class _BlobReader:
    """Blob contents through one ``git cat-file --batch`` process, one at a time (so
    memory holds one file, not the whole restore)."""

    def __init__(self, shadow: Git):
        self._shadow = shadow
        self._proc: subprocess.Popen | None = None

    def __enter__(self) -> "_BlobReader":
        return self

    def read(self, sha: str) -> bytes:
        if self._proc is None:
            sh = self._shadow
            self._proc = subprocess.Popen(sh._cmd(("cat-file", "--batch")),
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.DEVNULL, cwd=sh.root,
                                          env=sh._env)
        stdin, stdout = self._proc.stdin, self._proc.stdout
        assert stdin is not None and stdout is not None     # both are pipes
        stdin.write(sha.encode() + b"\n")
        stdin.flush()
        header = stdout.readline().split()
        if len(header) != 3:
            raise MossError(f"shadow: object {sha} is missing from .moss/shadow.git",
                            kind="io")
        size = int(header[2])
        data = stdout.read(size)
        stdout.read(1)                # the newline after the contents
        return data

    def __exit__(self, *exc) -> None:
        proc = self._proc
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
        except OSError:
            pass
        if proc.stdout is not None:
            proc.stdout.close()
        proc.wait()


"""Where Lua scripts and modules come from: project, then user, then built-in.

`require("x.y")` and `moss @x` both look in, in order:
  1. <project>/.moss/scripts/x/y.lua   (or x/y/init.lua)
  2. $XDG_CONFIG_HOME/moss/scripts/... (default ~/.config/moss/scripts)
  3. the built-in scripts shipped with moss
Names are dotted identifiers; `..`, absolute names and symlinks that leave a root are refused.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from .errors import MossError

NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]*(\.[A-Za-z0-9_][A-Za-z0-9_-]*)*$")
# Subfolders that hold modules, not runnable scripts.
LIBRARY_DIRS = {"lib", "machines", "roles", "types"}


def builtin_scripts_dir() -> Path:
    here = Path(__file__).resolve().parent
    packaged = here / "scripts"  # inside a wheel: moss/scripts
    return packaged if packaged.is_dir() else here.parent / "scripts"  # source checkout


def user_config_dir(env=os.environ) -> Path:
    base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "moss"


def user_data_dir(env=os.environ) -> Path:
    """$XDG_DATA_HOME/moss (default ~/.local/share/moss): state that belongs to the user,
    such as trust records, and that no repository can ship."""
    home = env.get("HOME") or os.path.expanduser("~")
    base = env.get("XDG_DATA_HOME") or os.path.join(home, ".local", "share")
    return Path(base) / "moss"


def display_path(path: Path) -> str:
    """A short path for messages: relative to cwd when inside it, else ~-contracted."""
    path = Path(path)
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        pass
    home = os.path.expanduser("~")
    s = str(path)
    if home not in ("", "/") and s.startswith(home + os.sep):
        return "~" + s[len(home):]
    return s


def display_str(path: str) -> str:
    """display_path for a normalised path string, without pathlib (the module loader's hot path)."""
    cwd = os.getcwd()
    if path == cwd:
        return "."
    prefix = cwd if cwd.endswith(os.sep) else cwd + os.sep
    if path.startswith(prefix) and os.path.isabs(path):
        return path[len(prefix):]
    home = os.path.expanduser("~")
    if home not in ("", "/") and path.startswith(home + os.sep):
        return "~" + path[len(home):]
    return path


@dataclass(frozen=True)
class Root:
    name: str  # "project", "user", "built-in"
    path: Path


@dataclass(frozen=True)
class ScriptInfo:
    name: str
    path: Path
    origin: str
    description: str
    shadows: tuple[str, ...] = ()


class ScriptRoots:
    """The script roots in lookup order. `project=False` leaves out the project's
    .moss/scripts (an untrusted project: its Lua must not run).

    `pins` (real path -> sha256, from the trust scan, host/trust/manifest.py) makes the project's
    scripts load only as the bytes that were trusted: a file that changed since, or appeared
    since (through a link into a folder the agent can edit, say), is refused by `read`."""

    def __init__(self, project_root: Path | None, env=os.environ, builtin: Path | None = None,
                 project: bool = True, pins: dict[str, str] | None = None):
        self.pins = pins
        roots = []
        if project_root is not None and project:
            roots.append(Root("project", Path(project_root) / ".moss" / "scripts"))
        roots.append(Root("user", user_config_dir(env) / "scripts"))
        roots.append(Root("built-in", builtin or builtin_scripts_dir()))
        self.roots = roots
        self._reals: dict[str, Path] = {}
        self._strs: dict[str, str] = {}

    def _candidates(self, name: str):
        parts = name.split(".")
        for root in self.roots:
            base = root.path.joinpath(*parts)
            yield root, base.with_name(base.name + ".lua")
            yield root, base / "init.lua"

    def find_module(self, name: str, what: str = "module") -> tuple[Path, str]:
        """Resolve a dotted name to (path, display name); MossError when absent/refused."""
        path, shown, _ = self.locate(name, what)
        return path, shown

    def locate(self, name: str, what: str = "module", after: str | None = None) -> tuple[Path, str, str]:
        """find_module, and the name of the root it came from ("project", "user", "built-in");
        with `after`, only the roots below the one of that name are looked in.

        Every `require` of every runtime comes here (a child agent's start-up resolves some
        40 modules), so it works on strings (os.path) rather than pathlib objects."""
        if not NAME_RE.match(name or ""):
            raise MossError(
                f"{what} name {name!r} refused: use dotted names like 'lib.util' "
                "(no '..', slashes or absolute paths)",
                kind="denied",
            )
        rel = name.replace(".", os.sep)
        roots = self.roots
        if after is not None:
            names = [r.name for r in roots]
            roots = roots[names.index(after) + 1:] if after in names else []
        for root in roots:
            base = os.path.join(self._str(root), rel)
            for candidate in (base + ".lua", os.path.join(base, "init.lua")):
                if not os.path.isfile(candidate):
                    continue
                real = os.path.realpath(candidate)
                root_real = str(self._real(root))
                inside = root_real if root_real.endswith(os.sep) else root_real + os.sep
                if real != root_real and not real.startswith(inside):
                    raise MossError(
                        f"{what} {name!r} refused: {display_path(Path(candidate))} is a symlink "
                        f"leading outside {display_path(root.path)}",
                        kind="denied",
                    )
                return Path(real), display_str(candidate), root.name
        looked = [display_path(candidate) for _, candidate in self._candidates(name)]
        raise MossError(f"{what} {name!r} not found; looked in:\n  " + "\n  ".join(looked), kind="not_found")

    def read(self, path: Path, origin: str | None) -> bytes:
        """The bytes of a script `locate` found; a project script must be the content trusted."""
        src = Path(path).read_bytes()
        if origin == "project" and self.pins is not None:
            import hashlib

            if self.pins.get(str(path)) != hashlib.sha256(src).hexdigest():
                raise MossError(f"{display_path(Path(path))} is not the content you trusted (it changed or "
                                f"appeared after moss checked this project's trust): review it with `moss trust`",
                                kind="denied")
        return src

    def _str(self, root: Root) -> str:
        s = self._strs.get(root.name)
        if s is None:
            s = self._strs[root.name] = str(root.path)
        return s

    def _real(self, root: Root) -> Path:
        """The root's real path, resolved once: a root that later turns into a symlink to
        elsewhere then refuses every module under it (stricter, never looser)."""
        real = self._reals.get(root.name)
        if real is None:
            real = self._reals[root.name] = root.path.resolve()
        return real

    def shadows_own(self, path: Path | str) -> bool:
        """Whether `path`, a project script or module, takes the place of one of moss's own or of
        the user's own (the same relative path under the built-in or the user's root)."""
        project = next((r for r in self.roots if r.name == "project"), None)
        if project is None:
            return False
        base = str(self._real(project)).rstrip(os.sep) + os.sep
        path = str(path)
        if not path.startswith(base):
            return False
        rel = path[len(base):]
        return any(os.path.isfile(os.path.join(self._str(r), rel)) for r in self.roots if r.name != "project")

    def origin_of(self, name: str) -> str | None:
        """Which root `name` would load from ("project", "user", "built-in"), or None."""
        try:
            path, _ = self.find_module(name, what="script")
        except MossError:
            return None
        for root in self.roots:
            if path.is_relative_to(root.path.resolve()):
                return root.name
        return None

    def list_scripts(self) -> list[ScriptInfo]:
        """Runnable scripts (top-level .lua files), first root wins; shadowed ones noted."""
        seen: dict[str, ScriptInfo] = {}
        for root in self.roots:
            if not root.path.is_dir():
                continue
            for p in sorted(root.path.glob("*.lua")):
                name = p.stem
                if name in seen:
                    first = seen[name]
                    seen[name] = ScriptInfo(first.name, first.path, first.origin, first.description,
                                            first.shadows + (root.name,))
                    continue
                seen[name] = ScriptInfo(name, p, root.name, _description(p))
        return sorted(seen.values(), key=lambda s: s.name)


def _description(path: Path) -> str:
    """First `-- text` comment line at the top of a script."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                s = line.strip()
                if not s:
                    continue
                if s.startswith("--"):
                    text = s.lstrip("-").strip()
                    if text and not text.startswith("@") and not text.startswith("["):
                        return text
                    continue
                break
    except OSError:
        pass
    return ""

"""Real code in seven languages, read at test time from what is installed on the machine.

Nothing here is copied into the project: each language's files come from where its toolchain
or package put them (tests/test_grammar_corpus.py says what it does with them). CI installs what
a new machine lacks (.ci/run); a language whose files are missing is an
error naming the package, never a skip.

    python      the standard library of the Python running the tests (sysconfig)
    go          Go's standard library sources (Debian golang-src: /usr/share/go-N/src)
    cpp         the C++ standard headers (libstdc++: /usr/include/c++/N)
    java        the JDK's sources (/usr/lib/jvm/*/lib/src.zip)
    javascript  npm's own code (/usr/lib/node_modules/npm, or Debian's /usr/share/nodejs/npm)
    rust        Rust's standard library sources (Debian rust-src: /usr/lib/rustlib/src)
    lua         moss's own scripts/
"""

from __future__ import annotations

import glob
import os
import re
import sysconfig
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LANGS = ("python", "rust", "go", "javascript", "cpp", "java", "lua")
MIN_BYTES, MAX_BYTES = 300, 20_000  # real files, small enough that 300 of them make a few MB
# names the edit risk rates as config or build files (scripts/lib/agent/risk.lua): high whatever
# they hold, so not what this corpus is about
_CONFIG = re.compile(r"(setup\.py|\.toml|\.json|\.ya?ml|\.lock|\.cfg|\.ini|Makefile|Dockerfile|go\.mod)$")

WHERE = {
    "python": "the Python standard library (sysconfig's stdlib path)",
    "go": "Go's standard library sources: apt-get install golang-src",
    "cpp": "the C++ standard headers: apt-get install libstdc++-12-dev (g++)",
    "java": "the JDK's sources (lib/src.zip): apt-get install openjdk-17-source",
    "javascript": "npm's node_modules: apt-get install npm (or nodejs from nodesource)",
    "rust": "Rust's standard library sources: apt-get install rust-src",
    "lua": "moss's own scripts/",
}


@dataclass(frozen=True)
class Source:
    lang: str
    origin: str  # where it was read from
    data: bytes

    @property
    def name(self) -> str:
        return self.origin.replace("\\", "/").rsplit("/", 1)[-1]

    @property
    def text(self) -> str:
        return self.data.decode("utf-8")

    def fence(self) -> str:
        """A fence longer than any run of backticks in the file (what a model writes)."""
        runs = [len(m) for m in re.findall(r"`+", self.text)]
        return "`" * max(3, max(runs, default=0) + 1)


def _files(roots: list[str], suffix: str = "") -> list[tuple[str, Callable[[], bytes]]]:
    """Files under `roots` (globs) whose name ends with `suffix`, of a size the corpus takes."""
    out = []
    for top in sorted({r for pat in roots for r in glob.glob(pat)}):
        for folder, dirs, names in os.walk(top):
            dirs[:] = sorted(d for d in dirs if d not in ("site-packages", "__pycache__"))
            for name in sorted(names):
                path = os.path.join(folder, name)
                if not name.endswith(suffix) or _CONFIG.search(name) or os.path.islink(path):
                    continue
                if MIN_BYTES <= os.path.getsize(path) <= MAX_BYTES:
                    out.append((path, lambda path=path: Path(path).read_bytes()))
    return out


def _java() -> list[tuple[str, Callable[[], bytes]]]:
    for z in sorted(glob.glob("/usr/lib/jvm/*/lib/src.zip")):
        if not os.path.isfile(z):  # Debian's link to openjdk-N-source, which may be absent
            continue
        zf = zipfile.ZipFile(z)
        return [(f"{z}!{i.filename}", lambda i=i, zf=zf: zf.read(i)) for i in sorted(zf.infolist(), key=lambda i: i.filename)
                if i.filename.endswith(".java") and MIN_BYTES <= i.file_size <= MAX_BYTES]
    return []


def _candidates(lang: str) -> list[tuple[str, Callable[[], bytes]]]:
    if lang == "python":
        return _files([sysconfig.get_paths()["stdlib"]], ".py")
    if lang == "go":
        return _files(["/usr/share/go-*/src"], ".go")
    if lang == "cpp":
        return _files(["/usr/include/c++/*"])
    if lang == "java":
        return _java()
    if lang == "javascript":
        return _files(["/usr/lib/node_modules/npm", "/usr/share/nodejs/npm"], ".js")
    if lang == "rust":
        return _files(["/usr/lib/rustlib/src/rust/library"], ".rs")
    if lang == "lua":
        return _files([str(REPO / "scripts")], ".lua")
    raise ValueError(lang)


def pick(lang: str, count: int) -> list[Source]:
    """`count` files of `lang`, spread evenly over everything installed (the same ones on every
    run of one machine): UTF-8 text, not binary, not a config file's name. Raises when fewer
    are installed, naming what to install."""
    found = _candidates(lang)
    if len(found) < count:
        raise FileNotFoundError(f"only {len(found)} {lang} files of {MIN_BYTES:,} to {MAX_BYTES:,} bytes "
                                f"are installed, {count} needed: {WHERE[lang]}")
    out: list[Source] = []
    taken: set[int] = set()
    for i in range(count):
        k = int(i * len(found) / count)
        while k in taken or not _text(found[k][1]()):  # binary or not UTF-8: the next one
            k = (k + 1) % len(found)
        taken.add(k)
        out.append(Source(lang, found[k][0], found[k][1]()))
    return out


def _text(data: bytes) -> bool:
    if b"\0" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True

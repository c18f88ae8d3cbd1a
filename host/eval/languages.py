"""The six languages of exercise folders (host/eval/exercises.py): how each one's tests build and
run inside a check's sandbox, what each needs on this machine, and what is prepared once.

A check runs sandboxed at ``edit`` (host/eval/attempt.py), with no network. Every language's
script first copies the attempt's tree to the sandbox's private ``/tmp`` (named after the
exercise, which CMake reads) and builds and tests there, so no build output ever lands in the
copy the agent works in. There it turns on the tests an exercise ships switched off (Rust's
``#[ignore]``, JavaScript's ``xtest``, Java's ``@Disabled``, C++'s ``EXERCISM_RUN_ALL_TESTS``),
as the benchmark's own harness does, and runs them:

=========== =====================================================================
language    how (each within 180 s, as the benchmark's own harness allows)
=========== =====================================================================
Python      ``python3 -m unittest`` (``python3 -m pytest`` when a test imports it)
Rust        ``cargo test --offline -- --include-ignored``
Go          ``go test ./...`` with ``GOPROXY=off``
JavaScript  jest with the exercises' babel preset, from the prepared cache (20 s a test)
C++         CMake and make (the build runs the Catch tests)
Java        ``javac``, then JUnit 5's console launcher, with AssertJ
=========== =====================================================================

What is shared between attempts, all under the cache folder (``MOSS_EVAL_CACHE``, else
``$XDG_CACHE_HOME/moss/eval``, else ``~/.cache/moss/eval``) and shown read-only to the checks:

- ``javascript/KEY/node_modules``: jest, babel-jest, @babel/core, the exercises' babel preset and
  core-js, at the versions the exercises' package.json names. Installed from the npm registry
  by ``moss eval --prepare DIR`` (``npm install --ignore-scripts``), never by an attempt; until
  then a JavaScript exercise is not run, and says so.
- ``go/VERSION/gocache``: Go's build cache after building the ``testing`` package once; each
  check starts from a copy of it in its own ``/tmp`` (Go writes to its cache).
- ``cpp/KEY/libcatch-main.a``: the Catch main (``test/tests-main.cpp``, the slow part of every
  C++ build: ~11 s of CPU) compiled once per distinct Catch header; a check links it instead
  of compiling it again.

Go's and C++'s are made the first time a check needs them (in the sandbox, like the checks);
``--prepare`` makes them too. Everything else is per check, in its private ``/tmp``: cargo's
target folder, Go's cache copy, the CMake build, the Java classes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import threading
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path, PurePosixPath

CACHE_ENV = "MOSS_EVAL_CACHE"
SCRATCH = "/tmp/moss-check"    # inside the sandbox: the check's private copy and build output
JAVA_LIBS = Path("/usr/share/java")  # Debian's jars: junit5, libassertj-core-java
JUNIT = "junit-platform-console-standalone.jar"
ASSERTJ = "assertj-core.jar"
# What the JavaScript exercises' tests need of their package.json (the rest, eslint and types, is
# for editors); the default versions are the benchmark's.
JS_PACKAGES = {"jest": "^29.7.0", "babel-jest": "^29.6.4", "@babel/core": "^7.25.2",
               "@exercism/babel-preset-javascript": "^0.2.1", "core-js": "~3.37.1"}
# javac is a short run: C1 alone and the serial collector take about half its CPU; the tests keep
# the full JIT (a search-heavy test, such as Java's alphametics, runs ~5 times slower on C1 alone)
JAVAC_FLAGS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
JAVA_FLAGS = "-XX:+UseSerialGC"
TIMEOUT = 180.0  # seconds a check's build and test may take: the benchmark's own harness allows 3 minutes


@dataclass(frozen=True)
class Language:
    name: str                  # as in the benchmark's folders: cpp, go, java, javascript, python, rust
    title: str
    suffix: str                # a test file's suffix selects the language
    tools: tuple[str, ...]     # commands it needs on PATH
    install: str               # what makes it run here
    timeout: float             # seconds its check may take
    how: str                   # the check, in a few words (rows and doctor say it)


LANGUAGES = {lang.name: lang for lang in (
    Language("python", "Python", ".py", ("python3",), "apt-get install python3", TIMEOUT, "python3 -m unittest"),
    Language("rust", "Rust", ".rs", ("cargo",), "rustup (rustup.rs), or apt-get install cargo", TIMEOUT,
             "cargo test --offline -- --include-ignored"),
    Language("go", "Go", ".go", ("go",), "apt-get install golang-go", TIMEOUT, "go test ./..."),
    Language("javascript", "JavaScript", ".js", ("node", "npm"), "apt-get install nodejs npm", TIMEOUT, "jest"),
    Language("cpp", "C++", ".cpp", ("cmake", "make", "c++"), "apt-get install cmake make g++", TIMEOUT,
             "cmake and make (Catch)"),
    Language("java", "Java", ".java", ("javac", "java"),
             "apt-get install openjdk-17-jdk-headless junit5 libassertj-core-java", TIMEOUT,
             "javac and JUnit 5's console launcher"),
)}
BY_SUFFIX = {lang.suffix: lang for lang in LANGUAGES.values()}


def cache_root(env=None) -> Path:
    env = os.environ if env is None else env
    if env.get(CACHE_ENV):
        return Path(env[CACHE_ENV]).expanduser()
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "moss" / "eval"


# ----------------------------------------------------------------------------- the scripts

def script(lang: Language, folder: str, tests: list[str], files: list[str]) -> str:
    """The check's shell script for an exercise (run in the copy, at edit, in the sandbox).
    It builds and tests in a scratch folder holding `files` alone: the exercise's own files
    (put back as given) and its solution files. A file the agent added is not part of the
    check, so none can stand in for the test runner (a `unittest/` package, a `conftest.py`, a
    Go `TestMain` that exits 0)."""
    w = f"{SCRATCH}/{folder}"
    listed = " ".join(shlex.quote(f) for f in files)
    head = ["exec 2>&1", "set -e", f"rm -rf {SCRATCH}", f"mkdir -p {shlex.quote(w)}",
            f"cp -a --parents -- {listed} {shlex.quote(w)}", f"cd {shlex.quote(w)}"]
    quoted = " ".join(shlex.quote(t) for t in tests)
    body = _BODIES[lang.name](quoted, tests)
    return "\n".join(head + body) + "\n"


def _python(quoted: str, tests: list[str]) -> list[str]:
    # PYTHONDONTWRITEBYTECODE: nothing to keep; a test that imports pytest runs under pytest
    modules = " ".join(shlex.quote(str(PurePosixPath(t).with_suffix("")).replace("/", "."))
                       for t in tests if PurePosixPath(t).suffix == ".py")
    return ["export PYTHONDONTWRITEBYTECODE=1",
            f'if grep -qE "^\\s*(import|from) pytest" {quoted}; then python3 -m pytest -q -p no:cacheprovider {quoted}; '
            f"else python3 -m unittest {modules}; fi"]


def _rust(quoted: str, tests: list[str]) -> list[str]:
    return [f"export CARGO_TARGET_DIR={SCRATCH}-target", "cargo test --offline -- --include-ignored"]


def _go(quoted: str, tests: list[str]) -> list[str]:
    return [f"export GOCACHE={SCRATCH}-gocache GOPATH={SCRATCH}-gopath GOPROXY=off GOTOOLCHAIN=local",
            'if [ -n "$MOSS_GO_CACHE" ]; then cp -a "$MOSS_GO_CACHE" "$GOCACHE"; fi',
            "go test ./..."]


def _javascript(quoted: str, tests: list[str]) -> list[str]:
    return ["rm -rf node_modules", 'ln -s "$MOSS_NODE_MODULES" node_modules',
            f"sed -i -E 's/\\bx(test|it|describe)\\(/\\1(/g' {quoted}",
            # jest's own 5 s per test is meant for one run on a quiet machine; checks run side by
            # side (-j), and a test that starts 50 worker threads took 5.3 s at a load of 16
            "node node_modules/jest/bin/jest.js --ci --watchman=false --testTimeout=20000"]


def _cpp(quoted: str, tests: list[str]) -> list[str]:
    # the prepared Catch main (when this exercise's test/ is the one it was built from) is linked
    # instead of compiling test/tests-main.cpp again: an archive at the end of the link line, so
    # only a program without a main of its own takes it (not CMake's compiler check)
    return ["link=",
            'if [ -n "$MOSS_CATCH_MAIN" ]; then echo "// the Catch main: prebuilt" > test/tests-main.cpp; '
            'link="-DCMAKE_CXX_STANDARD_LIBRARIES=$MOSS_CATCH_MAIN"; fi',
            f'cmake -S . -B {SCRATCH}-build -DEXERCISM_RUN_ALL_TESTS=1 $link > {SCRATCH}-cmake.log '
            f'|| {{ cat {SCRATCH}-cmake.log; exit 1; }}',
            f"make -s --no-print-directory -C {SCRATCH}-build"]


def _java(quoted: str, tests: list[str]) -> list[str]:
    flags = " ".join(f"-J{f}" for f in JAVAC_FLAGS.split())
    return [f"sed -i -E 's/@Disabled(\\([^)]*\\))?//g' {quoted}",
            f"find src -name '*.java' > {SCRATCH}-sources",
            f'javac {flags} -encoding UTF-8 -d {SCRATCH}-classes -cp "$MOSS_JUNIT:$MOSS_JAVA_CP" @{SCRATCH}-sources',
            f'java {JAVA_FLAGS} -jar "$MOSS_JUNIT" -cp "{SCRATCH}-classes:$MOSS_JAVA_CP" --scan-classpath '
            f"{SCRATCH}-classes --disable-banner --disable-ansi-colors --details=tree --fail-if-no-tests"]


_BODIES = {"python": _python, "rust": _rust, "go": _go, "javascript": _javascript, "cpp": _cpp, "java": _java}


# ----------------------------------------------------------------------------- this machine

@lru_cache(maxsize=64)
def _which(tool: str, path: str) -> str | None:
    return shutil.which(tool, path=path)


def missing_tools(lang: Language, env=None) -> list[str]:
    env = os.environ if env is None else env
    return [t for t in lang.tools if _which(t, env.get("PATH", os.defpath)) is None]


def toolchain_problem(lang: Language, env=None) -> str | None:
    """Why `lang`'s checks cannot run on this machine (a sentence naming the fix), or None."""
    missing = missing_tools(lang, env)
    if missing:
        return f"{', '.join(missing)} not found on PATH ({lang.title}: {lang.install})"
    if lang.name == "java":
        jars = [j for j in (JUNIT, ASSERTJ) if not (JAVA_LIBS / j).is_file()]
        if jars:
            return (f"{', '.join(str(JAVA_LIBS / j) for j in jars)} not found (Java's checks need JUnit 5's "
                    f"console launcher and AssertJ: apt-get install junit5 libassertj-core-java)")
    return None


READ_LIMIT = 1 << 20  # a build file or test the checks' set-up reads: more is not one


def _read_bytes(copy: Path, rel: str, limit: int = READ_LIMIT) -> bytes | None:
    """A file of an attempt's copy, read from the copy held open without following a link and at
    most `limit` bytes (the agent may have made it a link to /dev/zero, a fifo, or a huge
    file); None when it cannot be read so."""
    from ..errors import MossError
    from ..tools import safefs

    try:
        with safefs.Tree(copy) as tree:
            return tree.read_bytes(rel, limit)
    except (MossError, OSError):
        return None


def _read(copy: Path, rel: str) -> str | None:
    """`_read_bytes` as UTF-8 text; None when it is not."""
    data = _read_bytes(copy, rel)
    try:
        return None if data is None else data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def uses_pytest(copy: Path) -> bool:
    """Whether a Python exercise's tests import pytest (then pytest runs them)."""
    for test in copy.glob("*test*.py"):
        text = _read(copy, test.name)
        if text is not None and re.search(r"^\s*(import|from) pytest", text, re.M):
            return True
    return False


@lru_cache(maxsize=4)
def _has_pytest(path: str) -> bool:
    try:
        return subprocess.run(["python3", "-c", "import pytest"], capture_output=True, timeout=60,
                              env={"PATH": path}).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def rustup_home(env=None) -> str | None:
    """Where the rustup toolchains of the `cargo` on PATH are: RUSTUP_HOME, else the .rustup
    beside the .cargo/bin it was found in (HOME may be another folder than the one rustup used)."""
    env = os.environ if env is None else env
    if env.get("RUSTUP_HOME"):
        return env["RUSTUP_HOME"]
    cargo = _which("cargo", env.get("PATH", os.defpath))
    if cargo is None:
        return None
    bindir = Path(cargo).parent
    cand = bindir.parent.parent / ".rustup"
    return str(cand) if bindir.name == "bin" and bindir.parent.name == ".cargo" and cand.is_dir() else None


def cargo_home(env=None) -> Path:
    env = os.environ if env is None else env
    if env.get("CARGO_HOME"):
        return Path(env["CARGO_HOME"])
    cargo = _which("cargo", env.get("PATH", os.defpath))
    if cargo is not None and Path(cargo).parent.name == "bin" and Path(cargo).parent.parent.name == ".cargo":
        return Path(cargo).parent.parent
    return Path(os.path.expanduser("~")) / ".cargo"


# ----------------------------------------------------------------------------- what an exercise needs

def _crates(manifest: dict) -> list[str]:
    """The registry crates a Cargo.toml depends on (path and git dependencies aside)."""
    tables = [manifest.get(k) for k in ("dependencies", "dev-dependencies", "build-dependencies")]
    for target in (manifest.get("target") or {}).values():
        if isinstance(target, dict):
            tables += [target.get(k) for k in ("dependencies", "dev-dependencies", "build-dependencies")]
    out: list[str] = []
    for table in tables:
        for name, spec in (table or {}).items() if isinstance(table, dict) else ():
            if isinstance(spec, dict) and ("path" in spec or "git" in spec):
                continue
            crate = spec.get("package", name) if isinstance(spec, dict) else name
            if crate not in out:
                out.append(str(crate))
    return out


def missing_crates(copy: Path, env=None) -> list[str]:
    """The crates the copy's Cargo.toml needs that cargo's download cache does not hold (crates.io
    cannot be reached from a check: `cargo test --offline`)."""
    try:
        manifest = tomllib.loads(_read(copy, "Cargo.toml") or "")
    except tomllib.TOMLDecodeError:
        return []  # cargo itself says what is wrong with it
    cache = cargo_home(env) / "registry" / "cache"
    have = set()
    if cache.is_dir():
        for index in cache.iterdir():
            if index.is_dir():
                have |= {re.sub(r"-\d[^-]*\.crate$", "", f.name) for f in index.glob("*.crate")}
    return [c for c in _crates(manifest) if c not in have]


_GRADLE_DEP = re.compile(r"""^\s*(?:implementation|api|compileOnly|runtimeOnly)\s*\(?\s*["']([^"':]+):([^"':]+)(?::([^"']+))?["']""",
                         re.M)


def java_libraries(copy: Path) -> tuple[list[str], list[str]]:
    """(jars found for the libraries build.gradle's main code needs, the libraries not found here):
    gradle would download them; the checks use Debian's jars in /usr/share/java."""
    text = _read(copy, "build.gradle")
    if text is None:
        return [], []
    jars, missing = [], []
    for group, artifact, version in _GRADLE_DEP.findall(text):
        cands = [JAVA_LIBS / f"{artifact}-{version}.jar", JAVA_LIBS / f"{artifact}.jar"] if version else \
            [JAVA_LIBS / f"{artifact}.jar"]
        found = next((c for c in cands if c.is_file()), None)
        if found is None:
            missing.append(f"{group}:{artifact}" + (f":{version}" if version else ""))
        else:
            jars.append(str(found))
    return jars, missing


_BOOST = re.compile(r"find_package\s*\(\s*Boost\b([^)]*)\)", re.I)


def missing_boost(copy: Path) -> list[str]:
    """The Boost libraries a C++ exercise's CMakeLists.txt requires and this machine lacks
    (Debian's libboost-COMPONENT-dev): [] when none, ["headers"] when Boost is not there at all."""
    text = _read(copy, "CMakeLists.txt")
    if text is None:
        return []
    wanted: list[str] = []
    for args in _BOOST.findall(text):
        if "REQUIRED" not in args.upper():
            continue
        words = args.split()
        if "COMPONENTS" in words:
            wanted += [w for w in words[words.index("COMPONENTS") + 1:] if re.fullmatch(r"[a-z_]+", w)]
        wanted.append("headers")
    if not wanted:
        return []
    if not Path("/usr/include/boost/version.hpp").is_file():
        return sorted(set(wanted))
    import glob

    def have(c: str) -> bool:
        return any(glob.glob(f"{d}/libboost_{c}.so*") for d in ("/usr/lib", "/usr/lib/*", "/usr/local/lib"))

    return sorted({c for c in wanted if c != "headers" and not have(c)})


_ASSERTJ_GAP = re.compile(r"^src/test/java/\S+\.java:\d+: error: cannot find symbol\n(?:.*\n){0,4}?\s*location: "
                          r"(?:class|interface) \w*Assert\w*", re.M)


def environment_problem(lang_name: str, output: str) -> str | None:
    """A failed check's output that says this machine, not the solution, is at fault: the
    exercise's own tests call an AssertJ method this machine's assertj-core lacks (Debian's
    is older than the exercises ask for)."""
    if lang_name == "java" and _ASSERTJ_GAP.search(output):
        return (f"its tests call an AssertJ method that this machine's {JAVA_LIBS / ASSERTJ} does not have "
                f"(the exercise's build.gradle asks for a newer assertj-core)")
    return None


# a version range of the registry's own (^7.25.2, ~3.37.1, >=29 <30): never a URL, a path or a
# git repository, which `npm install` would fetch from wherever an exercise folder says
_RANGE = re.compile(r"[\^~<>=]*\s*\d+(\.(\d+|x|\*)){0,2}([-+][\w.]+)?(\s*(\|\||-)?\s*[\^~<>=]*\s*\d+(\.(\d+|x|\*)){0,2}"
                    r"([-+][\w.]+)?)*")


def js_packages(copy: Path) -> dict[str, str]:
    """What the tests need, at the versions the exercise's package.json names (a version that is
    not a plain range of the registry's is not taken: the default is)."""
    try:
        pkg = json.loads(_read(copy, "package.json") or "{}")
    except ValueError:
        pkg = {}
    dev = pkg.get("devDependencies") if isinstance(pkg, dict) else None
    dev = dev if isinstance(dev, dict) else {}
    out = {}
    for name, default in JS_PACKAGES.items():
        given = dev.get(name)
        out[name] = given.strip() if isinstance(given, str) and _RANGE.fullmatch(given.strip()) else default
    return out


def js_cache(packages: dict[str, str], env=None) -> Path:
    key = hashlib.sha256(json.dumps(packages, sort_keys=True).encode()).hexdigest()[:16]
    return cache_root(env) / "javascript" / key


# ----------------------------------------------------------------------------- a check's setup

@dataclass
class CheckSetup:
    env: dict[str, str]
    expose: list[str]          # paths shown read-only in the sandbox
    problem: str | None = None  # the exercise cannot run here: why (not the agent's doing)


def unavailable(lang_name: str, copy: Path, env=None) -> str | None:
    """Why an exercise of `lang_name` cannot run here, judged on its repository folder (or copy)
    before any attempt: the toolchain, a library or crate not available offline, JavaScript's
    packages not prepared, pytest for tests that import it. None when it can."""
    lang = LANGUAGES.get(lang_name)
    if lang is None:
        return f"moss has no check for {lang_name} exercises"
    problem = toolchain_problem(lang, env)
    if problem:
        return problem
    if lang.name == "python" and uses_pytest(copy) and not _has_pytest((env or os.environ).get("PATH", os.defpath)):
        return "its tests import pytest, which the python3 on PATH does not have: pip install pytest"
    if lang.name == "rust":
        crates = missing_crates(copy, env)
        if crates:
            return (f"its Cargo.toml needs the crate{'s' if len(crates) > 1 else ''} {', '.join(crates)}, not "
                    f"available offline (not in cargo's download cache {cargo_home(env) / 'registry'}; the "
                    f"checks cannot reach crates.io)")
    if lang.name == "java":
        _, missing = java_libraries(copy)
        if missing:
            return (f"its build.gradle needs the Java librar{'ies' if len(missing) > 1 else 'y'} "
                    f"{', '.join(missing)}, not on this machine (no jar in {JAVA_LIBS}; gradle cannot download)")
    if lang.name == "cpp":
        boost = missing_boost(copy)
        if boost:
            debs = " ".join(f"libboost-{c.replace('_', '-')}-dev" for c in boost if c != "headers") or "libboost-dev"
            return (f"its CMakeLists.txt requires Boost ({', '.join(boost)}), not on this machine: "
                    f"apt-get install {debs}")
    if lang.name == "javascript":
        where = js_cache(js_packages(copy), env)
        if not (where / "node_modules" / "jest").is_dir():
            return (f"jest and babel are not installed for moss eval: run `moss eval --prepare DIR` once (npm "
                    f"installs {', '.join(JS_PACKAGES)} from the registry into {where})")
    return None


def check_setup(lang_name: str, copy: Path, shell_setup=None, env=None) -> CheckSetup:
    """The variables and read-only paths `lang_name`'s check needs on this machine (made at
    check time: where the toolchains and prepared caches are is this machine's fact)."""
    env = os.environ if env is None else env
    out = CheckSetup(env={}, expose=[])
    why = unavailable(lang_name, copy, env)
    if why:
        out.problem = why
        return out
    if lang_name == "rust":
        home = rustup_home(env)
        if home:  # the cargo proxy finds its toolchains there, whatever HOME the check has
            out.env["RUSTUP_HOME"] = home
            out.expose.append(home)
        registry = cargo_home(env) / "registry"
        if registry.is_dir():
            out.env["CARGO_HOME"] = str(cargo_home(env))
            out.expose.append(str(cargo_home(env)))
    elif lang_name == "go":
        warm = prepare_go(shell_setup, env)
        if warm is not None:
            out.env["MOSS_GO_CACHE"] = str(warm)
            out.expose.append(str(warm))
    elif lang_name == "javascript":
        mods = js_cache(js_packages(copy), env) / "node_modules"
        out.env["MOSS_NODE_MODULES"] = str(mods)
        out.expose.append(str(mods.parent))
    elif lang_name == "cpp":
        main = prepare_catch_main(copy, shell_setup, env)
        if main is not None:
            out.env["MOSS_CATCH_MAIN"] = str(main)
            out.expose.append(str(main.parent))
    elif lang_name == "java":
        jars, _ = java_libraries(copy)
        out.env["MOSS_JUNIT"] = str(JAVA_LIBS / JUNIT)
        out.env["MOSS_JAVA_CP"] = ":".join([str(JAVA_LIBS / ASSERTJ), *jars])
    return out


# ----------------------------------------------------------------------------- prepared once

_prepare_lock = threading.Lock()


def _build_once(final: Path, files: dict[str, bytes], cmd: str, shell_setup, timeout: float) -> Path | None:
    """Make `final` (a folder) by running `cmd` in the sandbox, at edit, in a fresh folder holding
    `files`; the folder is renamed into place only when `cmd` succeeded (another eval may be
    making the same one: the first rename wins). None when it could not be made."""
    import tempfile

    from ..errors import MossError
    from ..tools import shell

    if final.is_dir():
        return final
    with _prepare_lock:
        if final.is_dir():
            return final
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            work = Path(tempfile.mkdtemp(prefix=".making-", dir=final.parent))
        except OSError:
            return None
        try:
            for name, data in files.items():
                (work / name).write_bytes(data)
            r = shell.run(cmd, root=work, access="edit", timeout=timeout, max_chars=2000, setup=shell_setup)
            if r["code"] != 0:
                return None
            try:
                os.rename(work, final)
            except OSError:
                pass  # made by another eval meanwhile
            return final if final.is_dir() else None
        except (MossError, OSError):
            return None
        finally:
            shutil.rmtree(work, ignore_errors=True)


@lru_cache(maxsize=4)
def _go_version(path: str) -> str | None:
    try:
        r = subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True, timeout=30,
                           env={"PATH": path, "HOME": os.path.expanduser("~"), "GOTOOLCHAIN": "local"})
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip() or None if r.returncode == 0 else None


def prepare_go(shell_setup=None, env=None) -> Path | None:
    """Go's build cache after one `go test` of a package importing testing (what every check
    would otherwise build afresh): made once per Go version."""
    env = os.environ if env is None else env
    version = _go_version(env.get("PATH", os.defpath))
    if not version:
        return None
    files = {"go.mod": b"module warm\n\ngo 1.18\n", "warm.go": b"package warm\n\nfunc One() int { return 1 }\n",
             "warm_test.go": b'package warm\n\nimport "testing"\n\nfunc TestOne(t *testing.T) {\n'
                             b'\tif One() != 1 {\n\t\tt.Fatal("one")\n\t}\n}\n'}
    cmd = "GOCACHE=$PWD/gocache GOPATH=/tmp/gopath GOPROXY=off GOTOOLCHAIN=local go test ./... && rm -f go.mod *.go"
    made = _build_once(cache_root(env) / "go" / re.sub(r"[^\w.-]", "_", version), files, cmd, shell_setup, 300.0)
    return made / "gocache" if made is not None else None


@lru_cache(maxsize=4)
def _compiler(path: str) -> str:
    try:
        r = subprocess.run(["c++", "--version"], capture_output=True, text=True, timeout=30, env={"PATH": path})
        return r.stdout.splitlines()[0] if r.returncode == 0 and r.stdout else ""
    except (OSError, subprocess.SubprocessError):
        return ""


CATCH_FLAGS = "-g -std=c++17"  # what the exercises' CMakeLists compiles with (Debug, C++17)


def prepare_catch_main(copy: Path, shell_setup=None, env=None) -> Path | None:
    """The exercise's Catch main (test/tests-main.cpp with test/catch.hpp) compiled once per
    distinct pair and compiler: its path, or None (then the check compiles it as the exercise's
    CMakeLists says)."""
    env = os.environ if env is None else env
    main = _read_bytes(copy, "test/tests-main.cpp")
    header = _read_bytes(copy, "test/catch.hpp", 16 * READ_LIMIT)  # Catch's single header: ~0.6 MB
    if main is None or header is None or b"CATCH_CONFIG_MAIN" not in main:
        return None
    compiler = _compiler(env.get("PATH", os.defpath))
    if not compiler:
        return None
    key = hashlib.sha256(main + b"\0" + header + b"\0" + compiler.encode() + CATCH_FLAGS.encode()).hexdigest()[:16]
    made = _build_once(cache_root(env) / "cpp" / key, {"tests-main.cpp": main, "catch.hpp": header},
                       f"c++ {CATCH_FLAGS} -c tests-main.cpp -o tests-main.o && ar rcs libcatch-main.a tests-main.o "
                       f"&& rm tests-main.cpp catch.hpp tests-main.o", shell_setup, 600.0)
    return made / "libcatch-main.a" if made is not None else None


def prepare_javascript(packages: dict[str, str], env=None, log=print) -> Path:
    """Install what the JavaScript checks need into the cache, from the npm registry (the one
    step of moss eval that reaches the network; install scripts are not run). Returns the folder."""
    from ..errors import MossError

    env = os.environ if env is None else env
    final = js_cache(packages, env)
    if (final / "node_modules" / "jest").is_dir():
        log(f"javascript: {', '.join(packages)} already installed in {final}")
        return final
    npm = _which("npm", env.get("PATH", os.defpath))
    if npm is None:
        raise MossError(f"npm not found on PATH ({LANGUAGES['javascript'].install})", kind="not_found")
    import tempfile

    final.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".making-", dir=final.parent))
    try:
        (work / "package.json").write_text(json.dumps({"private": True, "description": "moss eval: jest and babel "
                                                      "for the JavaScript exercises' checks",
                                                      "dependencies": packages}, indent=2) + "\n")
        log(f"javascript: npm install {' '.join(f'{k}@{v}' for k, v in packages.items())} (into {final})")
        r = subprocess.run([npm, "install", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
                           cwd=work, capture_output=True, text=True, timeout=1800)
        if r.returncode != 0:
            tail = " / ".join((r.stderr or r.stdout).strip().splitlines()[-3:])
            raise MossError(f"npm install failed (exit {r.returncode}): {tail}", kind="io")
        try:
            os.rename(work, final)
        except OSError:
            pass
        return final
    finally:
        shutil.rmtree(work, ignore_errors=True)

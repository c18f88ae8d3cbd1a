"""Shared fixtures: an isolated project directory and a way to run the real `moss` CLI."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import forkserver
import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
# Where `moss eval --prepare` put what the exercises' checks share (JavaScript's jest and babel:
# .ci/run prepares tests/fixtures/polyglot before the tests), as moss finds it for the user who
# runs the tests; read before _user_cache_dir points XDG_CACHE_HOME elsewhere. A project's own
# HOME has none: tests that run exercises pass it as MOSS_EVAL_CACHE.
EVAL_CACHE = os.environ.get("MOSS_EVAL_CACHE") or str(
    Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "moss" / "eval")
# The provider of the agents in the stories of `moss eval` and `moss batch` (here and on Ray)
# and of the sessions `moss mcp serve` starts. Each such agent starts from a new interpreter (a
# zygote, the agent itself when one attempt runs, a Ray job's agent, an MCP tool's session),
# which first imports the provider's SDK: the openai SDK's import is ~0.8 s of CPU less than
# the anthropic SDK's ~1.6 s, over some 80 such starts a suite run. The anthropic SDK keeps a
# story on each path: test_eval's good and lazy models side by side, test_batch's JSONL and TOML
# batches, on Ray the job that takes its key from the nodes' credentials file, and test_mcp's
# session in a project that plants an anthropic.py.
STORY_PROVIDER = "openai"
# fixtures hold other projects' tests (an exercise's hello_world_test.py): data, not moss's tests
collect_ignore = ["fixtures"]
# `@pytest.mark.needs_sandbox` for a test that runs commands under bubblewrap, and what CI must
# never skip (a missing sandbox, browser or Ray): tests/ciskips.py
pytest_plugins = ["ciskips"]


@contextlib.contextmanager
def builtin_lua():
    """(runtime, project root): a moss Lua runtime over an empty project, whose only script
    root besides the project is the built-in one (no user script can shadow a module)."""
    import tempfile

    from moss import api
    from moss.context import Context
    from moss.roots import ScriptRoots
    from moss.runtime import Runtime

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "proj"
        (root / ".moss" / "agent").mkdir(parents=True)
        ctx = Context(root=root, config={}, options={})
        rt = Runtime(ScriptRoots(root, env={"XDG_CONFIG_HOME": str(Path(tmp) / "cfg")}), api.functions(ctx))
        ctx.runtime = rt
        yield rt, root

def lua_value(module: str, name: str):
    """A value a built-in Lua module exports (`require(module)[name]`, as Python): tests that
    check text moss writes for the model read its words from there instead of copying them."""
    with builtin_lua() as (rt, _root):
        return rt.to_py(rt.execute(f"return require({module!r})[{name!r}]"))


def sigkill_when(p: subprocess.Popen, ready, *, timeout: float = 30.0, settle: float = 0.2) -> None:
    """Wait until `ready()` holds (failing the test if it does not within `timeout`), let the
    process run `settle` seconds more, then SIGKILL it, as the OOM killer or a closed laptop
    would. The process is gone afterwards in every case."""
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not ready():
            time.sleep(0.05)
        assert ready(), f"the process did not get there within {timeout} s"
        time.sleep(settle)
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=10)
    finally:
        if p.poll() is None:
            p.kill()


class Project:
    """A temp project with its own HOME/XDG_CONFIG_HOME/XDG_DATA_HOME so user config and
    trust records never leak in.

    The test wrote this project's .moss/, so by default the project is trusted the way its
    user would trust it: before each run, its current content is recorded in the isolated
    data directory (what `moss trust --yes` does). Set `trusted = False` to run it as a
    freshly cloned, untrusted repository."""

    def __init__(self, root: Path, home: Path):
        self.root = root
        self.home = home
        self.trusted = True
        self.env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("ANTHROPIC_", "OPENAI_", "MOSS_", "XDG_"))
        }
        self.env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"),
                        XDG_DATA_HOME=str(home / ".local" / "share"), PYTHONUNBUFFERED="1",
                        COLUMNS="200", NO_COLOR="1")
        # `python3` in a project's checks, validation and training scripts is the tests' own
        # interpreter, as for a user whose virtualenv is active. On a machine whose PATH starts
        # with pyenv's shims (as the test machine's does) each `python3` otherwise went through
        # a shell script of ~30 processes: 0.12 s against 0.04 s, hundreds of times a run.
        self.env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), self.env.get("PATH", "")])
        (root / ".moss" / "scripts").mkdir(parents=True, exist_ok=True)

    def write(self, rel: str, text: str) -> Path:
        p = self.root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text), encoding="utf-8")
        return p

    def script(self, name: str, text: str) -> Path:
        return self.write(f".moss/scripts/{name}.lua", text)

    def user_file(self, rel: str, text: str) -> Path:
        p = self.home / ".config" / "moss" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text), encoding="utf-8")
        return p

    def trust(self) -> None:
        """Record trust in the project's current .moss/ content (as `moss trust --yes`)."""
        from moss import trust
        from moss.config import read_layers
        from moss.errors import MossError

        try:
            manifest = trust.scan(self.root, read_layers(self.root, self.env)[1], self.env)
        except MossError:
            return  # a broken config file: the run itself reports it
        if manifest.needed:
            trust.grant(self.root, self.env, manifest)

    def moss(self, *args, input: str | None = None, timeout: float = 60, env: dict | None = None, cwd=None,
             fresh: bool = False):
        """`python -m moss ARGS` in the project, run to its end. Forked from a zygote that has
        moss and the LLM SDKs imported already (tests/forkserver.py); `fresh=True` starts a new
        interpreter instead, for a test about what the process itself imports or does at start."""
        e = dict(self.env)
        e.update(env or {})
        if self.trusted:
            self.trust()
        elif input is None:
            input = ""  # as in CI: never a trust question on the terminal running the tests
        return forkserver.run(
            [sys.executable, "-m", "moss", *args], fresh=fresh,
            cwd=cwd or self.root, env=e, input=input, capture_output=True, text=True, timeout=timeout,
        )

    def popen(self, *args, env: dict | None = None, fresh: bool = False, **kw):
        """`python -m moss ARGS` in the project, started (as `moss` above) and left running."""
        e = dict(self.env)
        e.update(env or {})
        if self.trusted:
            self.trust()
        return forkserver.popen([sys.executable, "-m", "moss", *args], fresh=fresh, cwd=self.root, env=e,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def pytest_configure(config):
    """Compile moss's own modules (host/) and the tests' helpers once, before any test starts.

    Most tests run `python -m moss` as a new process. Where PYTHONDONTWRITEBYTECODE is set
    (as on the shared test machine) no process leaves a .pyc behind, so each compiled every
    moss module it imported from source again: ~0.1 s of CPU per process, about half of a
    plain `moss @NAME`'s start-up. Reading a .pyc is allowed under that setting; only
    writing one is not, and compileall writes them on purpose (into __pycache__/, which git
    ignores), skipping those already up to date. Done in the controller only: xdist's workers
    start after it."""
    if hasattr(config, "workerinput"):
        return
    import compileall

    compileall.compile_dir(REPO / "host", quiet=2)
    compileall.compile_dir(REPO / "tests", maxlevels=0, quiet=2)


# Tests that run together on one worker, one after another (a key is a file, or a file and a
# test function with all its parameters):
# - the Ray files' module-scoped heads: under xdist's plain `load`, each worker that ran one of
#   their tests started its own head (four a run on two workers), each ~6 s of CPU to start and
#   ~0.15 of a core while it lived;
# - test_detect's fixed ports (it stands in for Ollama on 11434 in one test and finds nothing
#   there in another);
# - the tests that read tests/errorreach.py's analysis of host/ (~2.6 s of CPU), which each
#   worker that runs one of them makes.
ONE_WORKER = {"tests/test_fleet_ray.py": "ray heads", "tests/test_ray.py": "ray heads",
              "tests/test_detect.py": "fixed ports",
              **{f"tests/test_api_docs.py::{name}": "error-kind analysis" for name in (
                  "test_the_source_analysis_follows_calls_into_the_tools",
                  "test_a_primitive_declares_every_error_kind_its_code_can_raise",
                  "test_a_primitive_that_takes_arguments_declares_usage")}}


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_auto_num_workers(config):
    """`-n auto`: one worker more than the cores this process may use. Much of the suite waits
    (agents' subprocesses, a Ray job's status, a terminal, a browser), and a third worker on two
    cores fills those gaps: 267 s against 302 s for the whole suite on the 2-core test machine,
    for ~7% more CPU (bench/RESULTS.md). PYTEST_XDIST_AUTO_NUM_WORKERS still decides when set."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # xdist's own hook reads it
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 1
    return cores + 1


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`-n N` (xdist's default `--dist load`): every test is its own work unit, as under
    `load`, except the tests ONE_WORKER names, which make one unit per name. xdist's own way to say
    this (`--dist loadgroup` with `xdist_group` marks) renames each test's node id, which
    pytest 9.2 no longer lets it do: the marks are then silently ignored. An explicit
    `--dist` other than load is left to xdist."""
    if config.getoption("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Together(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file, _, rest = nodeid.partition("::")
            return ONE_WORKER.get(file) or ONE_WORKER.get(f"{file}::{rest.split('[', 1)[0]}") or nodeid

        def _assign_work_unit(self, node) -> None:
            # Every other worker takes its next unit from the far end of the queue. Tests of one
            # file tend to need the machine alike: taken from one end by both workers, a file of
            # tests that wait (a terminal, a slow model) ran on both at once and left the cores
            # idle, a file of busy ones had them contend. From two ends, a file runs on one
            # worker beside another part of the suite.
            if self.nodes.index(node) % 2 and len(self.workqueue) > 1:
                self.workqueue.move_to_end(next(reversed(self.workqueue)), last=False)
            super()._assign_work_unit(node)

    return Together(config, log)


@pytest.fixture(autouse=True, scope="session")
def _user_cache_dir(tmp_path_factory):
    """In-process tests keep moss's structure cache (host/tools/structcache.py) in a temp
    directory, never the user's own ~/.cache/moss."""
    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
    yield
    if old is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = old


@pytest.fixture
def api():
    """The fake Anthropic/OpenAI server (tests/fakeapi.py) on 127.0.0.1."""
    from fakeapi import FakeAPI

    with FakeAPI() as server:
        yield server


@pytest.fixture
def crate(project):
    """The project as a copy of the fixture Rust crate (tests/fixtures/rustcrate)."""
    import shutil

    shutil.copytree(FIXTURES / "rustcrate", project.root, dirs_exist_ok=True)
    return project


@pytest.fixture
def project(tmp_path) -> Project:
    root = tmp_path / "proj"
    root.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    return Project(root, home)

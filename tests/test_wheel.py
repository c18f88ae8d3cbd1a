"""A built wheel carries the Lua scripts and runs without the source tree."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import venv
import zipfile

from conftest import REPO


def test_wheel_carries_scripts_and_runs(tmp_path):
    # built from a copy of what a clean clone holds: setuptools reuses a checkout's build/ folder,
    # where a file of an earlier build would hide one the package list now leaves out
    src = tmp_path / "src"
    top = {".git", ".venv", "build", "dist", "moss_agent.egg-info", "tests", "bench", "docs", ".moss"}
    shutil.copytree(REPO, src, ignore=lambda d, names: [n for n in names if n == "__pycache__"
                                                        or (d == str(REPO) and n in top)])
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(dist), str(src)], check=True, capture_output=True, timeout=300)
    wheel = next(dist.glob("moss_agent-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in ("moss/bootstrap.lua", "moss/convert.lua", "moss/unhooked.lua", "moss/api/session_diff.lua",
                   "moss/sessions/__init__.py", "moss/sessions/row.py", "moss/scripts/agent.lua", "moss/scripts/lib/machine/runner.lua",
                   "moss/scripts/machines/v2.lua", "moss/scripts/roles/auditor.lua", "moss/scripts/types/moss.lua",
                   "moss/scripts/commands/answer.lua", "moss/scripts/init/config.toml",
                   "moss/cli.py", "moss/llm/chat.py", "moss/tools/view.py", "moss/tools/runs/manager.py",
                   "moss/tools/runs/executors/local.py", "moss/tools/runs/executors/ray.py",
                   "moss/eval/suite.py", "moss/eval/exercises.py", "moss/scripts/eval/suites/builtin/suite.toml",
                   "moss/scripts/eval/suites/builtin/repos/pyledger/ledger/money.py",
                   "moss/scripts/eval/suites/builtin/repos/pyledger/tests/__init__.py",
                   "moss/scripts/eval/suites/builtin/repos/pyledger/data/sample.csv",
                   "moss/scripts/eval/suites/builtin/repos/shtodo/todo.sh",
                   "moss/scripts/eval/suites/builtin/repos/shtodo/todo.conf",
                   "moss/scripts/eval.lua", "moss/eval/runner.py", "moss/eval/executors.py", "moss/api/eval.py",
                   # moss ui: its templates and vendored front-end libraries, licences beside them
                   "moss/board/app.py", "moss/board/templates/base.html", "moss/board/static/board.js",
                   "moss/board/static/htmx/htmx.min.js", "moss/board/static/htmx/LICENSE",
                   "moss/board/static/htmx-ext-sse/sse.min.js", "moss/board/static/htmx-ext-sse/LICENSE",
                   "moss/board/static/uplot/uPlot.iife.min.js", "moss/board/static/uplot/uPlot.min.css",
                   "moss/board/static/uplot/LICENSE"):
        assert needed in names, needed
    # every package under host/ ships (pyproject lists them by hand: a new one left out of the list
    # installs from a checkout, where the package-dir mapping finds it, and is missing from a wheel)
    packages = {str(p.parent.relative_to(REPO / "host")) for p in (REPO / "host").rglob("__init__.py")}
    missing = sorted(p for p in packages if f"moss/{p}/__init__.py".replace("/./", "/") not in names)
    assert not missing, f"packages under host/ missing from the wheel (pyproject's packages list): {missing}"
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]

    # A fresh venv with only the wheel installed; its dependencies come from this
    # interpreter's site-packages (no network), moss itself only from the wheel.
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    py = env_dir / "bin" / "python"
    target = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                            capture_output=True, text=True, check=True).stdout.strip()
    with zipfile.ZipFile(wheel) as z:
        z.extractall(target)
    deps = os.pathsep.join(p for p in site.getsitepackages())
    project = tmp_path / "proj"
    (project / ".moss" / "scripts").mkdir(parents=True)
    (project / ".moss" / "scripts" / "probe.lua").write_text(
        'local cli = require("lib.cli")\nlocal o = cli.parse({"--x", "3"}, {{"--x", type="number"}})\nprint(o.x)\n')
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHONPATH": deps}
    probe = subprocess.run([py, "-c", "import moss; print(moss.__file__)"], cwd=project, env=env,
                           capture_output=True, text=True)
    assert probe.stdout.startswith(target), probe.stdout + probe.stderr
    # --trust: this test wrote the project's script and vouches for it (see host/trust/).
    r = subprocess.run([py, "-m", "moss", "@probe", "--trust"], cwd=project, env=env, capture_output=True,
                       text=True)
    assert r.returncode == 0 and r.stdout == "3\n", r.stderr
    r = subprocess.run([py, "-m", "moss", "@agent", "--help"], cwd=project, env=env, capture_output=True, text=True)
    assert r.returncode == 0 and "--v2" in r.stdout, r.stderr
    # the built-in eval suite loads from the installed package, every repo it names there
    r = subprocess.run([py, "-c", "from moss.eval.suite import builtin_suite_dir, load_suite\n"
                        "s = load_suite(builtin_suite_dir()); print(len(s.tasks), s.tasks[0].repo)"],
                       cwd=project, env=env, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.split()[1].startswith(target), r.stdout + r.stderr
    r = subprocess.run([py, "-m", "moss", "scripts"], cwd=project, env=env, capture_output=True, text=True)
    agent_line = next(ln for ln in r.stdout.splitlines() if ln.startswith("@agent"))
    assert target in agent_line or "site-packages/moss/scripts/agent.lua" in agent_line

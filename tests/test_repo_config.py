"""This repository's own .moss/ (the README's worked example of config-driven validation):
it parses, names files that exist, and is ignored until trusted."""

from __future__ import annotations

import shutil
import sys
import tomllib

import pytest
from conftest import REPO


def test_the_repos_config_names_real_tests():
    cfg = tomllib.loads((REPO / ".moss" / "config.toml").read_text())["agent"]
    assert cfg["validate"] == [c["name"] for c in cfg["validate_commands"]]
    for name in cfg["quick_tests"]:
        assert (REPO / name).is_file(), name
        assert name in next(c["run"] for c in cfg["validate_commands"] if c["name"] == "quick-tests")


def test_a_fresh_clone_ignores_it_until_trusted(project):
    project.trusted = False
    r = project.moss("@quick", "--list", cwd=REPO)
    assert r.returncode == 2 and "moss trust" in r.stderr and r.stdout == ""
    r = project.moss("@quick", "--list", "--trust", cwd=REPO)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == tomllib.loads((REPO / ".moss/config.toml").read_text())["agent"]["quick_tests"]


@pytest.mark.needs_sandbox
def test_quick_compiles_without_a_bytecode_cache_and_writes_none(project):
    """`moss @quick` (this repository's own script, copied as it is) under
    PYTHONDONTWRITEBYTECODE=1, where no host/__pycache__ was ever written: the syntax step
    compiles in the read-only sandbox and passes, without a `Read-only file system` error
    per module, and the project gets no bytecode."""
    shutil.copy(REPO / ".moss" / "scripts" / "quick.lua", project.root / ".moss" / "scripts" / "quick.lua")
    project.write(".moss/config.toml", '[agent]\nquick_tests = ["tests/test_one.py"]\n')
    for i in range(5):
        project.write(f"host/part{i}/mod{i}.py", f"VALUE = {i}\n")
    project.write("tests/test_one.py", "def test_one():\n    assert 1 + 1 == 2\n")
    python = project.write(".venv/bin/python", f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)
    r = project.moss("@quick", env={"PYTHONDONTWRITEBYTECODE": "1"}, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "syntax: ok" in r.stdout and "quick tests: ok 1 passed" in r.stdout
    assert "Read-only file system" not in r.stdout + r.stderr
    assert not list((project.root / "host").rglob("__pycache__"))

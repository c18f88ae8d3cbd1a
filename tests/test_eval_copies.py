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


def test_a_variant_link_that_leaves_the_folder_is_refused_and_its_target_never_copied(tmp_path):
    """A variant folder holding `scripts/notes.md` as a link to the user's SSH key: the copy is
    refused, naming the link, and the key's text is nowhere in the attempt's folder. A link
    that stays inside the variant (a role pointing at a module beside it, the config itself)
    arrives as a link inside the copy, to the copied file."""
    import pytest

    from moss.errors import MossError

    root, repo = _project(tmp_path)
    key = tmp_path / "dot-ssh" / "id_ed25519"
    key.parent.mkdir()
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n")
    variant = tmp_path / "variant"
    (variant / "scripts" / "roles").mkdir(parents=True)
    (variant / "scripts" / "lib.lua").write_text("return { x = 1 }\n")
    os.symlink("../lib.lua", variant / "scripts" / "roles" / "alias.lua")
    (variant / "real.toml").write_text('[llm]\nmodel = "from-variant"\n')
    os.symlink("real.toml", variant / "config.toml")
    os.symlink(key, variant / "scripts" / "notes.md")
    home = tmp_path / "home"
    home.mkdir()
    with pytest.raises(MossError) as e:
        copies.make(_task(repo), home, project_root=root, project_trusted=False, variant=variant)
    assert e.value.kind == "usage" and "scripts/notes.md is a link to" in e.value.message
    assert "outside the variant folder" in e.value.message
    leaked = [p for p in home.rglob("*") if p.is_file() and "OPENSSH" in p.read_text(errors="replace")]
    assert leaked == []

    (variant / "scripts" / "notes.md").unlink()
    home2 = tmp_path / "home2"
    home2.mkdir()
    copy = copies.make(_task(repo), home2, project_root=root, project_trusted=False, variant=variant)
    alias = copy / ".moss" / "scripts" / "roles" / "alias.lua"
    assert alias.is_symlink() and os.readlink(alias) == "../lib.lua" and alias.read_text() == "return { x = 1 }\n"
    assert 'model = "from-variant"' in (copy / ".moss" / "config.toml").read_text()
    # a link to a folder outside, and a fifo, are refused the same way
    os.symlink(key.parent, variant / "scripts" / "keys")
    with pytest.raises(MossError, match="scripts/keys is a link to"):
        copies.variant_entries(variant)
    (variant / "scripts" / "keys").unlink()
    os.mkfifo(variant / "scripts" / "pipe")
    with pytest.raises(MossError, match="scripts/pipe is not a regular file"):
        copies.variant_entries(variant)


def test_a_variant_file_replaces_the_projects_link_at_its_path_without_writing_through_it(tmp_path):
    """The trusted project's `.moss/scripts/x.lua` is a link (copied as a link) to a file
    outside; the variant brings its own `scripts/x.lua`, and a link at the path of another of
    the project's files: the copy holds the variant's file and link, and the file outside is
    unchanged."""
    root, repo = _project(tmp_path)
    outside = tmp_path / "outside.lua"
    outside.write_text("return 'outside'\n")
    (root / ".moss" / "scripts").mkdir()
    os.symlink(outside, root / ".moss" / "scripts" / "x.lua")
    (root / ".moss" / "scripts" / "y.lua").write_text("return 'project'\n")
    variant = tmp_path / "variant"
    (variant / "scripts").mkdir(parents=True)
    (variant / "scripts" / "x.lua").write_text("return 'variant'\n")
    (variant / "scripts" / "z.lua").write_text("return 'z'\n")
    os.symlink("z.lua", variant / "scripts" / "y.lua")
    home = tmp_path / "home"
    home.mkdir()
    copy = copies.make(_task(repo), home, project_root=root, project_trusted=True, variant=variant)
    assert outside.read_text() == "return 'outside'\n"
    x = copy / ".moss" / "scripts" / "x.lua"
    assert not x.is_symlink() and x.read_text() == "return 'variant'\n"
    assert os.readlink(copy / ".moss" / "scripts" / "y.lua") == "z.lua"


def test_a_variant_file_under_a_linked_folder_of_the_project_is_refused_not_written_outside(tmp_path):
    """The trusted project's `.moss/scripts/roles` is a link to a folder of the user's own
    (copied as a link); a variant that brings `scripts/roles/coder.lua` stops with an error
    naming the link, and the user's folder is unchanged."""
    import pytest

    from moss.errors import MossError

    root, repo = _project(tmp_path)
    shared = tmp_path / "shared-roles"
    shared.mkdir()
    (shared / "coder.lua").write_text("return 'mine'\n")
    (root / ".moss" / "scripts").mkdir()
    os.symlink(shared, root / ".moss" / "scripts" / "roles")
    variant = tmp_path / "variant"
    (variant / "scripts" / "roles").mkdir(parents=True)
    (variant / "scripts" / "roles" / "coder.lua").write_text("return 'variant'\n")
    home = tmp_path / "home"
    home.mkdir()
    with pytest.raises(MossError, match="scripts/roles is a symlink"):
        copies.make(_task(repo), home, project_root=root, project_trusted=True, variant=variant)
    assert (shared / "coder.lua").read_text() == "return 'mine'\n"

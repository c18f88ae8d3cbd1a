"""Path confinement: real directories and symlinks on disk, no mocks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from moss.errors import MossError
from moss.tools.confine import confine


@pytest.fixture
def tree(tmp_path: Path):
    root = tmp_path / "proj"
    outside = tmp_path / "outside"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "mod.py").write_text("x = 1\n")
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / ".git" / "config").write_text("[core]\n")
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    return root.resolve(), outside.resolve()


def denied(root, path, **kw) -> str:
    with pytest.raises(MossError) as info:
        confine(root, path, **kw)
    assert info.value.kind == "denied", info.value
    return str(info.value)


def test_relative_nested_existing(tree):
    root, _ = tree
    assert confine(root, "src/pkg/mod.py", must_exist=True) == root / "src/pkg/mod.py"
    assert confine(str(root), Path("src") / "pkg") == root / "src/pkg"


def test_root_itself(tree):
    root, _ = tree
    assert confine(root, ".") == root
    assert confine(root, "") == root
    assert confine(root, str(root)) == root


def test_not_yet_existing_paths(tree):
    root, _ = tree
    assert confine(root, "new/dir/file.txt") == root / "new/dir/file.txt"
    assert confine(root, "src/pkg/new.py") == root / "src/pkg/new.py"
    assert not (root / "new").exists()  # confine never creates anything


def test_must_exist(tree):
    root, _ = tree
    with pytest.raises(MossError) as info:
        confine(root, "src/missing.py", must_exist=True)
    assert info.value.kind == "not_found"
    assert "does not exist" in str(info.value)


def test_dotdot_inside_root_is_fine(tree):
    root, _ = tree
    assert confine(root, "src/pkg/../pkg/mod.py") == root / "src/pkg/mod.py"
    assert confine(root, "..foo") == root / "..foo"  # a name, not a parent reference


@pytest.mark.parametrize("path", ["..", "../outside/secret.txt", "src/../../outside", "src/pkg/../../../x"])
def test_dotdot_escape_refused(tree, path):
    root, _ = tree
    msg = denied(root, path)
    assert "'..'" in msg and "escapes the project root" in msg


def test_absolute_inside_ok_outside_refused(tree):
    root, outside = tree
    assert confine(root, str(root / "src/pkg/mod.py")) == root / "src/pkg/mod.py"
    msg = denied(root, str(outside / "secret.txt"))
    assert "outside the project root" in msg
    assert "outside the project root" in denied(root, "/etc/passwd")
    assert "outside the project root" in denied(root, f"{root}/../outside/secret.txt")


def test_directory_symlink_escape_refused(tree):
    root, outside = tree
    (root / "linkdir").symlink_to(outside, target_is_directory=True)
    for path in ("linkdir", "linkdir/secret.txt", "linkdir/new.txt"):
        msg = denied(root, path)
        assert "symlink" in msg and str(outside) in msg


def test_file_symlink_escape_refused(tree):
    root, outside = tree
    (root / "src" / "evil.txt").symlink_to(outside / "secret.txt")
    assert "symlink" in denied(root, "src/evil.txt")
    # A dangling link: writing to it would create the file outside the root.
    (root / "dangling").symlink_to(outside / "not-yet.txt")
    assert "symlink" in denied(root, "dangling")
    assert not (outside / "not-yet.txt").exists()


def test_symlink_chain_escape_refused(tree):
    root, outside = tree
    (root / "a").symlink_to(root / "b")
    (root / "b").symlink_to(outside)
    assert "symlink" in denied(root, "a/secret.txt")


def test_symlink_inside_root_resolves(tree):
    root, _ = tree
    (root / "alias").symlink_to(root / "src" / "pkg")
    (root / "modlink.py").symlink_to("src/pkg/mod.py")
    assert confine(root, "alias/mod.py", must_exist=True) == root / "src/pkg/mod.py"
    assert confine(root, "modlink.py") == root / "src/pkg/mod.py"


@pytest.mark.parametrize("path", [".git", ".git/config", ".git/hooks/pre-commit", "./.git/x",
                                  "src/../.git/config", "vendor/lib/.git/config", "a/b/.git",
                                  "a/b/.git/hooks/post-checkout"])
def test_git_dir_refused(tree, path):
    root, _ = tree
    assert ".git" in denied(root, path)


def test_git_dir_refused_absolute_and_through_symlink(tree):
    root, _ = tree
    assert ".git" in denied(root, str(root / ".git" / "config"))
    (root / "g").symlink_to(root / ".git")
    assert ".git" in denied(root, "g/config")
    assert ".git" in denied(root, "g")


def test_gitignore_and_similar_names_allowed(tree):
    root, _ = tree
    assert confine(root, ".gitignore") == root / ".gitignore"
    assert confine(root, ".github/workflows/ci.yml") == root / ".github/workflows/ci.yml"


def test_root_given_through_a_symlink(tree, tmp_path):
    root, outside = tree
    alias = tmp_path / "rootalias"
    alias.symlink_to(root, target_is_directory=True)
    assert confine(alias, "src/pkg/mod.py") == root / "src/pkg/mod.py"
    assert confine(alias, str(alias / "src")) == root / "src"
    assert "outside" in denied(alias, str(outside))


def test_nul_byte_is_usage_error(tree):
    root, _ = tree
    with pytest.raises(MossError) as info:
        confine(root, "a\0b")
    assert info.value.kind == "usage"


def test_relative_path_is_relative_to_root_not_cwd(tree, monkeypatch, tmp_path):
    root, outside = tree
    monkeypatch.chdir(outside)
    assert confine(root, "secret.txt") == root / "secret.txt"
    assert os.getcwd() == str(outside)

"""The one way the host touches project files: links planted by a repository, and a folder
swapped for a link while moss writes, never lead moss outside the project.

Every test runs twice: with openat2 (the kernel checks the walk) and with the
component-by-component walk used where the kernel has no openat2.
"""

from __future__ import annotations

import os
import threading

import pytest
from swapper import swapping

from moss.errors import MossError
from moss.tools import safefs
from moss.tools.safefs import Tree, UnsafePath


@pytest.fixture(params=["openat2", "walk"])
def walk_kind(request):
    safefs.use_openat2(request.param == "openat2")
    yield request.param
    safefs.use_openat2(True)


@pytest.fixture
def project(tmp_path, walk_kind):
    root = tmp_path / "project"
    (root / ".moss" / "memory").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("host secret\n")
    with Tree(root) as t:
        yield root, outside, t


def test_a_planted_file_link_is_neither_read_nor_written_through(project):
    root, outside, t = project
    os.symlink(outside / "secret", root / ".moss" / "memory" / "facts.md")
    with pytest.raises(UnsafePath, match="symlink"):
        t.read_text(".moss/memory/facts.md")
    with pytest.raises(UnsafePath, match="symlink"):
        t.append(".moss/memory/facts.md", "- remembered\n")
    assert (outside / "secret").read_text() == "host secret\n"


def test_a_planted_folder_link_on_the_way_is_refused(project):
    root, outside, t = project
    os.symlink(outside, root / ".moss" / "agent")
    with pytest.raises(UnsafePath, match="symlink"):
        t.append(".moss/agent/logs/s1.jsonl", "{}\n")
    with pytest.raises(UnsafePath):
        t.write_atomic(".moss/agent/locks/1.json", "{}")
    assert sorted(os.listdir(outside)) == ["secret"]


def test_replacing_a_file_replaces_a_planted_link_itself(project):
    root, outside, t = project
    link = root / ".moss" / "memory" / "facts.md"
    os.symlink(outside / "secret", link)
    t.write_atomic(".moss/memory/facts.md", "mine\n")
    assert not link.is_symlink() and link.read_text() == "mine\n"
    assert (outside / "secret").read_text() == "host secret\n"
    assert sorted(os.listdir(link.parent)) == ["facts.md"]  # no temp file left behind


def test_a_dangling_link_is_not_created_through(project):
    root, outside, t = project
    os.symlink(outside / "made-by-moss", root / ".moss" / "memory" / ".gitignore")
    assert t.create_exclusive(".moss/memory/.gitignore", "*\n") is False
    with pytest.raises(UnsafePath):
        t.append(".moss/memory/.gitignore", "*\n")
    assert not (outside / "made-by-moss").exists()


def test_a_fifo_is_refused_without_hanging(project):
    root, _, t = project
    os.mkfifo(root / ".moss" / "memory" / "facts.md")
    with pytest.raises(UnsafePath, match="regular file"):
        t.read_bytes(".moss/memory/facts.md")
    with pytest.raises(UnsafePath, match="regular file"):
        t.append(".moss/memory/facts.md", "x")


def test_dotdot_and_absolute_paths_outside_are_refused(project):
    root, outside, t = project
    with pytest.raises(UnsafePath, match=r"'\.\.'"):
        t.read_bytes(".moss/../../outside/secret")
    with pytest.raises(UnsafePath, match="outside the project"):
        t.read_bytes(outside / "secret")
    (root / "a.txt").write_text("inside")
    assert t.read_text(root / "a.txt") == "inside"  # absolute, but beneath the root


def test_reads_are_capped(project):
    root, _, t = project
    (root / "big").write_bytes(b"x" * 5000)
    assert len(t.read_bytes("big", limit=5000)) == 5000
    with pytest.raises(MossError, match="larger than 4096 bytes"):
        t.read_bytes("big", limit=4096)


def test_follow_inside_allows_links_that_stay_in_the_tree_only(project):
    root, outside, t = project
    (root / "src").mkdir()
    (root / "src" / "real.py").write_text("x = 1\n")
    os.symlink("real.py", root / "src" / "alias.py")
    os.symlink(outside, root / "escape")
    assert t.read_text("src/alias.py", follow_inside=True) == "x = 1\n"
    with pytest.raises(UnsafePath):
        t.read_text("src/alias.py")
    with pytest.raises(UnsafePath):
        t.read_text("escape/secret", follow_inside=True)


def test_listdir_lstat_unlink_rename_act_on_names_not_targets(project):
    root, outside, t = project
    os.symlink(outside / "secret", root / ".moss" / "memory" / "link")
    assert t.listdir(".moss/memory") == ["link"]
    assert t.lstat(".moss/memory/link").st_mode & 0o170000 == 0o120000
    t.rename(".moss/memory/link", ".moss/quarantine/link")
    assert (root / ".moss" / "quarantine" / "link").is_symlink()
    t.unlink(".moss/quarantine/link")
    assert not (root / ".moss" / "quarantine" / "link").exists()
    assert (outside / "secret").read_text() == "host secret\n"
    assert t.listdir(".moss/missing") == []


def test_a_folder_swapped_for_a_link_in_a_loop_never_leads_a_write_outside(project):
    """The attack: a background process exchanges `d` (a real folder) with a symlink to a
    folder outside, as fast as it can, while moss writes into `d`."""
    root, outside, t = project
    target = outside / "victim"
    target.mkdir()
    (root / "d").mkdir()
    os.symlink(target, root / "d-link")
    with swapping(root / "d", root / "d-link"):
        wrote = refused = 0
        for i in range(1500):
            try:
                if i % 2:
                    t.write_atomic(f"d/f{i}", "x")
                else:
                    t.append(f"d/log{i % 10}", "x\n")
                wrote += 1
            except (UnsafePath, FileNotFoundError):
                refused += 1
    assert os.listdir(target) == []
    assert wrote + refused == 1500 and wrote > 0


def test_a_tree_is_reused_for_the_same_root_and_splits_moss_paths(tmp_path):
    root = tmp_path / "p"
    (root / ".moss").mkdir(parents=True)
    t, rel = safefs.under_moss(root / ".moss" / "agent" / "logs" / "x.jsonl")
    assert t is safefs.tree(root) and str(rel) == ".moss/agent/logs/x.jsonl"
    with pytest.raises(UnsafePath):
        safefs.split_moss(tmp_path / "elsewhere" / "x")


def test_concurrent_appends_from_threads_keep_whole_lines(project):
    root, _, t = project

    def writer(n):
        for _ in range(200):
            t.append(".moss/agent/logs/s.jsonl", f"{n:04d}" * 50 + "\n")

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    lines = (root / ".moss/agent/logs/s.jsonl").read_text().splitlines()
    assert len(lines) == 800 and all(len(set(line[i:i + 4] for i in range(0, 200, 4))) == 1 for line in lines)


def test_a_refusal_names_the_component_at_fault(project):
    root, outside, t = project
    os.symlink(outside, root / ".moss" / "agent")
    with pytest.raises(UnsafePath) as e:
        t.append(".moss/agent/logs/s1.jsonl", "{}\n")
    assert e.value.message == ".moss/agent is a symlink; moss does not follow links here — remove it"
    (root / ".moss" / "store").write_text("a file where a folder should be")
    with pytest.raises(UnsafePath) as e:
        t.write_atomic(".moss/store/doc.json", "{}")
    assert e.value.message == ".moss/store is a file, but moss needs a folder there: rename or remove .moss/store"
    os.mkfifo(root / ".moss" / "memory" / "pipe.md")
    with pytest.raises(UnsafePath, match=r"^\.moss/memory/pipe\.md is a named pipe; moss expected a regular file"):
        t.read_bytes(".moss/memory/pipe.md")


def test_touch_sets_the_times_of_a_link_itself_not_of_its_target(project):
    root, outside, t = project
    os.utime(outside / "secret", (1_000_000, 1_000_000))
    os.symlink(outside / "secret", root / ".moss" / "memory" / "lock.json")
    t.touch(".moss/memory/lock.json")
    assert os.stat(outside / "secret").st_mtime == 1_000_000
    assert os.lstat(root / ".moss" / "memory" / "lock.json").st_mtime > 1_000_000


def test_the_one_writer_outside_a_project_keeps_modes_and_never_writes_through_a_link(project):
    """A user's config, trust record or the shadow store's owner record is replaced by the same writer
    as .moss files (safefs.replace_file): an existing file
    keeps its permissions, a new one gets the umask's, and a link where the file should be
    is replaced itself while its target stays as it was. A cassette of recorded answers is
    appended the same way (append_file), and a link there is refused, not appended through."""
    root, outside, _ = project
    from moss.tools.safefs import replace_file as write_atomic

    cfg = root / "config.toml"
    cfg.write_text("old = 1\n")
    cfg.chmod(0o600)
    write_atomic(cfg, "new = 2\n")
    assert cfg.read_text() == "new = 2\n" and (cfg.stat().st_mode & 0o777) == 0o600
    umask = os.umask(0o027)
    try:
        safefs.replace_file(root / "fresh.toml", "x = 1\n")
    finally:
        os.umask(umask)
    assert ((root / "fresh.toml").stat().st_mode & 0o777) == 0o640
    (root / "linked.toml").symlink_to(outside / "secret")
    write_atomic(root / "linked.toml", "mine\n")
    assert not (root / "linked.toml").is_symlink() and (root / "linked.toml").read_text() == "mine\n"
    assert (outside / "secret").read_text() == "host secret\n"
    safefs.append_file(root / "answers.jsonl", '{"n": 1}\n')
    safefs.append_file(root / "answers.jsonl", '{"n": 2}\n')
    assert (root / "answers.jsonl").read_text() == '{"n": 1}\n{"n": 2}\n'
    (root / "tape.jsonl").symlink_to(outside / "secret")
    with pytest.raises(UnsafePath, match="tape.jsonl is a symlink"):
        safefs.append_file(root / "tape.jsonl", '{"n": 3}\n')
    assert (outside / "secret").read_text() == "host secret\n"

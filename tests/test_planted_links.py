"""What a cloned repository plants under .moss/ is never followed or trusted as a plain file.

Each attack of issue 22 (High items 2 and 5, and the Low file items) end to end: the real CLI
(`python -m moss`) in a temp git repository, the fake API server standing in for a hostile
model, and a link, a fifo or a device where moss keeps its own files. moss refuses each with a
one-line error naming the path (exit 2) or skips it with a one-line warning, and nothing lands
outside the project or reaches the model.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest
from swapper import swapping

SECRET = "host-secret-7f3a9c"


@pytest.fixture
def repo(project):
    """The project as a git repository, as a clone would be."""
    subprocess.run(["git", "init", "-q"], cwd=project.root, check=True)
    (project.root / "README.md").write_text("a project\n")
    return project


@pytest.fixture
def outside(tmp_path):
    """A folder outside the project, holding a host secret."""
    d = tmp_path / "outside"
    d.mkdir()
    (d / "secret.txt").write_text(SECRET + "\n")
    return d


def agent(project, api, *replies, timeout=90):
    """A refactorer session (commands at edit access, which take locks) whose model first
    answers the planning turn, then says `replies`."""
    api.push("1. do it", *replies)
    return project.moss("@agent", "--provider", "anthropic", "-n", "--refactor", "--auto-approve", "medium",
                        "do it", env=api.env(), timeout=timeout)


def seen_by_model(api) -> str:
    return json.dumps([r.body for r in api.requests])


def files_holding(root, text: str) -> list[str]:
    """Regular files under `root` (links not followed) whose content holds `text`."""
    hits = []
    for folder, _dirs, names in os.walk(root):
        for name in names:
            p = os.path.join(folder, name)
            if os.path.isfile(p) and not os.path.islink(p):
                with open(p, "rb") as f:
                    if text.encode() in f.read():
                        hits.append(os.path.relpath(p, root))
    return hits


def one_line_error(r) -> str:
    assert "Traceback" not in r.stderr, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, r.stderr
    return lines[0]


# ---- High 2: a memory file linked to a host secret ------------------------------------------


def test_memorize_never_reads_a_memory_file_linked_to_a_host_secret(repo, api, outside):
    memory = repo.root / ".moss" / "memory"
    memory.mkdir(parents=True)
    os.symlink(outside / "secret.txt", memory / "facts.md")
    r = agent(repo, api, "$(memorize the build uses make) $(run cat .moss/memory/facts.md)",
              "$(answer done)")
    assert r.returncode == 0, r.stderr
    assert len(api.requests) == 3
    # the model was told why its memorize failed, and never got the secret
    told = seen_by_model(api)
    assert ".moss/memory/facts.md is a symlink" in told
    assert SECRET not in told and SECRET not in r.stdout + r.stderr
    # the link is still a link, the secret unchanged, and no project file holds the secret
    assert (memory / "facts.md").is_symlink()
    assert (outside / "secret.txt").read_text() == SECRET + "\n"
    assert files_holding(repo.root, SECRET) == []


def test_memory_list_skips_a_linked_file_with_a_warning(repo, outside):
    memory = repo.root / ".moss" / "memory"
    memory.mkdir(parents=True)
    os.symlink(outside / "secret.txt", memory / "facts.md")
    (memory / "decisions.md").write_text("# Decisions\n- use make (2025-01-01)\n")
    r = repo.moss("memory", "list")
    assert r.returncode == 0, r.stderr
    assert "use make" in r.stdout and SECRET not in r.stdout + r.stderr
    warnings = [ln for ln in r.stderr.splitlines() if "facts.md" in ln]
    assert len(warnings) == 1 and warnings[0].startswith("warning: skipped .moss/memory/facts.md")


# ---- High 5: other writers under .moss/agent ------------------------------------------------


def test_a_log_folder_linked_outside_gets_no_session_log(repo, api, outside):
    agent_dir = repo.root / ".moss" / "agent"
    agent_dir.mkdir(parents=True)
    (outside / "logs").mkdir()
    os.symlink(outside / "logs", agent_dir / "logs")
    r = agent(repo, api, "$(answer done)")
    assert r.returncode == 2
    line = one_line_error(r)
    assert ".moss/agent/logs is a symlink; moss does not follow links here — remove it" in line
    assert os.listdir(outside / "logs") == []
    assert (agent_dir / "logs").is_symlink()


def test_dangling_mutex_and_gitignore_links_create_nothing_outside(repo, api, outside):
    locks = repo.root / ".moss" / "agent" / "locks"
    locks.mkdir(parents=True)
    os.symlink(outside / "made-by-gitignore", repo.root / ".moss" / "agent" / ".gitignore")
    os.symlink(outside / "made-by-mutex", locks / ".mutex")
    r = agent(repo, api, "$(run echo hi > out.txt)", "$(answer done)")
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(outside)) == ["secret.txt"]
    # the command did not run without its lock, and the model was told why
    assert not (repo.root / "out.txt").exists()
    assert ".moss/agent/locks/.mutex is a symlink" in seen_by_model(api)


def test_fifos_and_dev_zero_links_among_locks_and_running_markers_are_skipped(repo, api):
    agent_dir = repo.root / ".moss" / "agent"
    for sub in ("locks", "running"):
        (agent_dir / sub).mkdir(parents=True)
        os.mkfifo(agent_dir / sub / "4242-1.json")
        os.symlink("/dev/zero", agent_dir / sub / "4243-1.json")
    # the subprocess timeout only guards the test run: moss used to hang here for good
    r = agent(repo, api, "$(run echo hi > out.txt)", "$(answer done)", timeout=120)
    assert r.returncode == 0, r.stderr
    assert (repo.root / "out.txt").read_text() == "hi\n"
    warnings = [ln for ln in r.stderr.splitlines() if ln.startswith("warning: skipped ")]
    [locks] = [w for w in warnings if ".moss/agent/locks/" in w]  # one line for the folder, not one per poll
    assert "2 entries" in locks and "1 named pipe" in locks and "1 symlink" in locks, locks
    assert "4242-1.json" in locks and "4243-1.json" in locks, locks
    assert len(warnings) == len(set(warnings))
    listing = repo.moss("sessions", "list", timeout=60)
    assert "Traceback" not in listing.stderr
    assert any(".moss/agent/running/" in ln and "4242-1.json" in ln for ln in listing.stderr.splitlines())


def test_a_flood_of_planted_links_is_one_warning_line_per_folder(repo, api, tmp_path):
    """2,100 links planted among the lock files and 300 among the running markers (in round 3
    they gave 2,110 warning lines): one line for each folder, with the count, what they are and
    the first names; the session works as usual."""
    agent_dir = repo.root / ".moss" / "agent"
    outside = tmp_path / "outside.json"
    outside.write_text("{}")
    for sub, n in (("locks", 2100), ("running", 300)):
        (agent_dir / sub).mkdir(parents=True)
        for i in range(n):
            os.symlink(outside, agent_dir / sub / f"{4000 + i}-1.json")
    r = agent(repo, api, "$(run echo hi > out.txt)", "$(answer done)", timeout=120)
    assert r.returncode == 0, r.stderr
    assert (repo.root / "out.txt").read_text() == "hi\n"
    warnings = [ln for ln in r.stderr.splitlines() if ln.startswith("warning: ")]
    [locks] = [w for w in warnings if ".moss/agent/locks/" in w]
    assert locks.startswith("warning: skipped 2,100 entries in .moss/agent/locks/") and "(2,100 symlinks)" in locks
    assert "4000-1.json, 4001-1.json, 4002-1.json and 2,097 more" in locks and len(locks) < 300, locks
    assert len(warnings) <= 2, warnings  # and at most one for the running markers
    assert [w for w in warnings if ".moss/agent/running/" in w] in ([], [w for w in warnings if "300 entries" in w])


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_a_lock_file_with_keys_moss_does_not_know_breaks_no_command(repo, api):
    import socket

    locks = repo.root / ".moss" / "agent" / "locks"
    locks.mkdir(parents=True)
    pid = _dead_pid()
    (locks / f"{pid}-1.json").write_text(json.dumps({
        "targets": [{"path": "", "symbol": "", "kind": "target", "priority": 7}], "pid": pid,
        "host": socket.gethostname(), "session": "gone0001", "role": "agent", "since": time.time(),
        "written_by": "a newer moss"}))
    r = agent(repo, api, "$(run echo hi > out.txt)", "$(answer done)")
    assert r.returncode == 0, r.stderr
    assert (repo.root / "out.txt").read_text() == "hi\n"
    assert not (locks / f"{pid}-1.json").exists()  # its dead owner's lock was taken over


def test_a_6000_character_lock_target_is_a_one_line_error(repo):
    repo.script("longlock", """
        moss.session.bind("long0001")
        local ok = moss.lock("README.md/" .. string.rep("s", 300), { timeout = 1 })
        print("symbol longer than a file name:", ok ~= nil)
        moss.lock(string.rep("a", 6000))
    """)
    r = repo.moss("@longlock")
    assert r.returncode == 2
    assert r.stdout.strip() == "symbol longer than a file name:\ttrue"
    line = one_line_error(r)
    assert "a lock target is at most 4096 characters (this one has 6000)" in line
    assert "File name too long" not in r.stderr


def test_corrupt_run_records_are_listed_as_corrupt_in_one_line_each(repo):
    runs = repo.root / ".moss" / "agent" / "runs"
    runs.mkdir(parents=True)
    (runs / "badjson.json").write_text('{"id": "badjson", ')
    (runs / "typed.json").write_text(json.dumps({"id": "typed", "status": "finished", "name": 5, "cmd": "x",
                                                 "alerts": 3}))
    os.mkfifo(runs / "fifo.json")
    r = repo.moss("runs", "list", timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr  # corrupt records: exit 2, as sessions
    rows = {ln.split("\t")[0]: ln.split("\t") for ln in r.stdout.splitlines()[1:]}
    assert {k: v[3] for k, v in rows.items()} == {"badjson": "corrupt", "typed": "corrupt", "fifo": "corrupt"}
    warnings = r.stderr.splitlines()
    assert len(warnings) == 3 and all(w.startswith("error: .moss/agent/runs/") for w in warnings)
    assert any("typed.json" in w and "name is int" in w for w in warnings)
    assert any("fifo.json is a named pipe" in w for w in warnings)


# ---- a race: the log folder swapped for a link while a session appends -----------------------

def test_a_log_folder_swapped_for_a_link_in_a_loop_gets_no_line_outside(repo, outside):
    agent_dir = repo.root / ".moss" / "agent"
    (agent_dir / "logs").mkdir(parents=True)
    victim = outside / "victim"
    victim.mkdir()
    os.symlink(victim, agent_dir / "logs-swap")
    repo.script("chatty", """
        moss.session.bind("race0001")
        local wrote, refused = 0, 0
        for i = 1, 2000 do
          if pcall(moss.session.log, "race0001", "tick", { i = i }) then wrote = wrote + 1
          else refused = refused + 1 end
        end
        print(wrote, refused)
    """)
    with swapping(agent_dir / "logs", agent_dir / "logs-swap"):
        r = repo.moss("@chatty", timeout=120)
    assert r.returncode == 0, r.stderr
    wrote, refused = map(int, r.stdout.split())
    assert wrote + refused == 2000 and wrote > 0
    assert os.listdir(victim) == []


def test_moss_init_creates_nothing_through_dangling_links(project, outside):
    memory = project.root / ".moss" / "memory"
    memory.mkdir(parents=True)
    os.symlink(outside / "made-by-init", memory / "facts.md")
    os.symlink(outside / "made-by-init-config", project.root / ".moss" / "config.toml")
    r = project.moss("init")
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(outside)) == ["secret.txt"]
    assert "created .moss/memory/decisions.md" in r.stdout and "created .moss/memory/facts.md" not in r.stdout
    assert ".moss/config.toml exists; kept it" in r.stderr


# ---- High 1: a shadow store shipped by the repository -----------------------------------------

SHADOW_LINKS = ("moss-seq.tmp", ".gitignore", "info/exclude", "info/attributes", "moss-journal.jsonl")


def plant_shadow_store(root, outside):
    """A `.moss/shadow.git/` as a repository would ship it: a bare repository whose files moss
    writes are links to files outside the project (stand-ins for `~/.bashrc` and the like)."""
    store = root / ".moss" / "shadow.git"
    subprocess.run(["git", "init", "-q", "--bare", str(store)], check=True)
    (store / "info").mkdir(exist_ok=True)
    for name in SHADOW_LINKS:
        victim = outside / ("victim-" + name.replace("/", "-"))
        victim.write_text("export PATH=/usr/bin  # the user's own file\n")
        if (store / name).exists():
            (store / name).unlink()
        os.symlink(victim, store / name)
    return store


def outside_files(outside) -> dict:
    return {p.name: p.read_bytes() for p in sorted(outside.iterdir())}


def test_a_shipped_shadow_store_is_set_aside_and_a_rollback_writes_nothing_outside(repo, api, outside):
    """A refactor run that edits, fails validation and rolls back, in a repository that ships a
    `.moss/shadow.git` whose files are links out: the store is moved aside with one warning, a
    store of moss's own takes its place, the rollback works, and no file outside changes."""
    store = plant_shadow_store(repo.root, outside)
    before = outside_files(outside)
    (repo.root / "notes.txt").write_text("v1\n")
    repo.write(".moss/config.toml", "[agent]\nmax_retries = 0\n")
    api.push("1. do it", '$(edit notes.txt --old "v1" --new "v2")', "$(answer done)", "$(answer done)")
    r = repo.moss("@agent", "--provider", "anthropic", "-n", "--refactor", "--auto-approve", "medium",
                  "--validate", "false", "do it", env=api.env(), timeout=90)
    assert "Traceback" not in r.stderr, r.stderr
    assert "rollback: reverted: notes.txt" in r.stderr
    assert outside_files(outside) == before
    assert (repo.root / "notes.txt").read_text() == "v1\n"  # rolled back, by moss's own store
    warnings = [ln for ln in r.stderr.splitlines() if ".moss/shadow.git" in ln]
    assert len(warnings) == 1 and warnings[0].startswith("warning: .moss/shadow.git was not made by moss"), r.stderr
    # the shipped store is kept, links and all, where git and moss's tools leave it alone
    aside = [p for p in (repo.root / ".moss" / "agent" / "quarantine").iterdir() if p.name.endswith("shadow.git")]
    assert len(aside) == 1 and all((aside[0] / name).is_symlink() for name in SHADOW_LINKS)
    # the new store holds no link at all, and the next moss process uses it without a word
    assert not any(p.is_symlink() for p in store.rglob("*"))
    repo.script("snapshots", "print(#moss.shadow.list() > 0)")
    again = repo.moss("@snapshots")
    assert again.returncode == 0 and again.stdout.strip() == "true" and ".moss/shadow.git" not in again.stderr, again.stderr
    assert outside_files(outside) == before

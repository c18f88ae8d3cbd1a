"""Isolated child agents: each in its own copy of the tree, its change merged (or not) by its
parent. Through the real CLI, with the fake API playing every model; which child asks is told
by its task, never by prompt wording."""

from __future__ import annotations

import json
import os
import re

from fakeapi import last_user_text, state_of

ARGS = ("--provider", "anthropic", "--model", "claude-test")


def module(n: int, value: int = 0) -> str:
    return "\n\n".join(f"def f{i}():\n    return {value or i}" for i in range(1, n + 1)) + "\n"


def editor(body):
    """A refactorer child whose task is 'set FILE fN to V': edit that function, then answer."""
    user = last_user_text(body)
    m = re.search(r"set (\S+) f(\d+) to (\d+)", user)
    path, n, value = m.group(1), m.group(2), m.group(3)
    if state_of(body) == "planner":
        return "Ready to refactor."
    if f"Edited {path}" in user or "changed on disk" in user:
        return f"$(answer {path} f{n} is {value})"
    return f"$(edit {path}/f{n} replace def f{n}():\n    return {value})"


def events(project, sid):
    path = project.root / f".moss/agent/logs/{sid}.jsonl"
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


def copies(project):
    base = project.home / ".cache" / "moss" / "copies"
    return sorted(p.name for g in base.iterdir() for p in g.iterdir()) if base.is_dir() else []


def script(root: str, body: str) -> str:
    """A root script at `edit` named `root`, with `spawn(task)`: an isolated refactorer child."""
    return f"""
moss.session.bind("{root}")
moss.access.set("edit")
local function spawn(task)
  return moss.spawn {{ task = task, role = "refactorer", machine = "v1", max_turns = 4,
                      auto_approve = "medium", isolate = true }}
end
""" + body


TWO_THEN_THIRD = script("isoroot1", """
local a, b = spawn("set a.py f1 to 100"), spawn("set b.py f2 to 200")
local ra, rb = a:wait(), b:wait()
print("results", ra.reason, rb.reason, table.concat(ra.changed, ","), table.concat(rb.changed, ","))
print("patch", ra.patch:find("+    return 100", 1, true) ~= nil, ra.patch_stat.files)
print("before merge", moss.fs.read("a.py"):find("100") == nil, moss.fs.read("b.py"):find("200") == nil)
local c = spawn("set a.py f1 to 300")   -- starts from the tree as it is: a.py not merged yet
local rc = c:wait()
local ma = a:merge()
print("merge a", table.concat(ma.applied, ","), #ma.conflicts, ma.snapshot ~= nil)
local mb = b:merge()
print("merge b", table.concat(mb.applied, ","), #mb.conflicts)
local mc = c:merge()
print("merge c", #mc.applied, mc.conflicts[1].path, mc.conflicts[1].reason)
print("hunk", (mc.conflicts[1].hunks[1]:gsub("\\n", "|")))
""")


def test_isolated_children_leave_the_tree_alone_until_merged_and_a_clash_is_a_conflict(project, api):
    project.write("a.py", module(2))
    project.write("b.py", module(2))
    project.script("iso", TWO_THEN_THIRD)
    api.push(*[editor] * 12)
    r = project.moss("@iso", *ARGS, env=api.env(), timeout=120)
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[0] == "results\tanswered\tanswered\ta.py\tb.py"
    assert out[1] == "patch\ttrue\t1"
    assert out[2] == "before merge\ttrue\ttrue"
    assert out[3] == "merge a\ta.py\t0\ttrue"
    assert out[4] == "merge b\tb.py\t0"
    assert out[5] == "merge c\t0\ta.py\tboth changed"
    assert "<<<<<<< tree|    return 100|=======|    return 300|>>>>>>> child" in out[6]
    assert (project.root / "a.py").read_text() == module(2).replace("return 1\n", "return 100\n")
    assert (project.root / "b.py").read_text() == module(2).replace("return 2\n", "return 200\n")
    assert copies(project) == []  # every copy removed once merged
    log = events(project, "isoroot1")
    merged = [e for e in log if e["event"] == "child_merge"]
    assert [m["child"] for m in merged] == ["isoroot1-1", "isoroot1-2", "isoroot1-3"]
    assert merged[2]["conflicts"][0]["hunks"]
    # moss sessions show: each isolated child's change and what became of it
    shown = project.moss("sessions", "show", "isoroot1")
    assert shown.returncode == 0, shown.stderr
    assert "isoroot1-1 refactorer · answered · 3 turns · isolated · 1 file(s) +1 -1 · merged: 1 applied, 0 " \
        "conflict(s)" in shown.stdout
    assert "isolated · 1 file(s) +1 -1 · merged: 0 applied, 1 conflict(s)" in shown.stdout
    assert "patch: .moss/agent/patches/isoroot1-3.patch" in shown.stdout
    assert "+    return 300" in (project.root / ".moss/agent/patches/isoroot1-3.patch").read_text()
    assert "merged child isoroot1-3: 0 applied, 1 conflict(s) (a.py)" in shown.stdout


def task_of(body) -> str:
    m = re.search(r"\*\*Task:\*\* (.*)", last_user_text(body))
    return m.group(1).strip() if m else ""


def test_the_model_spawns_isolated_children_sees_their_patches_and_merges_or_drops_them_by_id(project, api):
    """`$(spawn --isolated ...)`, and [agent] isolate_writers for a writing role; $(await)
    shows each change, $(merge ID) brings one in, $(discard ID) drops the other."""
    project.write("a.py", module(2))
    project.write(".moss/config.toml", "[agent]\nisolate_writers = true\n")
    edit_task, look_task = "set a.py f1 to 100", "count the functions in a.py"

    def model(body):
        user = last_user_text(body)
        if task_of(body) == edit_task:
            return editor(body)
        if task_of(body) == look_task:
            return "$(answer 2 functions)" if "def f2" in user else "$(view a.py)"
        if state_of(body) == "planner":
            return "Ready."
        if "merged child" in user:
            return "$(answer merged it)"
        merge = re.search(r"Merge it into your tree with \$\(merge (\S+)\)", user)
        drop = re.search(r"changed nothing; drop the copy with \$\(discard (\S+)\)", user)
        if merge and drop:
            # the change is in the patch, and not yet in this tree
            assert "+    return 100" in user and "return 100" not in (project.root / "a.py").read_text()
            return f"$(children) $(merge {merge.group(1)}) $(discard {drop.group(1)})"
        if "started child agent" in user:
            return "$(await)"
        return f'$(spawn --isolated explorer "{look_task}") $(spawn refactorer "{edit_task}")'

    api.push(*[model] * 20)
    r = project.moss("@agent", "--refactor", "--spawn", "-n", "--auto-approve", "medium", "--output-format", "json",
                     "improve a.py", *ARGS, env=api.env(), timeout=120)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["answer"] == "merged it"
    assert (project.root / "a.py").read_text() == module(2).replace("return 1\n", "return 100\n")
    root = result["session_id"]
    log = events(project, root)
    made = {e["child"]: e["strategy"] for e in log if e["event"] == "child_isolated"}
    # a reader shares the files; a writer's links become copies before it may write
    assert made == {f"{root}-1": "hardlink", f"{root}-2": "hardlink-then-copy"}
    cmds = {e["cmd"].split()[0]: e["output"] for e in log if e["event"] == "command"}
    assert f"merged child {root}-2: 1 path(s) applied (a.py)" in cmds["merge"]
    assert f"dropped child {root}-1's copy" in cmds["discard"]
    assert "[isolated: 1 file(s) changed, not merged]" in cmds["children"]
    assert copies(project) == []


def copy_of(project, cid) -> object:
    """Where child `cid`'s copy of the tree is (the test's user cache, as the user's would be)."""
    base = project.home / ".cache" / "moss" / "copies"
    return next(base.glob(f"*/{cid}/tree"))


FAIL_AND_PASS = script("valroot1", """
local good = spawn("set b.py f2 to 200")
local rg = good:wait()
print("good", rg.reason, table.concat(rg.changed, ","), rg.validation.passed)
local bad = spawn("set a.py f1 to 5000")  -- check.py refuses it: retry, then roll back
local rb = bad:wait()
print("bad", rb.reason, #rb.changed, rb.validation.passed, rb.validation.rolled_back)
""")


def test_a_failing_isolated_child_rolls_back_only_its_own_copy(project, api):
    """Its validation fails and it rolls back: in its own copy. The parent's tree and a
    sibling's copy (holding the sibling's unmerged change) are as they were."""
    project.write("a.py", module(2))
    project.write("b.py", module(2))
    project.write("check.py", "import a, b\nassert a.f1() < 1000, 'f1 is too large'\n")
    project.write(".moss/config.toml", """
        [agent]
        validate_commands = [ { name = "check", run = "python3 check.py" } ]
        validate = ["check"]
        max_retries = 0
        """)
    project.script("val", FAIL_AND_PASS)
    api.push(*[editor] * 20)
    r = project.moss("@val", *ARGS, env=api.env(), timeout=120)
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[0] == "good\tanswered\tb.py\ttrue"
    assert out[1] == "bad\tblocked\t0\tfalse\ttrue", r.stdout  # rolled back: nothing left of its change
    assert (project.root / "a.py").read_text() == module(2)  # the parent's tree: untouched
    assert (project.root / "b.py").read_text() == module(2)
    sibling = copy_of(project, "valroot1-1")  # the sibling's change is still there, unmerged
    assert (sibling / "b.py").read_text() == module(2).replace("return 2\n", "return 200\n")
    assert (sibling / "a.py").read_text() == module(2)
    rolled = [e for e in events(project, "valroot1-2") if e["event"] == "rollback_done"]
    assert rolled and rolled[0]["reverted"] == ["a.py"]


HOSTILE_CHILD = """
-- a child that does what a hostile model at `full` could: writes moss's own folder and git
-- metadata in its copy, and swaps a link to .moss for a folder of its own
return { child = function(spec)
  if spec.resume then return { answer = "resumed", success = true, reason = "answered" } end
  moss.session.save(spec.id, { id = spec.id, task = spec.task, done = true }, { final = true })
  moss.access.set("edit")
  -- at once: its copy's files are still links to the parent's, so this waits for their copies
  local where = moss.shell.run("echo '# appended in place' >> a.py && pwd").stdout
  moss.access.set("full")
  local r = moss.shell.run("mkdir -p .moss/scripts .git/hooks && echo evil > .moss/scripts/evil.lua && " ..
    "echo hook > .git/hooks/pre-commit && rm docs && mkdir docs && echo evil > docs/config.toml && " ..
    "echo fine > fine.txt")
  return { answer = where, success = r.code == 0, reason = "answered" }
end }
"""


def test_a_copy_holds_links_never_what_they_point_to_and_a_merge_never_writes_moss_or_git(project, api, tmp_path):
    import subprocess

    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "secret.txt").write_text("TOPSECRET\n")
    (outside / "deep" / "more.txt").write_text("TOPSECRET too\n")
    project.write("a.py", module(1))
    project.write(".moss/config.toml", "[agent]\nmax_turns = 3\n")
    subprocess.run(["git", "init", "-q", str(project.root)], check=True)
    os.symlink(outside / "secret.txt", project.root / "leak")      # absolute, out of the project
    os.symlink("../outside", project.root / "up")                  # relative, a folder out of it
    os.symlink(".moss", project.root / "docs")                     # into moss's own folder
    project.script("hostile", HOSTILE_CHILD)
    project.script("start", """
        moss.session.bind("hostile1")
        moss.access.set("full")
        local r = moss.spawn { task = "x", script = "hostile", isolate = true }:wait()
        print(r.answer:gsub("%s+$", ""), table.concat(r.changed, ","))
    """)
    r = project.moss("@start", "--allow-full", env={"MOSS_TEST_COPY_HOLD": "0.5"})
    assert r.returncode == 0, r.stderr
    assert (project.root / "a.py").read_text() == module(1)  # an in-place write never reached the parent
    where, changed = r.stdout.strip().split("\t")
    assert where == str(project.root)  # its sandbox shows its copy where the project is
    assert changed == "a.py,docs,docs/config.toml,fine.txt"  # nothing under .moss/ or .git
    assert "kept the copies of the tree of 1 isolated child agent(s)" in r.stderr
    copy = copy_of(project, "hostile1-1")
    assert os.readlink(copy / "leak") == str(outside / "secret.txt") and os.readlink(copy / "up") == "../outside"
    for dirpath, _dirs, files in os.walk(copy):  # (os.walk never enters a linked folder)
        for name in files:
            p = os.path.join(dirpath, name)
            assert os.path.islink(p) or b"TOPSECRET" not in open(p, "rb").read(), p
    assert not (copy / "up" / "deep").is_symlink() and not any(copy.glob("**/more.txt"))

    # a later run of the same tree takes the copy up again and merges it
    project.script("finish", """
        moss.session.bind("hostile1")
        moss.access.set("edit")
        local h = moss.spawn { resume = "hostile1-1", script = "hostile", isolate = true }
        print(h:wait().answer)
        local m = h:merge()
        print(table.concat(m.applied, ","), #m.conflicts)
    """)
    r = project.moss("@finish")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["resumed", "a.py,docs,docs/config.toml,fine.txt\t0"]
    assert (project.root / "a.py").read_text() == module(1) + "# appended in place\n"
    assert (project.root / "fine.txt").read_text() == "fine\n"
    assert not (project.root / ".moss/scripts/evil.lua").exists()
    assert not (project.root / ".git/hooks/pre-commit").exists()
    assert (project.root / ".moss/config.toml").read_text() == "[agent]\nmax_turns = 3\n"
    assert not (project.root / "docs").is_symlink() and (project.root / "docs/config.toml").read_text() == "evil\n"
    assert copies(project) == []


def test_moss_sessions_clean_removes_the_copies_no_running_moss_works_in(project, api):
    from moss.tools.procs import start_time

    project.write("a.py", module(1))
    project.script("quiet", "return { child = function(spec) return { answer = 'ok', success = true } end }")
    project.script("two", """
        moss.session.bind("cleanme1")
        moss.access.set("edit")
        for i = 1, 2 do moss.spawn { task = "x", script = "quiet", isolate = true }:wait() end
    """)
    r = project.moss("@two")
    assert r.returncode == 0, r.stderr
    assert copies(project) == ["cleanme1-1", "cleanme1-2"]  # neither merged nor discarded: kept
    # the second copy as if a live moss process (this test's) still worked in it
    record = copy_of(project, "cleanme1-2").parent / "moss-copy.json"
    rec = json.loads(record.read_text())
    record.write_text(json.dumps({**rec, "pid": os.getpid(), "pid_start": start_time(os.getpid())}))
    r = project.moss("sessions", "clean")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"removed the copy of cleanme1-1 ({project.root}):")
    assert copies(project) == ["cleanme1-2"]
    r = project.moss("sessions", "clean")
    assert "no copies to remove in this project" in r.stderr


def test_copies_are_private_and_a_folder_planted_in_the_shared_temp_folder_is_never_used(tmp_path, monkeypatch):
    """In-process: a copy's folder is the user's alone (0700); in the system temp folder, a
    `moss-copies-UID` someone else made (or left open to others) is refused, not written."""
    import stat as st

    import pytest

    from moss.errors import MossError
    from moss.tools.worktree import Worktree, homes

    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "a.py").write_text(module(1))
    env = {"HOME": str(tmp_path / "home"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    wt = Worktree.create(project=proj, source=proj, child="priv-1", parent="priv", may_write=True, env=env)
    wt.wait_ready()
    for p in (tmp_path / "cache" / "moss" / "copies", wt.home):
        assert st.S_IMODE(os.stat(p).st_mode) & 0o077 == 0, p
    assert (wt.tree / "a.py").read_text() == module(1) and os.stat(wt.tree / "a.py").st_nlink == 1
    wt.discard()

    monkeypatch.setattr("tempfile.gettempdir", lambda: str(tmp_path / "tmp"))
    planted = tmp_path / "tmp" / f"moss-copies-{os.geteuid()}"
    planted.mkdir(parents=True)
    planted.chmod(0o777)  # open to every local user
    (tmp_path / "nocache").write_text("a file where the cache folder would be")
    env = {"HOME": str(tmp_path / "home"), "XDG_CACHE_HOME": str(tmp_path / "nocache")}
    with pytest.raises(MossError, match="no private folder for a child's copy"):
        Worktree.create(project=proj, source=proj, child="priv-2", parent="priv", may_write=True, env=env)
    assert list(planted.iterdir()) == []
    assert homes.listing(proj, env) == []


def test_the_docs_splitter_merges_the_children_whose_validation_passed(project, api):
    """docs/agent.md's example role, as it is there: three isolated children, one per folder;
    the two whose validation passed are merged, the third (its change fails check.py) is
    dropped, and its folder is as it was."""
    from conftest import REPO

    text = (REPO / "docs" / "agent.md").read_text()
    block = text[text.index("-- .moss/scripts/roles/splitter.lua"):]
    project.write(".moss/scripts/roles/splitter.lua", block[:block.index("```")])
    values = {"api": 100, "core": 200, "cli": 5000}
    for d in values:
        project.write(f"{d}/m.py", module(1))
    project.write("check.py", "import sys\nsys.path[:0] = ['cli']\nimport m\nassert m.f1() < 1000, 'f1 is too large'\n")
    project.write(".moss/config.toml", """
        [agent]
        validate_commands = [ { name = "check", run = "python3 check.py" } ]
        validate = ["check"]
        max_retries = 0
        """)

    def model(body):
        user = last_user_text(body)
        if state_of(body) == "planner":
            return "Ready."
        folder = re.search(r"Change only files under (\w+)/", user)
        if folder is None:
            return "$(answer split and merged)"
        path = f"{folder.group(1)}/m.py"
        if f"Edited {path}" in user or "changed on disk" in user:
            return f"$(answer {path} done)"
        return f"$(edit {path}/f1 replace def f1():\n    return {values[folder.group(1)]})"

    api.push(*[model] * 30)
    r = project.moss("@agent", "--role", "splitter", "-n", "--auto-approve", "medium", "--output-format", "json",
                     "set f1", *ARGS, env=api.env(), timeout=120)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["answer"] == "split and merged" and result["validation"]["passed"]
    assert (project.root / "api/m.py").read_text() == module(1, 100)
    assert (project.root / "core/m.py").read_text() == module(1, 200)
    assert (project.root / "cli/m.py").read_text() == module(1)  # its child failed: dropped
    log = events(project, result["session_id"])
    assert [e["child"][-1] for e in log if e["event"] == "child_merge"] == ["1", "2"]
    assert [e["child"][-1] for e in log if e["event"] == "child_discard"] == ["3"]
    assert copies(project) == []


RESUMED_KID = """
return { child = function(spec)
  if spec.resume then
    moss.access.set("edit")
    local r = moss.shell.run("echo '# in place' >> a.py")
    return { answer = "resumed " .. r.code, success = true, reason = "answered" }
  end
  moss.session.save(spec.id, { id = spec.id, task = spec.task, done = true }, { final = true })
  return { answer = "first", success = true, reason = "answered" }
end }
"""


def test_a_reader_resumed_with_more_access_never_writes_the_parents_files_through_its_links(project, api):
    """An isolated child that could not write gets a copy of hard links to the parent's files.
    Resumed later at the parent's `edit` (a resume without `access` gets the parent's), it
    appends to a.py in place: the append lands in its own copy, never in the parent's a.py."""
    project.write("a.py", module(1))
    project.script("kid", RESUMED_KID)
    project.script("start", """
        moss.session.bind("esc1")
        moss.access.set("edit")
        print(moss.spawn { task = "x", script = "kid", isolate = true, access = "read-shell" }:wait().answer)
    """)
    r = project.moss("@start")
    assert r.returncode == 0 and r.stdout.strip() == "first", r.stderr
    project.script("again", """
        moss.session.bind("esc1")
        moss.access.set("edit")
        local h = moss.spawn { resume = "esc1-1", script = "kid", isolate = true }
        local got = h:wait()
        print(got.answer, table.concat(got.changed or {}, ","))
    """)
    r = project.moss("@again")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["resumed", "0", "a.py"], r.stdout
    assert (project.root / "a.py").read_text() == module(1)


SIBLING_A = """return { child = function(spec)
  moss.access.set("edit")
  moss.shell.run("echo '# by A' >> a.py")
  return { answer = "a", success = true, reason = "answered" }
end }"""
SIBLING_B = """return { child = function(spec)
  moss.access.set("edit")
  local ok, err = pcall(moss.agents.merge, spec.task)
  return { answer = ok and "merged" or err.message, success = true, reason = "answered" }
end }"""


def test_only_a_childs_parent_can_merge_its_change(project, api):
    """A sibling that calls moss.agents.merge with another child's id is refused, naming the
    parent that can; the change stays in its copy, and the parent still merges it."""
    project.write("a.py", module(1))
    project.script("kida", SIBLING_A)
    project.script("kidb", SIBLING_B)
    project.script("start", """
        moss.session.bind("sib1")
        moss.access.set("edit")
        local a = moss.spawn { task = "x", script = "kida", isolate = true }
        a:wait()
        print(moss.spawn { task = a.id, script = "kidb" }:wait().answer)
        print(#a:merge().applied)
    """)
    r = project.moss("@start")
    assert r.returncode == 0, r.stderr
    said, applied = r.stdout.strip().splitlines()
    assert said == "moss.agents.merge: child sib1-1 is not a child of this agent (sib1-2): only its parent (sib1) can merge its change"
    assert applied == "1" and (project.root / "a.py").read_text().endswith("# by A\n")


READER_KID = """
return { child = function(spec)
  while not moss.fs.read("go.txt"):find("go") do end -- until the parent has changed a.py in place
  return { answer = "looked", success = true, reason = "answered" }
end }
"""


def test_an_isolated_reader_is_never_credited_with_the_parents_own_edits(project, api):
    """An isolated child that cannot write shares its files with the parent (hard links). The
    parent appends to a.py in place while the child runs: the child's result says it changed
    nothing, and its merge applies nothing."""
    project.write("a.py", module(1))
    project.write("go.txt", "wait\n")
    project.script("looker", READER_KID)
    project.script("start", """
        moss.session.bind("rd1")
        moss.access.set("edit")
        local h = moss.spawn { task = "look", script = "looker", isolate = true, access = "read-only" }
        while not moss.agents.info(h.id).isolated.whole do end  -- its starting point recorded
        moss.shell.run("echo '# parent' >> a.py; echo go > go.txt")  -- in place: through the links
        local r = h:wait()
        print(#(r.changed or {}), r.patch == "", #h:merge().applied)
    """)
    r = project.moss("@start")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "true", "0"], r.stdout
    assert (project.root / "a.py").read_text() == module(1) + "# parent\n"

"""Isolated child agents: each in its own copy of the tree, its change merged (or not) by its
parent. Through the real CLI, with the fake API playing every model; which child asks is told
by its task, never by prompt wording."""

from __future__ import annotations

import json
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


TWO_THEN_THIRD = """
moss.session.bind("isoroot1")
moss.access.set("edit")
local function spawn(task)
  return moss.spawn { task = task, role = "refactorer", machine = "v1", max_turns = 4,
                      auto_approve = "medium", isolate = true }
end
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
"""


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
    assert "merged child isoroot1-3: 0 applied, 1 conflict(s) (a.py)" in shown.stdout


def task_of(body) -> str:
    m = re.search(r"\*\*Task:\*\* (.*)", last_user_text(body))
    return m.group(1).strip() if m else ""


def test_the_model_spawns_an_isolated_child_sees_its_patch_and_merges_it_by_id(project, api):
    project.write("a.py", module(2))
    child_task = "set a.py f1 to 100"

    def model(body):
        user = last_user_text(body)
        if task_of(body) == child_task:
            return editor(body)
        if state_of(body) == "planner":
            return "Ready."
        if "merged child" in user:
            return "$(answer merged it)"
        m = re.search(r"Merge it into your tree with \$\(merge (\S+)\)", user)
        if m:
            # the child's change is in its patch, and not yet in this tree
            assert "+    return 100" in user and "return 100" not in (project.root / "a.py").read_text()
            return f"$(children) $(merge {m.group(1)})"
        if "started child agent" in user:
            return "$(await)"
        return f'$(spawn --isolated refactorer "{child_task}")'

    api.push(*[model] * 20)
    r = project.moss("@agent", "--refactor", "--spawn", "-n", "--auto-approve", "medium", "--output-format", "json",
                     "improve a.py", *ARGS, env=api.env(), timeout=120)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["answer"] == "merged it"
    assert (project.root / "a.py").read_text() == module(2).replace("return 1\n", "return 100\n")
    root = result["session_id"]
    cmds = {e["cmd"].split()[0]: e["output"] for e in events(project, root) if e["event"] == "command"}
    assert f"merged child {root}-1: 1 path(s) applied (a.py)" in cmds["merge"]
    assert "[isolated: 1 file(s) changed, not merged]" in cmds["children"]
    assert copies(project) == []

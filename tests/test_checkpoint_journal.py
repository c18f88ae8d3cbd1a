"""Incremental checkpoints (host/sessions/checkpoint.py, host/api/session.py): a base file
plus a journal of what each save changed. Whatever a session table goes through, the checkpoint read back is the table as a
whole save would have written it; old checkpoints (no journal) load as they are; a session
killed with SIGKILL resumes from its last finished turn."""

from __future__ import annotations

import json

import pytest
from conftest import sigkill_when
from moss import api
from moss.sessions import JOURNAL_MAX_SAVES, apply_ops, checkpoint_path, journal_path, read_checkpoint
from moss.context import Context
from moss.roots import ScriptRoots
from moss.runtime import Runtime

# A deterministic random walk over a session-like table: lists that grow, shrink and change
# in the middle, maps that gain and lose keys, values that change type (int/float, table/scalar,
# list/map, empty {} and []), moss.json.null, strings with escapes and bytes that are not UTF-8.
MUTATE = r"""
local S, step = ...
local r = step * 7919 + 17
local function rnd(n) r = (r * 1103515245 + 12345) % 2147483648; return r % n end
local function val(d)
  local k = rnd(d > 2 and 6 or 9)
  if k == 0 then return rnd(100) end
  if k == 1 then return rnd(100) / 4 end
  if k == 2 then return "s\"\\\n" .. rnd(10) .. string.char(rnd(256)) end
  if k == 3 then return rnd(2) == 0 end
  if k == 4 then return ({1.0, 1, -0.0, 0, moss.json.null, "x"})[rnd(6) + 1] end
  if k == 5 then return rnd(2) == 0 and {} or moss.dict() end
  if k == 6 then local t = {} for i = 1, rnd(4) + 1 do t[i] = val(d + 1) end return t end
  if k == 7 then local t = moss.dict() for i = 1, rnd(4) do t["k" .. rnd(6)] = val(d + 1) end return t end
  return { note = "n" .. rnd(50), turn = rnd(300), tags = { "a", "b" } }
end
for _ = 1, rnd(4) + 1 do
  local what = rnd(10)
  if what <= 2 then S.items[#S.items + 1] = val(1)
  elseif what == 3 and #S.items > 0 then table.remove(S.items, rnd(#S.items) + 1)
  elseif what == 4 and #S.items > 0 then S.items[rnd(#S.items) + 1] = val(1)
  elseif what == 5 then S.seen["k" .. rnd(40)] = rnd(3) == 0 and nil or val(2)
  elseif what == 6 then S.turn = S.turn + 1; S.state = ({"explorer", "evaluator"})[rnd(2) + 1]
  elseif what == 7 then S.misc = val(0)
  elseif what == 8 and #S.items > 0 then
    local it = S.items[rnd(#S.items) + 1]
    if type(it) == "table" and not rawequal(it, moss.json.null) then it["x" .. rnd(3)] = val(2) end
  else S.usage = { input = rnd(1000), cost = rnd(1000) / 3 } end
end
"""


def test_journal_reads_back_what_a_whole_save_would_write(tmp_path):
    ctx = Context(root=tmp_path, config={}, options={})
    rt = Runtime(ScriptRoots(tmp_path, env={"XDG_CONFIG_HOME": str(tmp_path / "cfg")}), api.functions(ctx))
    ctx.runtime = rt
    mutate = rt.load(MUTATE, "mutate")
    S = rt.execute("return { id = 'abc', turn = 0, items = {}, seen = moss.dict(), done = false }")
    save = rt.execute("return function(S) return moss.session.save(S.id, S) end")
    path = checkpoint_path(tmp_path, "abc")
    for step in range(1, 3 * JOURNAL_MAX_SAVES):
        rt.call(mutate, S, step)
        rt.call(save, S)
        expected = json.loads(json.dumps(rt.to_py(S), default=str))
        got = read_checkpoint(path)
        assert got.pop("saved_at") and got.pop("session_id") == "abc"
        assert got == expected, f"after step {step}"
    # the journal was compacted into the base along the way, and is now in use again
    assert journal_path(tmp_path, "abc").exists()
    assert len(journal_path(tmp_path, "abc").read_text().splitlines()) <= JOURNAL_MAX_SAVES + 1
    # the session's end (its script says so: final) is a whole base: a reader of the file alone sees it
    rt.execute("local S = ...; S.done = true; moss.session.save(S.id, S, { final = true })", "=end", S)
    assert json.loads(path.read_text())["done"] is True
    assert read_checkpoint(path)["done"] is True


def test_a_torn_or_stale_journal_is_ignored_where_it_stops_being_whole(tmp_path):
    base = checkpoint_path(tmp_path, "s1")
    base.parent.mkdir(parents=True)
    base.write_text(json.dumps({"turn": 1, "saved_at": 5.0, "items": [1]}))
    journal = journal_path(tmp_path, "s1")
    journal.write_text('{"base": 5.0}\n{"ops":[["s",["turn"],2],["a",["items"],[2]]]}\n{"ops":[["s",["tur')
    assert read_checkpoint(base) == {"turn": 2, "saved_at": 5.0, "items": [1, 2]}
    journal.write_text('{"base": 4.0}\n{"ops":[["s",["turn"],9]]}\n')  # the journal of an older base
    assert read_checkpoint(base)["turn"] == 1


def test_apply_ops_lists_are_one_based_like_lua():
    doc = {"a": [{"x": 1}, {"x": 2}], "m": {"1": "one"}}
    doc = apply_ops(doc, [["s", ["a", 2, "x"], 3], ["a", ["a"], [{"x": 4}]], ["d", ["m", 1]], ["s", ["a", 4], 5]])
    assert doc == {"a": [{"x": 1}, {"x": 3}, {"x": 4}, 5], "m": {}}


def test_an_old_checkpoint_without_journal_still_resumes(project):
    """A checkpoint written whole, as moss wrote every save before the journal: --resume goes on."""
    script = project.root / "answers.json"
    script.write_text(json.dumps(["$(note first look)", "$(answer done)"]))
    r = project.moss("@agent", "--v1", "-n", "--max-turns", "1", "--provider", "script", "--script", str(script),
                     "--output-format", "json", "a task")
    sid = json.loads(r.stdout)["session_id"]
    path = checkpoint_path(project.root, sid)
    state = read_checkpoint(path)
    journal_path(project.root, sid).unlink(missing_ok=True)
    state.update(done=False, reason=None, max_turns=5)
    path.write_text(json.dumps(state))
    script.write_text(json.dumps(["$(answer done)"]))
    r = project.moss("@agent", "--resume", sid, "-n", "--provider", "script", "--script", str(script),
                     "--output-format", "json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["answer"] == "done" and out["session_id"] == sid
    assert read_checkpoint(path)["mem"]["items"][0]["content"] == "first look"


@pytest.mark.slow
def test_sigkill_mid_session_resumes_from_the_last_finished_turn(project):
    """Killed while turn 41 waits for its model, a session resumes at turn 40 with every note
    of turns 1-40: the journal holds what the base (written at turn 0) does not."""
    from fakeapi import FakeAPI

    with FakeAPI() as api_:
        api_.push(*[f"$(note step {k})" for k in range(1, 41)], {"text": "$(answer late)", "delay": 60})
        p = project.popen("@agent", "--v1", "-n", "--max-turns", "60", "--provider", "anthropic", "the task",
                          env=api_.env())
        sigkill_when(p, lambda: len(api_.requests) >= 41, timeout=60)
        assert len(api_.requests) == 41
    (base,) = (project.root / ".moss/agent").glob("session-*.json")
    sid = base.stem[len("session-"):]
    assert json.loads(base.read_text())["turn"] == 0  # the base alone is the start...
    saved = read_checkpoint(base)  # ...the journal brings it to the last finished turn
    assert saved["turn"] == 40 and saved["done"] is False
    assert [i["content"] for i in saved["mem"]["items"]] == [f"step {k}" for k in range(1, 41)]

    with FakeAPI() as api2:
        api2.push("$(answer 42)")
        r = project.moss("@agent", "--provider", "anthropic", "--resume", sid, "-n", "--output-format", "json",
                         env=api2.env())
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["turns"] == 41
        # what the model sees on resuming: the notes of all forty turns
        assert "step 40" in json.dumps(api2.requests[0].body) and "step 1\\n" in json.dumps(api2.requests[0].body)


def test_a_long_session_with_bounded_memory_keeps_a_checkpoint_of_bounded_size(project):
    """Loop and progress detection remember recent commands only: a session of 300 turns whose
    model keeps its memory small saves about what a session of 100 turns saves, not three times."""
    (project.root / "big.txt").write_text("".join(f"line {i}\n" for i in range(1, 1301)))

    def run(turns):
        replies = []
        for k in range(1, turns + 1):
            forget = f'$(forget "step {k - 5} seen") ' if k > 5 else ""
            replies.append(f'{forget}$(note "step {k} seen") $(view big.txt:{k * 4}-{k * 4 + 3})')
        replies.append("$(answer done)")
        script = project.root / f"answers-{turns}.json"
        script.write_text(json.dumps(replies))
        r = project.moss("@agent", "--v1", "-n", "--max-turns", str(turns + 5), "--provider", "script",
                         "--script", str(script), "--output-format", "json", "read big.txt", timeout=120)
        assert r.returncode == 0, r.stderr
        sid = json.loads(r.stdout)["session_id"]
        state = read_checkpoint(checkpoint_path(project.root, sid))
        assert state["turn"] == turns + 1 and len(state["mem"]["items"]) == 5
        return len(checkpoint_path(project.root, sid).read_bytes())

    short, long = run(100), run(300)
    assert long < 1.25 * short, (short, long)



def test_forgetting_a_note_journals_the_removal_not_the_whole_memory(tmp_path):
    """Working memory of 20 notes, the oldest forgotten and a new one noted each turn: a turn's
    journal line holds those two changes, not the 20 notes again (it did: every note shifted
    one place, so the whole list was rewritten on every save)."""
    ctx = Context(root=tmp_path, config={}, options={})
    rt = Runtime(ScriptRoots(tmp_path, env={"XDG_CONFIG_HOME": str(tmp_path / "cfg")}), api.functions(ctx))
    ctx.runtime = rt
    S = rt.execute("""
      local S = { id = 'mem', turn = 0, mem = { items = {} }, done = false }
      for k = 1, 20 do S.mem.items[k] = { id = 'n' .. k, kind = 'note', content = 'finding ' .. k .. ': ' .. ('x'):rep(200) } end
      return S""")
    turn = rt.execute("""return function(S)
      S.turn = S.turn + 1
      table.remove(S.mem.items, 1)
      local k = S.turn + 20
      S.mem.items[#S.mem.items + 1] = { id = 'n' .. k, kind = 'note', content = 'finding ' .. k .. ': ' .. ('x'):rep(200) }
      moss.session.save(S.id, S)
    end""")
    rt.execute("local S = ...; moss.session.save(S.id, S)", "=first", S)
    for _ in range(10):
        rt.call(turn, S)
    lines = journal_path(tmp_path, "mem").read_text().splitlines()[1:]
    assert len(lines) == 10
    assert all(len(line) < 600 for line in lines), [len(line) for line in lines]  # 20 notes are ~4,700 bytes
    got = read_checkpoint(checkpoint_path(tmp_path, "mem"))
    assert [i["id"] for i in got["mem"]["items"]] == [f"n{k}" for k in range(11, 31)]

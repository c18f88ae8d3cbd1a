"""The Wild Loop (`moss @agent --machine wild`) and moss.runs, end to end.

The real CLI and SDKs talk to the fake API server; a scripted model answers from the prompt
it is shown (which stage, which alert, which run), like test_agent.py's Model. Fake
"training" scripts written by each test print `step N loss X` lines and exit 0/1 depending
on --lr; an lr >= 1 prints `loss nan` and then hangs until stopped. With --after=FILE a run
that trains starts its steps only once FILE exists (the scripted model writes ANSWERED when it
answers an alert): what happens first is then decided by the test, not by how fast each
process happens to start.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

import pytest
from conftest import builtin_lua, lua_value
from fakeapi import FakeAPI, last_user_text, system_text

# the words moss writes around what it shows the model (lib/wild/prompts.lua), never copied here
H = lua_value("lib.wild.prompts", "HEADINGS")
SOURCES = lua_value("lib.wild.prompts", "SOURCES")
MESSAGES = lua_value("lib.machine.messages", "HEADING")  # the block of moss's notes to the model


TRAIN = r'''
import os, sys, time
args = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
lr = float(args.get("lr", "0.01"))
sys.stdout.write(f"args {sys.argv[1:]}\n")  # one write: a reader never sees half of the line
sys.stdout.flush()
if lr >= 1:
    print("step 0 loss nan", flush=True)
    time.sleep(float(args.get("hold", "60")))
    sys.exit(2)
deadline = time.time() + 30
while "after" in args and not os.path.exists(args["after"]) and time.time() < deadline:
    time.sleep(0.05)
for step in range(3):
    time.sleep(float(args.get("sleep", "0.05")))
    print(f"step {step} loss {2.0 - step * lr * 10:.4f}", flush=True)
open(f"out-{lr}.txt", "w").write("done\n")
sys.exit(0 if lr <= 0.01 else 1)
'''

ANSWERED = "alert-answered"  # written by WildModel when it answers an alert (see --after)

HEADING = re.compile(r"^## Wild Loop — ([A-Z ]+) \(iteration (\d+)\)(?:: (.*))?$", re.M)


def stage_of(user: str) -> tuple[str, int, str]:
    m = HEADING.search(user)
    assert m, user[:300]
    return m.group(1), int(m.group(2)), m.group(3) or ""


def sweep_tag(params: dict, name: str = "lr sweep", base: str = "python3 train.py", **extra) -> str:
    spec = {"name": name, "base_command": base, "parameters": params, **extra}
    return "Here is the plan.\n<sweep>\n" + json.dumps(spec, indent=2) + "\n</sweep>"


class WildModel:
    """Answers each stage like a model would; records (stage, detail, prompt) per call."""

    def __init__(self, project, sweeps, analysis=("COMPLETE",), explore_first=False, choice="stop"):
        self.project = project
        self.choice = choice            # None: leave the first alert unresolved
        self.sweeps = list(sweeps)      # one <sweep> reply per EXPLORING round
        self.analysis = list(analysis)  # one promise per ANALYZING prompt
        self.explore_first = explore_first
        self.calls: list[tuple[str, str, str]] = []
        self.at_analysis: list[list[dict]] = []  # run records as they were when analysis began

    def __call__(self, body) -> str:
        user = last_user_text(body)
        stage, iteration, detail = stage_of(user)
        self.calls.append((stage, detail, user))
        if stage == "EXPLORING":
            if self.explore_first:
                self.explore_first = False
                return "I need to see the training script first. $(view train.py) $(note lr is --lr)"
            return self.sweeps.pop(0) if self.sweeps else "<promise>COMPLETE</promise> nothing left to try"
        if stage == "RUNNING" and detail.startswith("alert"):
            (self.project.root / ANSWERED).write_text("")
            alert_id = re.search(r"\*\*Alert\*\* `([0-9a-f]+)`", user).group(1)
            if self.choice is None:
                self.choice = "continue"
                return "I will keep an eye on it."
            tag = json.dumps({"alert_id": alert_id, "choice": self.choice})
            return f"Loss is NaN, {self.choice}.\n<resolve_alert>{tag}</resolve_alert>"
        if stage == "RUNNING":
            return "Noted."
        if stage == "ANALYZING":
            self.at_analysis.append(runs_on_disk(self.project))
            promise = self.analysis.pop(0) if self.analysis else "COMPLETE"
            return f"Analysis: lr=0.001 gives the lowest loss; larger rates fail.\n<promise>{promise}</promise>"
        if stage == "TIME LIMIT":
            return "Report: the run was still going when time ran out."
        raise AssertionError(stage)

    def stages(self) -> list[str]:
        return [s + (": " + d if d else "") for s, d, _ in self.calls]


def runs_on_disk(project) -> list[dict]:
    d = project.root / ".moss" / "agent" / "runs"
    recs = [json.loads(p.read_text()) for p in d.glob("*.json")] if d.is_dir() else []
    return sorted(recs, key=lambda r: r["created_at"])


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture
def api():
    with FakeAPI() as server:
        yield server


@pytest.fixture
def lab(project):
    project.write("train.py", TRAIN)
    return project


def wild(project, api, *args, model=None, n=40, timeout=60, full=True):
    if model is not None:
        api.push(*([model] * n))
    extra = ["--allow-full"] if full else []
    return project.moss("@agent", "--provider", "openai", "--machine", "wild", "-n", *extra, *args,
                        env=api.env(), timeout=timeout)


# ---- the Lua libraries ---------------------------------------------------------------------------

LIB_CASES = r'''
local tags = require("lib.wild.tags")
local grid = require("lib.wild.grid")
local out = {}
local spec = tags.sweep([[text before <Sweep>
```json
{"name": "g", "base_command": "python3 train.py",
 "parameters": {"lr": [0.001, 1e-5, 3], "opt": "adam", "note": ["it's", "a b"], "on": [true, null]},
 "max_runs": 7}
```
</SWEEP> after]])
local combos, total = grid.expand(spec.parameters, spec.max_runs)
out.total, out.n = total, #combos
out.commands = {}
for _, c in ipairs(combos) do out.commands[#out.commands + 1] = grid.command(spec.base_command, c) end
out.keys = {}
for _, p in ipairs(spec.parameters) do out.keys[#out.keys + 1] = p.key end
local z = tags.sweep('<sweep>{"name": "z", "base_command": "b", "parameters": {"b": [1, 2], "a": [3, 4]}}</sweep>')
local zc = grid.expand(z.parameters, 10)
out.order = {}
for _, c in ipairs(zc) do out.order[#out.order + 1] = grid.describe(c) end
out.weird_key = grid.command("run", { { key = "a b", value = "x" } })
out.empty = grid.command("run", {})
out.quote = { grid.shquote("plain-1.5e-3"), grid.shquote(""), grid.shquote("$(rm -rf /)"), grid.shquote("a'b") }
out.floats = {}
for _, v in ipairs({ 0.1, 100.0, 1e-5, 1e16, 2.5e-7, 1 / 3 }) do out.floats[#out.floats + 1] = grid.format_value(v) end
local _, e1 = tags.sweep('<sweep>{"name": "x"}</sweep>')
local _, e2 = tags.sweep("<sweep>{not json}</sweep>")
local _, e3 = tags.sweep('<sweep>{"name": "x", "base_command": "b", "parameters": [1]}</sweep>')
out.errors = { e1, e2, e3 }
out.none = tags.sweep("no tag here") == nil
out.promise = { tags.promise("a <promise>CONTINUE</promise> b <signal>needs_human</signal>") }
local p2, perr = tags.promise("<promise>maybe</promise>")
out.bad_promise = perr
out.resolutions = { tags.resolutions('<resolve_alert>{"alert_id": "ab12", "choice": "stop"}</resolve_alert>' ..
  '<resolve_alert>{"alert_id": "x"}</resolve_alert>') }
out.strip = tags.strip("The analysis.\n\n<promise>COMPLETE</promise>\n")
print(moss.json.encode(out))
'''


def test_grid_expansion_command_building_and_tags(project):
    project.script("wildlib", LIB_CASES)
    r = project.moss("@wildlib")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    # the Cartesian product in parameter order, scalars as one-item lists, cut to max_runs
    assert out["keys"] == ["lr", "opt", "note", "on"]
    assert out["total"] == 3 * 1 * 2 * 2 and out["n"] == 7
    assert out["commands"][:5] == [
        "python3 train.py --lr=0.001 --opt=adam --note='it'\"'\"'s' --on=true",
        "python3 train.py --lr=0.001 --opt=adam --note='it'\"'\"'s' --on=null",
        "python3 train.py --lr=0.001 --opt=adam --note='a b' --on=true",
        "python3 train.py --lr=0.001 --opt=adam --note='a b' --on=null",
        "python3 train.py --lr=1e-05 --opt=adam --note='it'\"'\"'s' --on=true",
    ]
    assert out["commands"][6] == "python3 train.py --lr=1e-05 --opt=adam --note='a b' --on=true"
    # source order, not alphabetical: "b" varies slowest
    assert out["order"] == ["b=1, a=3", "b=1, a=4", "b=2, a=3", "b=2, a=4"]
    assert out["weird_key"] == "run '--a b=x'"
    assert out["empty"] == "run"
    assert out["quote"] == ["plain-1.5e-3", "''", "'$(rm -rf /)'", "'a'\"'\"'b'"]
    assert out["floats"] == ["0.1", "100.0", "1e-05", "1e+16", "2.5e-07", "0.3333333333333333"]
    assert "missing required field(s): base_command, parameters" in out["errors"][0]
    assert "not valid JSON" in out["errors"][1] and "line 1, column 2" in out["errors"][1]
    assert "parameters must be an object" in out["errors"][2]
    assert out["none"] is True
    assert out["promise"] == ["NEEDS_HUMAN"]  # the last signal counts; <signal> is an alias
    assert "CONTINUE, COMPLETE or NEEDS_HUMAN" in out["bad_promise"]
    found, errors = out["resolutions"]
    assert found == [{"alert_id": "ab12", "choice": "stop"}]
    assert 'needs both "alert_id" and "choice"' in errors[0]
    assert out["strip"] == "The analysis."


# ---- moss.runs ------------------------------------------------------------------------------------

RUNS_SCRIPT = r'''
moss.access.set(moss.args[1])
local rules = { "loss is nan", { metric = "loss", op = ">", threshold = 1.95, severity = "info",
  choices = { "ignore", "Stop Job" } }, "/Traceback/" }
local a = moss.runs.start{ cmd = "python3 train.py --lr=0.001", name = "good", alerts = rules }
local b = moss.runs.start{ cmd = "python3 train.py --lr=0.1", name = "bad" }
local c = moss.runs.start{ cmd = "python3 train.py --lr=1", name = "nan", alerts = rules }
local events = {}
local function take(ev)  -- an alert is answered whenever it arrives, even after its run ended
  events[#events + 1] = ev
  if ev.type == "alert" and ev.run_id == c.id then
    local ok, err = pcall(moss.runs.resolve, ev.id, "maybe")
    ev.bad_choice = tostring(err)
    ev.resolved = moss.runs.resolve(ev.id, "STOP")
  elseif ev.type == "alert" then
    ev.resolved = moss.runs.resolve(ev.id, "ignore")
  end
end
while true do
  local ev = moss.runs.wait(10)
  if not ev then break end
  take(ev)
  local active = 0
  for _, r in ipairs(moss.runs.list()) do
    if r.status == "running" or r.status == "queued" then active = active + 1 end
  end
  if active == 0 then break end
end
while true do  -- what is still queued (the last transitions, an alert read after its run ended)
  local ev = moss.runs.wait(0)
  if not ev then break end
  take(ev)
end
print(moss.json.encode({ a = a, events = events, list = moss.runs.list(), tail = moss.runs.log_tail(a.id, 16),
  pending = moss.runs.alerts{ status = "pending" }, all = moss.runs.alerts(), nowait = moss.runs.wait(0),
  status = moss.runs.status(b.id) }))
'''


@pytest.mark.parametrize("access", ["full", pytest.param("edit", marks=pytest.mark.needs_sandbox)])
def test_runs_statuses_alerts_logs_and_persistence(lab, access):
    lab.script("runs", RUNS_SCRIPT)
    r = lab.moss("@runs", access, "--allow-full", timeout=30)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["a"]["status"] == "running"
    assert out["a"]["sandbox"] == ("none" if access == "full" else "bwrap-project")
    by_name = {x["name"]: x for x in out["list"]}
    assert by_name["good"]["status"] == "finished" and by_name["good"]["code"] == 0
    assert by_name["bad"]["status"] == "failed" and by_name["bad"]["code"] == 1
    assert by_name["nan"]["status"] == "stopped"
    assert "alert" in by_name["nan"]["error"]
    alerts = [e for e in out["events"] if e["type"] == "alert"]
    nan = next(e for e in alerts if e["run_id"] == by_name["nan"]["id"])
    assert nan["severity"] == "critical" and "loss is nan" in nan["message"] and nan["choices"] == ["continue", "stop"]
    assert "not one of 'continue', 'stop'" in nan["bad_choice"]
    assert nan["resolved"]["choice"] == "stop" and nan["resolved"]["run_status"] == "stopped"
    high = next(e for e in alerts if e["run_id"] == by_name["good"]["id"])  # loss 2.0 > 1.95 on step 0
    assert high["severity"] == "info" and "loss = 2.0000 > 1.95" in high["message"]
    assert high["resolved"]["run_status"] in ("running", "finished")  # "ignore" does not stop it
    assert len(alerts) == 2  # each rule fires once per run; "bad" had no rules
    # events: alerts come before run transitions once both are queued; terminal events carry codes
    finished = [e for e in out["events"] if e["type"] == "run" and e["status"] in ("finished", "failed")]
    assert {e["code"] for e in finished} == {0, 1}
    assert out["tail"] == "step 2 loss 1.9800\n"[-16:]
    assert out["pending"] == [] and len(out["all"]) == 2
    assert "nowait" not in out  # wait(0) with nothing queued is nil
    assert out["status"]["status"] == "failed"
    # persisted: the records and logs are on disk; a new process sees the same runs and alerts
    recs = runs_on_disk(lab)
    assert [x["status"] for x in recs] == ["finished", "failed", "stopped"]
    assert (lab.root / ".moss/agent/runs" / f"{recs[0]['id']}.log").read_text().count("loss") == 3
    lab.script("seeruns", 'local l = moss.runs.list() print(#l, l[3].status, #moss.runs.alerts(), '
               'moss.runs.alerts()[1].status)')
    r2 = lab.moss("@seeruns")
    assert r2.stdout.split() == ["3", "stopped", "2", "resolved"], r2.stderr


def test_runs_need_write_access_and_valid_rules(lab):
    lab.script("deny", r'''
        local function try(f, ...) local ok, e = pcall(f, ...) return ok and "ok" or (e.kind .. ": " .. e.message) end
        print(try(moss.runs.start, { cmd = "true" }))
        moss.access.set("read-shell")
        print(try(moss.runs.start, { cmd = "true" }))
        moss.access.set("full")
        print(try(moss.runs.start, { cmd = "true", alerts = { "loss ~ 3" } }))
        print(try(moss.runs.start, { cmd = "true", alerts = { "/(?<=loss )nan/" } }))
        print(try(moss.runs.start, { cmd = "true", workdir = "../.." }))
        print(try(moss.runs.start, { cmd = "true", colour = "red" }))
        print(try(moss.runs.stop, "nosuchrun"))
    ''')
    r = lab.moss("@deny", "--allow-full")
    lines = r.stdout.splitlines()
    assert lines[0].startswith("denied: ") and "needs edit or full" in lines[0]
    assert lines[1].startswith("denied: ")
    assert lines[2].startswith("usage: ") and "alert rule" in lines[2]
    # lookbehind is not linear: RE2 refuses it, and the error says what and why in one line
    assert lines[3].startswith("usage: ") and "bad regex '(?<=loss )nan'" in lines[3] and "lookaround" in lines[3]
    assert lines[4].startswith("denied: ")
    assert lines[5].startswith("usage: ") and "unknown field(s) colour" in lines[5]
    assert lines[6].startswith("not_found: ")


def test_attached_runs_stop_when_moss_exits_detached_ones_are_adopted(lab):
    lab.write("slow.py", "import time, sys\nprint('slow start', flush=True)\ntime.sleep(float(sys.argv[1]))\n"
              "print('slow end', flush=True)\nsys.exit(int(sys.argv[2]))\n")
    lab.script("bg", r'''
        moss.access.set("full")
        local a = moss.runs.start{ cmd = "python3 slow.py 30 0", name = "attached" }
        local d = moss.runs.start{ cmd = "python3 slow.py 1.0 3", name = "detached", detach = true }
        print(a.id, d.id, moss.runs.status(a.id).pid, moss.runs.status(d.id).pid)
    ''')
    r = lab.moss("@bg", "--allow-full")
    assert r.returncode == 0, r.stderr
    aid, did, apid, dpid = r.stdout.split()
    recs = {x["id"]: x for x in runs_on_disk(lab)}
    assert recs[aid]["status"] == "stopped" and "moss exited" in recs[aid]["error"]
    assert not pid_alive(int(apid))
    assert recs[did]["status"] == "running" and pid_alive(int(dpid))
    # a later moss process adopts the detached run and sees it end with its exit code
    lab.script("adopt", r'''
        local id = moss.args[1]
        local ev = moss.runs.wait(5)
        while ev and not (ev.id == id and ev.status ~= "running") do ev = moss.runs.wait(5) end
        local r = moss.runs.status(id)
        print(r.status, r.code, moss.runs.log_tail(id, 9))
    ''')
    r2 = lab.moss("@adopt", did)
    assert r2.stdout.split() == ["failed", "3", "slow", "end"], r2.stderr


# ---- the Wild Loop ---------------------------------------------------------------------------------


@pytest.mark.needs_sandbox
def test_full_loop_explore_sweep_alert_events_analysis_complete(lab, api):
    # the runs write files: access edit (bubblewrap, the project writable), not full
    # the runs that train wait until the NaN alert was answered: its prompt comes first
    model = WildModel(lab, [sweep_tag({"lr": [0.001, 0.1, 1], "after": ANSWERED})], explore_first=True)
    r = wild(lab, api, "--output-format", "json", "find a learning rate that trains", model=model,
             full=False)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["reason"] == "answered" and result["machine"] == "wild"
    assert result["answer"] == "Analysis: lr=0.001 gives the lowest loss; larger rates fail."
    stages = model.stages()
    # exploring without a sweep re-prompts (Ralph loop) with the command's results
    assert stages[:2] == ["EXPLORING", "EXPLORING"]
    explore2 = model.calls[1][2]
    assert f"**{H['results']}**" in explore2 and "time.sleep" in explore2
    assert re.search(r"\*\*" + re.escape(H["notes"]) + r":\*\*\n- \[\w+\] lr is --lr", explore2)
    # then one event per turn: the NaN alert first, two run events, then the analysis
    assert stages[2] == "RUNNING: alert"
    assert sorted(stages[3:5]) == ["RUNNING: run failed", "RUNNING: run finished"]
    assert stages[5:] == ["ANALYZING"]
    # analysis only after every run ended and no alert was pending (the double guard)
    at = model.at_analysis[0]
    assert [x["status"] for x in at] == ["finished", "failed", "stopped"]
    assert all(a["status"] == "resolved" for x in at for a in x["alerts"])
    (nan,) = at[2]["alerts"]
    # what each prompt carries is checked by its data (ids, values, the log), not by the words
    # around them, which scripts/lib/wild/prompts.lua owns and a user may rewrite
    alert = model.calls[2][2]
    assert nan["severity"] == "critical" and re.search(r"\bcritical\b", alert, re.I)
    assert nan["id"] in alert and "loss is nan" in alert and '"continue", "stop"' in alert
    assert '<resolve_alert>{"alert_id": "' in alert and "step 0 loss nan" in alert
    for _, _detail, text in model.calls[3:5]:
        assert H["log_tail"] in text and "step 2 loss" in text
        assert "lr sweep" in text and "python3 train.py" in text  # the sweep's name and command
    finished = next(t for _, d, t in model.calls if d == "run finished")
    assert at[0]["code"] == 0 and re.search(r"\b0\b", finished) and "--lr=0.001" in finished
    # the next prompt's messages say the model's resolution took: the alert, its choice, the run's state
    notes = model.calls[3][2].split(f"**{MESSAGES}:**", 1)[1]
    assert nan["id"] in notes and '"stop"' in notes and at[2]["status"] in notes
    analysis = model.calls[5][2]
    for x in at:  # every run, with its status and its last output
        assert re.search(re.escape(x["id"]) + r".*\b" + x["status"] + r"\b", analysis), x
    assert "<promise>COMPLETE</promise>" in analysis and "`step 2 loss" in analysis
    # exploring lists the commands it may use (from the command files)
    assert "$(view" in system_text(api.requests[0].body)
    # the runs really ran the commands (with the project writable) and wrote their files
    assert (lab.root / "out-0.001.txt").exists() and (lab.root / "out-0.1.txt").exists()


def test_catastrophic_alert_regexes_from_config_and_the_model_end_promptly(lab, api):
    # /(a+)+$/ against 50 a's and a b backtracks 2^50 times on Python's re: the host's
    # monitor thread would hold a core for ever and the loop would never see the run end.
    # On RE2 each line costs time linear in its length; the rule still matches what it should.
    lab.write("evil.py", "print('a' * 50 + 'b', flush=True)\nprint('x' * 40 + 'y', flush=True)\n"
                         "print('aaaa', flush=True)\n")
    lab.write(".moss/config.toml", '[agent.wild]\nalerts = ["/(x+x+)+z/"]\n')
    model = WildModel(lab, [sweep_tag({"lr": 0.001}, base="python3 evil.py", alerts=["/(a+)+$/"])],
                      choice="continue")
    r = wild(lab, api, "--output-format", "json", "try the evil script", model=model, timeout=120)
    assert r.returncode == 0, r.stderr
    (rec,) = model.at_analysis[0]
    assert rec["status"] == "finished"
    # the model's rule fired on "aaaa" (and only there), the config's on nothing
    assert [(a["message"].split(" (run")[0], a.get("line")) for a in rec["alerts"]] == [
        ("log line matches /(a+)+$/", "aaaa")]


def test_an_alert_left_pending_is_shown_again_before_the_analysis(lab, api):
    model = WildModel(lab, [sweep_tag({"lr": 1, "hold": 0.3})], choice=None)
    r = wild(lab, api, "tune lr", model=model)
    assert r.returncode == 0, r.stderr
    assert model.stages() == ["EXPLORING", "RUNNING: alert", "RUNNING: run failed",
                              "RUNNING: alert still pending", "ANALYZING"]
    assert H["still_pending"] in model.calls[3][2]
    (rec,) = model.at_analysis[0]
    assert rec["status"] == "failed" and rec["alerts"][0]["choice"] == "continue"


def test_needs_human_blocks_with_exit_3_and_resume_continues(lab, api):
    model = WildModel(lab, [sweep_tag({"lr": 0.001})], analysis=["NEEDS_HUMAN", "COMPLETE"])
    r = wild(lab, api, "tune lr", model=model)
    assert r.returncode == 3, r.stderr
    assert "blocked" in r.stderr and "Open questions: Analysis: lr=0.001" in r.stderr
    sid = re.search(r"Resume with: moss @agent --resume (\w+)", r.stderr).group(1)
    assert model.stages() == ["EXPLORING", "RUNNING: run finished", "ANALYZING"]
    r2 = wild(lab, api, "--resume", sid, "try a smaller lr next time")
    assert r2.returncode == 0, r2.stderr
    assert r2.stdout.strip() == "Analysis: lr=0.001 gives the lowest loss; larger rates fail."
    assert model.stages()[3:] == ["ANALYZING"]
    assert "The user says: try a smaller lr next time" in model.calls[3][2]
    assert len(runs_on_disk(lab)) == 1  # the resumed session did not start the sweep again


def test_invalid_sweep_reprompts_grid_is_cut_and_continue_explores_again(lab, api):
    bad = "<sweep>{\"name\": \"x\", \"parameters\": {}}</sweep>"
    good = sweep_tag({"lr": [0.001, 0.1, 0.002]}, name="first", max_runs=2)
    model = WildModel(lab, [bad, good], analysis=["CONTINUE"])
    r = wild(lab, api, "--output-format", "json", "tune lr", model=model)
    assert r.returncode == 0, r.stderr
    stages = model.stages()
    assert stages[:2] == ["EXPLORING", "EXPLORING"]
    # the model is shown the parser's own error for its tag (scripts/lib/wild/tags.lua)
    with builtin_lua() as (rt, _root):
        refusal = rt.to_py(rt.execute(f"return {{require('lib.wild.tags').sweep({json.dumps(bad)})}}"))[2]
    assert "base_command" in refusal and refusal in model.calls[1][2]
    assert len(runs_on_disk(lab)) == 2  # the grid of 3 was cut to max_runs, and moss says so
    told = model.calls[2][2].split(f"**{MESSAGES}:**", 1)[1]
    assert re.search(r"\b3\b", told) and re.search(r"\b2\b", told) and "max_runs" in told
    assert stages[-2:] == ["ANALYZING", "EXPLORING"]
    explore3 = model.calls[-1][2]
    assert "(iteration 2)" in explore3 and f"**{H['earlier']}:**" in explore3 and '"first"' in explore3
    assert f"{H['analysis_then']}: Analysis: lr=0.001" in explore3
    # COMPLETE in EXPLORING ends the loop too (promises count in every stage)
    assert json.loads(r.stdout)["answer"] == "nothing left to try"


@pytest.mark.needs_sandbox
def test_complete_is_an_answer_the_validation_gate_judges(lab, api):
    """<promise>COMPLETE</promise> ends the loop `answered` only as any answer does: when the
    project's validation (configured here, failing) passes. The first COMPLETE goes back with
    the failure; the second, validation still failing, ends `unvalidated`, exit 1."""
    lab.write(".moss/config.toml", """
        [agent]
        validate_commands = [ { name = "loss", run = "test -f out-0.001.txt" } ]
    """)
    api.push(*["<promise>COMPLETE</promise> the loss is low enough"] * 3)
    r = wild(lab, api, "--output-format", "json", "tune lr", full=False)
    assert r.returncode == 1, r.stderr
    out = json.loads(r.stdout)
    assert out["reason"] == "unvalidated" and out["success"] is False
    assert out["validation"]["step"] == "loss" and out["turns"] == 2


def test_max_time_ends_cleanly(lab, api):
    lab.write(".moss/config.toml", "[agent.wild]\nmax_time_s = 2\n")
    model = WildModel(lab, [sweep_tag({"lr": 0.001, "sleep": 20})])
    start = time.monotonic()
    r = wild(lab, api, "tune lr", model=model)
    elapsed = time.monotonic() - start
    assert r.returncode == 1, r.stderr
    assert "stopped: the Wild Loop's time limit ([agent.wild] max_time_s) passed" in r.stderr
    assert "Final report:\nReport: the run was still going" in r.stderr
    (session,) = (lab.root / ".moss/agent").glob("session-*.json")
    assert json.loads(session.read_text())["reason"] == "max_time"
    # the limit is checked before every prompt and while waiting: one last prompt asks for a report
    assert model.stages() == ["EXPLORING", "TIME LIMIT"]
    assert elapsed < 10
    for rec in runs_on_disk(lab):  # (none if the limit passed before the sweep could start)
        assert rec["status"] == "stopped" and not pid_alive(rec["pid"])


def test_max_turns_limits_iterations(lab, api):
    model = WildModel(lab, [sweep_tag({"lr": [0.001, 0.1]})])
    r = wild(lab, api, "--max-turns", "2", "--output-format", "json", "tune lr", model=model)
    assert r.returncode == 1
    assert json.loads(r.stdout)["reason"] == "max_turns"
    assert len(model.calls) == 2


def logged(project, event: str) -> list[dict]:
    """The records of `event` in the project's session logs so far (whole lines only: moss may
    be writing the next one)."""
    d = project.root / ".moss" / "agent" / "logs"
    recs = [json.loads(ln) for f in sorted(d.glob("*.jsonl")) for ln in f.read_text().split("\n")[:-1]
            if ln.strip()] if d.is_dir() else []
    return [r for r in recs if r.get("event") == event]


def start_waiting_loop(lab, api):
    """A Wild Loop whose one run sleeps: returns the moss process once it waits for that run
    (its session log says `wild_waiting`, written as the loop starts waiting for the run's next
    event, while the run is still going)."""
    model = WildModel(lab, [sweep_tag({"lr": 0.001, "sleep": 30})])
    api.push(*([model] * 5))
    p = lab.popen("@agent", "--provider", "openai", "--machine", "wild", "-n", "--allow-full", "tune lr",
                  env=api.env())
    deadline = time.monotonic() + 20
    waiting: list[dict] = []
    while time.monotonic() < deadline and p.poll() is None:
        waiting = logged(lab, "wild_waiting")
        if waiting:
            break
        time.sleep(0.05)
    recs = runs_on_disk(lab)
    if not (waiting and recs and recs[0]["status"] == "running"):
        p.kill()
        raise AssertionError(p.stderr.read() if p.poll() is not None else (waiting, recs))
    assert waiting[0]["going"] == 1 and waiting[0]["sweep"] == "lr sweep"
    return p


def test_ctrl_c_while_waiting_stops_promptly_and_stops_runs(lab, api):
    p = start_waiting_loop(lab, api)
    try:
        start = time.monotonic()
        p.send_signal(signal.SIGINT)
        p.wait(timeout=10)
        elapsed = time.monotonic() - start
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, p.stderr.read()
    assert elapsed < 1.5, f"took {elapsed:.2f}s"
    (rec,) = runs_on_disk(lab)
    assert rec["status"] == "stopped" and not pid_alive(rec["pid"])


def test_moss_say_stop_while_waiting_for_runs_ends_the_loop_resumably(lab, api):
    """Stopping the loop goes through the live-session inbox, also while RUNNING waits for runs."""
    p = start_waiting_loop(lab, api)
    try:
        start = time.monotonic()
        said = lab.moss("say", "stop")
        assert said.returncode == 0, said.stderr
        p.wait(timeout=15)
        elapsed = time.monotonic() - start
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 3, p.stderr.read()  # stopped, as asked: resumable
    assert elapsed < 5, f"took {elapsed:.2f}s"
    sid = next((lab.root / ".moss/agent").glob("session-*.json")).stem[len("session-"):]
    assert json.loads((lab.root / f".moss/agent/session-{sid}.json").read_text())["reason"] == "stopped"


# ---- alert sources: spikes, manual, scripts, the LLM judge; de-duplication ---------------------------

SPIKY = r'''
import os, sys, time
for v in (1.0, 1.1, 0.9, 1.0, 5.0, 6.0):
    print(f"step loss={v}", flush=True)
    time.sleep(0.05)
print("waiting", flush=True)
deadline = time.time() + 20
while time.time() < deadline and not os.path.exists("go"):
    time.sleep(0.05)
'''

ALERT_SCRIPT = r'''
moss.access.set("full")
local r = moss.runs.start{ cmd = "python3 spiky.py", name = "spiky", alerts = { "loss spike 3", "loss > 100" } }
print(r.id)
local events = {}
local function take(pred, t)
  local deadline = os.time() + t
  while os.time() <= deadline do
    local ev = moss.runs.wait(1)
    if ev then
      events[#events + 1] = ev
      if pred(ev) then return ev end
    end
  end
end
local spike = take(function(ev) return ev.type == "alert" end, 15)
-- a script raises its own alert; the same message again is not a second alert
local mine = moss.runs.alert(r.id, { severity = "critical", message = "my own check failed" })
local again = moss.runs.alert(r.id, { severity = "critical", message = "my own check failed" })
local bad = { pcall(moss.runs.alert, r.id, { message = "x", severity = "loud" }) }
-- a person's alert arrives through the trigger file while this process watches the run
local manual = take(function(ev) return ev.type == "alert" and ev.message:find("from a person", 1, true) end, 30)
moss.fs.write("go", "")
take(function(ev) return ev.type == "run" and ev.status == "finished" end, 20)
print(moss.json.encode({ spike = spike, mine = mine, again = again, bad = tostring(bad[2]), manual = manual,
  alerts = moss.runs.alerts{ run_id = r.id } }))
'''


def test_spike_script_and_manual_alerts_with_deduplication(lab):
    lab.write("spiky.py", SPIKY)
    lab.script("alerts", ALERT_SCRIPT)
    p = lab.popen("@alerts", "--allow-full")
    try:
        rid = p.stdout.readline().strip()
        assert re.fullmatch(r"[0-9a-f]{12}", rid), p.stderr.read() if p.poll() is not None else rid
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # wait for the spike (the script raises its own alert after it)
            recs = {x["id"]: x for x in runs_on_disk(lab)}
            if len(recs.get(rid, {}).get("alerts", [])) >= 2:
                break
            time.sleep(0.1)
        # `moss runs alert` while another moss process watches the run: handed over, then shown there
        r = lab.moss("runs", "alert", rid[:6], "look at this from a person", "--severity", "critical")
        assert r.returncode == 0, r.stderr
        assert "handed to the moss process watching it" in r.stdout
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    res = json.loads(out.splitlines()[-1])
    spike = res["spike"]
    assert spike["severity"] == "warning" and "loss = 5.0 is 5.0x its running mean 1" in spike["message"]
    assert res["mine"]["source"] == "script" and res["mine"]["severity"] == "critical"
    assert res["again"]["duplicate"] is True and res["again"]["id"] == res["mine"]["id"]
    assert "severity must be one of info, warning, critical" in res["bad"]
    assert res["manual"]["severity"] == "critical"
    by_source = {}
    for a in res["alerts"]:
        by_source.setdefault(a["source"], []).append(a)
    # one spike alert (6.0 is a spike too, but a rule fires once per run), one script, one manual
    assert {k: len(v) for k, v in by_source.items()} == {"rule": 1, "script": 1, "manual": 1}
    assert "look at this from a person" in by_source["manual"][0]["message"]


def test_moss_runs_commands_list_show_logs_alert_stop(lab):
    lab.write("slow.py", "import time\nprint('slow start loss 1.5', flush=True)\ntime.sleep(60)\n")
    lab.script("bg", r'''
        moss.access.set("full")
        local d = moss.runs.start{ cmd = "python3 slow.py", name = "long one", detach = true }
        local deadline = os.time() + 10
        while os.time() < deadline and not moss.runs.log_tail(d.id, 100):find("slow start") do moss.runs.wait(0.2) end
        print(d.id, moss.runs.status(d.id).pid)
    ''')
    r = lab.moss("@bg", "--allow-full")
    assert r.returncode == 0, r.stderr
    rid, pid = r.stdout.split()
    r = lab.moss("runs", "list")
    assert r.returncode == 0, r.stderr
    header, row = r.stdout.splitlines()
    assert header.split("\t") == ["id", "name", "executor", "status", "code", "duration", "alerts", "started"]
    assert row.split("\t")[:4] == [rid, "long one", "local (none)", "running"]
    r = lab.moss("runs", "logs", rid)
    assert r.stdout == "slow start loss 1.5\n"
    # no moss process watches the detached run: the alert is recorded at once
    r = lab.moss("runs", "alert", rid, "the loss looks stuck")
    assert r.returncode == 0 and re.match(r"alert [0-9a-f]{12} raised on " + rid, r.stdout), r.stdout + r.stderr
    r = lab.moss("runs", "show", rid)
    assert "python3 slow.py" in r.stdout and "the loss looks stuck (run long one)" in r.stdout
    assert re.search(r"\twarning\tmanual\tpending\t", r.stdout)
    r = lab.moss("runs", "stop", rid)
    assert r.returncode == 0 and r.stdout.strip() == f"{rid} long one: stopped", r.stdout + r.stderr
    assert not pid_alive(int(pid))
    (rec,) = runs_on_disk(lab)
    assert rec["status"] == "stopped" and rec["error"] == "stopped with moss runs stop"
    r = lab.moss("runs", "show", "nosuch")
    assert r.returncode == 2 and "no run with id 'nosuch'" in r.stderr


class JudgeModel(WildModel):
    """Also the LLM judge: its calls carry the label wild/judge."""

    def __init__(self, *a, verdict="ALERT critical: the loss stopped improving", **kw):
        super().__init__(*a, **kw)
        self.verdict = verdict
        self.judged: list[str] = []

    def __call__(self, body):
        from fakeapi import state_of

        if state_of(body) == "judge":
            self.judged.append(last_user_text(body))
            return self.verdict
        return super().__call__(body)


def test_llm_judge_raises_an_alert_rate_limited(lab, api):
    lab.write(".moss/config.toml", "[agent.wild.judge]\nevery_s = 0\nmax_calls = 1\n")
    model = JudgeModel(lab, [sweep_tag({"lr": 0.001, "sleep": 1.0})])
    r = wild(lab, api, "tune lr", model=model)
    assert r.returncode == 0, r.stderr
    # one judge call (max_calls), on a log it was shown; its alert is shown as the judge's
    assert len(model.judged) == 1 and "args ['--lr=0.001'" in model.judged[0]  # the run's own log
    assert model.stages()[:2] == ["EXPLORING", "RUNNING: alert"]
    alert = model.calls[1][2]
    assert SOURCES["judge"] in alert and "judge: the loss stopped improving" in alert
    (rec,) = runs_on_disk(lab)
    assert rec["status"] == "stopped"
    assert [(a["source"], a["severity"], a["choice"]) for a in rec["alerts"]] == [("judge", "critical", "stop")]


def test_judge_off_by_default_and_ok_raises_nothing(lab, api):
    model = JudgeModel(lab, [sweep_tag({"lr": 0.001})])
    r = wild(lab, api, "tune lr", model=model)
    assert r.returncode == 0, r.stderr
    assert model.judged == [] and model.stages() == ["EXPLORING", "RUNNING: run finished", "ANALYZING"]
    lab.script("jp", r'''
        local j = require("lib.wild.judge")
        print(moss.json.encode({ ok = j.parse("OK") or false, a = j.parse("ALERT critical: it diverged"),
          b = j.parse("**ALERT** (info): slow"), c = j.parse("hmm\nALERT loud: x") }))
    ''')
    out = json.loads(lab.moss("@jp").stdout)
    assert out == {"ok": False, "a": {"severity": "critical", "message": "it diverged"},
                   "b": {"severity": "info", "message": "slow"}, "c": {"severity": "warning", "message": "x"}}


# ---- the ray executor without a cluster: access and trust --------------------------------------------

def test_ray_executor_needs_full_access(lab, api):
    lab.user_file("config.toml", '[agent.wild]\nexecutor = "ray"\nray_address = "http://127.0.0.1:9"\n')
    model = WildModel(lab, [sweep_tag({"lr": 0.001})])
    r = wild(lab, api, "tune lr", model=model, full=False)
    assert r.returncode == 2, r.stderr
    assert "needs full access: pass --allow-full" in r.stderr and model.calls == []
    lab.script("rayedit", r'''
        moss.access.set("edit")
        local ok, e = pcall(moss.runs.start, { cmd = "true", executor = "ray", address = "http://127.0.0.1:9" })
        print(e.kind, e.message)
    ''')
    r = lab.moss("@rayedit")
    assert r.stdout.startswith("denied\t") and "outside moss's sandbox" in r.stdout and "--allow-full" in r.stdout
    # with full access and no cluster there, the sweep is refused and the model is told why
    r = wild(lab, api, "--max-turns", "2", "tune lr")  # the same model, its answers already queued
    assert model.stages() == ["EXPLORING", "EXPLORING"], r.stderr
    told = model.calls[1][2].split(f"**{MESSAGES}:**", 1)[1]  # moss's notes to the model
    assert "cannot reach the Ray cluster at http://127.0.0.1:9" in told
    assert runs_on_disk(lab) == []


def test_ray_address_and_executor_from_a_project_need_trust(lab):
    from moss.trust import scan_config

    items, _ = scan_config({"agent": {"wild": {"executor": "ray", "ray_address": "http://attacker.invalid:8265"}},
                            "x": {"dashboard_address": "10.0.0.1:1"}})
    kinds = {i.key: i.kind for i in items}
    assert kinds == {"agent.wild.executor": "setting", "agent.wild.ray_address": "endpoint",
                     "x.dashboard_address": "endpoint"}
    lab.write(".moss/config.toml", '[agent.wild]\nexecutor = "ray"\nray_address = "http://attacker.invalid:8265"\n'
              "max_runs = 3\n")
    lab.user_file("scripts/seecfg.lua", "local w = moss.config.agent.wild print(w.executor, w.ray_address, w.max_runs)")
    lab.trusted = False
    r = lab.moss("trust", input="")
    assert "http://attacker.invalid:8265" in next(ln for ln in r.stdout.splitlines() if "agent.wild.ray_address" in ln)
    r = lab.moss("@seecfg")  # untrusted: the endpoint and the executor are ignored, max_runs is not
    assert r.stdout.split() == ["nil", "nil", "3"], r.stderr
    assert "ray_address" in r.stderr
    lab.trusted = True
    r = lab.moss("@seecfg")
    assert r.stdout.split() == ["ray", "http://attacker.invalid:8265", "3"]

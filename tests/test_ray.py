"""The Wild Loop and moss.runs on a real Ray cluster: one private head node on 127.0.0.1 for
the whole module (tests/rayhead.py: hardened, every port chosen, stopped by PID).

What a user notices: a sweep's runs become Ray jobs and finish with their metrics read from
the jobs' logs; a NaN in a job's log is an alert the model resolves by stopping the job; a
job outlives moss and a resumed session picks it up where it is; `moss runs` shows and stops
jobs. Deselect with `-m "not ray"`; skipped when Ray is not installed (the `ray` extra).
"""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.request

import pytest
from rayhead import RayHead, ray_importable
from test_wild import TRAIN, WildModel, runs_on_disk, sweep_tag, wild

pytestmark = [
    pytest.mark.ray,
    pytest.mark.skipif(not ray_importable(), reason="Ray is not installed: pip install -e '.[ray]' (the ray extra)"),
]


@pytest.fixture(scope="module")
def head():
    h = RayHead(num_cpus=2)
    h.start()
    gcs, raylet = h.pids("gcs_server"), h.pids("raylet")
    assert gcs and raylet, h.known
    yield h
    left = h.stop()
    assert left == [], f"still running after the head was stopped: {left}"
    for pid in gcs + raylet:  # by PID: what this fixture started is gone
        assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"


def ray_status(head, sid: str) -> dict:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"{head.address}/api/jobs/{sid}", timeout=10) as r:
        return json.loads(r.read())


@pytest.fixture
def raylab(project, head):
    project.write("train.py", TRAIN)
    project.user_file("config.toml", f'[agent.wild]\nexecutor = "ray"\nray_address = "{head.address}"\n')
    return project


def test_sweep_2x2_runs_as_ray_jobs_with_metrics_from_their_logs(raylab, api, head):
    model = WildModel(raylab, [sweep_tag({"lr": [0.001, 0.002], "batch": [16, 32]},
                                         resources={"num_cpus": 1})])
    t0 = time.monotonic()
    r = wild(raylab, api, "--output-format", "json", "find a learning rate", model=model, timeout=150)
    elapsed = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["reason"] == "answered"
    stages = model.stages()
    assert stages[0] == "EXPLORING" and stages[-1] == "ANALYZING"
    assert sorted(stages[1:-1]) == ["RUNNING: run finished"] * 4
    # the run events show the metrics the jobs printed, copied from the cluster's job logs
    for _, _detail, text in model.calls[1:5]:
        assert "step 2 loss" in text and "exit code 0" in text
    analysis = model.calls[-1][2]
    assert "4 passed (finished), 0 failed, 0 stopped, of 4 runs" in analysis
    recs = runs_on_disk(raylab)
    assert len(recs) == 4
    for rec in recs:
        assert rec["executor"] == "ray" and rec["status"] == "finished" and rec["code"] == 0
        assert rec["ray"]["num_cpus"] == 1 and rec["ray"]["working_dir"].startswith("gcs://_ray_pkg_")
        job = ray_status(head, rec["ray"]["submission_id"])
        assert job["status"] == "SUCCEEDED" and job["entrypoint"] == rec["cmd"]
        log = (raylab.root / rec["log"]).read_text()
        assert log.count(" loss ") == 3 and "step 2 loss" in log
    assert {r["cmd"] for r in recs} == {f"python3 train.py --lr={lr} --batch={b}"
                                        for lr in (0.001, 0.002) for b in (16, 32)}
    print(f"2x2 sweep on Ray: {elapsed:.1f} s end to end")


def test_nan_in_a_ray_job_is_an_alert_and_stop_stops_the_job(raylab, api, head):
    model = WildModel(raylab, [sweep_tag({"lr": 1, "hold": 120})])
    r = wild(raylab, api, "tune lr", model=model, timeout=120)
    assert r.returncode == 0, r.stderr
    assert model.stages() == ["EXPLORING", "RUNNING: alert", "ANALYZING"]
    alert = model.calls[1][2]
    assert "severity **CRITICAL**" in alert and "loss is nan" in alert and "step 0 loss nan" in alert
    (rec,) = runs_on_disk(raylab)
    assert rec["status"] == "stopped" and "resolved with 'stop'" in rec["error"]
    assert rec["alerts"][0]["choice"] == "stop"
    assert ray_status(head, rec["ray"]["submission_id"])["status"] == "STOPPED"
    assert "0 passed (finished), 0 failed, 1 stopped, of 1 runs" in model.calls[2][2]


def test_ray_jobs_outlive_moss_and_moss_runs_shows_logs_and_stops_them(raylab, head):
    raylab.write("slow.py", "import time\nprint('slow start loss 1.5', flush=True)\ntime.sleep(120)\n")
    raylab.script("bg", f'''
        moss.access.set("full")
        local r = moss.runs.start{{ cmd = "python3 slow.py", name = "long job", executor = "ray",
          address = "{head.address}", resources = {{ num_cpus = 1 }} }}
        print(r.id)
    ''')
    r = raylab.moss("@bg", "--allow-full")
    assert r.returncode == 0, r.stderr
    rid = r.stdout.strip()
    (rec,) = runs_on_disk(raylab)
    sid = rec["ray"]["submission_id"]
    deadline = time.monotonic() + 60
    while ray_status(head, sid)["status"] != "RUNNING" and time.monotonic() < deadline:
        time.sleep(0.3)
    assert ray_status(head, sid)["status"] == "RUNNING"  # moss has exited; the job goes on
    deadline = time.monotonic() + 30
    while True:
        r = raylab.moss("runs", "logs", rid)
        if "slow start" in r.stdout or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert "slow start loss 1.5" in r.stdout, r.stdout + r.stderr
    r = raylab.moss("runs", "list")
    row = next(ln for ln in r.stdout.splitlines() if ln.startswith(rid))
    assert row.split("\t")[1:4] == ["long job", "ray (1 CPU)", "running"]
    r = raylab.moss("runs", "show", rid)
    assert sid in r.stdout and head.address in r.stdout
    t0 = time.monotonic()
    r = raylab.moss("runs", "stop", rid)
    assert r.returncode == 0 and r.stdout.strip() == f"{rid} long job: stopped", r.stdout + r.stderr
    assert ray_status(head, sid)["status"] == "STOPPED"
    print(f"moss runs stop of a Ray job: {time.monotonic() - t0:.1f} s")
    (rec,) = runs_on_disk(raylab)
    assert rec["status"] == "stopped" and rec["error"] == "stopped with moss runs stop"


def test_resume_reattaches_to_a_ray_job_started_before_moss_was_killed(raylab, api, head):
    model = WildModel(raylab, [sweep_tag({"lr": 0.001, "sleep": 3})])
    api.push(*([model] * 10))
    p = raylab.popen("@agent", "--provider", "openai", "--machine", "wild", "-n", "--allow-full", "tune lr",
                     env=api.env())
    try:
        deadline = time.monotonic() + 60
        rec = None
        while time.monotonic() < deadline:
            recs = runs_on_disk(raylab)
            if recs and recs[0]["status"] == "running":
                rec = recs[0]
                break
            time.sleep(0.1)
        assert rec is not None, p.stderr.read() if p.poll() is not None else runs_on_disk(raylab)
        p.send_signal(signal.SIGKILL)  # no clean-up at all
        p.wait(timeout=10)
    finally:
        if p.poll() is None:
            p.kill()
    sid = rec["ray"]["submission_id"]
    assert ray_status(head, sid)["status"] in ("RUNNING", "SUCCEEDED")  # the job did not die with moss
    assert model.stages() == ["EXPLORING"]
    r = wild(raylab, api, "--resume", timeout=90)
    assert r.returncode == 0, r.stderr
    # the resumed loop re-attached: it saw the job finish and analysed it; no second sweep
    assert model.stages() == ["EXPLORING", "RUNNING: run finished", "ANALYZING"]
    assert "step 2 loss 1.9800" in model.calls[1][2]
    (rec,) = runs_on_disk(raylab)
    assert rec["status"] == "finished" and rec["code"] == 0
    log = (raylab.root / rec["log"]).read_text()
    assert [ln for ln in log.splitlines() if " loss " in ln] == ["step 0 loss 2.0000", "step 1 loss 1.9900",
                                                                  "step 2 loss 1.9800"]
    (log,) = (raylab.root / ".moss/agent/logs").glob("*.jsonl")  # the session's log says so
    adopted = [json.loads(ln) for ln in log.read_text().splitlines() if '"run_adopted"' in ln]
    assert len(adopted) == 1 and adopted[0]["executor"] == "ray" and adopted[0]["status"] == "running", adopted

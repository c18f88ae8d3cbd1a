"""`moss eval --executor ray`: each attempt one Ray job on a private head on 127.0.0.1
(tests/rayhead.py: hardened, every port chosen, stopped by PID), with the fake model.

The head is started the way an operator would start a cluster for moss: the model's key in the
nodes' environment (a distinctive fake one, which the fake API server insists on), `python3` on
their PATH able to import moss's dependencies. The driver holds the same key in its own
environment, and the stories check that it never reaches the cluster's job list or a job's log.

What a user notices: the same outcomes as `--executor local`; a driver killed mid-run and run
again with `--resume` finishes with every attempt run once (the head's job list says so); the
budget stops the jobs; a job stopped on the cluster is tried again and then counted as an
infrastructure failure, not the agent's. Deselect with `-m "not ray"`.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import FIXTURES, needs_bwrap, sigkill_when
from fakeapi import FakeAPI
from rayhead import RayHead, ray_importable
from test_eval import model, rows_of

KEY = "sk-ant-fleet-7Q2vX9kLmN4pR8sT1uW3yZ5b"  # fake, distinctive: found anywhere, it leaked
ray_only = [pytest.mark.ray, pytest.mark.slow,
            pytest.mark.skipif(not ray_importable(), reason="Ray is not installed: pip install -e '.[ray]'")]


class KeyedHead(RayHead):
    """A head whose nodes hold the model's key and this interpreter's folder first on PATH (so
    a job's `python3` has moss's dependencies; moss itself arrives with each job)."""

    def env(self) -> dict:
        env = super().env()
        env["ANTHROPIC_API_KEY"] = KEY
        env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
        return env


@pytest.fixture(scope="module")
def head():
    if not ray_importable():
        pytest.skip("Ray is not installed")
    h = KeyedHead(num_cpus=2)
    try:
        h.start()
    except BaseException:
        h.stop()
        raise
    yield h
    assert h.stop() == [], "the head's processes outlived it"


@pytest.fixture
def keyed_api():
    with FakeAPI(api_key=KEY) as server:
        yield server


def driver_env(api) -> dict:
    return {**api.env(), "ANTHROPIC_API_KEY": KEY}


def jobs_of(head, run: str | None = None) -> list[dict]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"{head.address}/api/jobs/", timeout=20) as r:
        jobs = json.loads(r.read())
    return [j for j in jobs if run is None or (j.get("metadata") or {}).get("moss_eval") == run]


def job_logs(head, sid: str) -> str:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"{head.address}/api/jobs/{sid}/logs", timeout=20) as r:
        return json.loads(r.read())["logs"]


def post_stop(head, sid: str) -> None:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    req = urllib.request.Request(f"{head.address}/api/jobs/{sid}/stop", method="POST", data=b"")
    with opener.open(req, timeout=20) as r:
        r.read()


def run_id(out: Path) -> str:
    return json.loads((out / "ray.json").read_text())["run"]


def fleet_project(project, tasks=("count-functions", "fix-add", "fix-mul")):
    """The fixture suite cut to `tasks`, the project's model "good"; a `lazy` variant beside it."""
    shutil.copytree(FIXTURES / "evalsuite", project.root / "suite")
    toml = (project.root / "suite/suite.toml").read_text()
    head_, *blocks = toml.split("[[task]]")
    kept = [b for b in blocks if any(f'id = "{t}"' in b for t in tasks)]
    (project.root / "suite/suite.toml").write_text(head_ + "".join("[[task]]" + b for b in kept))
    project.write(".moss/config.toml", '[llm]\nprovider = "anthropic"\nmodel = "good"\n')
    project.write("variants/lazy/config.toml", '[llm]\nmodel = "lazy"\n')
    return project


def outcomes(rows) -> dict:
    return {(r["task"], r["cell"], r["trial"]): (r["passed"], r["reason"], (r.get("check") or {}).get("passed"))
            for r in rows}


@needs_bwrap
@pytest.mark.ray
@pytest.mark.slow
def test_six_attempts_as_ray_jobs_end_as_they_do_locally_and_no_job_holds_the_key(project, keyed_api, head):
    """Three tasks in two cells (the project's good model, a lazy variant): six attempts, each a
    Ray job running the driver's moss (shipped with the job, not the node's), give the same
    verdicts as `--executor local`; the rows come back from the jobs' logs with their session
    logs. The cluster's job list (entrypoints, runtime envs, metadata) and every job's log hold
    no trace of the key the driver has in its environment; the jobs reached the model with the
    key the nodes hold."""
    fleet_project(project)
    keyed_api.push(*[model] * 400)
    words = ("eval", "suite", "--variant", "base=", "--variant", f"lazy={project.root / 'variants/lazy'}", "--json")
    local = project.root / "local"
    r = project.moss(*words, "-j", "2", "--out", str(local), env=driver_env(keyed_api), timeout=600)
    assert r.returncode == 0, r.stderr
    out = project.root / "onray"
    t0 = time.monotonic()
    r = project.moss(*words, "-j", "2", "--executor", "ray", "--ray-address", head.address, "--out", str(out),
                     env=driver_env(keyed_api), timeout=600)
    print(f"6 attempts on Ray: {time.monotonic() - t0:.1f} s")
    assert r.returncode == 0, r.stderr
    rows = rows_of(out)
    assert len(rows) == 6
    assert outcomes(rows) == outcomes(rows_of(local))
    assert sum(1 for row in rows if row["passed"]) == 3  # the good cell passes, the lazy one does not
    for row in rows:
        assert row["ray"]["submission_id"].startswith(f"moss-eval-{run_id(out)}-")
        assert "_ray_pkg_" in row["ray"]["moss"] and "/work/main" not in row["ray"]["moss"]
        assert Path(row["log"]).is_file() and Path(row["log"]).parent == out / "logs"
        assert json.loads(Path(row["log"]).read_text().splitlines()[0])  # the session's own log, back home
    jobs = jobs_of(head, run_id(out))
    assert len(jobs) == 6 and all(j["status"] == "SUCCEEDED" for j in jobs)
    assert {j["metadata"]["moss_attempt"] for j in jobs} == {row["key"] for row in rows}
    listing = json.dumps(jobs_of(head))
    assert KEY not in listing and KEY[-12:] not in listing
    for j in jobs:
        log = job_logs(head, j["submission_id"])
        assert "MOSS-ATTEMPT" in log and KEY not in log and KEY[-12:] not in log
    keys = {(r.headers.get("x-api-key") or r.headers.get("authorization", "")).removeprefix("Bearer ")
            for r in keyed_api.requests}
    assert keys == {KEY}  # the server takes no other key: the jobs' requests carried the nodes' one

"""`moss eval --executor ray`: each attempt one Ray job on a private head on 127.0.0.1
(tests/rayhead.py: hardened, every port chosen, stopped by PID), with the fake model.

The head is started the way an operator would start a cluster for moss: the model's key in the
nodes' environment (a distinctive fake one, which the fake API server insists on), `python3` on
their PATH able to import moss's dependencies. The driver holds the same key in its own
environment, and the stories check that it never reaches the cluster's job list or a job's log.

What a user notices: the same outcomes as `--executor local`; a driver killed mid-run and run
again with `--resume` finishes with every attempt run once (the head's job list says so); the
budget stops the jobs; a job stopped on the cluster is tried again and then counted as an
infrastructure failure, not the agent's; a node may hold the key in a credentials file instead;
`moss batch --executor ray` gives the outcomes and patches a local batch gives.
Deselect those with `-m "not ray"`. The last stories need no head: a project's `[eval]
executor` and `ray_address` wait for trust, and bad options are one line.
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
from conftest import FIXTURES, STORY_PROVIDER, sigkill_when
from fakeapi import FakeAPI
from rayhead import RayHead, ray_importable
from test_eval import model, rows_of

KEY = "sk-fleet-7Q2vX9kLmN4pR8sT1uW3yZ5b"  # fake, distinctive: found anywhere, it leaked
FILE_KEY = "sk-ant-fleetfile-Hq8Zr3Vn6Bw1Lk5Tp9Xc"  # the other one, only in the nodes' credentials file


class KeyedHead(RayHead):
    """A head whose nodes hold the model's key (OpenAI's: the stories' agents run on the openai
    SDK, see STORY_PROVIDER) and this interpreter's folder first on PATH (so a job's `python3`
    has moss's dependencies; moss itself arrives with each job), and a credentials file
    (MOSS_CREDENTIALS_FILE) with an Anthropic key."""

    def env(self) -> dict:
        env = super().env()
        env["OPENAI_API_KEY"] = KEY
        creds = self.base / "credentials"
        creds.write_text(f"# placed by the operator\nANTHROPIC_API_KEY={FILE_KEY}\n")
        creds.chmod(0o600)
        env["MOSS_CREDENTIALS_FILE"] = str(creds)
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
    return {**api.env(), "OPENAI_API_KEY": KEY}


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


def keys_sent(api) -> set[str]:
    """The keys the requests to `api` carried (as X-Api-Key, or as a bearer token)."""
    return {(r.headers.get("x-api-key") or r.headers.get("authorization", "")).removeprefix("Bearer ")
            for r in api.requests}


def run_id(out: Path) -> str:
    return json.loads((out / "ray.json").read_text())["run"]


def fleet_project(project, tasks=("count-functions", "fix-add", "fix-mul")):
    """The fixture suite cut to `tasks`, the project's model "good"; a `lazy` variant beside it."""
    shutil.copytree(FIXTURES / "evalsuite", project.root / "suite")
    toml = (project.root / "suite/suite.toml").read_text()
    head_, *blocks = toml.split("[[task]]")
    kept = [b for b in blocks if any(f'id = "{t}"' in b for t in tasks)]
    (project.root / "suite/suite.toml").write_text(head_ + "".join("[[task]]" + b for b in kept))
    project.write(".moss/config.toml", f'[llm]\nprovider = "{STORY_PROVIDER}"\nmodel = "good"\n')
    project.write("variants/lazy/config.toml", '[llm]\nmodel = "lazy"\n')
    return project


def outcomes(rows) -> dict:
    """Per attempt: its verdict, the agent's outcome, the check, and the patch its agent made."""
    return {(r["task"], r["cell"], r["trial"]): (r["passed"], r["reason"], (r.get("check") or {}).get("passed"),
                                                 r.get("patch"))
            for r in rows}


@pytest.mark.needs_sandbox
@pytest.mark.ray
@pytest.mark.slow
def test_six_attempts_as_ray_jobs_end_as_they_do_locally_and_no_job_holds_the_key(project, keyed_api, head):
    """Three tasks in two cells (the project's good model, a lazy variant): six attempts, each a
    Ray job running the driver's moss (shipped with the job, not the node's), give the same
    verdicts and the same patches as `--executor local`; the rows come back from the jobs' logs with their session
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
    assert outcomes(rows) == outcomes(rows_of(local))  # the patches too: made on the node, the same diff
    assert any("+    return a + b" in (row.get("patch") or "") for row in rows)
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
    travelled = {name for j in jobs_of(head) for name in (j.get("runtime_env") or {}).get("env_vars", {})}
    assert travelled <= {"ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "PYTHONUNBUFFERED"}, travelled
    assert keys_sent(keyed_api) == {KEY}  # the server takes no other key: the jobs' requests carried the nodes' one


@pytest.mark.needs_sandbox
@pytest.mark.ray
@pytest.mark.slow
def test_a_job_can_take_its_key_from_the_nodes_credentials_file(project, head):
    """The driver holds no key at all; the attempt's agent (provider anthropic: the Ray story
    whose agent runs on the anthropic SDK) reaches a server that takes only the key in the file
    the operator placed on the nodes (MOSS_CREDENTIALS_FILE), and neither the job list nor the
    job's log shows it. The task's prompt is longer than a command line should carry (40 KB):
    the attempt travels as a package of its own."""
    fleet_project(project, tasks=("count-functions",))
    toml = project.root / "suite/suite.toml"
    toml.write_text(toml.read_text().replace("Answer with the number.", "Answer with the number. " + "Pad. " * 8000))
    project.write(".moss/config.toml", '[llm]\nprovider = "anthropic"\nmodel = "good"\n')
    with FakeAPI(api_key=FILE_KEY) as api:
        api.push(*[model] * 50)
        out = project.root / "results"
        r = project.moss("eval", "suite", "--executor", "ray", "--ray-address", head.address, "--out", str(out),
                         env={"ANTHROPIC_BASE_URL": api.anthropic_url}, timeout=300)
        assert r.returncode == 0, r.stderr
        [row] = rows_of(out)
        assert row["passed"] is True, row
        assert keys_sent(api) == {FILE_KEY}
    [job] = jobs_of(head, run_id(out))
    assert FILE_KEY not in json.dumps(jobs_of(head)) and FILE_KEY not in job_logs(head, job["submission_id"])
    assert job["entrypoint"].startswith("python3 -P -m moss.eval.remote @_ray_pkg_") and len(job["entrypoint"]) < 200


def task_of(body) -> str:
    text = json.dumps(body)
    return next((t for marker, t in (("How many functions", "count-functions"), ("add() returns", "fix-add"),
                                     ("mul() returns", "fix-mul")) if marker in text), "?")


@pytest.mark.needs_sandbox
@pytest.mark.ray
@pytest.mark.slow
def test_a_driver_killed_mid_run_resumes_and_every_attempt_runs_once(project, keyed_api, head):
    """The driver is SIGKILLed once the first attempt is recorded, while fix-add's job waits for
    the model and fix-mul's has been submitted. Both jobs go on without it; the same command
    with `--resume` re-attaches to them and collects their rows, and submits nothing new: the
    head's job list holds exactly one job per attempt, and no task's agent asked the model again
    after the kill."""
    fleet_project(project)
    release = threading.Event()
    asked: list[str] = []

    def held(body):
        t = task_of(body)
        asked.append(t)
        if t == "fix-add":
            release.wait(180)
        return model(body)

    keyed_api.push(*[held] * 400)
    out = project.root / "results"
    words = ("eval", "suite", "-j", "2", "--executor", "ray", "--ray-address", head.address)
    p = project.popen(*words, "--out", str(out), env=driver_env(keyed_api))
    try:
        sigkill_when(p, lambda: len(rows_of(out)) >= 1 and (out / "ray.json").exists()
                     and len(jobs_of(head, run_id(out))) == 3, timeout=300)
    finally:
        release.set()
    run = run_id(out)
    first = {row["task"] for row in rows_of(out)}
    assert first == {"count-functions"}
    before = len(asked)
    r = project.moss(*words, "--resume", str(out), "--json", env=driver_env(keyed_api), timeout=600)
    assert r.returncode == 0, r.stderr
    rows = rows_of(out)
    assert sorted(row["task"] for row in rows) == ["count-functions", "fix-add", "fix-mul"]
    assert all(row["passed"] is True for row in rows)
    attached = {row["task"]: row["ray"].get("attached") for row in rows}
    assert attached["fix-add"] is True  # the job the dead driver had started, picked up, not run again
    jobs = jobs_of(head, run)
    assert sorted(j["metadata"]["moss_attempt"] for j in jobs) == sorted(row["key"] for row in rows)
    assert all(j["submission_id"].endswith("-t0") and j["status"] == "SUCCEEDED" for j in jobs)
    assert "count-functions" not in asked[before:]


@pytest.mark.needs_sandbox
@pytest.mark.ray
@pytest.mark.slow
def test_a_batch_driver_killed_mid_batch_resumes_and_every_task_runs_once(project, keyed_api, head):
    """`moss batch --executor ray` of six tasks is SIGKILLed once one task's line is written
    while fix-add's job waits for the model. The same command with `--resume` collects what the
    jobs did without it and submits only what is missing: every task has one line with the
    outcome a local batch gives, the head holds exactly one job per task, fix-add's job was
    picked up rather than run again, and no task finished before the kill asked the model again."""
    from test_batch import OUTCOMES, batch_project, task_in
    from test_batch import model as batch_model
    from test_batch import outcomes as batch_outcomes
    from test_batch import rows_in

    batch_project(project)
    release = threading.Event()
    asked: list[str] = []

    def held(body):
        t = task_in(body) or "?"
        asked.append(t)
        if t == "fix-add":
            release.wait(180)
        return batch_model(body)

    keyed_api.push(*[held] * 600)
    out = project.root / "results.jsonl"
    words = ("batch", "work/tasks.jsonl", "-j", "2", "-o", str(out), "--executor", "ray", "--ray-address",
             head.address)

    def state() -> Path | None:
        return next(iter(project.root.glob("results*/ray.json")), None)

    def run() -> str | None:
        st = state()
        return json.loads(st.read_text())["run"] if st else None

    p = project.popen(*words, env=driver_env(keyed_api))
    try:
        sigkill_when(p, lambda: len(rows_in(out)) >= 1 and run() is not None
                     and any(j["metadata"].get("moss_attempt", "").startswith("fix-add")
                             for j in jobs_of(head, run())), timeout=300)
    finally:
        release.set()
    finished = {row["id"] for row in rows_in(out)}
    assert finished and "fix-add" not in finished
    before = len(asked)
    r = project.moss(*words, "--resume", env=driver_env(keyed_api), timeout=600)
    assert r.returncode == 1, r.stderr  # the task that never finishes failed, as locally
    rows = rows_in(out)
    assert sorted(row["id"] for row in rows) == sorted(OUTCOMES)  # one line each
    assert batch_outcomes(rows) == OUTCOMES
    assert {row["id"]: row["ray"].get("attached") for row in rows}["fix-add"] is True
    jobs = jobs_of(head, run())
    assert sorted(j["metadata"]["moss_attempt"] for j in jobs) == sorted(row["key"] for row in rows)
    assert all(j["submission_id"].endswith("-t0") for j in jobs)
    assert not finished & set(asked[before:])


@pytest.mark.needs_sandbox
@pytest.mark.ray
@pytest.mark.slow
def test_the_budget_stops_a_running_job_and_a_resume_runs_it_again_as_a_fresh_try(project, keyed_api, head):
    """One budget across the fleet: the first attempt to end spends more than `--max-tokens`, so
    the job still waiting for the model is stopped on the cluster (its row: reason budget) and
    the third attempt is never submitted. A resume with more budget runs what was stopped as
    the next try of its attempt (the eval stopped it: no failure counted) and the rest."""
    fleet_project(project)
    release = threading.Event()

    def held(body):
        # fix-add (the second attempt started) waits; count-functions, which answers in one call,
        # is the one to end. Chosen by task, not by which job reaches the model first: on a
        # loaded machine fix-add's job may be first, and its own share of the budget (what is
        # left, 50 tokens) would stop it after its edit.
        if task_of(body) == "fix-add":
            release.wait(180)
        return model(body)

    keyed_api.push(*[held] * 400)
    out = project.root / "results"
    words = ("eval", "suite", "-j", "2", "--executor", "ray", "--ray-address", head.address)
    try:
        r = project.moss(*words, "--max-tokens", "50", "--out", str(out), env=driver_env(keyed_api), timeout=600)
    finally:
        release.set()
    assert r.returncode == 1, r.stderr
    assert "budget reached: 1 attempt" in r.stderr
    rows = rows_of(out)
    assert len(rows) == 2
    [stopped] = [row for row in rows if row["reason"] == "budget"]
    assert stopped["passed"] is None and stopped["ray"]["stopped"] is True
    run = run_id(out)
    status = {j["submission_id"]: j["status"] for j in jobs_of(head, run)}
    assert len(status) == 2 and status[stopped["ray"]["submission_id"]] == "STOPPED"
    assert stopped["ray"]["submission_id"] in json.loads((out / "ray.json").read_text())["stopped"]
    r = project.moss(*words, "--resume", str(out), "--json", env=driver_env(keyed_api), timeout=600)
    assert r.returncode == 0, r.stderr
    final = {row["task"]: row for row in rows_of(out) if row["reason"] != "budget"}
    assert sorted(final) == ["count-functions", "fix-add", "fix-mul"] and all(r["passed"] for r in final.values())
    assert final[stopped["task"]]["ray"]["submission_id"].endswith("-t1")


@pytest.mark.needs_sandbox
@pytest.mark.ray
@pytest.mark.slow
def test_a_job_stopped_on_the_cluster_is_tried_again_then_counted_as_infrastructure(project, keyed_api, head):
    """Someone stops the attempt's job on the cluster, twice. With `--retries 1` moss submits it
    again once, then records the attempt as an infrastructure failure: it counts neither way,
    and the row names both jobs."""
    fleet_project(project, tasks=("count-functions",))
    release = threading.Event()
    keyed_api.push(*[lambda body: (release.wait(180), model(body))[1]] * 50)
    out = project.root / "results"
    p = project.popen("eval", "suite", "--executor", "ray", "--ray-address", head.address, "--retries", "1",
                      "--out", str(out), "--json", env=driver_env(keyed_api))
    try:
        for n in (0, 1):
            deadline = time.monotonic() + 120
            job = None
            while time.monotonic() < deadline:
                if (out / "ray.json").exists():
                    job = next((j for j in jobs_of(head, run_id(out)) if j["submission_id"].endswith(f"-t{n}")
                                and j["status"] == "RUNNING"), None)
                    if job and keyed_api.requests:
                        break
                time.sleep(0.2)
            assert job is not None, f"try {n} never ran"
            post_stop(head, job["submission_id"])
        stdout, stderr = p.communicate(timeout=300)
    finally:
        release.set()
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, stderr
    [row] = rows_of(out)
    assert row["reason"] == "infra_error" and row["passed"] is None and row["tries"] == 2
    assert "failed 2 times" in row["detail"] and "-t0 STOPPED" in row["detail"] and "-t1 STOPPED" in row["detail"]
    [cell] = json.loads(stdout)["cells"]
    assert cell["n"] == 0 and cell["not_counted"] == 1
    assert sorted(j["status"] for j in jobs_of(head, run_id(out))) == ["STOPPED", "STOPPED"]


def test_a_projects_ray_address_and_executor_wait_for_trust(project, api):
    """A cloned repository's config saying `[eval] executor = "ray"` with a cluster address
    would send the project's files, and the attempts, to whatever that address names. Until the
    project is trusted moss ignores both, says so, and runs the eval here (here a budget of 0
    lets nothing start); once trusted, the eval goes to that cluster (which is not there)."""
    fleet_project(project, tasks=("count-functions",))
    project.write(".moss/config.toml", f'[llm]\nprovider = "{STORY_PROVIDER}"\nmodel = "good"\n'
                  '[eval]\nexecutor = "ray"\nray_address = "http://127.0.0.1:9"\n')
    project.trusted = False
    r = project.moss("eval", "suite", "--max-cost", "0", env=api.env(), input="")
    assert r.returncode == 1 and "budget reached" in r.stderr, r.stderr
    assert "eval.executor" in r.stderr and "eval.ray_address" in r.stderr
    assert "Ray cluster" not in r.stderr
    project.trusted = True
    r = project.moss("eval", "suite", "--max-cost", "0", env=api.env())
    assert r.returncode != 0 and "cannot reach the Ray cluster at http://127.0.0.1:9" in r.stderr, r.stderr


@pytest.mark.parametrize("words, message", [
    (("--num-cpus", "0"), "--num-cpus must be a number above 0, got 0"),
    (("--ray-address", "ray://127.0.0.1:10001"), "is a Ray Client address"),
    (("--record", "tapes"), "--record and --replay need --executor local"),
])
def test_bad_ray_options_are_one_clear_line(project, api, words, message):
    """Each mistake is refused before any attempt starts or the cluster is asked, in one line."""
    fleet_project(project, tasks=("count-functions",))
    r = project.moss("eval", "suite", "--executor", "ray", "--ray-address", "http://127.0.0.1:9", *words,
                     env=api.env())
    assert r.returncode == 2, r.stderr
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_ray_options_without_the_ray_executor_are_refused(project, api):
    """`--num-cpus` on a local eval would silently do nothing: it is refused, in one line."""
    fleet_project(project, tasks=("count-functions",))
    r = project.moss("eval", "suite", "--num-cpus", "2", env=api.env())
    assert r.returncode == 2 and r.stderr.strip() == "--num-cpus is for --executor ray", r.stderr


@pytest.mark.needs_sandbox
@pytest.mark.ray
@pytest.mark.slow
def test_a_task_at_a_commit_with_a_link_travels_whole(project, keyed_api, head):
    """A task's repository is a git repository whose newest commit already has the fix, the
    task pinned to the commit before it, and it holds a link. On the node the copy is that
    commit (its check fails before the agent: .git travelled with the package), the link is
    still a link, and the agent's fix passes."""
    import subprocess

    fleet_project(project, tasks=("fix-add",))
    repo = project.root / "suite/repos/pycalc"
    (repo / "calc_link.py").symlink_to("calc.py")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "buggy"], check=True)
    first = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    (repo / "calc.py").write_text((repo / "calc.py").read_text().replace("a - b", "a + b"))
    subprocess.run([*git, "commit", "-qam", "fixed"], check=True)
    toml = project.root / "suite/suite.toml"
    text = toml.read_text().replace('run = ["python3 test_add.py"]', 'run = ["test -L calc_link.py", "python3 test_add.py"]')
    toml.write_text(text.replace('repo = "repos/pycalc"\n', f'repo = "repos/pycalc"\ncommit = "{first}"\n'))
    keyed_api.push(*[model] * 50)
    out = project.root / "results"
    r = project.moss("eval", "suite", "--executor", "ray", "--ray-address", head.address, "--out", str(out),
                     env=driver_env(keyed_api), timeout=300)
    assert r.returncode == 0, r.stderr
    [row] = rows_of(out)
    assert row["reason"] == "answered" and row["check"] == {"passed": True, "detail": ""}, row
    assert row["passed"] is True


@pytest.mark.needs_sandbox
@pytest.mark.ray
@pytest.mark.slow
def test_ctrl_c_stops_the_jobs_on_the_cluster_and_exits_130(project, keyed_api, head):
    """Ctrl-C (SIGINT to `moss eval`) while fix-add's job waits for the model: the eval asks the
    cluster to stop its running jobs at once (moss exits within its 2 s grace; Ray's own
    SIGTERM-then-SIGKILL ends them: none is left running), writes no line for them (a resume
    runs them again), remembers that it stopped them, and exits 130."""
    import signal

    fleet_project(project)
    release = threading.Event()

    def held(body):
        if task_of(body) == "fix-add":
            release.wait(180)
        return model(body)

    keyed_api.push(*[held] * 400)
    out = project.root / "results"
    p = project.popen("eval", "suite", "-j", "2", "--executor", "ray", "--ray-address", head.address,
                      "--out", str(out), env=driver_env(keyed_api))
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and p.poll() is None and not (
                rows_of(out) and any(task_of(r.body) == "fix-add" for r in list(keyed_api.requests))):
            time.sleep(0.1)
        assert rows_of(out), "no attempt ended"
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=120)
        assert p.returncode == 130, err
        assert all(row["reason"] == "answered" for row in rows_of(out))
        # the stop was asked before moss exited; Ray's own grace (SIGTERM, SIGKILL 3 s later) ends
        # them (fix-add's model answer is still held: its job can only end by being stopped)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(j["status"] in ("PENDING", "RUNNING")
                                                  for j in jobs_of(head, run_id(out))):
            time.sleep(0.2)
        jobs = jobs_of(head, run_id(out))
    finally:
        release.set()
        if p.poll() is None:
            p.kill()
    assert not [j["submission_id"] for j in jobs if j["status"] in ("PENDING", "RUNNING")]
    status = {j["metadata"]["moss_task"]: j["status"] for j in jobs}
    assert status["fix-add"] == "STOPPED"
    stopped = {j["submission_id"] for j in jobs if j["status"] == "STOPPED"}
    assert stopped <= set(json.loads((out / "ray.json").read_text())["stopped"])


@pytest.mark.needs_sandbox
@pytest.mark.ray
@pytest.mark.slow
def test_a_batch_on_ray_ends_as_it_does_locally_with_the_same_patches(project, keyed_api, head):
    """`moss batch` of six agent tasks (four changes, a question, one that never finishes) with
    `--executor ray`: every task's outcome and patch is what `--executor local` gives, each a
    job on the cluster."""
    from test_batch import OUTCOMES, batch_project
    from test_batch import model as batch_model
    from test_batch import outcomes as batch_outcomes

    batch_project(project)
    keyed_api.push(*[batch_model] * 400)
    runs = {}
    for how in ("local", "ray"):
        out = project.root / f"{how}.jsonl"
        extra = ["--executor", "ray", "--ray-address", head.address] if how == "ray" else []
        r = project.moss("batch", "work/tasks.jsonl", "-j", "2", "-o", str(out), *extra, env=driver_env(keyed_api),
                         timeout=600)
        assert r.returncode == 1 and "6 tasks: 5 done, 1 failed" in r.stderr, r.stderr
        runs[how] = {row["id"]: row for row in (json.loads(x) for x in out.read_text().splitlines())}
        assert batch_outcomes(list(runs[how].values())) == OUTCOMES
    assert {k: r["patch"] for k, r in runs["ray"].items()} == {k: r["patch"] for k, r in runs["local"].items()}
    assert all(r["ray"]["submission_id"].startswith("moss-eval-") for r in runs["ray"].values())
    assert "+    return a + b" in runs["ray"]["fix-add"]["patch"]
    # moss batch status names each task's job, and each is a job the head ran
    shown = project.moss("batch", "status", str(project.root / "ray.jsonl"), "--json")
    assert shown.returncode == 0, shown.stderr
    jobs = {t["id"]: t["job"] for t in json.loads(shown.stdout)["tasks"]}
    assert jobs == {k: r["ray"]["submission_id"] for k, r in runs["ray"].items()}
    on_head = {j.get("submission_id") for j in jobs_of(head)}
    assert set(jobs.values()) <= on_head
    table = project.moss("batch", "status", str(project.root / "ray.jsonl"))
    assert table.returncode == 0, table.stderr
    rows = [line.split("\t") for line in table.stdout.splitlines()]
    assert rows[0][-1] == "job" and {r[0]: r[-1] for r in rows[1:]} == jobs


# A provider's *_BASE_URL as gateways take keys in it: every one would reach the job list.
BASE_URLS_WITH_MORE = [
    "https://me:s3cret-pass@gateway.example",
    f"https://gateway.example/v1?key={KEY}",
    "https://gw.example.com/v1?code=Kf8Zq2Lm",
    "https://gw.example.com/openai?subscription-key=0f3c9a",
    "https://gw.example.com/v1?",
    "https://gw.example.com/v1#key=Kf8Zq2Lm",
    f"https://gw.example.com/v1/{KEY}",
    "https://gw.example.com/t/Ab3dEf6hIj9kLm2nOp5qRs8t/v1",
    "https://gw.example.com/k/0123456789abcdef0123456789abcdef/v1",
    "https://gw.example.com/v1;key=Kf8Zq2Lm",
    "https://gw.example.com/v1/%4Bf8Zq",
    "http://gw.example.com:notaport/v1",
    "gw.example.com/v1",
]


def test_only_plain_base_urls_travel_to_the_cluster():
    """What a job's `env_vars` may carry from the driver (anyone reading the job list sees it):
    a provider's `*_BASE_URL` of scheme, host, port and a plain path, nothing else; one that
    holds more (a password, a query, a fragment, a key in its path) is refused, saying why and
    what to do, rather than left out (the job would then send the node's key elsewhere)."""
    from moss.errors import MossError
    from moss.eval.ray_executor import job_env, travels

    assert travels("ANTHROPIC_BASE_URL", "http://127.0.0.1:8080")
    assert travels("OPENAI_BASE_URL", "https://gateway.example/v1")
    assert travels("OPENAI_BASE_URL", "https://gw.example/openai/deployments/gpt-4o-mini-2024-07-18-prod")
    assert not travels("ANTHROPIC_API_KEY", KEY)
    assert not travels("HOME", "/root")
    assert job_env({"OPENAI_BASE_URL": "https://gateway.example/v1", "OPENAI_API_KEY": KEY, "HOME": "/root"}) == \
        {"OPENAI_BASE_URL": "https://gateway.example/v1", "PYTHONUNBUFFERED": "1"}
    for url in BASE_URLS_WITH_MORE:
        assert not travels("OPENAI_BASE_URL", url), url
        with pytest.raises(MossError) as e:
            job_env({"OPENAI_BASE_URL": url})
        msg = e.value.message
        assert msg.startswith("OPENAI_BASE_URL cannot go to the Ray cluster: ") and "ray start" in msg, msg
        assert "Kf8Zq2Lm" not in msg and KEY not in msg and "s3cret" not in msg  # the message repeats no secret


def test_a_base_url_with_a_key_in_it_stops_the_eval_before_the_cluster_is_asked(project, api):
    """`moss eval --executor ray` with OPENAI_BASE_URL holding a key in its query: one line
    saying why and what to do, exit 2, before any job is submitted or the cluster asked (there
    is none at that address)."""
    fleet_project(project, tasks=("count-functions",))
    r = project.moss("eval", "suite", "--executor", "ray", "--ray-address", "http://127.0.0.1:9",
                     env={**api.env(), "OPENAI_BASE_URL": f"https://gw.example.com/v1?key={KEY}"})
    assert r.returncode == 2, r.stderr
    assert "OPENAI_BASE_URL cannot go to the Ray cluster: it has a query" in r.stderr, r.stderr
    assert KEY not in r.stderr and "cannot reach the Ray cluster" not in r.stderr

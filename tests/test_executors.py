"""Executors are chosen by name, and a new one plugs into runs through the Executor interface.

The story a later issue (fleets of machines) relies on: an executor that runs a command
somewhere moss only asks about (here a real process whose output lands in a file of its
own, as a cluster keeps a job's log) implements start, status, logs and stop, and gets the
rest from the RunManager for free: the record on disk, events from `wait`, log tails, alert
rules checked on the lines it copies, and a stop that is recorded with its reason.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from moss.errors import MossError
from moss.tools.runs import RunManager, executor
from moss.tools.runs import executors as registry
from moss.tools.runs.executors import Executor, register
from moss.tools.runs.live import Live


class Faraway(Executor):
    """A job is a process writing to its own log file; moss learns about it only by asking."""

    name = "faraway-test"
    remote = True

    def start(self, req):
        m = self.runs
        out = req.root / f"faraway-{req.rid}.out"
        with out.open("wb") as fh:
            proc = subprocess.Popen([sys.executable, "-c", req.cmd], stdout=fh, stderr=subprocess.STDOUT)
        rec = m.new_record(req, sandbox="faraway", executor=self.name, detached=True)
        live = Live(req.rules)
        live.client = (proc, out)
        with m.lock:
            m.watch(rec, live)
            return m.public(rec)

    def logs(self, rid):
        m = self.runs
        _rec, live = m.run(rid)
        data = live.client[1].read_bytes()
        if len(data) > live.copied:
            m.store.append(rid, "log", data[live.copied:])
            live.copied = len(data)

    def status(self, rid, *, force=False):
        m = self.runs
        rec, live = m.run(rid)
        if rec["status"] in ("finished", "failed", "stopped"):
            return
        code = live.client[0].poll()
        self.logs(rid)
        with m.lock:
            if rec["status"] == "queued":
                rec["started_at"] = m.now()
                m.set_status(rec, "running")
        if code is not None:
            m.finish(rid, code)

    def stop(self, rid, reason, wait):
        m = self.runs
        rec, live = m.run(rid)
        live.stop_reason = reason
        live.client[0].terminate()
        live.client[0].wait(wait)
        self.status(rid, force=True)
        return m.public(rec)

    def outlives_moss(self, rec):
        return True


@pytest.fixture
def faraway():
    register(Faraway)
    yield Faraway
    registry.unregister(Faraway.name)


def _wait_for(m, rid, status, seconds=20):
    end = time.monotonic() + seconds
    events = []
    while time.monotonic() < end:
        ev = m.wait(0.5)
        if ev:
            events.append(ev)
        if m.status(rid)["status"] == status:
            while (ev := m.wait(0)) is not None:
                events.append(ev)
            return events
    raise AssertionError(f"run {rid} is {m.status(rid)['status']}, not {status}; events {events}")


def test_executors_are_chosen_by_name_and_an_unknown_name_lists_the_known_ones(tmp_path):
    assert executor("local").name == "local" and executor("ray").name == "ray"
    with pytest.raises(MossError, match=r"executor must be one of local, ray, got 'fleet'") as e:
        executor("fleet")
    assert e.value.kind == "usage"
    m = RunManager(tmp_path)
    try:
        with pytest.raises(MossError, match="executor must be one of local, ray, got 'fleet'"):
            m.start("true", access="full", allow_full=True, executor="fleet")
        assert m.list() == []  # nothing was recorded for it
    finally:
        m.close()


def test_a_new_executor_gets_records_events_tails_alerts_and_stop_from_the_manager(tmp_path, faraway):
    m = RunManager(tmp_path)
    try:
        done = m.start("print('epoch 1 loss 0.5'); print('epoch 2 loss nan')", access="full", allow_full=True,
                       executor="faraway-test", name="short", alerts=["loss is nan"])
        events = _wait_for(m, done["id"], "finished")
        assert [e["status"] for e in events if e["type"] == "run"][-1] == "finished"
        (alert,) = [e for e in events if e["type"] == "alert"]  # from the lines the executor copied
        assert "loss is nan" in alert["message"] and alert["severity"] == "critical"
        assert m.log_tail(done["id"], 100) == "epoch 1 loss 0.5\nepoch 2 loss nan\n"
        rec = m.status(done["id"])
        assert rec["executor"] == "faraway-test" and rec["code"] == 0

        slow = m.start("import time; print('started', flush=True); time.sleep(60)", access="full",
                       allow_full=True, executor="faraway-test", name="slow")
        _wait_for(m, slow["id"], "running")
        out = m.stop(slow["id"], reason="enough")
        assert out["status"] == "stopped" and out["error"] == "enough"
    finally:
        m.close()
    # another moss process reads the same records
    again = RunManager(tmp_path)
    try:
        by_name = {r["name"]: r for r in again.list()}
        assert by_name["short"]["status"] == "finished" and by_name["slow"]["status"] == "stopped"
    finally:
        again.close()

"""The test Ray head (tests/rayhead.py) knows its processes by the names they end up with.

`ray start` forks each core process and then execs it; a process first seen in between still
carries its parent's name. The ray tests assert that gcs_server and raylet were started and are
gone after the head stops, by PID, so a name remembered too early failed a whole module in CI.
"""
import subprocess
import sys
import time

from rayhead import RayHead, _comm

FORK_THEN_EXEC = """
import os, sys
pid = os.fork()
if pid == 0:
    print(os.getpid(), flush=True)   # the child exists, still named after this python
    sys.stdin.readline()             # ... until the test has looked at it
    os.execvp("sleep", ["sleep", "60"])
os.waitpid(pid, 0)
"""


def test_a_process_seen_before_it_execs_is_known_by_the_name_it_execs_to(tmp_path):
    h = RayHead(base=str(tmp_path))
    h.log = open(tmp_path / "log", "wb")
    h.proc = subprocess.Popen([sys.executable, "-c", FORK_THEN_EXEC], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        child = int(h.proc.stdout.readline())
        assert h.pids("sleep") == [] and child in h.known  # seen under its parent's name
        h.proc.stdin.write("go\n")
        h.proc.stdin.flush()
        end = time.monotonic() + 30
        while _comm(child) != "sleep" and time.monotonic() < end:
            time.sleep(0.05)  # polls for the exec, orders nothing
        assert h.pids("sleep") == [child]
    finally:
        left = h.stop()
    assert left == []  # and stop() found the child by PID to stop it

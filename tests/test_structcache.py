"""The structure cache on disk (host/tools/structcache.py): what one process parsed, the
next one reads — and only for exactly the same bytes, only from the user's own cache
directory, within its size bound, whatever other processes or damage do to it."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from moss.tools import structcache, treesitter
from moss.tools.treesitter import grammars
from moss.tools.search import search
from moss.tools.view import view

APP = '''\
class Store:
    """Keeps things."""

    def load(self):
        return "needle"
'''


def _no_parsing(monkeypatch):
    """From here on, any parse in this process fails the test: what is shown must come
    from the cache."""
    def refuse(*a, **k):
        raise AssertionError("parsed although the cache holds this file")
    monkeypatch.setattr(grammars, "parse", refuse)  # every extraction parses through it
    treesitter.clear_caches()  # as a new process: nothing in memory


def _cache_env(project, db: Path) -> dict:
    return {"MOSS_STRUCTURE_CACHE": str(db)}


def test_a_new_process_reads_what_the_cli_parsed(project, tmp_path, monkeypatch):
    """`moss text-search` and `moss view` in one process leave the file's symbols in the
    user's cache; a later session (here, this process with parsing switched off) labels
    the hit and draws the skeleton from them alone, exactly as a parse would."""
    project.write("app.py", APP)
    db = tmp_path / "cache" / "structure.sqlite3"
    env = _cache_env(project, db)
    r = project.moss("text-search", "needle", env=env)
    assert r.returncode == 0, r.stderr
    assert "(Store/load L4-5)" in r.stdout
    fresh = project.moss("view", "app.py", env=env)
    assert fresh.returncode == 0, fresh.stderr
    monkeypatch.setenv("MOSS_STRUCTURE_CACHE", str(db))
    _no_parsing(monkeypatch)
    got = search(project.root, "needle", keep=False)
    assert "5 (Store/load L4-5): return \"needle\"" in got
    assert view(project.root, "app.py", max_chars=0).rstrip() == fresh.stdout.rstrip()


def test_the_cache_lives_in_the_users_cache_directory_not_the_repository(project):
    """With no override, the cache is $XDG_CACHE_HOME/moss (here HOME/.cache/moss): a
    search writes nothing into the project."""
    project.write("app.py", APP)
    before = sorted(p.relative_to(project.root) for p in project.root.rglob("*"))
    r = project.moss("text-search", "needle")
    assert r.returncode == 0, r.stderr
    assert (project.home / ".cache" / "moss" / "structure.sqlite3").is_file()
    after = sorted(p.relative_to(project.root) for p in project.root.rglob("*"))
    assert [p for p in after if p not in before and ".moss" not in p.parts] == []


def test_changed_bytes_never_get_the_old_symbols(project, tmp_path):
    """An edit that keeps the file's size and modification time (what a quick checkout can
    do) still changes the content hash: the next process shows the new name."""
    path = project.write("app.py", APP)
    env = _cache_env(project, tmp_path / "c.sqlite3")
    assert "(Store/load L4-5)" in project.moss("text-search", "needle", env=env).stdout
    st = path.stat()
    path.write_text(APP.replace("def load", "def save"), encoding="utf-8")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size
    r = project.moss("text-search", "needle", env=env)
    assert "(Store/save L4-5)" in r.stdout and "load" not in r.stdout


def test_an_entry_planted_in_the_repository_is_never_read(project, tmp_path, monkeypatch):
    """A hostile repository ships cache files, well-formed and keyed for the very bytes of
    its app.py, claiming a symbol `Planted/evil`: moss reads only the user's cache, so the
    label is the real one."""
    project.write("app.py", APP)
    src = (project.root / "app.py").read_bytes()
    planted = [treesitter.Symbol("evil", "function", "", 1, 5, 0, len(src), container="Planted")]
    for rel in (".cache/moss/structure.sqlite3", ".moss/structure.sqlite3", ".moss/cache/structure.sqlite3"):
        monkeypatch.setenv("MOSS_STRUCTURE_CACHE", str(project.root / rel))
        key, chash, _ = treesitter.cache.disk_get(src, "python", lite_ok=True)
        structcache.put(key, chash, planted, None, lite=False)
        assert structcache.get(key, chash, lite_ok=True)[0][0].path == "Planted/evil"  # it would be read...
    monkeypatch.delenv("MOSS_STRUCTURE_CACHE")
    for cwd in (project.root, project.root / ".moss"):
        r = project.moss("text-search", "needle", cwd=cwd)
        assert r.returncode == 0, r.stderr
        assert "(Store/load L4-5)" in r.stdout and "Planted" not in r.stdout  # ...but never is


def test_an_entry_is_checked_against_the_bytes_it_was_made_from(project, tmp_path, monkeypatch):
    """An entry moved under another file's key (a damaged or tampered index) still names
    the content it was made from: it is refused for other bytes, and replaced."""
    project.write("app.py", APP)
    project.write("other.py", "def other():\n    return 'needle'\n")
    db = tmp_path / "c.sqlite3"
    monkeypatch.setenv("MOSS_STRUCTURE_CACHE", str(db))
    treesitter.clear_caches()
    search(project.root, "needle")
    app = (project.root / "app.py").read_bytes()
    key, chash, got = treesitter.cache.disk_get(app, "python", lite_ok=True)
    assert got is not None
    other = (project.root / "other.py").read_bytes()
    okey, _, _ = treesitter.cache.disk_get(other, "python", lite_ok=True)
    with sqlite3.connect(db) as c:
        c.execute("UPDATE entries SET data = (SELECT data FROM entries WHERE key = ?) WHERE key = ?",
                  (okey, key))
    assert structcache.get(key, chash, lite_ok=True) is None
    treesitter.clear_caches()
    assert "(Store/load L4-5)" in search(project.root, "needle")
    assert structcache.get(key, chash, lite_ok=True)[0][0].path == "Store"  # replaced


def test_damaged_entries_and_a_damaged_file_are_replaced_never_fatal(project, tmp_path, monkeypatch):
    """Garbage in an entry is ignored and the entry made again; a cache file that is not
    a database at all is moved aside and a new one made: the search answers either way."""
    project.write("app.py", APP)
    db = tmp_path / "c.sqlite3"
    env = _cache_env(project, db)
    assert "(Store/load L4-5)" in project.moss("text-search", "needle", env=env).stdout
    with sqlite3.connect(db) as c:
        c.execute("UPDATE entries SET data = X'00ff00ff5a5a'")
    r = project.moss("text-search", "needle", env=env)
    assert r.returncode == 0 and "(Store/load L4-5)" in r.stdout, r.stderr
    monkeypatch.setenv("MOSS_STRUCTURE_CACHE", str(db))
    src = (project.root / "app.py").read_bytes()
    assert treesitter.cache.disk_get(src, "python", lite_ok=True)[2] is not None  # sound again

    for extra in ("-wal", "-shm"):
        Path(str(db) + extra).unlink(missing_ok=True)
    db.write_bytes(b"this is not a database\n" * 500)
    r = project.moss("text-search", "needle", env=env)
    assert r.returncode == 0 and "(Store/load L4-5)" in r.stdout, r.stderr
    assert Path(str(db) + ".corrupt").read_bytes().startswith(b"this is not")
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT COUNT(*) FROM entries").fetchone()[0] == 1


def test_a_cache_file_sqlite_finds_malformed_is_set_aside(project, tmp_path):
    """A cache file damaged inside (a power loss while it was being written: the cache does
    not wait for the disk) is moved aside when sqlite finds it malformed; the search that
    found it answers, and the next one is served from a new file."""
    project.write("app.py", APP)
    for i in range(40):
        project.write(f"m{i}.py", APP.replace("Store", f"Store{i}") + "\n" * 4000)
    db = tmp_path / "c.sqlite3"
    env = _cache_env(project, db)
    assert "(Store/load L4-5)" in project.moss("text-search", "needle", env=env).stdout
    data = bytearray(db.read_bytes())
    assert len(data) > 3 * 4096
    data[4096:len(data) - 1024] = b"\xa5" * (len(data) - 1024 - 4096)  # every page after the first
    db.write_bytes(bytes(data))
    for extra in ("-wal", "-shm"):
        Path(str(db) + extra).unlink(missing_ok=True)
    r = project.moss("text-search", "needle", env=env)
    assert r.returncode == 0 and "(Store/load L4-5)" in r.stdout, r.stderr
    assert Path(str(db) + ".corrupt").is_file()
    r = project.moss("text-search", "needle", env=env)
    assert r.returncode == 0 and "(Store/load L4-5)" in r.stdout, r.stderr
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT COUNT(*) FROM entries").fetchone()[0] == 41


def test_a_first_search_over_many_files_labels_all_and_leaves_them_warm(project, tmp_path, monkeypatch):
    """`moss text-search` in a fresh checkout with hits in many files (enough that the CLI
    parses them in several processes at once) labels every shown hit as a parse here does,
    and leaves every file's symbols in the cache: the next process parses nothing."""
    body = "".join(f"    def step_{j}(self):\n        return {j}\n\n" for j in range(300))
    for i in range(30):
        project.write(f"pkg/m{i:02d}.py", f"class Worker{i}:\n{body}    def last(self):\n"
                                          "        return 'needle'\n")
    db = tmp_path / "c.sqlite3"
    r = project.moss("text-search", "needle", env=_cache_env(project, db))
    assert r.returncode == 0, r.stderr
    monkeypatch.setenv("MOSS_STRUCTURE_CACHE", "off")
    treesitter.clear_caches()
    assert r.stdout == search(project.root, "needle", keep=False, max_chars=0) + "\n"
    assert all(f"(Worker{i}/last L902-903)" in r.stdout for i in range(30))
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT COUNT(*) FROM entries").fetchone()[0] == 30
    monkeypatch.setenv("MOSS_STRUCTURE_CACHE", str(db))
    _no_parsing(monkeypatch)
    assert search(project.root, "needle", keep=False, max_chars=0) + "\n" == r.stdout

def _syms(n: int) -> list:
    return [treesitter.Symbol(f"name_{i}_{'x' * 40}", "function", "", i, i, 0, 1) for i in range(n)]


def test_the_cache_stays_within_its_bound(tmp_path, monkeypatch):
    """With MOSS_STRUCTURE_CACHE_MB set small, storing far more than fits keeps the entries
    under the bound (the least recently used go first) and the file from growing."""
    db = tmp_path / "c.sqlite3"
    monkeypatch.setenv("MOSS_STRUCTURE_CACHE", str(db))
    monkeypatch.setenv("MOSS_STRUCTURE_CACHE_MB", "0.1")
    bound = structcache.max_bytes()
    keys = []

    def store(i: int) -> None:
        key = structcache.content_key(structcache.content_hash(b"%d" % i), "python", "tree_sitter_python")
        structcache.put(key, structcache.content_hash(b"%d" % i), _syms(20), None, lite=True)
        keys.append((key, structcache.content_hash(b"%d" % i)))

    for i in range(300):
        store(i)
    size_then = db.stat().st_size
    for i in range(300, 900):
        store(i)
    _, n, size = structcache.stats()
    assert 0 < size <= bound
    assert n < 900
    assert structcache.get(*keys[-1], lite_ok=True) is not None      # the newest stay
    assert structcache.get(*keys[0], lite_ok=True) is None           # the oldest went
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT bytes FROM total").fetchone()[0] == size  # the running total is right
    assert db.stat().st_size <= max(size_then, 2 * bound) * 1.25


WRITER = textwrap.dedent("""
    import sys
    from moss.tools import structcache, treesitter
    who = sys.argv[1]
    sys.stdin.readline()  # both start together
    for i in range(300):
        for tag in (who, "shared"):
            chash = structcache.content_hash(f"{tag}-{i}".encode())
            key = structcache.content_key(chash, "python", "tree_sitter_python")
            syms = [treesitter.Symbol(f"{tag}_{i}", "function", "", 1, 2, 0, 9)]
            structcache.put(key, chash, syms, None, lite=False)
    print("done")
""")


def test_two_processes_writing_at_once(tmp_path, monkeypatch):
    """Two processes storing hundreds of entries into the same cache at the same moment,
    some under the same keys: both finish, every entry either wrote that is there is whole and
    its own, and the cache's running total is the sum of its entries. (An entry may be missing:
    a writer that waited 2 s for the other's lock drops it, as a cache may; on a loaded CI
    machine that happened once.)"""
    db = tmp_path / "c.sqlite3"
    env = {**os.environ, "MOSS_STRUCTURE_CACHE": str(db)}
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, who], env=env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for who in ("a", "b")]
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0 and out.strip() == "done", err
    monkeypatch.setenv("MOSS_STRUCTURE_CACHE", str(db))
    found = {"a": 0, "b": 0, "shared": 0}
    for tag in found:
        for i in range(300):
            chash = structcache.content_hash(f"{tag}-{i}".encode())
            got = structcache.get(structcache.content_key(chash, "python", "tree_sitter_python"), chash, False)
            if got is not None:
                assert got[0][0].name == f"{tag}_{i}"
                found[tag] += 1
    assert all(found.values()), found  # each writer's own entries and the shared ones are there
    with sqlite3.connect(db) as c:
        n, total = c.execute("SELECT COUNT(*), SUM(size) FROM entries").fetchone()
        assert n == sum(found.values())  # nothing in the file but what the two wrote
        assert c.execute("SELECT bytes FROM total").fetchone()[0] == total


def test_a_new_cache_opened_while_another_process_makes_it_stays_on(tmp_path, monkeypatch):
    """Two moss processes starting at once on a machine without a cache both make it. The one
    that meets the other mid-way (here: the test, holding the tables it is making in an open
    transaction) looks again once they are made, and keeps its cache on; it used to turn its
    cache off for the whole process, in 1 such start in 4."""
    import threading

    db = tmp_path / "c.sqlite3"
    maker = sqlite3.connect(str(db), isolation_level=None)
    maker.execute("BEGIN IMMEDIATE")
    for statement in structcache._SCHEMA.split(";"):
        maker.execute(statement)
    waiting = threading.Event()
    monkeypatch.setattr(structcache.time, "sleep", lambda s: waiting.set())
    got: dict = {}
    t = threading.Thread(target=lambda: got.update(conn=_try_open(db)))
    t.start()
    assert waiting.wait(10), got  # it met the maker's lock and waits, rather than giving up
    maker.execute("COMMIT")
    t.join(10)
    conn = got["conn"]
    assert isinstance(conn, sqlite3.Connection), conn
    assert conn.execute("SELECT bytes FROM total").fetchone() == (0,)
    conn.close()
    maker.close()


def _try_open(db):
    try:
        return structcache._open(db)
    except sqlite3.Error as e:
        return e


def test_moss_cache_path_and_clear(project):
    """`moss cache path` says where the cache is and what it holds; `moss cache clear`
    empties it, and the next search parses again and answers the same."""
    project.write("app.py", APP)
    first = project.moss("text-search", "needle").stdout
    r = project.moss("cache", "path")
    where = str(project.home / ".cache" / "moss" / "structure.sqlite3")
    assert r.returncode == 0 and r.stdout.startswith(f"{where}: 1 entry"), r.stdout
    r = project.moss("cache", "clear")
    assert r.stdout.strip() == f"removed 1 entry from {where}"
    assert project.moss("cache", "path").stdout.startswith(f"{where}: 0 entries")
    assert project.moss("text-search", "needle").stdout == first


def test_cache_off(project):
    """MOSS_STRUCTURE_CACHE=off: nothing is written anywhere, and search answers the same."""
    project.write("app.py", APP)
    r = project.moss("text-search", "needle", env={"MOSS_STRUCTURE_CACHE": "off"})
    assert "(Store/load L4-5)" in r.stdout
    assert not (project.home / ".cache").exists()
    assert "off" in project.moss("cache", "clear", env={"MOSS_STRUCTURE_CACHE": "off"}).stdout


@pytest.fixture(autouse=True)
def _own_connections():
    """Each test's cache file is its own; connections to earlier ones are not reused."""
    yield
    for c in getattr(structcache._local, "conns", {}).values():
        c.close()
    structcache._local.conns = {}
    structcache._disabled.clear()


def test_threads_share_the_cache_like_child_agents(project, tmp_path, monkeypatch):
    """Child agents run in threads of one process: four threads searching the same files at
    once, each with its own connection to the one cache file, all get the same labelled
    answer, and the file holds one entry per file."""
    import threading

    for i in range(8):
        project.write(f"m{i}.py", APP.replace("Store", f"Store{i}"))
    db = tmp_path / "c.sqlite3"
    monkeypatch.setenv("MOSS_STRUCTURE_CACHE", str(db))
    treesitter.clear_caches()
    got: list[str] = []
    errors: list[BaseException] = []

    def one() -> None:
        try:
            got.append(search(project.root, "needle"))
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(got) == 4 and len(set(got)) == 1
    assert all(f"(Store{i}/load L4-5)" in got[0] for i in range(8))
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT COUNT(*) FROM entries").fetchone()[0] == 8

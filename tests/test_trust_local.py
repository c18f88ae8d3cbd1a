"""Your own edits are yours: trust pins what arrived from elsewhere, not what you typed.

Each test is a real git repository (a bare "origin", a colleague's clone that pushes, and
the user's clone the real `moss` CLI runs in). The user trusts their clone once; after that,
an edit made in the working tree (a script, a new script, a command, `moss config set`) runs
without a question, and keeps doing so once committed; content that git brings (a pull, a
checkout of another version, a merge) asks again, and says on stderr which file and how it
changed. A repository cannot make its own content look like a local edit.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import Project

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid", "GIT_CONFIG_GLOBAL": os.devnull,
           "GIT_CONFIG_NOSYSTEM": "1"}


def git(cwd: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    r = subprocess.run(["git", "-c", "init.defaultBranch=main", "-c", "protocol.file.allow=always", *args],
                       cwd=cwd, env={**env, **GIT_ENV}, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


class Repos:
    """origin (bare), the colleague's clone `them`, and the user's clone `me` (a moss Project)."""

    def __init__(self, tmp: Path):
        self.origin = tmp / "origin.git"
        git(tmp, "init", "-q", "--bare", str(self.origin))
        self.them = tmp / "them"
        git(tmp, "clone", "-q", str(self.origin), str(self.them))
        self.commit({".moss/scripts/hi.lua": 'print("v1")\n',
                     ".moss/config.toml": '[agent]\nvalidate_commands = [ { name = "t", run = "make test" } ]\n'},
                    "the project's moss scripts")
        home = tmp / "home"
        home.mkdir()
        git(tmp, "clone", "-q", str(self.origin), str(tmp / "me"))
        self.me = Project(tmp / "me", home)
        self.me.trusted = False  # the fixture must not re-trust before each run: the tests do

    def commit(self, files: dict[str, str], message: str) -> None:
        """The colleague changes files and pushes."""
        for rel, text in files.items():
            p = self.them / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
        git(self.them, "add", "-A")
        git(self.them, "commit", "-q", "-m", message)
        git(self.them, "push", "-q", "origin", "HEAD:main")

    def run(self, *args: str, **kw):
        return self.me.moss(*args, **kw)

    def trust(self) -> None:
        r = self.run("trust", "--yes")
        assert r.returncode == 0, r.stderr

    def edit(self, rel: str, text: str) -> Path:
        p = self.me.root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        return p


@pytest.fixture
def repos(tmp_path) -> Repos:
    return Repos(tmp_path)


def status(repos: Repos) -> tuple[int, str]:
    r = repos.run("trust", "--status")
    return r.returncode, r.stdout


def test_a_local_edit_to_a_trusted_project_runs_without_asking(repos):
    """Trusted once, the user edits a script, adds one, changes a command and commits: every
    run uses what they wrote, with no question (none could be answered here: no terminal) and
    no notice; `moss trust --status` says it is their own edits."""
    assert repos.run("@hi").returncode == 2  # a clone nobody trusted: asks (here: refuses)
    repos.trust()
    assert repos.run("@hi").stdout == "v1\n"

    repos.edit(".moss/scripts/hi.lua", 'print("mine")\n')
    repos.edit(".moss/scripts/new.lua", 'print(moss.trust.trusted, moss.trust.how)\n')
    repos.edit(".moss/config.toml", '[agent]\nvalidate_commands = [ { name = "t", run = "make check" } ]\n')
    r = repos.run("@new")
    assert r.returncode == 0 and r.stdout == "true\tyour own edits\n", r.stderr
    assert "moss trust" not in r.stderr and "untrusted" not in r.stderr
    assert repos.run("@new").stdout == "true\trecorded\n"  # remembered: the next run is plainly trusted
    r = repos.run("@hi")
    assert r.returncode == 0 and r.stdout == "mine\n", r.stderr
    code, out = status(repos)
    assert code == 0

    # Committing their own edits brings nothing new: still no question.
    git(repos.me.root, "add", "-A")
    git(repos.me.root, "commit", "-q", "-m", "my edits")
    r = repos.run("@hi")
    assert r.returncode == 0 and r.stdout == "mine\n", r.stderr
    # ...and editing again on top of that commit is still theirs.
    repos.edit(".moss/scripts/hi.lua", 'print("mine, again")\n')
    assert repos.run("@hi").stdout == "mine, again\n"


@pytest.mark.parametrize("change", ["script", "new script", "command"])
def test_a_pulled_change_to_a_trusted_project_asks(repos, change):
    """The colleague pushes a change to the project's moss content; the user pulls (a fast
    forward: nothing of theirs involved). The next run does not use it: non-interactively it
    says on stderr which file changed and that it arrived by git, and runs the built-ins."""
    repos.trust()
    files = {"script": {".moss/scripts/hi.lua": 'print("PULLED")\n'},
             "new script": {".moss/scripts/lib.lua": 'print("PULLED")\n'},
             "command": {".moss/config.toml": '[agent]\nvalidate_commands = [ { name = "t", run = "curl x | sh" } ]\n'},
             }[change]
    repos.commit(files, "a change from elsewhere")
    git(repos.me.root, "pull", "-q", "--ff-only")
    rel = next(iter(files))

    r = repos.run("@hi")
    assert "PULLED" not in r.stdout
    assert r.returncode == 2  # @hi exists only in the project, which is not trusted now
    assert f"{rel}: arrived by git" in r.stderr
    assert "moss trust" in r.stderr
    code, out = status(repos)
    assert code == 1 and f"{rel}: arrived by git" in out

    # On a terminal it asks; a yes is then the user's trust of what arrived.
    r = repos.run("@hi", env={"MOSS_ASSUME_TTY": "1"}, input="y\n")
    assert r.returncode == 0 and f"{rel}: arrived by git" in r.stderr  # the question says how
    assert r.stdout == ("PULLED\n" if change == "script" else "v1\n")


def test_a_local_edit_on_top_of_a_pull_asks_until_the_pull_is_trusted(repos):
    """A pulled change and an edit of the user's own at once: the pulled file asks; the
    notice tells the two apart."""
    repos.trust()
    repos.commit({".moss/scripts/hi.lua": 'print("PULLED")\n'}, "upstream")
    git(repos.me.root, "pull", "-q", "--ff-only")
    repos.edit(".moss/scripts/mine.lua", 'print("mine")\n')
    r = repos.run("@mine")
    assert r.returncode == 2
    assert ".moss/scripts/hi.lua: arrived by git" in r.stderr
    assert ".moss/scripts/mine.lua: edited here" in r.stderr


@pytest.mark.parametrize("step", ["commit", "add"])
def test_committing_before_the_first_run_asks_once(repos, step):
    """moss cannot tell a commit of the user's own from one that arrived unless it saw the
    edit first: an edit committed, or staged with `git add`, before any run asks once (the
    safe side); once answered, it is remembered."""
    repos.trust()
    repos.edit(".moss/scripts/hi.lua", 'print("mine")\n')
    git(repos.me.root, *(["commit", "-q", "-am", "mine"] if step == "commit" else ["add", "-A"]))
    r = repos.run("@hi")
    assert r.returncode == 2 and "mine" not in r.stdout
    assert ".moss/scripts/hi.lua: " + ("arrived by git" if step == "commit" else "its content is an object git")  \
        in r.stderr
    r = repos.run("@hi", env={"MOSS_ASSUME_TTY": "1"}, input="y\n")
    assert r.returncode == 0 and r.stdout == "mine\n"
    assert repos.run("@hi").stdout == "mine\n"


def _checkout_another_version(repos: Repos) -> None:
    git(repos.me.root, "fetch", "-q")
    git(repos.me.root, "checkout", "origin/main", "--", ".moss/scripts/hi.lua")


def _checkout_through_crlf(repos: Repos) -> None:
    # The repository's own .gitattributes re-encodes line endings on checkout: the bytes in
    # the working tree are no object git has, but what `git add` would store from them is.
    repos.edit(".gitattributes", "*.lua text eol=crlf\n")
    _checkout_another_version(repos)
    assert b"\r\n" in (repos.me.root / ".moss/scripts/hi.lua").read_bytes()


def _merge_no_commit(repos: Repos) -> None:
    git(repos.me.root, "fetch", "-q")
    git(repos.me.root, "merge", "-q", "--no-commit", "--no-ff", "origin/main")


def _merge_squash(repos: Repos) -> None:
    git(repos.me.root, "fetch", "-q")
    git(repos.me.root, "merge", "-q", "--squash", "origin/main")


def _pull_assume_unchanged(repos: Repos) -> None:
    # The index says the file is unchanged: moss reads HEAD's tree, never the index.
    git(repos.me.root, "update-index", "--assume-unchanged", ".moss/scripts/hi.lua")
    git(repos.me.root, "pull", "-q", "--ff-only")


@pytest.mark.parametrize("arrive", [_checkout_another_version, _checkout_through_crlf, _merge_no_commit,
                                    _merge_squash, _pull_assume_unchanged],
                         ids=["checkout-rev-path", "checkout-through-eol-crlf", "merge-no-commit", "merge-squash",
                              "assume-unchanged"])
def test_a_repository_cannot_mark_its_own_content_as_a_local_edit(repos, arrive):
    """Content from the repository that reaches the working tree without moving HEAD (a
    checkout of another version, a merge not yet committed, a squash), or with the index told
    to look away, is not taken as the user's edit: it asks, and stderr says why."""
    repos.trust()
    repos.commit({".moss/scripts/hi.lua": 'print("FROM THE REPOSITORY")\n'}, "from elsewhere")
    arrive(repos)
    r = repos.run("@hi")
    assert "FROM THE REPOSITORY" not in r.stdout
    assert r.returncode == 2 and ".moss/scripts/hi.lua: " in r.stderr
    assert ".moss/scripts/hi.lua: edited here" not in r.stderr


def test_a_fresh_clone_is_never_a_local_edit(repos, tmp_path):
    """Nothing was trusted: the working tree equals HEAD, and that is no reason to trust it.
    The same for a copy whose planted .git claims HEAD holds nothing (a tarball with a .git)."""
    r = repos.run("@hi")
    assert r.returncode == 2 and "v1" not in r.stdout
    planted = tmp_path / "tarball"
    planted.mkdir()
    git(planted, "init", "-q")  # an empty HEAD: every .moss file "absent from HEAD"
    (planted / ".moss/scripts").mkdir(parents=True)
    (planted / ".moss/scripts/hi.lua").write_text('print("PLANTED")\n')
    other = Project(planted, repos.me.home)
    other.trusted = False
    r = other.moss("@hi")
    assert r.returncode == 2 and "PLANTED" not in r.stdout


def test_content_that_git_brings_to_another_path_is_not_a_local_edit(repos):
    """The repository's .moss is a link to tools/moss: a pull changes tools/moss/scripts/hi.lua,
    and HEAD has no entry at .moss/scripts/hi.lua before or after. It asks: moss takes only
    a change to a file reached without links as the user's own."""
    git(repos.them, "rm", "-q", "-r", ".moss")
    repos.commit({"tools/moss/scripts/hi.lua": 'print("tools v1")\n'}, "moss content moves to tools/")
    (repos.them / ".moss").symlink_to("tools/moss")
    repos.commit({}, "link .moss")
    git(repos.me.root, "pull", "-q", "--ff-only")
    assert (repos.me.root / ".moss").is_symlink()
    repos.trust()
    assert repos.run("@hi").stdout == "tools v1\n"
    repos.commit({"tools/moss/scripts/hi.lua": 'print("PULLED")\n'}, "tools update")
    git(repos.me.root, "pull", "-q", "--ff-only")
    r = repos.run("@hi")
    assert r.returncode == 2 and "PULLED" not in r.stdout
    assert ".moss/scripts/hi.lua: reached through a link" in r.stderr


def test_a_nested_repository_under_scripts_is_not_a_local_edit(repos, tmp_path):
    """.moss/scripts/lib is a clone of its own: its pulls never show in the project's HEAD,
    so a change there asks."""
    lib_origin = tmp_path / "lib"
    lib_origin.mkdir()
    git(lib_origin, "init", "-q")
    (lib_origin / "tool.lua").write_text('print("lib v1")\n')
    git(lib_origin, "add", "-A")
    git(lib_origin, "commit", "-q", "-m", "lib")
    git(repos.me.root, "clone", "-q", str(lib_origin), ".moss/scripts/lib")
    repos.trust()
    (lib_origin / "tool.lua").write_text('print("PULLED")\n')
    git(lib_origin, "commit", "-q", "-am", "lib update")
    git(repos.me.root / ".moss/scripts/lib", "pull", "-q", "--ff-only")
    code, out = status(repos)
    assert code == 1 and ".moss/scripts/lib/tool.lua: inside another git repository" in out


def test_a_hostile_git_config_runs_nothing_while_moss_reads_head(repos, tmp_path):
    """The repository's .git/config names commands for git to run (fsmonitor, hooks, a
    filter driver the .gitattributes applies to scripts). moss reads HEAD to judge a local
    edit and none of them runs; a script under a filter asks instead of being judged."""
    marker = tmp_path / "pwned"
    evil = tmp_path / "evil.sh"
    evil.write_text(f"#!/bin/sh\ntouch {marker}\ncat\n")
    evil.chmod(0o755)
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    for name in ("post-checkout", "post-index-change", "reference-transaction", "pre-commit", "post-merge"):
        for where in (hooks, repos.me.root / ".git/hooks"):
            (where / name).write_text(evil.read_text())
            (where / name).chmod(0o755)
    repos.trust()
    with open(repos.me.root / ".git/config", "a") as f:
        f.write(f"[core]\n\tfsmonitor = {evil}\n\thooksPath = {hooks}\n\tpager = {evil}\n"
                f"[filter \"x\"]\n\tclean = {evil}\n\tsmudge = {evil}\n\tprocess = {evil}\n"
                f"[diff \"x\"]\n\ttextconv = {evil}\n")
    repos.edit(".gitattributes", "*.lua filter=x diff=x\n")
    repos.edit(".moss/scripts/hi.lua", 'print("mine")\n')
    r = repos.run("@hi")
    assert not marker.exists()
    assert r.returncode == 2 and ".moss/scripts/hi.lua: git converts it" in r.stderr and "filter=x" in r.stderr
    # Without the filter attribute, the same edit is the user's own; still nothing ran.
    (repos.me.root / ".gitattributes").unlink()
    r = repos.run("@hi")
    assert r.returncode == 0 and r.stdout == "mine\n", r.stderr
    assert not marker.exists()
    subprocess.run(["git", "status"], cwd=repos.me.root, capture_output=True)
    assert marker.exists()  # the same repository does run them for a plain `git status`


def test_moss_config_set_keeps_trust(project):
    """`moss config set agent.machine v2` is the user's own write: a trusted project stays
    trusted, in a git work tree or not, and the next run uses the new value."""
    project.trusted = False
    project.write(".moss/config.toml", '[agent]\nvalidate_commands = [ { name = "t", run = "make test" } ]\n')
    project.script("show", "print(moss.config.agent.machine, moss.trust.trusted)\n")
    assert project.moss("trust", "--yes").returncode == 0
    r = project.moss("config", "set", "agent.machine", "v2")
    assert r.returncode == 0, r.stderr
    assert project.moss("trust", "--status").returncode == 0
    r = project.moss("@show")
    assert r.returncode == 0 and r.stdout == "v2\ttrue\n", r.stderr
    assert "moss trust" not in r.stderr


def test_moss_init_force_keeps_trust(project):
    """`moss init --force` rewrites the config: moss's own write keeps the project trusted."""
    project.trusted = False
    project.write(".moss/config.toml", '[agent]\nrole = "explorer"\n')
    project.script("show", "print(moss.trust.trusted)\n")
    assert project.moss("trust", "--yes").returncode == 0
    assert project.moss("init", "--force").returncode == 0
    assert project.moss("@show").stdout == "true\n"


def test_without_git_a_hand_edit_asks_and_says_why(project):
    """Not a git work tree: moss cannot tell who changed a file, so any change asks, as
    before, and stderr names the file and the reason."""
    project.trusted = False
    project.script("hi", 'print("v1")\n')
    assert project.moss("trust", "--yes").returncode == 0
    project.script("hi", 'print("edited")\n')
    r = project.moss("@hi")
    assert r.returncode == 2 and "edited" not in r.stdout
    assert ".moss/scripts/hi.lua: not a git work tree" in r.stderr


def test_a_user_config_change_that_widens_a_project_value_asks(repos):
    """Lowering your own max_turns under a project's value turns that value into a widening
    one: moss's write to your user config does not re-trust it, and the file did not change,
    so it asks."""
    repos.edit(".moss/config.toml", '[agent]\nmax_turns = 10\n')
    repos.edit(".moss/scripts/hi.lua", 'print(moss.config.agent.max_turns)\n')
    git(repos.me.root, "commit", "-q", "-am", "mine")
    repos.trust()
    assert repos.run("@hi").stdout == "10\n"
    assert repos.run("config", "set", "--user", "agent.max_turns", "5").returncode == 0
    r = repos.run("@hi")
    assert r.returncode == 2
    assert ".moss/config.toml: the file did not change" in r.stderr


def test_local_edits_false_makes_every_change_ask(repos):
    """[trust] local_edits = false in your own config: every change asks again, as before
    (for a project kept in sync by other means than git: a shared folder, an unpacked archive)."""
    repos.trust()
    repos.me.user_file("config.toml", "[trust]\nlocal_edits = false\n")
    repos.edit(".moss/scripts/hi.lua", 'print("mine")\n')
    r = repos.run("@hi")
    assert r.returncode == 2 and "mine" not in r.stdout
    repos.me.user_file("config.toml", '[trust]\nlocal_edits = "yes"\n')
    r = repos.run("@hi")
    assert r.returncode == 2 and "local_edits must be true or false" in r.stderr


def test_a_pulled_config_change_that_brings_no_setting_keeps_local_edits_yours(repos):
    """The colleague changes only a comment and a free key of the config; after the pull, the
    user's own edit of a command in it is still theirs: what arrived brought no setting that
    needs trust."""
    repos.trust()
    repos.commit({".moss/config.toml": '# tests\n[agent]\nmy_note = "x"\n'
                                       'validate_commands = [ { name = "t", run = "make test" } ]\n'}, "a comment")
    git(repos.me.root, "pull", "-q", "--ff-only")
    repos.edit(".moss/config.toml", '# tests\n[agent]\nmy_note = "x"\n'
                                    'validate_commands = [ { name = "t", run = "make check" } ]\n')
    repos.edit(".moss/scripts/hi.lua", "print(moss.config.agent.validate_commands[1].run)\n")
    r = repos.run("@hi")
    assert r.returncode == 0 and r.stdout == "make check\n", r.stderr


def test_a_project_in_a_subfolder_of_the_repository_is_judged_the_same(tmp_path):
    """The moss project is `app/` of a larger repository: a local edit there runs without a
    question; a version checked out of the repository asks."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    app = repo / "app"
    (app / ".moss/scripts").mkdir(parents=True)
    (app / ".moss/scripts/hi.lua").write_text('print("v1")\n')
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "v1")
    (app / ".moss/scripts/hi.lua").write_text('print("v2")\n')
    git(repo, "commit", "-q", "-am", "v2")
    home = tmp_path / "home"
    home.mkdir()
    me = Project(app, home)
    me.trusted = False
    assert me.moss("trust", "--yes").returncode == 0
    (app / ".moss/scripts/hi.lua").write_text('print("mine")\n')
    r = me.moss("@hi")
    assert r.returncode == 0 and r.stdout == "mine\n", r.stderr
    git(app, "checkout", "HEAD~1", "--", ".moss/scripts/hi.lua")
    r = me.moss("@hi")
    assert r.returncode == 2 and "v1" not in r.stdout
    assert ".moss/scripts/hi.lua: its content is an object git already has" in r.stderr


def test_a_repository_owned_by_someone_else_is_read_only_if_your_git_says_it_is_safe(repos):
    """moss runs as root; the clone belongs to another user. git refuses such a repository,
    so moss cannot tell an edit from an arrival and asks, until the user's own git config
    lists it in safe.directory (the one thing moss takes from that config)."""
    repos.trust()
    for dirpath, dirnames, filenames in os.walk(repos.me.root):
        for name in dirnames + filenames + ["."]:
            os.lchown(os.path.join(dirpath, name), 65534, 65534)
    repos.edit(".moss/scripts/hi.lua", 'print("mine")\n')
    r = repos.run("@hi")
    assert r.returncode == 2 and ".moss/scripts/hi.lua: not a git work tree (or git would not read it)" in r.stderr
    (repos.me.home / ".gitconfig").write_text(f"[safe]\n\tdirectory = {repos.me.root}\n")
    r = repos.run("@hi")
    assert r.returncode == 0 and r.stdout == "mine\n", r.stderr


def test_moss_config_set_does_not_trust_an_untrusted_project(repos):
    """A fresh clone brings a command; the user sets a value of their own in its config. moss's
    write keeps trust only where there was trust: the clone's command still waits."""
    r = repos.run("config", "set", "agent.max_turns", "3")
    assert r.returncode == 0, r.stderr
    code, out = status(repos)
    assert code == 1 and "make test" in out


def test_after_a_pull_moss_trust_shows_each_changed_scripts_diff(repos):
    """The colleague changes a script (one line, and one with a hidden bidi override) and adds
    one; after the pull, `moss trust` shows, beside the hashes, the diff of each from the text
    the user trusted to the text now (the override written as its escape), and asks."""
    repos.trust()
    repos.commit({".moss/scripts/hi.lua": 'print("v2")\nlocal x = "\u202eevil"\n',
                  ".moss/scripts/lib.lua": 'return { answer = 42 }\n'}, "a change from elsewhere")
    git(repos.me.root, "pull", "-q", "--ff-only")
    r = repos.run("trust")
    assert r.returncode == 3  # not a terminal: nothing answered
    lines = r.stdout.splitlines()
    at = lines.index("--- trusted/.moss/scripts/hi.lua")
    assert lines[at:at + 6] == ["--- trusted/.moss/scripts/hi.lua", "+++ now/.moss/scripts/hi.lua", "@@ -1 +1,2 @@",
                                '-print("v1")', '+print("v2")', '+local x = "\\u202eevil"']
    at = lines.index("--- /dev/null")
    assert lines[at + 1:at + 4] == ["+++ now/.moss/scripts/lib.lua", "@@ -0,0 +1 @@", "+return { answer = 42 }"]
    assert "\u202e" not in r.stdout


def test_a_long_diff_is_capped_and_paged_on_a_terminal(repos, tmp_path):
    """A pulled script of 500 new lines: on a terminal the diff goes through the user's $PAGER
    (here one that keeps what it was given), capped at 200 lines of this file with a line
    saying how many more there are; then moss asks, and a no keeps the project untrusted."""
    import sys

    from screen import Terminal

    repos.trust()
    repos.commit({".moss/scripts/big.lua": "".join(f"local v{i} = {i}\n" for i in range(500))}, "a big one")
    git(repos.me.root, "pull", "-q", "--ff-only")
    paged = tmp_path / "paged.txt"
    env = {**{k: v for k, v in repos.me.env.items() if k != "NO_COLOR"}, "PAGER": f"cat > {paged}"}
    with Terminal([sys.executable, "-m", "moss", "trust"], cwd=repos.me.root, env=env, rows=30, cols=120,
                  stdout_on_pty=True) as t:
        t.wait(lambda: t.shows("[y/N]"), 60, "the question")
        t.type("n\n")
        assert t.proc.wait(30) == 1
    text = paged.read_text()
    assert "+local v0 = 0" in text and "+local v196 = 196" in text and "local v197 =" not in text
    assert "… 303 more lines of this diff (read .moss/scripts/big.lua itself)" in text
    assert not any("local v1 = 1" in line for line in t.everything())  # paged, not printed on the screen

"""How risky a shell command is, as moss rates it before an agent at `edit` or `full` runs it
(scripts/lib/agent/shell_risk.lua, through lib/agent/risk.lua's `assess_command`).

At the default `--auto-approve low` only a low command runs without asking, so a command that
deletes, moves, overwrites or installs must not come out low however it is written: behind
`timeout` or `env`, after `git -C .`, inside `sh -c '…'` or `$( … )`, as `sed --in-place`.
The table below is what a user would see in the approval question: the level, and the reason
naming what the command does. Everything runs through moss's real Lua runtime; the last tests
run the real CLI against the fake API server.
"""

from __future__ import annotations

import json
import random
import time

import pytest
from conftest import builtin_lua
from test_integrity import repo  # noqa: F401  (a fixture: a git project with a role at edit access)

ASSESS = """
local risk = require("lib.agent.risk")
local level, reason = risk.assess_command(...)
return moss.dict { level = level, reason = reason }
"""


@pytest.fixture(scope="module")
def rt():
    """A moss Lua runtime over an empty project (only the built-in scripts can answer)."""
    with builtin_lua() as (runtime, _root):
        yield runtime


def rate(rt, cmd: str) -> tuple[str, str]:
    out = rt.to_py(rt.execute(ASSESS, "=(risk)", cmd))
    return out["level"], out["reason"]


# command -> (level, a fragment of the reason the user is shown, or "" when any reason will do)
RATED = {
    # ---- the attack round: all were low and ran at the default level ----
    "timeout 5 rm x": ("high", "deletes files (`rm`, run by `timeout`)"),
    "nice rm x": ("high", "run by `nice`"),
    "busybox rm x": ("high", "run by `busybox`"),
    "git -C . rm x": ("high", "deletes files (`git rm`)"),
    "git -C . checkout -- .": ("high", "`git checkout`"),
    "git -c x=y reset --hard": ("high", "discards changes (`git reset --hard`)"),
    "sed --in-place s/a/b/ f": ("medium", "edits files in place (`sed --in-place`)"),
    "sed -i.bak s/a/b/ f": ("medium", "`sed -i.bak`"),
    # ---- compound commands: every part counts, the riskiest decides ----
    "ls; rm x": ("high", "`rm`"),
    "ls && rm x": ("high", "`rm`"),
    "false || rm x": ("high", "`rm`"),
    "cat a | xargs rm": ("high", "run by `xargs`"),
    "rm x & ls": ("high", "`rm`"),
    "ls\nrm x": ("high", "`rm`"),
    "echo $(rm x)": ("high", "`rm`"),
    "echo `rm x`": ("high", "`rm`"),
    'echo "$(rm x)"': ("high", "`rm`"),
    "(cd sub && rm x)": ("high", "`rm`"),
    "{ ls; rm x; }": ("high", "`rm`"),
    "if true; then rm x; fi": ("high", "`rm`"),
    "for f in *.tmp; do rm $f; done": ("high", "`rm`"),
    "diff <(rm x) b": ("high", "`rm`"),
    "echo 'a; rm x'": ("low", ""),  # quoted: one argument to echo, nothing runs it
    # ---- redirections that write a file ----
    "echo hi > out.txt": ("medium", "writes to out.txt (`>`)"),
    "echo hi >> log.txt": ("medium", "writes to log.txt (`>>`)"),
    "make 2> err.txt": ("medium", "writes to err.txt (`2>`)"),
    "ls &> all.txt": ("medium", "writes to all.txt"),
    "ls 2>/dev/null": ("low", ""),
    "ls > /dev/null 2>&1": ("low", ""),
    "wc -l < input.txt": ("low", ""),
    # ---- assignments and wrappers come off before the program is rated ----
    "FOO=1 rm x": ("high", "deletes files (`rm`)"),
    "timeout -s KILL --kill-after=2 5 rm x": ("high", "run by `timeout`"),
    "nice -n 5 rm x": ("high", "run by `nice`"),
    "ionice -c 3 rm x": ("high", "run by `ionice`"),
    "env -i A=1 B=2 rm x": ("high", "run by `env`"),
    "/usr/bin/env rm x": ("high", "run by `env`"),
    "xargs -0 -I {} rm {}": ("high", "run by `xargs`"),
    "sudo -u root rm x": ("high", "run by `sudo`"),
    "doas rm x": ("high", "run by `doas`"),
    "command rm x": ("high", "run by `command`"),
    "exec rm x": ("high", "run by `exec`"),
    "nohup rm x": ("high", "run by `nohup`"),
    "stdbuf -oL rm x": ("high", "run by `stdbuf`"),
    "time rm x": ("high", "run by `time`"),
    "chroot /srv rm x": ("high", "run by `chroot`"),
    "timeout 5 nice env A=1 rm x": ("high", "run by `timeout`, `nice`, `env`"),
    "sh -c 'rm x'": ("high", "deletes files (`rm`, run by `sh -c`)"),
    "bash -lc \"timeout 3 rm x\"": ("high", "run by `bash -c`, `timeout`"),
    "env -S 'rm x'": ("high", "run by `env -S`"),
    "find . -name '*.o' -delete": ("high", "deletes files (`find -delete`)"),
    "find . -exec rm {} \\;": ("high", "deletes files (`rm`, run by `find -exec`)"),
    "find . -name '*.py' -exec grep -l TODO {} +": ("medium", "runs a command per file (`find -exec`)"),
    "flock /tmp/lock rm x": ("high", "run by `flock`"),
    "flock /tmp/lock -c 'rm x'": ("high", "run by `flock -c`"),
    "watch -n 1 'ls; rm x'": ("high", "run by `watch`"),
    "su -c 'rm x' root": ("high", "run by `su -c`"),
    "strace -o trace.txt rm x": ("high", "run by `strace`"),
    "command -v rm": ("low", ""),  # only says where rm is
    "timeout 5 ls": ("low", ""),
    # ---- git: global options, then the subcommand ----
    "git --git-dir=.git --work-tree . clean -fdx": ("high", "deletes untracked files (`git clean`)"),
    "git --no-pager -C sub restore .": ("high", "`git restore`"),
    "git checkout .": ("high", "`git checkout`"),
    "git push --force origin main": ("high", "uses the network (`git push`)"),
    "git branch -D feature": ("high", "`git branch -D`"),
    "git stash drop": ("high", "discards stashed changes (`git stash drop`)"),
    "git stash clear": ("high", "`git stash clear`"),
    "git filter-branch --tree-filter true HEAD": ("high", "rewrites history"),
    "git update-ref -d refs/heads/main": ("high", "`git update-ref -d`"),
    "git gc --prune=now": ("high", "`git gc --prune`"),
    "git reflog expire --expire=now --all": ("high", "`git reflog expire`"),
    "git -c alias.st='!rm -rf .' st": ("high", "`git -c alias.st`"),
    "git -c color.ui=never status": ("low", ""),
    "git --no-pager log --oneline -5": ("low", ""),
    "git diff HEAD~1": ("low", ""),
    "git show HEAD:README.md": ("low", ""),
    "git grep -n TODO": ("low", ""),
    "git blame src/a.py": ("low", ""),
    "git branch -a": ("low", ""),
    "git stash": ("medium", "sets changes aside"),
    "git nuke": ("medium", "may be an alias"),
    # ---- flags, attached or long, and how the program is written ----
    "sed -i s/a/b/ f": ("medium", "`sed -i`"),
    "sed --in-place=.orig s/a/b/ f": ("medium", "`sed --in-place=.orig`"),
    "sed -ni p f": ("medium", "in place"),
    "sed -n 1,5p f": ("low", ""),
    "sed -e s/i/j/ f": ("low", ""),  # the i is in the script, not a flag
    "perl -i -pe 's/a/b/' f": ("medium", "edits files in place (`perl -i`)"),
    "perl -pi -e 's/a/b/' f": ("medium", "`perl -pi`"),
    "perl -i.bak -pe 's/a/b/' f": ("medium", "in place"),
    "perl -ne 'print if /x/' f": ("medium", "runs inline code"),
    "/bin/rm x": ("high", "deletes files (`rm`)"),
    "\\rm x": ("high", "deletes files (`rm`)"),
    "'rm' x": ("high", "deletes files (`rm`)"),
    "r\"\"m x": ("high", "deletes files (`rm`)"),
    # ---- what cannot be read is high, not low ----
    "$X y": ("high", "the program is only known when it runs (`$X`)"),
    "${CMD} y": ("high", "only known when it runs"),
    "$(echo rm) x": ("high", "only known when it runs"),
    "eval ls": ("high", "`eval`"),
    "echo 'unclosed": ("high", "unclosed '"),
    'echo "unclosed': ("high", 'unclosed "'),
    "echo $(ls": ("high", "unclosed ("),
    "/bin/r? x": ("high", "pattern"),
    "case x in a) rm y;; esac": ("high", "case statement"),
    "cat <<EOF\n$(rm x)\nEOF": ("high", "here-document"),
    "echo rm x | sh": ("high", "runs shell commands from its input"),
    "alias ll=rm": ("high", "alias"),
    # ---- the rest keeps the ratings it had ----
    "ls -la": ("low", "only programs known to read, build or test"),
    "cat README.md": ("low", ""),
    "grep -rn TODO src": ("low", ""),
    "rg -n 'fn main' src": ("low", ""),
    "head -20 a.py | wc -l": ("low", ""),
    "python3 -m pytest -q": ("low", ""),
    "pytest -q tests/test_a.py": ("low", ""),
    "cargo test": ("low", ""),
    "cat <<'EOF'\n$(rm x)\nEOF": ("low", ""),  # a quoted here-document is only text
    "echo $((1 + 2))": ("low", ""),
    "mv a b": ("high", "moves or renames files (`mv`)"),
    "curl https://example.com": ("high", "uses the network"),
    "pip install requests": ("high", "installs packages (`pip install`)"),
    "python3 -m pip install requests": ("high", "`pip install`"),
    "npm install": ("high", "installs packages"),
    "cp a b": ("medium", "copies over files"),
    "python -c 'print(1)'": ("medium", "runs inline code (`python -c`)"),
    "bash build.sh": ("medium", "runs another script"),
    "trap 'rm x' EXIT; ls": ("high", "run by `trap`"),
    "coproc rm x": ("high", "coprocess"),
    "echo 'import shutil' | python3": ("medium", "runs code from its input (`python`)"),
    "python3 --version": ("low", ""),
    "tar czf out.tgz src": ("medium", "writes files (`tar`)"),
    "tar tzf out.tgz": ("low", ""),
    "tar xf a.tar --remove-files": ("high", "deletes files (`tar --remove-files`)"),
    "gzip notes.txt": ("medium", "writes files (`gzip`)"),
    "gzip -dc notes.txt.gz": ("low", ""),
    "vim -es -c '%d|x' notes.txt": ("medium", "edits files (`vim`)"),
    "npm uninstall left-pad": ("high", "removes packages"),
    "awk 'BEGIN { system(\"rm x\") }'": ("high", "runs a command from its program"),
    "awk '{ print | \"sh\" }' f": ("high", "runs a command from its program"),
    "awk '$1 > 2 || $2 < 1 { print $3 }' f": ("low", ""),
    # ---- the third attack round: each ran at the default level; now low is an allow-list ----
    "sort -o f in.txt": ("medium", "writes to f (`sort -o`)"),
    "sort --output=f in.txt": ("medium", "writes to f (`sort --output`)"),
    "sort -uo f in.txt": ("medium", "writes to f (`sort -o`)"),
    "uniq in.txt out.txt": ("medium", "writes to out.txt (`uniq`)"),
    "git diff --output=f": ("medium", "writes to f (`git diff --output`)"),
    "git log --output=f": ("medium", "writes to f (`git log --output`)"),
    "git archive -o out.tar HEAD": ("medium", "writes to out.tar (`git archive -o`)"),
    "gawk -i inplace '{ print }' f": ("medium", "edits files in place (`gawk -i inplace`)"),
    "cmake -E rm -f x": ("high", "deletes or moves files (`cmake -E rm`)"),
    "openssl enc -aes-256-cbc -in a -out f": ("medium", "runs `openssl`, which this rating does not know"),
    "xxd -r dump.hex f": ("medium", "writes to f (`xxd`)"),
    "dos2unix f": ("medium", "rewrites files in place (`dos2unix`)"),
    "iconv -f latin1 -t utf8 -o f in.txt": ("medium", "writes to f (`iconv -o`)"),
    "php -r 'unlink(\"x\");'": ("medium", "runs `php`"),
    "lua -e 'os.remove(\"x\")'": ("medium", "runs `lua`"),
    "Rscript -e 'file.remove(\"x\")'": ("medium", "runs `Rscript`"),
    "tclsh": ("medium", "runs `tclsh`"),
    "gdb -batch -ex 'shell rm x'": ("medium", "runs `gdb`"),
    "make -f /dev/stdin": ("medium", "a makefile or rules from elsewhere (`make -f`)"),
    "eatmydata rm x": ("high", "deletes files (`rm`, run by `eatmydata`)"),
    "chattr +i f": ("medium", "changes file attributes (`chattr`)"),
    "setfacl -m u:x:rwx f": ("medium", "changes permissions (`setfacl`)"),
    # ---- readers stay low without the flag or operand that writes ----
    "sort -u in.txt | head -5": ("low", ""),
    "uniq -c in.txt": ("low", ""),
    "uniq -f 2 in.txt": ("low", ""),
    "xxd -r -p dump.hex": ("low", ""),
    "iconv -f latin1 -t utf8 in.txt": ("low", ""),
    "date +%F": ("low", ""),
    "date -s 2020-01-01": ("medium", "`date -s`"),
    "date 0101000020": ("medium", "sets the clock"),
    "rg --pre ./unpack TODO": ("medium", "`rg --pre`"),
    "fd -x rm": ("medium", "`fd -x`"),
    "tree -o listing.txt": ("medium", "writes to listing.txt (`tree -o`)"),
    "sed -n '/a/w out.txt' f": ("medium", "writes to out.txt (`sed` w)"),
    "sed 's/a/b/w out.txt' f": ("medium", "writes to out.txt"),
    "sed '1e rm x' f": ("high", "runs a command from its script (`sed` e)"),
    "sed 's/a/b/e' f": ("high", "runs a command from its script"),
    "sed -f edits.sed f": ("medium", "sed script from a file"),
    "sed \"$S\" f": ("high", "a sed script only known when it runs"),
    "sed 's|/usr|/opt|g; /^#/d' f": ("low", ""),
    "sed -n '/start/,/end/{p;q}' f": ("low", ""),
    "sed 's/[/]/x/' f": ("low", ""),
    "sed -E -n '$!N;P;D' f": ("low", ""),
    "awk '{ print $1 > \"out\" }' f": ("medium", "writes to a file from its program"),
    "awk -f prog.awk f": ("medium", "`awk -f`"),
    "awk -F: '{ print $1 }' f": ("low", ""),
    "awk '{ print ($1 > 2) }' f": ("low", ""),
    "git branch feature": ("medium", "creates a branch (`git branch feature`)"),
    "git branch --show-current": ("low", ""),
    "git branch -v --sort -committerdate": ("low", ""),
    "git grep -Orm TODO": ("medium", "runs a pager"),
    "git bundle create all.bundle HEAD": ("medium", "writes a bundle"),
    "git worktree list": ("low", ""),
    "git remote show origin": ("high", "uses the network (`git remote show`)"),
    "touch x": ("medium", "creates files"),
    "mkdir build": ("medium", "creates directories"),
    "sudo ls": ("medium", "runs as another user (`sudo`)"),
    "su -c 'ls' root": ("medium", "runs as another user (`su`)"),
    "flock /tmp/l ls": ("medium", "creates its lock file (`flock`)"),
    "strace -o trace.txt ls": ("medium", "writes to trace.txt (`strace -o`)"),
    "time -o t.txt ls": ("medium", "writes to t.txt (`time -o`)"),
    "for f in *.py; do wc -l \"$f\"; done": ("low", ""),
    "cd sub && ls": ("low", ""),
    "X=1; echo $X": ("low", ""),
    "perl script.pl": ("medium", "runs a perl program"),
    "perl -v": ("low", ""),
    "node app.js": ("medium", "runs a program (`node app.js`)"),
    "node --test": ("low", ""),
    "python3 -m http.server": ("medium", "runs the module `http.server`"),
    # ---- builds and tests of the usual toolchains: the project's own code, writing build output ----
    "cargo build --release": ("low", ""),
    "cargo +nightly test -q": ("low", ""),
    "cargo fmt": ("medium", "rewrites files (`cargo fmt` without --check)"),
    "cargo fmt --check": ("low", ""),
    "cargo clippy --fix": ("medium", "`cargo clippy --fix`"),
    "cargo run": ("medium", "runs `cargo`"),
    "go test ./...": ("low", ""),
    "go test -exec ./wrap ./...": ("medium", "`go test -exec`"),
    "go run .": ("medium", "runs `go`"),
    "go env -w GOFLAGS=-x": ("medium", "`go env -w`"),
    "python3 -m unittest discover": ("low", ""),
    "python3 -m mypy host": ("low", ""),
    "mypy --install-types": ("medium", "`mypy --install-types`"),
    "ruff check .": ("low", ""),
    "ruff check --fix .": ("medium", "`ruff check --fix`"),
    "black --check .": ("low", ""),
    "black .": ("medium", "rewrites files"),
    "npm test": ("low", ""),
    "npm run build": ("low", ""),
    "npm run clean": ("medium", "runs `npm`"),
    "make": ("low", ""),
    "make -j4 check": ("low", ""),
    "make clean": ("medium", "runs the make target `clean`"),
    "make CC=./evil": ("medium", "sets a make variable"),
    "cmake --build build": ("low", ""),
    "cmake -E copy a b": ("medium", "changes files (`cmake -E copy`)"),
    "cmake --install build": ("high", "installs"),
}


@pytest.mark.parametrize("cmd", list(RATED), ids=[repr(c)[1:-1][:50] for c in RATED])
def test_command_is_rated_by_what_it_does(rt, cmd):
    level, fragment = RATED[cmd]
    got, reason = rate(rt, cmd)
    assert (got, fragment in reason) == (level, True), f"{cmd!r} -> {got}: {reason}"


def test_a_reason_shows_a_long_word_shortened(rt):
    """The reason is read in a one-line question: a 10 kB file name is cut to a few dozen bytes."""
    level, reason = rate(rt, "echo hi > " + "é" * 5000)
    assert level == "medium" and reason.startswith("writes to éé") and "…" in reason and len(reason) < 120


def test_the_table_covers_enough_commands():
    assert len(RATED) >= 200


WRAPS = ["timeout 5 {}", "nice -n 3 {}", "env A=1 {}", "FOO=bar {}", "sudo {}", "nohup {}", "time {}",
         "true && {}", "ls | {}", "echo $({})", "{{ {}; }}", "({})", "xargs {}", "command {}", "busybox {}"]


@pytest.mark.parametrize("wrap", WRAPS)
def test_wrapping_a_command_never_lowers_its_rating(rt, wrap):
    """However a risky command is wrapped or chained, it is rated at least as it is alone."""
    order = {"low": 1, "medium": 2, "high": 3}
    for cmd, (level, _) in RATED.items():
        if level == "low" or "\n" in cmd or "'" in cmd:
            continue
        got, reason = rate(rt, wrap.format(cmd))
        assert order[got] >= order[level], f"{wrap.format(cmd)!r} -> {got}: {reason}"


PIECES = ["rm", "x", " ", ";", "&&", "|", "&", "\n", "'", '"', "\\", "$(", "`", "(", ")", "{", "}", "$X",
          ">", "2>", "<<", "EOF", "sh -c", "git -C .", "timeout 5", "-i", "#", "$((", "<(", "é"]


def test_any_text_gets_a_level_and_a_reason(rt):
    """Whatever a model writes, the rating answers (no Lua error to the user)."""
    rng = random.Random(22)
    for _ in range(1500):
        cmd = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 25)))
        level, reason = rate(rt, cmd)
        assert level in ("low", "medium", "high") and reason, cmd


def test_long_and_deeply_nested_commands_are_rated_quickly(rt):
    """Rating reads each character a bounded number of times: a 400 kB command or nesting
    thousands deep is answered at once, and nesting it cannot follow is high."""
    big = "ls -la src && " * 30_000 + "rm x"
    started = time.monotonic()
    assert rate(rt, big)[0] == "high"
    assert rate(rt, "echo " + "a" * 400_000)[0] == "low"
    level, reason = rate(rt, "echo " + "$(" * 5000 + "ls" + ")" * 5000)
    assert level == "high" and "nested too deeply" in reason
    level, reason = rate(rt, "sh -c " + "'sh -c \"" * 2000 + "ls")
    assert level == "high"
    level, reason = rate(rt, "find . " + "-exec find . " * 3000 + "-exec ls {} ;")
    assert level == "high"
    assert time.monotonic() - started < 20


# What the rating cannot see into: a program that deletes by itself, a wrapper it does not know.
# None is low any more (they are not known readers); none is high either, though it may delete:
# security.md says so ("Not protected"); the sandbox, not the rating, bounds these.
UNSEEN = ["python3 tidy.py", "make clean", "npm run clean", "./tidy.sh", "mywrap rm x"]


@pytest.mark.parametrize("cmd", UNSEEN)
def test_what_the_rating_cannot_see_into_is_rated_by_what_it_shows(rt, cmd):
    assert rate(rt, cmd)[0] == "medium"


def test_a_program_the_rating_does_not_know_is_never_low(rt):
    """Low is an allow-list: 3,000 random program names outside the ones the rating reads
    (lib/agent/shell_risk.lua MAY_BE_LOW), alone, with arguments, by path, behind a wrapper, in a
    pipe or `sh -c`, are never low; the names of the allow-list are a small part of them."""
    known = set(rt.to_py(rt.execute('return require("lib.agent.shell_risk").MAY_BE_LOW')))
    rng = random.Random(40)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789._+-"
    shapes = ["{}", "{} x", "{} -q --flag=1 a b", "./{}", "/usr/local/bin/{} x", "timeout 5 {} x",
              "env A=1 {}", "cat f | {}", "{} < in.txt", "sh -c '{} x'", "echo $({})", "ls && {} x"]
    tried = hit = 0
    while tried < 3000:
        name = rng.choice("abcdefghijklmnopqrstuvwxyz") + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 11)))
        if name in known:
            hit += 1
            continue
        tried += 1
        cmd = rng.choice(shapes).format(name)
        level, reason = rate(rt, cmd)
        assert level != "low", f"{cmd!r} -> {level}: {reason}"
    assert hit < 300, hit  # the test tried names the rating does not know, not only its own


# ---- the real CLI: at the default level the disguised delete does not run -----------------

@pytest.mark.needs_sandbox
def test_a_wrapped_delete_is_not_run_at_the_default_level_while_ls_runs(repo, api):  # noqa: F811
    """Without --auto-approve the model runs `ls`, then `timeout 5 rm notes.txt`: ls runs, the
    delete does not, notes.txt is still there, and the user's progress lines say why."""
    api.push("$(run ls)", "$(run timeout 5 rm notes.txt)", "$(answer done)")
    r = repo.moss("@agent", "--provider", "anthropic", "--v1", "-n", "--role", "fixer", "--validate", "true",
                  "fix add", env=api.env(), timeout=90)
    assert r.returncode == 0, r.stderr
    assert (repo.root / "notes.txt").read_text() == "v1\n"
    assert "✓ run ls" in r.stderr
    assert ("✗ run timeout 5 rm notes.txt — Not run: risk high (deletes files (`rm`, run by `timeout`)) "
            "is above --auto-approve low") in r.stderr
    (log,) = (repo.root / ".moss/agent/logs").glob("*.jsonl")
    ls, rm = [e for e in map(json.loads, log.read_text().splitlines()) if e["event"] == "command"]
    assert ls["ok"] is True and "notes.txt" in ls["output"]
    assert rm["refused"] is True
    # the model is told in its next request why it did not run
    assert "run by `timeout`" in json.dumps(api.requests[-1].body)


@pytest.mark.needs_sandbox
def test_the_user_is_asked_about_a_wrapped_delete_and_no_keeps_the_file(repo, api):  # noqa: F811
    """On a terminal the question names the risk and why; answering no runs nothing."""
    api.push("$(run git -C . rm -q --cached notes.txt && timeout 5 rm notes.txt)", "$(answer done)")
    r = repo.moss("@agent", "--provider", "anthropic", "--v1", "--role", "fixer", "--validate", "true", "fix add",
                  env={**api.env(), "MOSS_ASSUME_TTY": "1"}, input="n\n", timeout=90)
    assert "risk high: deletes files (`git rm`)" in r.stderr
    assert (repo.root / "notes.txt").exists()


@pytest.mark.needs_sandbox
def test_commands_that_overwrite_without_a_delete_word_are_not_run_at_the_default_level(repo, api):  # noqa: F811
    """Round 3: `sort -o`, `uniq IN OUT` and an unknown program overwrote files at the default
    level. In one reply the model truncates notes.txt with `sort -o`, overwrites it with
    `uniq`, and runs `php`; then reads it with `cat`: the writers are not run (the progress
    lines say why), the reader is, and notes.txt is as it was."""
    api.push("$(run sort -o notes.txt /dev/null) $(run uniq app/calc.py notes.txt) $(run php -r 'unlink(\"notes.txt\");') "
             "$(run cat notes.txt)", "$(answer done)")
    r = repo.moss("@agent", "--provider", "anthropic", "--v1", "-n", "--role", "fixer", "--validate", "true",
                  "fix add", env=api.env(), timeout=90)
    assert r.returncode == 0, r.stderr
    assert (repo.root / "notes.txt").read_text() == "v1\n"
    assert "Not run: risk medium (writes to notes.txt (`sort -o`)) is above --auto-approve low" in r.stderr
    assert "Not run: risk medium (writes to notes.txt (`uniq`)) is above --auto-approve low" in r.stderr
    assert "Not run: risk medium (runs `php`, which this rating does not know to only read)" in r.stderr
    assert "✓ run cat notes.txt" in r.stderr

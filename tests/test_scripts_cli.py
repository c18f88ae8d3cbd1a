"""`moss @NAME`, script resolution and overriding, `moss scripts`, `moss init`, errors."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO


def test_project_script_overrides_user_and_builtin(project):
    project.user_file("scripts/greet.lua", 'print("user greet")\n')
    r = project.moss("@greet")
    assert r.stdout == "user greet\n"
    project.script("greet", 'print("project greet", ...)\n')
    r = project.moss("@greet", "a", "b c")
    assert r.returncode == 0
    assert r.stdout == "project greet\ta\tb c\n"


def test_project_module_overrides_builtin_module(project):
    builtin = next((REPO / "scripts" / "lib").glob("*.lua"))
    mod = builtin.stem
    project.write(f".moss/scripts/lib/{mod}.lua", "return { overridden = true }\n")
    project.script("which", f'print(require("lib.{mod}").overridden)\n')
    r = project.moss("@which")
    assert r.stdout.strip() == "true", r.stderr


def test_args_reach_lua(project):
    project.script("args", "for i, a in ipairs(moss.args) do print(i, a) end print(select('#', ...))\n")
    r = project.moss("@args", "one", "--flag", "x y")
    assert r.stdout.splitlines() == ["1\tone", "2\t--flag", "3\tx y", "3"]


def test_host_options_are_taken_out_of_args(project):
    project.script("opts", "print(#moss.args, moss.args[1], moss.options.model, moss.options.max_cost)\n")
    r = project.moss("@opts", "--model", "m1", "task", "--max-cost=0.5")
    assert r.stdout.strip() == "1\ttask\tm1\t0.5"


def test_missing_script_exits_2_naming_where_it_looked(project):
    r = project.moss("@missing")
    assert r.returncode == 2
    assert "script 'missing' not found" in r.stderr
    assert ".moss/scripts/missing.lua" in r.stderr
    assert "moss/scripts/missing.lua" in r.stderr  # user dir too
    assert str(REPO / "scripts" / "missing.lua") in r.stderr  # the built-in scripts


def test_lua_error_names_file_line_and_traceback(project):
    project.write(".moss/scripts/lib/helper.lua", "local M = {}\nfunction M.fail(x)\n  error('bad input: ' .. x)\nend\nreturn M\n")
    project.script("boom", 'local h = require("lib.helper")\nlocal function run() h.fail(42) end\nrun()\n')
    r = project.moss("@boom")
    assert r.returncode == 1
    assert ".moss/scripts/lib/helper.lua:3: bad input: 42" in r.stderr
    assert "stack traceback:" in r.stderr
    assert ".moss/scripts/boom.lua:2:" in r.stderr
    assert "bootstrap" not in r.stderr


def test_syntax_error_names_file_line(project):
    project.script("broken", "local x = = 1\n")
    r = project.moss("@broken")
    assert r.returncode == 1
    assert ".moss/scripts/broken.lua:1: unexpected symbol near '='" in r.stderr


def test_host_error_is_catchable_in_lua(project):
    project.script(
        "catch",
        """
        local ok, err = pcall(require, "no.such.module")
        print(ok, moss.error_kind(err), err:match("not found") ~= nil)
        local ok2, err2 = pcall(moss.ui.print)
        print(ok2, type(tostring(err2)))
        """,
    )
    r = project.moss("@catch")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "false\tnot_found\ttrue"


def test_module_style_script_help_and_exit_status(project):
    project.script(
        "tool",
        """
        -- Does a thing with a widget.
        return {
          help = "usage: moss @tool [--fail]\\n\\nDoes a thing.",
          main = function(args)
            if args[1] == "--fail" then return 4 end
            print("ran")
          end,
        }
        """,
    )
    r = project.moss("@tool", "--help")
    assert r.returncode == 0
    assert r.stdout.startswith("usage: moss @tool [--fail]")
    assert "--provider NAME" in r.stdout  # host options are listed too
    assert "ran" not in r.stdout.splitlines()  # main did not run
    assert project.moss("@tool").stdout == "ran\n"
    assert project.moss("@tool", "--fail").returncode == 4
    listing = project.moss("scripts").stdout
    line = next(ln for ln in listing.splitlines() if ln.startswith("@tool"))
    assert "project" in line and "Does a thing with a widget." in line


def test_scripts_lists_origin_and_overrides(project):
    project.user_file("scripts/tidy.lua", "-- user tidy\nprint('user')\n")
    project.script("tidy", "-- my tidy\nprint('mine')\n")
    out = project.moss("scripts").stdout
    line = next(ln for ln in out.splitlines() if ln.startswith("@tidy\t"))
    assert line.split("\t")[1] == "project (overrides user)"
    assert line.split("\t")[3] == "my tidy"


def test_print_goes_to_stdout_ui_to_stderr(project):
    project.script("out", 'print("answer")\nmoss.ui.print("progress")\nmoss.ui.status("turn 1")\n')
    r = project.moss("@out")
    assert r.stdout == "answer\n"
    assert "progress" in r.stderr and "turn 1" in r.stderr


def test_version_and_help():
    r = subprocess.run([sys.executable, "-m", "moss", "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("moss, version ")
    r = subprocess.run([sys.executable, "-m", "moss", "--help"], capture_output=True, text=True)
    assert "moss @NAME" in r.stdout and "init" in r.stdout


def test_init_creates_layout_and_gitignore(project):
    cwd = project.root.parent / "fresh"
    cwd.mkdir()
    r = project.moss("init", cwd=cwd)
    assert r.returncode == 0, r.stderr
    base = cwd / ".moss"
    assert (base / "config.toml").read_text().startswith("# moss project configuration")
    assert (base / "memory").is_dir()
    # git agrees with the contract: only config.toml, memory/ and scripts/ are versioned.
    subprocess.run(["git", "init", "-q"], cwd=cwd, check=True)
    (base / "agent").mkdir()
    (base / "agent" / "session-x.json").write_text("{}")
    (base / "scripts" / "mine.lua").write_text("print(1)")
    out = subprocess.run(["git", "status", "--porcelain", "-uall"], cwd=cwd, capture_output=True, text=True).stdout
    paths = {ln[3:] for ln in out.splitlines()}
    assert ".moss/config.toml" in paths
    assert ".moss/memory/facts.md" in paths
    assert ".moss/scripts/mine.lua" in paths
    assert ".moss/agent/session-x.json" not in paths
    # A second init keeps the edited config.
    (base / "config.toml").write_text("[agent]\nx = 1\n")
    project.moss("init", cwd=cwd)
    assert (base / "config.toml").read_text() == "[agent]\nx = 1\n"

"""Layered config: project over user, every field visible to Lua, get/set, broken TOML."""

from __future__ import annotations

import tomllib


def test_arbitrary_agent_field_reaches_lua_and_project_wins(project):
    project.user_file("config.toml", '[agent]\nmy_custom_option = "user"\nonly_user = 7\n[llm]\nmodel = "u"\n')
    project.write(".moss/config.toml", '[agent]\nmy_custom_option = "project"\n[agent.deep]\nlist = [1, 2, 3]\n')
    project.script(
        "cfg",
        """
        local a = moss.config.agent
        print(a.my_custom_option, a.only_user, a.deep.list[3], moss.config.llm.model)
        """,
    )
    r = project.moss("@cfg")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "project\t7\t3\tu"


def test_broken_toml_exits_2_with_line_and_column(project):
    project.write(".moss/config.toml", '[agent]\nmax_turns = 3\nname = "unterminated\n')
    project.script("x", "print(1)\n")
    r = project.moss("@x")
    assert r.returncode == 2
    assert ".moss/config.toml:3:" in r.stderr
    line_col = r.stderr.split(".moss/config.toml:")[1].split(":")[:2]
    assert all(part.isdigit() for part in line_col)
    assert "illegal character" in r.stderr.lower()  # the parser's reason
    r = project.moss("config", "get", "agent.max_turns")
    assert r.returncode == 2 and ".moss/config.toml:3:" in r.stderr


def test_broken_user_toml_named(project):
    project.user_file("config.toml", "[llm\n")
    project.script("x", "print(1)\n")
    r = project.moss("@x")
    assert r.returncode == 2
    assert "config.toml:1:" in r.stderr


def test_config_get_and_set_keep_other_keys(project):
    project.write(".moss/config.toml", '[llm]\nprovider = "openai"\n[agent]\nmax_turns = 9\n')
    r = project.moss("config", "set", "agent.some.key", "42")
    assert r.returncode == 0, r.stderr
    project.moss("config", "set", "agent.label", "hello world")
    project.moss("config", "set", "agent.flags", "[1, 2]")
    data = tomllib.loads((project.root / ".moss/config.toml").read_text())
    assert data == {"llm": {"provider": "openai"},
                    "agent": {"max_turns": 9, "some": {"key": 42}, "label": "hello world", "flags": [1, 2]}}
    assert project.moss("config", "get", "agent.some.key").stdout.strip() == "42"
    assert project.moss("config", "get", "llm.provider").stdout.strip() == "openai"
    r = project.moss("config", "get", "agent.nope")
    assert r.returncode == 1 and "agent.nope is not set" in r.stderr
    project.script("seen", "print(moss.config.agent.some.key + 1)\n")
    assert project.moss("@seen").stdout.strip() == "43"


def test_config_get_of_an_unset_key_shows_its_default(project):
    """The README's own example on a fresh project: `moss config get agent.max_turns` shows
    the turn limit a run would use (the default machine's), says it is the default, exits 0;
    choosing another machine changes the default shown."""
    r = project.moss("config", "get", "agent.max_turns")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "15\n"
    assert "agent.max_turns is not set in any config file; 15 is its default" in r.stderr
    assert project.moss("config", "get", "agent.role").stdout == "explorer\n"
    project.moss("config", "set", "agent.machine", "v2")
    r = project.moss("config", "get", "agent.max_turns")
    assert r.stdout == "16\n" and "v2 machine" in r.stderr
    project.moss("config", "set", "agent.max_turns", "9")
    r = project.moss("config", "get", "agent.max_turns")
    assert (r.stdout, r.stderr) == ("9\n", "")
    r = project.moss("config", "get", "agent.no_such_setting")
    assert r.returncode == 1 and "agent.no_such_setting is not set, and has no default" in r.stderr


def test_config_set_keeps_comments_and_refuses_to_replace_a_table(project):
    cwd = project.root.parent / "fresh"
    cwd.mkdir()
    project.moss("init", cwd=cwd)
    r = project.moss("config", "set", "agent.max_turns", "20", cwd=cwd)
    assert r.returncode == 0 and "rewritten" not in r.stderr
    project.moss("config", "set", "agent.extra.name", '"x"', cwd=cwd)
    text = (cwd / ".moss/config.toml").read_text()
    assert "# moss project configuration" in text and '# validate_on = "edit"' in text
    data = tomllib.loads(text)
    assert data["agent"]["max_turns"] == 20 and data["agent"]["extra"] == {"name": "x"}
    r = project.moss("config", "set", "agent", "5", cwd=cwd)
    assert r.returncode == 2 and "agent is a table" in r.stderr
    assert tomllib.loads((cwd / ".moss/config.toml").read_text()) == data

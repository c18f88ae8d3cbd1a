"""Property-based fuzzing of two places where text from outside meets moss's code.

(a) The `$(...)` command parser (scripts/lib/machine/parser.lua) reads every model reply: on
any text it must return well-formed commands, each exactly the text it came from, and
`strip` must keep everything outside them.
(b) Checkpoints (.moss/agent/session-ID.json) are read back from disk, where anything may
be found: loading or listing one gives a value or a clear moss error, never an internal one.

Both run inside one in-process moss Lua runtime, the way the agent calls them. The examples
are derandomized so CI is repeatable; `HYPOTHESIS_PROFILE=explore` draws new ones each run.
"""

from __future__ import annotations

import json
import os
import re

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from conftest import builtin_lua  # noqa: E402
from moss.runtime import LuaScriptError  # noqa: E402

COMMON = dict(max_examples=200, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("repeatable", derandomize=True, **COMMON)
settings.register_profile("explore", **COMMON)
PROFILE = settings.get_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable")
                               if os.environ.get("HYPOTHESIS_PROFILE") in ("repeatable", "explore")
                               else "repeatable")

# Errors a caller can act on; "lua" (a bug in a script) and "internal" (a bug in moss) are not.
CLEAR_KINDS = {"config", "not_found", "usage"}


@pytest.fixture(scope="module")
def lua():
    """The built-in scripts over an empty project (no user script can shadow the parser)."""
    with builtin_lua() as pair:
        yield pair


# ---------------------------------------------------------------------------- (a) parser

# Replies built from the grammar's own pieces (so commands, quotes, escapes and nesting
# meet often), mixed with arbitrary Unicode.
PIECES = ["$(", "$(view ", "$(note ", "$( Done", "$(text-search ", ")", ")", "(", '"', "'", "\\",
          " ", "\n", "\t", "$", "a", "src/x.rs", "it's", "é", "```", "ANSWER", "-", "_"]
texts = st.one_of(
    st.lists(st.sampled_from(PIECES) | st.text(max_size=3), min_size=1, max_size=60).map("".join),
    st.lists(st.sampled_from(PIECES), min_size=5, max_size=40).map("".join),
    st.text(max_size=300),
)

PARSE = """
local P = require("lib.machine.parser")
local text = ...
local cmds = P.parse(text)
local words, unquoted = {}, {}
for i, c in ipairs(cmds) do
  local _ = c.after -- made on first read (a command's line is only cut when a script asks)
  words[i] = P.words(c.args)
  unquoted[i] = P.unquote(c.args)
end
return moss.dict { cmds = cmds, stripped = P.strip(text), words = words, unquoted = unquoted }
"""

_NAME = re.compile(rb"[a-z0-9_-]+")
_BODY = re.compile(rb"[ \t\n\r\f\v]*([A-Za-z0-9_-]+)[ \t\n\r\f\v]*(.*?)[ \t\n\r\f\v]*", re.S)


def _normalise(b: bytes) -> bytes:
    """parser.strip's tidying, with Lua's %s (ASCII whitespace), which bytes regexes share."""
    b = re.sub(rb"\n\s*\n\s*\n+", b"\n\n", b)
    return re.sub(rb"\s+\Z", b"", re.sub(rb"\A\s+", b"", b))


def _parse(lua, text: str) -> dict:
    rt, _ = lua
    try:
        return rt.to_py(rt.execute(PARSE, "=(fuzz)", text))
    except LuaScriptError as e:
        pytest.fail(f"the parser raised a {e.kind} error on {text!r}: {e.message}")


@settings(parent=PROFILE)
@given(text=texts)
@example(text="keep $(! $(view a)) tail $(view a) end")   # the same raw text inside a non-command
@example(text="$(view a) $(note it's \"x\") $(done ANSWER)\n13 $(unclosed")
@example(text="$(")
def test_parser_returns_well_formed_commands_and_keeps_the_rest(lua, text):
    out = _parse(lua, text)
    raw_text = text.encode("utf-8")
    cmds = out["cmds"]
    assert isinstance(cmds, list)
    kept, last = [], 0
    for i, c in enumerate(cmds):
        assert set(c) >= {"name", "args", "raw", "line", "after", "first", "last"}, c
        name, args, raw = (c[k].encode("utf-8") for k in ("name", "args", "raw"))
        assert _NAME.fullmatch(name), c
        # exactly the text it came from, in order, not overlapping the one before
        first, end = c["first"], c["last"]
        assert isinstance(first, int) and isinstance(end, int) and last < first <= end
        assert raw_text[first - 1:end] == raw and raw.startswith(b"$(") and raw.endswith(b")")
        m = _BODY.fullmatch(raw[2:-1])
        assert m and m[1].lower() == name and m[2] == args, c
        assert c["line"] == raw_text.count(b"\n", 0, first - 1) + 1
        assert c["after"].encode("utf-8") == raw_text[end:].split(b"\n", 1)[0]
        assert all(isinstance(w, str) for w in out["words"][i])
        assert isinstance(out["unquoted"][i], str)
        kept.append(raw_text[last:first - 1])
        last = end
    kept.append(raw_text[last:])
    assert out["stripped"].encode("utf-8") == _normalise(b"".join(kept))


words = st.text(alphabet=st.sampled_from(list("abcxyz019._/-:=,é")), min_size=1, max_size=12)


@settings(parent=PROFILE)
@given(prefix=texts.map(lambda t: t.replace("$(", "$ (")), name=st.from_regex(r"[A-Za-z][A-Za-z0-9_-]{0,12}", fullmatch=True),
       args=st.lists(words, max_size=5), suffix=texts)
def test_a_command_written_in_any_text_is_found_whole(lua, prefix, name, args, suffix):
    """Whatever precedes a command (stray quotes, parentheses, backslashes) and whatever
    follows it, `$(name args)` comes back as itself and first."""
    if prefix.endswith("\\") or prefix.endswith("$"):
        prefix += " "
    command = f"$({name} {' '.join(args)})"
    cmds = _parse(lua, prefix + command + suffix)["cmds"]
    assert cmds, (prefix, command, suffix)
    assert (cmds[0]["name"], cmds[0]["args"], cmds[0]["raw"]) == (name.lower(), " ".join(args), command)


# ------------------------------------------------------------------------ (b) checkpoints

GOOD = {"id": "abc", "session_id": "abc", "task": "what is this?", "machine": "v1", "role": "explorer",
        "state": "agent", "turn": 2, "max_turns": 15, "mem": {"items": []}, "messages": {}, "done": False}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=25)
checkpoints = st.one_of(
    st.binary(max_size=300),                                            # any bytes
    json_values.map(lambda v: json.dumps(v).encode()),                  # any JSON shape
    st.fixed_dictionaries({}, optional={k: json_values for k in GOOD})  # the right keys, any values
    .map(lambda d: json.dumps(d).encode()),
    st.tuples(st.integers(0, 200), st.binary(max_size=3))               # a torn or damaged good one
    .map(lambda cut: json.dumps(GOOD).encode()[:cut[0]] + cut[1]),
    st.integers(150, 400).map(lambda n: b"[" * n + b"]" * n),          # nested past Lua's limit
)

LOAD = """
local id = ...
local function try(f, ...)
  local ok, v = pcall(f, ...)
  if ok then return moss.dict { kind = "ok", type = type(v), value = v } end
  return moss.dict { kind = moss.error_kind(v), message = tostring(type(v) == "table" and v.message or v) }
end
return moss.dict { load = try(moss.session.load, id), latest = try(moss.session.load), list = try(moss.session.list) }
"""


@settings(parent=PROFILE)
@given(data=checkpoints)
@example(data=b"\xff\xfe{}")
@example(data=b'{"turn": 99999999999999999999, "task": "\\ud800"}')
@example(data=b"[" * 100_000)
def test_any_checkpoint_loads_or_fails_clearly(lua, data):
    rt, root = lua
    agent = root / ".moss" / "agent"
    for old in agent.glob("session-*.json"):
        old.unlink()
    (agent / "session-abc.json").write_bytes(data)
    try:
        out = rt.to_py(rt.execute(LOAD, "=(fuzz)", "abc"))
    except LuaScriptError as e:
        pytest.fail(f"{e.kind}: {e.message}")
    for what in ("load", "latest"):
        r = out[what]
        if r["kind"] == "ok":
            assert r["type"] == "table" and r["value"]["session_id"] == "abc"
        else:
            assert r["kind"] in CLEAR_KINDS, r
            assert "session-abc.json" in r["message"] and "start fresh" in r["message"], r
    listed = out["list"]
    assert listed["kind"] == "ok", listed
    (row,) = listed["value"]
    assert row["id"] == "abc"
    if out["load"]["kind"] == "ok":
        assert "error" not in row
        # the host lists a checkpoint's plain fields whatever they are; their meaning is Lua's
        # (`field_kinds`, the host's own, says what type each field has, for Lua to judge)
        plain = {k: v for k, v in row.items() if k != "field_kinds"}
        assert all(v is None or isinstance(v, (str, int, float, bool)) for v in plain.values()), row
        assert isinstance(row.get("field_kinds", []), (list, dict)), row
    else:
        assert row["state"] == "corrupt" and row["error"] == out["load"]["message"].split(": ", 1)[1]

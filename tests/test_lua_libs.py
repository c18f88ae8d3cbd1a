"""The agent's Lua libraries, exercised through the real `moss` CLI the way a user's script would.

Every case below is data: a module, a function and JSON arguments. One project script
(`.moss/scripts/libcases.lua`) reads all of them from `cases.json`, `require`s each module,
calls it under `pcall` and prints one JSON object of results, so the whole table costs a single
`moss @libcases` run. The Python tests then assert on what a model or a user would notice.

Stateful scenarios (working memory, the flag spec) live in small helper modules written into the
project's `.moss/scripts/tcase/`, which also shows a project module `require`-ing built-in ones.

"""

from __future__ import annotations

import json
import re
import textwrap

import pytest
from conftest import Project

NIL = "<nil>"  # how the harness spells a Lua nil among several return values

HARNESS = r'''
-- Run every case in cases.json: require(mod)[fn](args...) under pcall; print one JSON object.
local cases = moss.json.decode(moss.fs.read("cases.json"))
local out = moss.dict()
for _, c in ipairs(cases) do
  local r = table.pack(pcall(function()
    local mod = require(c.mod)
    return mod[c.fn](table.unpack(c.args, 1, c.nargs))
  end))
  if r[1] then
    local ret = {}
    for i = 2, r.n do
      local v = r[i]
      if v == nil then v = "<nil>" end
      ret[i - 1] = v
    end
    out[c.id] = { ok = true, ret = ret }
  else
    local e = r[2]
    out[c.id] = { ok = false, kind = moss.error_kind(e), message = tostring(type(e) == "table" and e.message or e),
      text = tostring(e) }
  end
end
print(moss.json.encode(out))
'''

# Working-memory scenarios: plain functions of JSON-able arguments.
MEM_HELPER = r'''
local memory = require("lib.machine.memory")
local M = {}

local function with_pending(n)
  local mem = memory.new()
  local outs = {}
  for i = 1, n do outs[i] = { cmd = "view f" .. i, content = "output " .. i, ok = true } end
  memory.set_pending(mem, outs)
  return mem
end

local function contents(mem)
  local t = {}
  for i, it in ipairs(mem.items) do t[i] = it.content end
  return t
end

--- ids of n fresh notes
function M.note_ids(n)
  local mem, ids = memory.new(), {}
  for i = 1, n do ids[i] = memory.note(mem, "note " .. i, 1).id end
  return ids
end

--- keep ARGS against n pending results: (kept commands, error or nil, ids of kept items)
function M.keep(args, n)
  local mem = with_pending(n)
  local kept, err = memory.keep(mem, args, 1)
  local cmds, ids = {}, {}
  for i, it in ipairs(kept) do cmds[i] = it.cmd; ids[i] = it.id end
  return cmds, err, ids
end

--- keeping the same result twice stores it once
function M.keep_twice()
  local mem = with_pending(2)
  memory.keep(mem, "1", 1)
  local again = memory.keep(mem, "1 2", 2)
  return #again, #mem.items
end

--- three notes; drop the second one written as FORM (%s is replaced by its id)
function M.drop(form)
  local mem = memory.new()
  for _, t in ipairs({ "alpha", "beta", "gamma" }) do memory.note(mem, t, 1) end
  local id = mem.items[2].id
  local arg = form:gsub("%%s", id)
  local dropped = memory.drop(mem, arg)
  return dropped and dropped.content or "<nil>", contents(mem)
end

--- notes with the given texts; forget PATTERN: (count removed, contents left)
function M.forget(texts, pattern)
  local mem = memory.new()
  for _, t in ipairs(texts) do memory.note(mem, t, 1) end
  local n = memory.forget(mem, pattern)
  return n, contents(mem)
end

--- forget also matches a kept output's command
function M.forget_output(pattern)
  local mem = with_pending(2)
  memory.keep(mem, "", 1)
  memory.note(mem, "a conclusion", 1)
  local n = memory.forget(mem, pattern)
  return n, contents(mem)
end

--- notes and kept outputs are told apart
function M.kinds()
  local mem = with_pending(2)
  memory.note(mem, "first note", 1)
  memory.keep(mem, "2", 1)
  memory.note(mem, "second note", 2)
  local notes, outs = {}, {}
  for i, it in ipairs(memory.notes(mem)) do notes[i] = it.content end
  for i, it in ipairs(memory.outputs(mem)) do outs[i] = it.cmd end
  return notes, outs, memory.size(mem)
end

--- new_id with all but one single-character id taken must find the free one
function M.last_free(free)
  local taken = {}
  for c in memory.ALPHABET:gmatch(".") do if c ~= free then taken[c] = true end end
  return memory.new_id(1, taken)
end

function M.none_free()
  local taken = {}
  for c in memory.ALPHABET:gmatch(".") do taken[c] = true end
  return memory.new_id(1, taken)
end

return M
'''

# A flag spec like a user's script would declare (mixed list/record tables do not survive JSON).
CLI_HELPER = r'''
local cli = require("lib.cli")
local M = {}
M.SPEC = {
  { "--max-turns", type = "number", default = 10, help = "turn limit" },
  { "-n", "--non-interactive", type = "flag", key = "non_interactive", help = "never ask" },
  { "--role", choices = { "auditor", "explorer", "refactorer" }, help = "which role" },
  { "--resume", metavar = "[ID]", optional_value = true, help = "continue a session" },
  { "--validate", metavar = "CMD", help = "validation command" },
}
function M.parse(args)
  local opts, rest = cli.parse(args, M.SPEC)
  return moss.dict(opts), rest
end
function M.help()
  return cli.help(M.SPEC)
end
return M
'''

CASES: list[dict] = []


def case(cid: str, mod: str, fn: str, *args) -> str:
    CASES.append({"id": cid, "mod": mod, "fn": fn, "args": list(args), "nargs": len(args)})
    return cid


def params(table: dict):
    """pytest params over a case table's keys."""
    return [pytest.param(k, id=k) for k in table]


@pytest.fixture(scope="module")
def lua(tmp_path_factory):
    """Run every case once through the real CLI; answer {id: {ok, ret | kind, message}}."""
    base = tmp_path_factory.mktemp("lualibs")
    (base / "proj").mkdir()
    (base / "home").mkdir()
    proj = Project(base / "proj", base / "home")
    proj.script("libcases", HARNESS)
    proj.write(".moss/scripts/tcase/mem.lua", MEM_HELPER)
    proj.write(".moss/scripts/tcase/cli.lua", CLI_HELPER)
    proj.write(".moss/scripts/tcase/parse.lua", PARSE_HELPER)
    proj.write("cases.json", json.dumps(CASES))
    r = proj.moss("@libcases")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def ret(lua, cid):
    r = lua[cid]
    assert r["ok"], f"{cid} raised ({r['kind']}): {r['text']}"
    return [None if v == NIL else v for v in r["ret"]]


def first(lua, cid):
    return ret(lua, cid)[0]


def failure(lua, cid):
    r = lua[cid]
    assert not r["ok"], f"{cid} should have raised, returned {r.get('ret')!r}"
    return r


def obj(value):
    """An empty Lua table comes back as []; treat it as an empty object."""
    return value or {}


# ---------------------------------------------------------------------------------------------
# parser.parse: the $(...) grammar
# ---------------------------------------------------------------------------------------------

P = "lib.machine.parser"

# id -> (reply text, [(name, args), ...])
PARSE = {
    "simple": ("$(view src/main.rs)", [("view", "src/main.rs")]),
    "several": (
        'Let me look.\n$(view src/main.rs) $(text-search "enum Provider")\n$(run cargo test)',
        [("view", "src/main.rs"), ("text-search", '"enum Provider"'), ("run", "cargo test")],
    ),
    "nested_parens_in_quotes": (r'$(text-search "fn (a|b)\(")', [("text-search", r'"fn (a|b)\("')]),
    "nested_parens_bare": ("$(run echo $(pwd) (x)) $(view a)", [("run", "echo $(pwd) (x)"), ("view", "a")]),
    "double_quoted_close_paren": ('$(text-search "a)b") $(view c)', [("text-search", '"a)b"'), ("view", "c")]),
    "single_quoted_close_paren": ("$(text-search 'c)d') $(view e)", [("text-search", "'c)d'"), ("view", "e")]),
    "escaped_quotes_and_parens": (r'$(note say \"hi\" \) ok) $(view f)', [("note", r'say \"hi\" \) ok'), ("view", "f")]),
    "escaped_paren_bare": (r"$(text-search fn\() $(view g)", [("text-search", r"fn\("), ("view", "g")]),
    "apostrophe_in_free_text": ("$(note it's in llm.rs) and $(view llm.rs)", [("note", "it's in llm.rs"), ("view", "llm.rs")]),
    "apostrophes_then_quotes": (
        "$(note don't stop) $(note the user's 'config' file) $(text-search 'x')",
        [("note", "don't stop"), ("note", "the user's 'config' file"), ("text-search", "'x'")],
    ),
    "unclosed_dropped": ("$(view a) then $(view b", [("view", "a")]),
    "unclosed_drops_rest": ("$(view a) $(note oops ( $(view c)", [("view", "a")]),
    "code_fences": (
        "Here:\n```\n$(view a)\n```\n```sh\n$(run ls -la)\n```",
        [("view", "a"), ("run", "ls -la")],
    ),
    "empty": ("$() $(   ) $(view x)", [("view", "x")]),
    "uppercase_names": ("$(VIEW Foo) $(Text-Search Bar)", [("view", "Foo"), ("text-search", "Bar")]),
    "padding_trimmed": ("$(  view   a b  )", [("view", "a b")]),
    "no_commands": ("Costs $5 (roughly) and $ (spaced) is not a command.", []),
    "multiline_args": ("$(edit a.py/f replace\ndef f():\n    return (1)\n)", [("edit", "a.py/f replace\ndef f():\n    return (1)")]),
    # A trailing apostrophe (plural possessive) or an inch mark is not a quote either; today it
    # opens one because *some* quote closes later in the reply, and the next command is eaten.
    "possessive_plural_then_quote": (
        "$(note the tests' output is empty) $(text-search 'fn main')",
        [("note", "the tests' output is empty"), ("text-search", "'fn main'")],
    ),
    "inch_mark_then_quote": (
        '$(note a 5" screen) $(text-search "fn main")',
        [("note", 'a 5" screen'), ("text-search", '"fn main"')],
    ),
}
for _k, (_text, _) in PARSE.items():
    case(f"parse/{_k}", P, "parse", _text)


@pytest.mark.parametrize("key", params(PARSE))
def test_parse_commands(lua, key):
    _, expected = PARSE[key]
    got = first(lua, f"parse/{key}")
    assert [(c["name"], c["args"]) for c in got] == expected


def test_parse_raw_and_line_numbers(lua):
    cmds = first(lua, "parse/several")
    assert [c["line"] for c in cmds] == [2, 2, 3]
    assert cmds[1]["raw"] == '$(text-search "enum Provider")'
    fenced = first(lua, "parse/code_fences")
    assert [c["line"] for c in fenced] == [3, 6]
    assert first(lua, "parse/padding_trimmed")[0]["raw"] == "$(  view   a b  )"


# `after` is worked out when a command's field is read (see parser.lua), so read it in Lua
PARSE_HELPER = r'''
local parser = require("lib.machine.parser")
return { afters = function(text)
  local out = {}
  for i, c in ipairs(parser.parse(text)) do out[i] = { c.name, c.args, c.line, c.after } end
  return out
end }
'''

case("parse/done_after", "tcase.parse", "afters", "I checked llm.rs.\n$(done ANSWER) the answer is 13\nThanks!")
case("parse/done_inline", "tcase.parse", "afters", "$(done 13)")
case("parse/afters_on_one_line", "tcase.parse", "afters", "$(view a) and $(view b) end\nnext")


def test_parse_done_after_takes_rest_of_line(lua):
    assert first(lua, "parse/done_after") == [["done", "ANSWER", 2, " the answer is 13"]]  # not "Thanks!"
    assert first(lua, "parse/done_inline") == [["done", "13", 1, ""]]
    assert first(lua, "parse/afters_on_one_line") == [["view", "a", 1, " and $(view b) end"], ["view", "b", 1, " end"]]


# parser.words: shell-like splitting that keeps regex backslashes
WORDS = {
    "regex_backslash_s": (r'"fn\s+main" --only *.rs', [r"fn\s+main", "--only", "*.rs"]),
    "regex_escaped_paren": (r'"eval\(" src', [r"eval\(", "src"]),
    "single_quotes_keep_backslashes": (r"'fn\s+(x)\b'", [r"fn\s+(x)\b"]),
    "quoted_words": (r"""'a b' "c d" e\ f""", ["a b", "c d", "e f"]),
    "escaped_quotes": (r'"say \"hi\"" x', ['say "hi"', "x"]),
    "escaped_backslash": (r'"a\\b"', [r"a\b"]),
    "empty_quoted_arg": ('a "" b', ["a", "", "b"]),
    "extra_spaces": ("  spaced   out \t ", ["spaced", "out"]),
    "nothing": ("", []),
    "adjacent_quotes_join": ('x"y z"w', ["xy zw"]),
    "newline_inside_quotes": ('--old "line1\nline2" --new "x"', ["--old", "line1\nline2", "--new", "x"]),
    "windows_path_kept": (r"C:\path\to", [r"C:\path\to"]),
}
for _k, (_text, _) in WORDS.items():
    case(f"words/{_k}", P, "words", _text)


@pytest.mark.parametrize("key", params(WORDS))
def test_words(lua, key):
    assert first(lua, f"words/{key}") == WORDS[key][1]


# parser.unquote: one layer of matching quotes around free text, escapes undone
UNQUOTE = {
    "double": ('"hello world"', "hello world"),
    "single": ("'x'", "x"),
    "unmatched": ('"a', '"a'),
    "lone_quote": ('"', '"'),
    "empty": ("", ""),
    "plain": ("plain text", "plain text"),
    "escapes": (r'say \"hi\" \(ok\)', 'say "hi" (ok)'),
    "escaped_backslash": (r'"C:\\x"', r"C:\x"),
    # Free text that merely starts and ends with a quoted word is not one quoted string.
    "two_quoted_names": ('"parse" is called from "main"', '"parse" is called from "main"'),
}
for _k, (_text, _) in UNQUOTE.items():
    case(f"unquote/{_k}", P, "unquote", _text)
case("unquote/nil", P, "unquote")


@pytest.mark.parametrize("key", params(UNQUOTE))
def test_unquote(lua, key):
    assert first(lua, f"unquote/{key}") == UNQUOTE[key][1]


def test_unquote_nil_is_empty(lua):
    assert first(lua, "unquote/nil") == ""


case("strip/mixed", P, "strip", "I will look.\n$(view a)\n\n\n\n$(view b) then decide $(note x)\n  ")
case("strip/repeated", P, "strip", "a $(view x) b $(view x) c")
case("strip/none", P, "strip", "  nothing to strip here \n")
case("strip/nested", P, "strip", 'Search: $(text-search "fn (a|b)") done.')


def test_strip_removes_commands(lua):
    mixed = first(lua, "strip/mixed")
    assert "$(" not in mixed
    assert mixed.startswith("I will look.") and mixed.rstrip().endswith("then decide")
    assert "\n\n\n" not in mixed  # runs of blank lines collapse
    assert first(lua, "strip/repeated").split() == ["a", "b", "c"]
    assert first(lua, "strip/none") == "nothing to strip here"
    assert first(lua, "strip/nested") == "Search:  done."


# ---------------------------------------------------------------------------------------------
# memory: ids, keep / drop / forget, notes vs outputs
# ---------------------------------------------------------------------------------------------

MEM = "tcase.mem"
case("mem/ids", MEM, "note_ids", 300)
case("mem/last_free", MEM, "last_free", "z")
case("mem/none_free", MEM, "none_free")


def test_memory_ids_are_short_unambiguous_and_unique(lua):
    ids = first(lua, "mem/ids")
    assert len(ids) == 300
    assert all(re.fullmatch(r"[a-hjkmnp-z2-9]{4}", i) for i in ids), ids
    assert not any(c in i for i in ids for c in "01ilo")
    assert len(set(ids)) == len(ids)


def test_memory_new_id_avoids_taken(lua):
    assert first(lua, "mem/last_free") == "z"
    assert "could not find a free id" in failure(lua, "mem/none_free")["message"]


# id -> (args, pending count, kept commands, error substrings or None)
KEEP = {
    "numbers": ("1 3", 3, ["view f1", "view f3"], None),
    "all": ("all", 3, ["view f1", "view f2", "view f3"], None),
    "all_padded": ("  all ", 2, ["view f1", "view f2"], None),
    "empty_means_all": ("", 2, ["view f1", "view f2"], None),
    "duplicates_once": ("2 2 1", 3, ["view f2", "view f1"], None),
    "out_of_range": ("1 9", 3, ["view f1"], ["9", "there are 3"]),
    "zero_and_junk": ("0 x 2.5", 3, [], ["0", "x", "2.5"]),
    "nothing_pending": ("1", 0, [], ["no new results"]),
    "commas": ("1, 3", 3, ["view f1", "view f3"], None),
}
for _k, (_args, _n, _, _) in KEEP.items():
    case(f"keep/{_k}", MEM, "keep", _args, _n)


@pytest.mark.parametrize("key", params(KEEP))
def test_memory_keep(lua, key):
    _, _, cmds, errs = KEEP[key]
    kept, err, ids = ret(lua, f"keep/{key}")
    assert kept == cmds
    assert len(ids or []) == len(cmds)
    if errs is None:
        assert err is None
    else:
        assert err is not None
        for part in errs:
            assert part in err


def test_memory_keep_names_bad_number_only(lua):
    _, err, _ = ret(lua, "keep/out_of_range")
    assert err == "keep: no result numbered 9 (there are 3)"


case("mem/keep_twice", MEM, "keep_twice")


def test_memory_keep_same_result_once(lua):
    again, total = ret(lua, "mem/keep_twice")
    assert (again, total) == (1, 2)  # result 1 was already kept; only 2 is new


DROP = {
    "plain": ("%s", "beta", ["alpha", "gamma"]),
    "brackets": ("[%s]", "beta", ["alpha", "gamma"]),
    "padded": ("  %s ", "beta", ["alpha", "gamma"]),
    "unknown": ("zzzz", None, ["alpha", "beta", "gamma"]),
    "empty": ("", None, ["alpha", "beta", "gamma"]),
}
for _k, (_form, _, _) in DROP.items():
    case(f"drop/{_k}", MEM, "drop", _form)


@pytest.mark.parametrize("key", params(DROP))
def test_memory_drop(lua, key):
    _, dropped, left = DROP[key]
    got_dropped, got_left = ret(lua, f"drop/{key}")
    assert (got_dropped, got_left) == (dropped, left)


NOTES = ["found a.b in x.rs", "axb is unrelated", "Config lives in CONFIG.toml", "100% done (really)"]
FORGET = {
    "plain_dot": ("a.b", 1, ["axb is unrelated", "Config lives in CONFIG.toml", "100% done (really)"]),
    "case_insensitive": ("config", 1, ["found a.b in x.rs", "axb is unrelated", "100% done (really)"]),
    "pattern_chars_literal": ("% done (", 1, ["found a.b in x.rs", "axb is unrelated", "Config lives in CONFIG.toml"]),
    "no_match": ("nothing", 0, NOTES),
    "empty_forgets_nothing": ("", 0, NOTES),
}
for _k, (_pat, _, _) in FORGET.items():
    case(f"forget/{_k}", MEM, "forget", NOTES, _pat)
case("forget/output_cmd", MEM, "forget_output", "view f2")


@pytest.mark.parametrize("key", params(FORGET))
def test_memory_forget_plain_text(lua, key):
    _, n, left = FORGET[key]
    assert ret(lua, f"forget/{key}") == [n, left]


def test_memory_forget_matches_kept_command(lua):
    assert ret(lua, "forget/output_cmd") == [1, ["output 1", "a conclusion"]]


case("mem/kinds", MEM, "kinds")


def test_memory_notes_vs_outputs(lua):
    notes, outputs, size = ret(lua, "mem/kinds")
    assert notes == ["first note", "second note"]
    assert outputs == ["view f2"]
    assert size == len("first note") + len("second note") + len("output 2") + len("view f2")


# ---------------------------------------------------------------------------------------------
# cli.parse
# ---------------------------------------------------------------------------------------------

CLI = "tcase.cli"
# id -> (argv, options, positionals)
CLI_OK = {
    "flags_values_positionals": (["fix", "-n", "--max-turns", "5", "the", "bug"],
                                 {"non_interactive": True, "max_turns": 5}, ["fix", "the", "bug"]),
    "defaults": ([], {"max_turns": 10}, []),
    "inline_values": (["--max-turns=7", "--role=auditor"], {"max_turns": 7, "role": "auditor"}, []),
    "long_flag": (["--non-interactive", "task"], {"non_interactive": True, "max_turns": 10}, ["task"]),
    "float_number": (["--max-turns", "2.5"], {"max_turns": 2.5}, []),
    "negative_number_value": (["--max-turns", "-3"], {"max_turns": -3}, []),
    "value_with_spaces": (["--validate", "cargo test --all"], {"validate": "cargo test --all", "max_turns": 10}, []),
    "inline_empty_value": (["--validate="], {"validate": "", "max_turns": 10}, []),
    "double_dash_passthrough": (["a", "--", "--bogus", "-n", "--max-turns"], {"max_turns": 10},
                                ["a", "--bogus", "-n", "--max-turns"]),
    "negative_number_positional": (["-5", "-"], {"max_turns": 10}, ["-5", "-"]),
    "optional_value_given": (["--resume", "abcd"], {"resume": "abcd", "max_turns": 10}, []),
    "optional_value_last": (["task", "--resume"], {"resume": True, "max_turns": 10}, ["task"]),
    "optional_value_before_flag": (["--resume", "-n"], {"resume": True, "non_interactive": True, "max_turns": 10}, []),
    "optional_value_inline": (["--resume=xyz"], {"resume": "xyz", "max_turns": 10}, []),
    "last_wins": (["--role", "auditor", "--role", "explorer"], {"role": "explorer", "max_turns": 10}, []),
}
for _k, (_argv, _, _) in CLI_OK.items():
    case(f"cli/{_k}", CLI, "parse", _argv)


@pytest.mark.parametrize("key", params(CLI_OK))
def test_cli_parse(lua, key):
    _, opts, rest = CLI_OK[key]
    got_opts, got_rest = ret(lua, f"cli/{key}")
    assert obj(got_opts) == opts
    assert got_rest == rest


# id -> (argv, exact usage message)
CLI_ERR = {
    "not_a_number": (["--max-turns", "x"], "--max-turns expects a number, got 'x'"),
    "bad_choice": (["--role", "wizard"], "--role must be one of auditor, explorer, refactorer; got 'wizard'"),
    "bad_choice_inline": (["--role=wizard"], "--role must be one of auditor, explorer, refactorer; got 'wizard'"),
    "unknown_option": (["--max-turn", "3"], "unknown option --max-turn (see --help)"),
    "unknown_inline": (["--bogus=1"], "unknown option --bogus (see --help)"),
    "unknown_short": (["-x"], "unknown option -x (see --help)"),
    "missing_value": (["--validate"], "--validate needs a value"),
    "flag_with_value": (["--non-interactive=yes"], "--non-interactive takes no value"),
}
for _k, (_argv, _) in CLI_ERR.items():
    case(f"clierr/{_k}", CLI, "parse", _argv)


@pytest.mark.parametrize("key", params(CLI_ERR))
def test_cli_parse_usage_errors(lua, key):
    r = failure(lua, f"clierr/{key}")
    assert r["kind"] == "usage"
    assert r["message"] == CLI_ERR[key][1]


case("cli/help", CLI, "help")


def test_cli_help_aligned(lua):
    lines = first(lua, "cli/help").split("\n")
    assert len(lines) == 5
    cols = {line.index(h) for line, h in zip(lines, ["turn limit", "never ask", "which role",
                                                       "continue a session", "validation command"])}
    assert len(cols) == 1  # every help text starts in the same column
    assert lines[0].startswith("  --max-turns N ")
    assert lines[1].startswith("  -n, --non-interactive ")
    assert lines[3].startswith("  --resume [ID] ")
    assert lines[4].startswith("  --validate CMD ")


CLI_SCRIPT = r'''
-- Demo of lib.cli in a user's script.
local cli = require("lib.cli")
local SPEC = {
  { "--count", type = "number", default = 1, help = "how many" },
  { "--shout", type = "flag", help = "upper-case" },
}
return {
  help = function() return "usage: moss @greet [--count N] [--shout] NAME\n\n" .. cli.help(SPEC) end,
  main = function(args)
    local opts, rest = cli.parse(args, SPEC)
    local name = table.concat(rest, " ")
    if opts.shout then name = name:upper() end
    for _ = 1, opts.count do print("hello " .. name) end
  end,
}
'''


def test_cli_in_a_real_script(tmp_path):
    (tmp_path / "proj").mkdir()
    (tmp_path / "home").mkdir()
    proj = Project(tmp_path / "proj", tmp_path / "home")
    proj.script("greet", CLI_SCRIPT)
    r = proj.moss("@greet", "--count", "2", "--shout", "ada", "--verbose")  # --verbose is a host option
    assert r.returncode == 0, r.stderr
    assert r.stdout == "hello ADA\nhello ADA\n"
    r = proj.moss("@greet", "--count=x", "ada")
    assert r.returncode == 2
    assert "--count expects a number, got 'x'" in r.stderr
    assert "Traceback" not in r.stderr
    r = proj.moss("@greet", "--cuont", "2")
    assert r.returncode == 2 and "unknown option --cuont" in r.stderr
    r = proj.moss("@greet", "--help")
    assert r.returncode == 0
    assert "--count N" in r.stdout and "how many" in r.stdout


# ---------------------------------------------------------------------------------------------
# risk
# ---------------------------------------------------------------------------------------------

R = "lib.agent.risk"


def spec(target, action, content=None):
    s = {"target": target, "action": action}
    if content is not None:
        s["content"] = content
    return s


# id -> (spec, level, reason substring)
RISK = {
    "delete": (spec("src/lib.rs/helper", "delete"), "high", "deletes src/lib.rs/helper"),
    "cargo_toml": (spec("Cargo.toml", "text", "serde = \"1\""), "high", "config/build file Cargo.toml"),
    "package_json": (spec("package.json", "replace", "{}"), "high", "package.json"),
    "nested_package_json": (spec("web/package.json", "text", "{}"), "high", "web/package.json"),
    "config_yaml_create": (spec("config.yaml", "create", "a: 1"), "high", "config.yaml"),
    "makefile_append": (spec("Makefile", "append", "x:\n\techo"), "high", "Makefile"),
    "dockerfile": (spec("docker/Dockerfile", "text", "FROM alpine"), "high", "Dockerfile"),
    "entry_main": (spec("src/main.rs/main", "replace", "fn main() {}"), "high", "entry point main"),
    "entry_method_run": (spec("app/cli.py/App/run", "replace", "def run(self): pass"), "high", "entry point"),
    # Writing a public item is not by itself a change of public API (issue 39): the first token no
    # longer decides. What an edit does to the file's public surface does (tests/test_surface_risk.py).
    "pub_fn": (spec("src/lib.rs/parse", "replace", "pub fn parse() {}"), "medium", "replace of src/lib.rs/parse"),
    "pub_crate_fn": (spec("src/lib.rs/parse", "replace", "pub(crate) fn parse() {}"), "medium", "replace"),
    "indented_pub": (spec("src/lib.rs/Foo/new", "replace", "    pub fn new() -> Self {}"), "medium", "replace"),
    "export": (spec("src/a.ts/foo", "replace", "export function foo() {}"), "medium", "replace of src/a.ts/foo"),
    "public_java": (spec("A.java/A/go", "replace", "public void go() {}"), "medium", "replace"),
    "pub_insert": (spec("src/lib.rs/foo", "insert", "pub fn helper() {}"), "low", "adds code"),
    "comment_only_insert": (spec("src/lib.rs/foo", "insert", "// TODO: handle errors"), "low", "comments only"),
    "comment_text_edit": (spec("src/a.py", "text", "# clearer note\n# second line"), "low", "comments only"),
    "block_comment": (spec("src/a.c", "text", "/* start\n * middle\n */"), "low", "comments only"),
    "docstring_text": (spec("src/a.py", "text", '"""Better docs."""'), "low", "comments only"),
    "insert": (spec("src/lib.rs/foo", "insert", "fn helper() {}"), "low", "adds code"),
    "append": (spec("src/util.py", "append", "def extra(): pass"), "low", "adds code"),
    "create": (spec("src/new.py", "create", "print(1)"), "low", "adds code"),
    "replace": (spec("src/lib.rs/foo", "replace", "fn foo() -> i32 { 1 }"), "medium", "replace of src/lib.rs/foo"),
    "text": (spec("src/a.py", "text", "x = 2"), "medium", "text of src/a.py"),
    "not_entry_prefix": (spec("src/lib.rs/domain", "replace", "fn domain() {}"), "medium", "replace"),
    # --- known bugs ---
    "yaml_under_dotted_dir": (spec(".github/workflows/ci.yml", "text", "on: push"), "high", "ci.yml"),
    "doc_comment_then_pub": (spec("src/lib.rs/parse", "replace", "/// Parse it.\npub fn parse() {}"), "medium", "replace"),
    "attribute_then_pub": (spec("src/lib.rs/Opts", "replace", "#[derive(Debug)]\npub struct Opts;"), "medium", "replace"),
    "deref_not_comment": (spec("src/a.c/reset", "replace", "*ptr = 0;"), "medium", "replace"),
    "rust_attribute_not_comment": (spec("src/lib.rs/Opts", "text", "#[derive(Clone)]"), "medium", "text"),
    "empty_replace_deletes": (spec("src/lib.rs/helper", "replace", ""), "high", ""),
}
for _k, (_spec, _, _) in RISK.items():
    case(f"risk/{_k}", R, "assess", _spec)


@pytest.mark.parametrize("key", params(RISK))
def test_risk_assess(lua, key):
    _, level, reason = RISK[key]
    got_level, got_reason = ret(lua, f"risk/{key}")
    assert got_level == level, got_reason
    assert reason in got_reason


# Replacing a whole symbol with a comment removes its code: that must not be auto-approved at the
# default threshold (low), unlike an inserted comment.
case("risk/replace_symbol_with_comment", R, "assess", spec("src/lib.rs/validate", "replace", "// removed for now"))


def test_risk_replace_symbol_with_comment_is_not_low(lua):
    level, _ = ret(lua, "risk/replace_symbol_with_comment")
    assert level != "low"


case("riskb/empty", R, "batch", [])
case("riskb/highest", R, "batch", [RISK["insert"][0], RISK["replace"][0], RISK["delete"][0], RISK["append"][0]])
case("riskb/all_low", R, "batch", [RISK["insert"][0], RISK["comment_only_insert"][0]])
case("riskb/first_of_equal", R, "batch", [RISK["replace"][0], RISK["text"][0]])


def test_risk_batch_takes_highest(lua):
    assert ret(lua, "riskb/empty") == ["low", "no edits"]
    assert ret(lua, "riskb/highest") == ["high", "deletes src/lib.rs/helper"]
    assert ret(lua, "riskb/all_low")[0] == "low"
    assert ret(lua, "riskb/first_of_equal") == ["medium", "replace of src/lib.rs/foo"]


# (level, threshold or None) -> approved
AUTO = {
    ("low", None): True, ("medium", None): False, ("high", None): False,
    ("low", "low"): True, ("medium", "low"): False,
    ("medium", "medium"): True, ("high", "medium"): False,
    ("high", "high"): True, ("low", "high"): True,
    ("medium", "bogus"): False,  # an unknown threshold behaves like low
}
for (_lvl, _thr) in AUTO:
    if _thr is None:
        case(f"auto/{_lvl}/default", R, "auto_approved", _lvl)
    else:
        case(f"auto/{_lvl}/{_thr}", R, "auto_approved", _lvl, _thr)


@pytest.mark.parametrize("level,threshold", list(AUTO), ids=[f"{lv}-{th}" for lv, th in AUTO])
def test_risk_auto_approved(lua, level, threshold):
    assert first(lua, f"auto/{level}/{threshold or 'default'}") is AUTO[(level, threshold)]


# ---------------------------------------------------------------------------------------------
# edits.parse_one / parse_batch
# ---------------------------------------------------------------------------------------------

E = "lib.agent.edits"
FN = "fn foo() -> i32 {\n    let x = (1 + 2);\n    x\n}"
# id -> (text, spec)
EDIT_OK = {
    "delete": ("src/lib.rs/foo delete", {"target": "src/lib.rs/foo", "action": "delete"}),
    "replace_multiline": (f"src/lib.rs/foo replace {FN}",
                          {"target": "src/lib.rs/foo", "action": "replace", "content": FN}),
    "replace_on_next_line": (f"src/lib.rs/foo replace\n{FN}\n",
                             {"target": "src/lib.rs/foo", "action": "replace", "content": FN}),
    "replace_keeps_indent": ("a.py/A/f replace\n    def f(self):\n        return 1",
                             {"target": "a.py/A/f", "action": "replace",
                              "content": "    def f(self):\n        return 1"}),
    # a fenced block's content is its lines exactly, each with its newline (issue 39)
    "replace_fenced": (f"src/lib.rs/foo replace\n```rust\n{FN}\n```",
                       {"target": "src/lib.rs/foo", "action": "replace", "content": FN + "\n"}),
    "replace_fenced_same_line": ("a.py/f replace ```python\ndef f(): pass\n```",
                                 {"target": "a.py/f", "action": "replace", "content": "def f(): pass\n"}),
    "replace_fence_no_lang": ("a.py/f replace\n```\ndef f(): pass\n```",
                              {"target": "a.py/f", "action": "replace", "content": "def f(): pass\n"}),
    "insert_before": ("src/lib.rs/foo insert --before fn a() {}",
                      {"target": "src/lib.rs/foo", "action": "insert", "position": "before", "content": "fn a() {}"}),
    "insert_after_fenced": ("src/lib.rs/foo insert --after\n```rust\nfn b() {}\n```",
                            {"target": "src/lib.rs/foo", "action": "insert", "position": "after", "content": "fn b() {}\n"}),
    "exact_text": ('src/a.py --old "x = 1" --new "x = 2"',
                   {"target": "src/a.py", "action": "text", "old": "x = 1", "content": "x = 2"}),
    "exact_text_regexish": (r'src/a.py --old "re.compile(\"\s+\")" --new "WS"',
                            {"target": "src/a.py", "action": "text", "old": r're.compile("\s+")', "content": "WS"}),
    "exact_text_multiline_delete": ('README.md --old "line one\nline two" --new ""',
                                    {"target": "README.md", "action": "text", "old": "line one\nline two", "content": ""}),
    "create_quoted": ('notes/todo.md create "# TODO"',
                      {"target": "notes/todo.md", "action": "create", "content": "# TODO"}),
    "create_fenced": ("docs/x.md create\n```markdown\n# Title\n\nBody\n```",
                      {"target": "docs/x.md", "action": "create", "content": "# Title\n\nBody\n"}),
    "append_single_quoted_escape": (r"notes.md append 'it\'s done'",
                                    {"target": "notes.md", "action": "append", "content": "it's done"}),
    "append_double_quoted_escape": (r'notes.md append "say \"hi\""',
                                    {"target": "notes.md", "action": "append", "content": 'say "hi"'}),
    "two_strings_not_unquoted": ('notes.md append "a" and "b"',
                                 {"target": "notes.md", "action": "append", "content": '"a" and "b"'}),
    "code_with_quotes_kept": ('a.py/f replace "".join(xs)',
                              {"target": "a.py/f", "action": "replace", "content": '"".join(xs)'}),
    "prepend": ("a.py prepend import os",
                {"target": "a.py", "action": "prepend", "content": "import os"}),
}
for _k, (_text, _) in EDIT_OK.items():
    case(f"edit/{_k}", E, "parse_one", _text)


@pytest.mark.parametrize("key", params(EDIT_OK))
def test_edit_parse_one(lua, key):
    assert first(lua, f"edit/{key}") == EDIT_OK[key][1]


# id -> (text, substrings of the usage message)
EDIT_ERR = {
    "no_target": ("", ["edit needs a target", "$(edit path/Symbol replace <code>)"]),
    "no_action": ("src/a.py", ["unknown edit action ''", "delete", "replace <code>", "--old"]),
    "unknown_action": ("src/a.py frobnicate x", ["unknown edit action 'frobnicate'",
                                                 "insert --before|--after <code>", "create <content>"]),
    "insert_without_position": ("src/lib.rs/foo insert fn a() {}", ["insert needs --before or --after"]),
    "insert_bad_position": ("src/lib.rs/foo insert --inside fn a() {}", ["insert needs --before or --after"]),
    "old_without_new": ('src/a.py --old "x = 1"', ['--old "old text" --new "new text"']),
    "old_without_value": ("src/a.py --old", ['--old "old text" --new "new text"']),
    # Trailing words after `delete` are not silently ignored (a batch missing a space before its
    # next "|" would otherwise lose the rest of the batch).
    "delete_trailing_text": ("src/lib.rs/foo delete src/lib.rs/bar", ["delete"]),
    "replace_nothing": ("src/lib.rs/foo replace", ["replace"]),
}
for _k, (_text, _) in EDIT_ERR.items():
    case(f"editerr/{_k}", E, "parse_one", _text)


@pytest.mark.parametrize("key", params(EDIT_ERR))
def test_edit_parse_one_usage_errors(lua, key):
    r = failure(lua, f"editerr/{key}")
    assert r["kind"] == "usage"
    for part in EDIT_ERR[key][1]:
        assert part in r["message"]


# id -> (text, [(target, action, content or None)])
BATCH = {
    "single": ("a.rs/x delete", [("a.rs/x", "delete", None)]),
    "three": ("a.rs/x delete | b.rs/y replace fn y() -> bool { a || b } | c.rs/z insert --after fn z() {}",
              [("a.rs/x", "delete", None), ("b.rs/y", "replace", "fn y() -> bool { a || b }"),
               ("c.rs/z", "insert", "fn z() {}")]),
    "oror_not_split": ("a.rs/x replace fn x() -> bool { p || q || r }",
                       [("a.rs/x", "replace", "fn x() -> bool { p || q || r }")]),
    "pipe_on_own_line": ("a.rs/x delete\n|\nb.rs/y delete", [("a.rs/x", "delete", None), ("b.rs/y", "delete", None)]),
    "multiline_parts": ("a.py/f replace\ndef f():\n    return 1\n | a.py/g insert --before\ndef h():\n    pass",
                        [("a.py/f", "replace", "def f():\n    return 1"),
                         ("a.py/g", "insert", "def h():\n    pass")]),
    "fenced_pipe_not_split": ("a.rs/kind replace\n```rust\nfn kind(v: V) -> u8 {\n    match v { V::A | V::B => 1, _ => 0 }\n}\n```"
                              " | b.rs/y delete",
                              [("a.rs/kind", "replace", "fn kind(v: V) -> u8 {\n    match v { V::A | V::B => 1, _ => 0 }\n}\n"),
                               ("b.rs/y", "delete", None)]),
}
for _k, (_text, _) in BATCH.items():
    case(f"batch/{_k}", E, "parse_batch", _text)
case("batcherr/bad_part", E, "parse_batch", "a.rs/x delete | b.rs/y frobnicate")


@pytest.mark.parametrize("key", params(BATCH))
def test_edit_parse_batch(lua, key):
    got = first(lua, f"batch/{key}")
    assert [(s["target"], s["action"], s.get("content")) for s in got] == BATCH[key][1]


def test_edit_parse_batch_bad_part_is_usage_error(lua):
    r = failure(lua, "batcherr/bad_part")
    assert r["kind"] == "usage" and "unknown edit action 'frobnicate'" in r["message"]


# ---------------------------------------------------------------------------------------------
# dispatch.by_keywords
# ---------------------------------------------------------------------------------------------

DISPATCH = {
    "check this for vulnerabilities": ("auditor", "keyword 'check'"),
    "Is there a security issue in auth.py?": ("auditor", "keyword"),
    "review this module": ("auditor", "keyword 'review'"),
    "fix the bug": ("refactorer", "keyword 'fix'"),
    "Rename parse_args to parse": ("refactorer", "keyword 'rename'"),
    "add a check for null": ("refactorer", "keyword"),  # tie 1-1: the earlier rule wins
    "find and fix the crash": ("refactorer", "keyword 'fix'"),
    "review and fix issues": ("auditor", "keyword"),  # 2 auditor hits beat 1
    "where is X defined": ("explorer", "keyword 'where'"),
    "Where's the config loaded?": ("explorer", "keyword 'where'"),
    "explain how the parser works": ("explorer", "keyword"),
    "hello there": ("explorer", "no keyword matched; the default"),
    "prefix the names": ("explorer", "no keyword matched"),  # whole words only: no 'fix' in 'prefix'
    "": ("explorer", "no keyword matched"),
}
for _task in DISPATCH:
    case(f"dispatch/{_task}", "lib.agent.dispatch", "by_keywords", _task)


@pytest.mark.parametrize("task", list(DISPATCH), ids=[t or "<empty>" for t in DISPATCH])
def test_dispatch_by_keywords(lua, task):
    role, why = ret(lua, f"dispatch/{task}")
    assert role == DISPATCH[task][0]
    assert DISPATCH[task][1] in why


# ---------------------------------------------------------------------------------------------
# validate.steps
# ---------------------------------------------------------------------------------------------

V = "lib.agent.validate"
CHECK = {"name": "check", "run": "cargo check"}
TEST = {"name": "test", "run": "cargo test", "timeout": 600}
case("val/order", V, "steps", {"validate": ["test", "check"], "validate_commands": [CHECK, TEST]})
case("val/all_commands", V, "steps", {"validate_commands": [CHECK, TEST]})
case("val/missing", V, "steps", {"validate": ["typecheck", "test"], "validate_commands": [TEST]})
case("val/extra", V, "steps", {"validate": ["check"], "validate_commands": [CHECK]}, ["make lint"])
case("val/extra_two", V, "steps", {"validate": ["check"], "validate_commands": [CHECK]}, ["make lint", "make doc"])
case("val/extra_only", V, "steps", {}, ["pytest -q"])
case("val/never", V, "steps", {"validate_on": "never"})
case("val/string_validate", V, "steps", {"validate": "test", "validate_commands": [TEST]})


def test_validate_steps_in_config_order(lua):
    steps, source = ret(lua, "val/order")
    assert steps == [TEST, CHECK]
    assert source == "config"
    steps, source = ret(lua, "val/all_commands")
    assert (steps, source) == ([CHECK, TEST], "config")


def test_validate_missing_step_is_config_error(lua):
    r = failure(lua, "val/missing")
    assert r["kind"] == "config"
    assert "'typecheck'" in r["message"] and "validate_commands" in r["message"]


def test_validate_extra_steps(lua):
    steps, source = ret(lua, "val/extra")
    assert steps == [CHECK, {"name": "validate", "run": "make lint"}]
    assert source == "config + --validate"
    steps, source = ret(lua, "val/extra_only")
    assert (steps, source) == ([{"name": "validate", "run": "pytest -q"}], "--validate")
    steps, _ = ret(lua, "val/extra_two")
    assert [s["name"] for s in steps] == ["check", "validate", "validate2"]


def test_validate_two_extra_steps_source(lua):
    _, source = ret(lua, "val/extra_two")
    assert source == "config + --validate"


def test_validate_never_skips_detection(lua):
    steps, source = ret(lua, "val/never")
    assert steps == [] and source is None


def test_validate_string_instead_of_list(lua):
    r = lua["val/string_validate"]
    if r["ok"]:
        assert r["ret"][0] == [TEST]
    else:
        assert r["kind"] == "config", r["text"]


DETECT_SCRIPT = r'''
local v = require("lib.agent.validate")
local steps, why = v.steps(moss.config.agent or {}, moss.args)
print(moss.json.encode({ steps = steps, why = why or "<nil>" }))
'''
NONE_WHY = "no Cargo.toml, go.mod, pyproject.toml or package.json scripts found"
# id -> (files, [(name, run)], source)
DETECT = {
    "cargo": ({"Cargo.toml": "[package]\nname = \"x\"\n"}, [("check", "cargo check --quiet")], "detected from Cargo.toml"),
    "pyproject": ({"pyproject.toml": "[project]\nname = \"x\"\n"}, [("compile", "python3 -m compileall -q .")],
                  "detected from pyproject.toml"),
    "setup_py": ({"setup.py": "from setuptools import setup\n"}, [("compile", "python3 -m compileall -q .")],
                 "detected from setup.py"),
    "go_mod": ({"go.mod": "module x\n"}, [("build", "go build ./...")], "detected from go.mod"),
    "package_json_test": ({"package.json": json.dumps({"scripts": {"build": "tsc", "test": "jest"}})},
                          [("test", "npm run --silent test")], "detected from package.json script 'test'"),
    "package_json_typecheck": ({"package.json": json.dumps({"scripts": {"lint": "x", "typecheck": "tsc --noEmit"}})},
                               [("typecheck", "npm run --silent typecheck")],
                               "detected from package.json script 'typecheck'"),
    "package_json_no_scripts": ({"package.json": json.dumps({"name": "x", "scripts": {"start": "node ."}})}, [], NONE_WHY),
    "package_json_broken_falls_back": ({"package.json": "{not json", "go.mod": "module x\n"},
                                       [("build", "go build ./...")], "detected from go.mod"),
    "nothing": ({"README.md": "hi\n"}, [], NONE_WHY),
    "config_wins": ({"Cargo.toml": "[package]\n", ".moss/config.toml":
                     '[agent]\nvalidate = ["test"]\n'
                     'validate_commands = [{ name = "test", run = "pytest -q" }, { name = "lint", run = "ruff ." }]\n'},
                    [("test", "pytest -q")], "config"),
}


@pytest.mark.parametrize("key", params(DETECT))
def test_validate_detection(project, key):
    files, steps, source = DETECT[key]
    for rel, text in files.items():
        project.write(rel, text)
    project.script("detect", DETECT_SCRIPT)
    r = project.moss("@detect")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert [(s["name"], s["run"]) for s in got["steps"]] == steps
    assert got["why"] == source


def test_validate_detection_plus_extra(project):
    project.write("Cargo.toml", "[package]\n")
    project.script("detect", DETECT_SCRIPT)
    r = project.moss("@detect", "make check")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    # an explicit --validate replaces detection rather than adding to it
    assert (got["steps"], got["why"]) == ([{"name": "validate", "run": "make check"}], "--validate")


def test_validate_config_error_from_real_config(project):
    project.write(".moss/config.toml", textwrap.dedent('''\
        [agent]
        validate = ["typecheck"]
        validate_commands = [{ name = "test", run = "pytest" }]
        '''))
    project.script("detect", DETECT_SCRIPT)
    r = project.moss("@detect")
    assert r.returncode == 2  # a config error, not a crash
    assert "validate names 'typecheck' but validate_commands has no such step" in r.stderr
    assert "Traceback" not in r.stderr

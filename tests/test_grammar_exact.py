"""What the model writes reaches the file exactly: the cases that used to cut a command short.

Code that a language lexes differently from moss's `$(...)` grammar (an f-string's quote, a Rust
lifetime, a `)` in a comment, a raw string or a regex) used to end the command early and write
half the code with the fence line still in it. Inside a fence, nothing counts; in `$(run ...)`, a
heredoc's body is opaque the same way (scripts/lib/machine/parser.lua). Each case below is written
by a scripted model through the real CLI against the fake API (one run for all, at
`--auto-approve medium` in `-n`), and its test reads the file's bytes.

Bad input gets a clear message and writes nothing: an unclosed fence, a fence inside a fence, and
replies of a megabyte of backticks, of fence lines, of heredoc markers and of `$(`; the parse of
each is linear (bench/m_grammar.py measures it). Properties, in-process: any text in a fence longer
than any run of backticks in it, or in a heredoc whose delimiter it does not hold, comes back
exactly; and every built-in system prompt parses without a problem.
"""

from __future__ import annotations

import json
import re

import pytest
from conftest import builtin_lua
from fakeapi import last_user_text, state_of

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

CONFIG = """
[agent]
max_tokens = 4000000
[llm]
max_output_tokens = 4000000
context_window = 40000000
"""

# case -> (path, code); every one of these cut the command short before (issue 39)
CASES = {
    "python_fstrings": ("src/proverb.py", r'''def proverb(*items, qualifier=None):
    """For want of a nail (a proverb)."""
    phrases = [f'For want of a {a} the {b} was lost.' for a, b in zip(items, items[1:])]
    if items:
        what = f"{qualifier} {items[0]}" if qualifier else items[0]
        phrases.append(f'And all for the want of a {what}.')
    return phrases


def closer():
    return f"{')'}" + f'{"("}' + "it's"
'''),
    "rust_lifetimes_and_char_literals": ("src/lib.rs", r'''pub fn longest<'a>(x: &'a str, y: &'a str) -> &'a str {
    if x.len() >= y.len() { x } else { y }
}

pub fn balanced(s: &str) -> bool {
    let mut depth = 0i32;
    for c in s.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            '"' | '\'' => {}
            _ => {}
        }
        if depth < 0 { return false; }
    }
    depth == 0 && r#"a ) raw "string""#.len() > 0
}
'''),
    "go_runes_and_raw_strings": ("main.go", r'''package main

import "fmt"

// Depth counts '(' against ')': a comment with a ) inside.
func Depth(s string) int {
	d := 0
	for _, r := range s {
		switch r {
		case '(':
			d++
		case ')':
			d--
		}
	}
	return d
}

func main() {
	fmt.Println(Depth(`raw ) string`), ')', "\")")
}
'''),
    "cpp_raw_strings_and_comments": ("src/paren.cpp", r'''#include <string>

// a comment with a ) inside
static const std::string raw = R"(a)b)";
/* and ( a block comment */
int depth(const std::string& s) {
    int d = 0;
    for (char c : s) { if (c == '(') ++d; else if (c == ')') --d; }
    return d + (raw.size() > 3 ? 0 : ')');
}
'''),
    "lua_long_strings": ("lib/paren.lua", r'''local M = {}

local text = [[ ) ]] .. [==[ ]] ( ]==]
--[[ a long comment ( with a ) ]]

function M.depth(s)
  local d = 0
  for c in s:gmatch("[()]") do d = d + (c == "(" and 1 or -1) end
  return d, text, ')'
end

return M
'''),
    "js_regex_and_template_literals": ("web/split.js", r'''const WS = /[\s)(]+/g;

export function split(s) {
  return s.split(WS).filter(Boolean);
}

export const label = (n) => `${n} item${n === 1 ? '' : 's'} ) (` + '```' + `\`${")"}\``;
'''),
    "java_char_literals_and_text_blocks": ("src/Paren.java", r'''public class Paren {
    // a ) in a comment
    static final String BLOCK = """
        ) it's "quoted" (
        """;

    public static int depth(String s) {
        int d = 0;
        for (char c : s.toCharArray()) {
            if (c == '(') d++;
            else if (c == ')') d--;
        }
        return d;
    }
}
'''),
    "markdown_holding_fences": ("docs/usage.md", '''# Usage

```python
print("(a")
```

~~~
also ) fenced
~~~
'''),
}
HEREDOC = 'echo "(a) it\'s"\n) done\nprintf \'%s\\n\' "$(date)"\n'
OLD, NEW = '''print("it's (done)")''', '''print('it\\'s "done" :)')'''


def fence(code: str) -> str:
    return "`" * max(3, max((len(r) for r in re.findall(r"`+", code)), default=0) + 1)


def agent_run(project, api, replies: list[str], files: dict[str, str]):
    """`files` in the project, the refactorer at --auto-approve medium in -n, a model that plans,
    writes `replies` in turn and then answers. Returns (result, what the model was told after
    each reply)."""
    for rel, text in files.items():
        project.write(rel, text)
    project.write(".moss/config.toml", CONFIG)
    queue, seen = list(replies) + ["$(answer done)"], []

    def model(body):
        if state_of(body) == "planner":
            return "1. Write the code.\nReady to refactor."
        seen.append(last_user_text(body))
        return queue.pop(0) if len(queue) > 1 else queue[0]

    api.push(*[model] * (len(replies) + 4))
    r = project.moss("@agent", "--provider", "anthropic", "--v1", "-n", "--refactor", "--auto-approve", "medium",
                     "--validate", "true", "--output-format", "json", "write it", env=api.env(), timeout=180)
    assert r.stdout.strip(), r.stderr
    return json.loads(r.stdout), seen[1:]


# ------------------------------------------------------------------- the named cases

@pytest.mark.needs_sandbox
def test_each_case_that_cut_a_command_now_reaches_its_file_exactly(project, api, subtests):
    """Every case in one reply, each into a file that held a placeholder; --old/--new in fences;
    heredocs through $(run) with `)` and quotes in their bodies."""
    files = {path: "placeholder\n" for path, _ in CASES.values()}
    files["src/q.py"] = f"{OLD}\n"
    cmds = [f"$(edit {path} replace {fence(code)}{path.rsplit('.', 1)[1]}\n{code}{fence(code)})"
            for path, code in CASES.values()]
    cmds.append(f"$(edit src/q.py --old ```\n{OLD}\n``` --new ```\n{NEW}\n```)")
    cmds.append(f"$(run cat > notes.sh <<'EOF'\n{HEREDOC}EOF\n)")
    cmds.append("$(run cat > notes2.sh <<-\"END\"\n\t) it's (\n\tEND)")
    cmds.append(f"$(run cat > notes3.sh <<\\EOF\n{HEREDOC}EOF\n)")  # POSIX's escaped delimiter
    result, told = agent_run(project, api, ["Writing it all.\n" + "\n\n".join(cmds)], files)
    for case, (path, code) in CASES.items():
        with subtests.test(case):
            assert (project.root / path).read_bytes() == code.encode()
    with subtests.test("old_and_new_text_in_fences_need_no_escaping"):
        assert (project.root / "src/q.py").read_text() == NEW + "\n"
    with subtests.test("heredoc_with_parentheses_and_quotes"):
        assert (project.root / "notes.sh").read_text() == HEREDOC
        assert (project.root / "notes2.sh").read_text() == ") it's (\n"  # <<-: tabs off; it ends at "END)"
        assert (project.root / "notes3.sh").read_text() == HEREDOC
    assert "Not run" not in told[0] and "Not applied" not in told[0]
    assert result["reason"] == "answered"


# ----------------------------------------------------------------------- bad input

MB = 1_000_000
BAD = {  # case -> (a reply, what the message quotes of the command or where, the line in the reply)
    "unclosed_fence": ("Here it is.\n$(edit bad/a.py replace ```python\nx = (1\n$(view bad/a.py)\n",
                       "edit bad/a.py replace ```python", 2),
    "fence_inside_a_fence": ("$(edit bad/b.md replace ```\nIntro\n```\nf(x))\n```\n", "line 3 of the code", None),
    "a_megabyte_of_backticks": ("$(edit bad/c.py replace " + "`" * MB + ")", None, None),
    "a_megabyte_of_fence_lines": ("$(edit bad/c.py replace " + "```\n" * (MB // 4) + ")", "line 2 of the code", None),
    "a_megabyte_of_heredoc_markers": ("$(run cat <<EOF\n" + "<<EOF\n" * (MB // 6) + ")", "run cat <<EOF", 1),
    "a_megabyte_of_command_openers": ("$(note " + "$(" * (MB // 2), "note $($(", 1),
}
PLACEHOLDERS = {"bad/a.py": "a = 1\n", "bad/b.md": "# b\n", "bad/c.py": "c = 1\n"}


@pytest.mark.needs_sandbox
def test_bad_input_is_refused_with_a_clear_message_and_writes_nothing(project, api, subtests):
    """Each bad reply in a turn of its own; what the model is told comes in the next request, and
    a megabyte of input is not echoed back to it."""
    result, told = agent_run(project, api, [reply for reply, _, _ in BAD.values()], PLACEHOLDERS)
    for (case, (_, quoted, line)), msg in zip(BAD.items(), told):
        with subtests.test(case):
            assert "Not run" in msg or "Not applied" in msg
            if quoted:
                assert quoted in msg
            if line:
                assert f"line {line} of your reply" in msg
            assert len(msg) < 20_000
    with subtests.test("a_command_after_an_unclosed_fence_does_not_run"):
        assert "view bad/a.py" not in told[0].split("Not run", 1)[0]
    for rel, text in PLACEHOLDERS.items():
        assert (project.root / rel).read_text() == text, rel  # nothing written, not half
    assert result["reason"] == "answered"


# ---------------------------------------------------------------- properties (in-process)

@pytest.fixture(scope="module")
def lua():
    with builtin_lua() as pair:
        yield pair[0]


ROUND_TRIP = """
local P, E = require("lib.machine.parser"), require("lib.agent.edits")
local text = ...
local cmds, problems = P.parse(text)
local out = { n = #cmds, problems = #problems }
if #cmds == 1 then
  out.args = cmds[1].args
  if cmds[1].name == "edit" then out.content = E.parse_one(cmds[1].args).content end
  if cmds[1].name == "batch-edit" then
    local specs = E.parse_batch(cmds[1].args)
    out.contents = {}
    for i, s in ipairs(specs) do out.contents[i] = s.content end
  end
end
return moss.dict(out)
"""

PIECES = ["(", ")", '"', "'", "`", "``", "```", "~~~", "\\", "$(", "\n", "<<EOF", "EOF", "it's", "f'{x})'",
          "\r\n", " ", "\t", "é", "[[", "]]", "/*", "//", "#", " | ", "EOF)", "\n```", "\n~~~~"]
code_text = st.lists(st.sampled_from(PIECES) | st.text(max_size=4), max_size=40).map("".join)
COMMON = dict(max_examples=150, deadline=None, database=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow])


def round_trip(lua, text: str) -> dict:
    return lua.to_py(lua.execute(ROUND_TRIP, "=(grammar)", text))


@settings(**COMMON)
@given(code=code_text, tildes=st.booleans())
def test_any_code_in_a_long_enough_fence_comes_back_exactly(lua, code, tildes):
    ch = "~" if tildes else "`"
    f = ch * max(3, max((len(r) for r in re.findall(re.escape(ch) + "+", code)), default=0) + 1)
    got = round_trip(lua, f"Done:\n$(edit f.txt create {f}text\n{code}\n{f}) and more text")
    assert (got["n"], got["problems"]) == (1, 0)
    assert got["content"] == code + "\n"


@settings(**COMMON)
@given(a=code_text, b=code_text)
def test_two_fenced_parts_of_a_batch_come_back_exactly(lua, a, b):
    f = "`" * max(3, max((len(r) for r in re.findall(r"`+", a + b)), default=0) + 1)
    got = round_trip(lua, f"$(batch-edit a.txt create {f}\n{a}\n{f} | b.txt create {f}\n{b}\n{f})")
    assert (got["n"], got["problems"]) == (1, 0)
    assert got["contents"] == [a + "\n", b + "\n"]


@settings(**COMMON)
@given(body=code_text, word=st.sampled_from(["'EOF'", '"EOF"', "\\EOF", "EOF"]))
def test_a_heredoc_body_is_opaque_in_run(lua, body, word):
    assume(not re.search(r"(^|\n)EOF[ \t\r]*(\)|\n|$)", body))
    got = round_trip(lua, f"$(run cat > x.txt <<{word}\n{body}\nEOF\n) tail")
    assert (got["n"], got["problems"]) == (1, 0)
    assert got["args"] == f"cat > x.txt <<{word}\n{body}\nEOF"


SPAWN = """
local P = require("lib.machine.parser")
local cmds = P.parse(...)
return require("commands.spawn").parse(cmds[1].args)
"""


@pytest.mark.parametrize("reply, role, task, isolated", [
    ('$(spawn explorer "find where it\'s read")', "explorer", "find where it's read", False),
    ("$(spawn explorer find where the users' config is read)", "explorer", "find where the users' config is read", False),
    ('$(spawn explorer --isolated "look")', "explorer", "look", True),
    ('$(spawn --isolated explorer "look")', "explorer", "look", True),
    ('$(spawn refactorer make it print this:\n```py\nprint(f"{x})")  # a ) too\n```)', "refactorer",
     'make it print this:\n```py\nprint(f"{x})")  # a ) too\n```', False),
])
def test_a_spawned_childs_task_is_what_the_model_wrote(lua, reply, role, task, isolated):
    """$(spawn ROLE task): the task reaches the child as written (apostrophes, a fence of real
    code), and --isolated counts before the role or after it, never as words of the task."""
    assert list(lua.to_py(lua.execute(SPAWN, "=(spawn)", reply))) == [role, task, isolated]


PROMPTS = """
local P, prompts = require("lib.machine.parser"), require("lib.machine.prompts")
local out = {}
for _, m in ipairs(moss.scripts.list("machines")) do
  local loaded, machine = pcall(require, m.module) -- the Wild Loop needs a session's config to load
  for _, r in ipairs(loaded and moss.scripts.list("roles") or {}) do
    local role = require(r.module)
    for name, state in pairs(machine.states or {}) do
      local ok, text = pcall(prompts.system, role, name, state, machine)
      if ok then
        local cmds, problems = P.parse(text)
        out[#out + 1] = { where = m.name .. "/" .. r.name .. "/" .. name, commands = #cmds, problems = #problems }
      end
    end
  end
end
return out
"""


def test_every_built_in_system_prompt_parses_without_a_problem(lua):
    """The examples the prompts teach (fences, heredocs) are well-formed commands themselves."""
    got = lua.to_py(lua.execute(PROMPTS, "=(prompts)"))
    assert len(got) >= 6 and sum(p["commands"] for p in got) > 20
    assert [p["where"] for p in got if p["problems"]] == []


RUN_PARSE = """
local run = require("commands.run")
local ok, got = pcall(run.parse, ...)
return ok and got[1] or ("error: " .. tostring(got.message or got))
"""


def test_a_run_command_written_in_a_fence_runs_the_code_in_it(lua):
    """Models often fence a shell command: `$(run ```sh` ⏎ `ls -la` ⏎ ```` ``` ````)` runs `ls -la`."""
    def parse(text):
        return lua.to_py(lua.execute(RUN_PARSE, "=(run)", text))

    assert parse("```sh\nls -la (x)\n```") == "ls -la (x)"
    assert parse("echo ```") == "echo ```"
    assert parse("```sh\nls\n``` && rm x").startswith("error: ")

"""Approval judges what an edit changed: a file's public surface before and after, not the first
token of the new code.

Writing a file that exports anything was "changes public API" (high), so implementing `pub fn
add(a: i32, b: i32) -> i32 { todo!() }` as `{ a + b }` was refused at `--auto-approve medium`.
Now the host reads each changed file's public items with tree-sitter (host/tools/surface.py) and
moss.edit.preview returns what the edit removed, changed or added; scripts/lib/agent/risk.lua rates
a removed, renamed or re-signed public item high and names it, and anything else medium at most.
A file no parser reads falls back to its text: only an exported name that disappears counts.
"""

from __future__ import annotations

import json

import pytest
from conftest import builtin_lua
from hypothesis import given, settings
from hypothesis import strategies as st
from fakeapi import last_user_text, state_of

from moss.tools import surface

# ---------------------------------------------------------------- the host: surfaces

# lang -> (path, before, a body rewrite, a signature change, the changed item's name, a private change)
LANGS = {
    "rust": ("src/lib.rs",
             "pub fn scale(x: i32) -> i32 {\n    todo!()\n}\nfn helper() {}\n",
             "pub fn scale(x: i32) -> i32 {\n    x * 2\n}\nfn helper() {}\n",
             "pub fn scale(x: i64, by: i64) -> i64 {\n    x * by\n}\nfn helper() {}\n", "scale",
             "pub fn scale(x: i32) -> i32 {\n    todo!()\n}\nfn helper(y: u8) {}\n"),
    "python": ("pkg/calc.py",
               "def add(a, b):\n    raise NotImplementedError\n\n\ndef _h(x):\n    pass\n",
               "def add(a, b):\n    return a + b\n\n\ndef _h(x):\n    pass\n",
               "def add(a, b, c=0):\n    return a + b + c\n\n\ndef _h(x):\n    pass\n", "add",
               "def add(a, b):\n    raise NotImplementedError\n\n\ndef _h(x, y):\n    pass\n"),
    "javascript": ("web/shape.js",
                   "export class Shape {\n  area(unit) { throw new Error('implement me'); }\n}\nfunction local(a) {}\n",
                   "export class Shape {\n  area(unit) { return 0; }\n}\nfunction local(a) {}\n",
                   "export class Shape {\n  area(unit, scale) { return 0; }\n}\nfunction local(a) {}\n", "Shape.area",
                   "export class Shape {\n  area(unit) { throw new Error('implement me'); }\n}\nfunction local(a, b) {}\n"),
    "typescript": ("web/api.ts",
                   "export function get(url: string): Promise<string> { return fetch(url) as any; }\n",
                   "export function get(url: string): Promise<string> { return Promise.resolve(url); }\n",
                   "export function get(url: URL): Promise<string> { return Promise.resolve(''); }\n", "get",
                   "export function get(url: string): Promise<string> { return fetch(url) as any; }\nconst x = 1;\n"),
    "go": ("calc/calc.go",
           "package calc\n\nfunc Add(a, b int) int {\n\tpanic(\"todo\")\n}\n\nfunc helper() {}\n",
           "package calc\n\nfunc Add(a, b int) int {\n\treturn a + b\n}\n\nfunc helper() {}\n",
           "package calc\n\nfunc Add(a, b int64) int64 {\n\treturn a + b\n}\n\nfunc helper() {}\n", "Add",
           "package calc\n\nfunc Add(a, b int) int {\n\tpanic(\"todo\")\n}\n\nfunc helper(x int) {}\n"),
    "lua": ("lib/m.lua",
            "local M = {}\nfunction M.add(a, b) error('todo') end\nlocal function h(x) end\nreturn M\n",
            "local M = {}\nfunction M.add(a, b) return a + b end\nlocal function h(x) end\nreturn M\n",
            "local M = {}\nfunction M.add(a, b, c) return a + b + c end\nlocal function h(x) end\nreturn M\n", "M.add",
            "local M = {}\nfunction M.add(a, b) error('todo') end\nlocal function h(x, y) end\nreturn M\n"),
    "java": ("src/Calc.java",
             "public class Calc {\n    public int add(int a, int b) { throw new UnsupportedOperationException(); }\n"
             "    private void h(int x) {}\n}\n",
             "public class Calc {\n    public int add(int a, int b) { return a + b; }\n    private void h(int x) {}\n}\n",
             "public class Calc {\n    public long add(long a, long b) { return a + b; }\n    private void h(int x) {}\n}\n",
             "Calc.add",
             "public class Calc {\n    public int add(int a, int b) { throw new UnsupportedOperationException(); }\n"
             "    private void h(int x, int y) {}\n}\n"),
    "cpp": ("src/calc.hpp",
            "namespace calc {\nclass Calc {\n public:\n  int add(int a, int b) { return 0; }\n private:\n  int h(int);\n};\n}\n",
            "namespace calc {\nclass Calc {\n public:\n  int add(int a, int b) { return a + b; }\n private:\n  int h(int);\n};\n}\n",
            "namespace calc {\nclass Calc {\n public:\n  long add(long a, long b) { return a + b; }\n private:\n  int h(int);\n};\n}\n",
            "calc::Calc::add",
            "namespace calc {\nclass Calc {\n public:\n  int add(int a, int b) { return 0; }\n private:\n  int h(int, int);\n};\n}\n"),
}


@pytest.mark.parametrize("lang", list(LANGS))
def test_a_body_rewrite_changes_no_public_item(lang):
    path, before, body, _, _, _ = LANGS[lang]
    got = surface.compare(path, before, body)
    assert (got["lang"], got["how"]) == (lang, "tree-sitter")
    assert (got["removed"], got["changed"], got["added"]) == ([], [], [])


@pytest.mark.parametrize("lang", list(LANGS))
def test_a_changed_public_signature_is_named_with_both_heads(lang):
    path, before, _, sig, name, _ = LANGS[lang]
    got = surface.compare(path, before, sig)
    assert [c["name"] for c in got["changed"]] == [name] and got["removed"] == []
    change = got["changed"][0]
    assert change["before"] != change["after"] and change["after"].endswith(change["after_sig"])


@pytest.mark.parametrize("lang", list(LANGS))
def test_a_private_item_changes_nothing_public(lang):
    path, before, _, _, _, private = LANGS[lang]
    got = surface.compare(path, before, private)
    assert (got["removed"], got["changed"]) == ([], [])


@pytest.mark.parametrize("lang", list(LANGS))
def test_removing_a_public_item_is_reported_and_a_new_file_only_adds(lang):
    path, before, _, _, name, _ = LANGS[lang]
    gone = surface.compare(path, before, None)
    assert name in [r["name"] for r in gone["removed"]]
    new = surface.compare(path, None, before)
    assert name in [a["name"] for a in new["added"]] and (new["removed"], new["changed"]) == ([], [])


def test_what_counts_as_public_in_each_language():
    """The rules of host/tools/surface.py's docstring, one line each."""
    def names(path, text):
        return [i.name for i in surface.items(text, surface.language_of(path, text))]

    assert names("m.py", "__all__ = ['a']\ndef a(): pass\ndef b(): pass\nclass C:\n    def _p(self): pass\n"
                         "    def __eq__(self, o): pass\n") == ["a"]
    assert names("m.py", "class C:\n    def _p(self): pass\n    def __eq__(self, o): pass\n    x = 1\n") == \
        ["C", "C.__eq__", "C.x"]
    assert names("l.rs", "pub(crate) fn a() {}\npub struct S { pub x: u8, y: u8 }\npub enum E { A, B(u8) }\n"
                         "impl S { pub fn new() -> S { todo!() } fn p(&self) {} }\nimpl Clone for S { }\n"
                         "pub mod m { pub fn f() {} fn g() {} }\n") == \
        ["S", "S.x", "E", "E::A", "E::B", "S::new", "impl Clone for S", "m", "m::f"]
    assert names("a.go", "package a\ntype T struct { X int; y int }\nfunc (t *T) M() {}\nfunc (t *T) m() {}\n"
                         "func F() {}\nconst C = 1\n") == ["T", "T.X", "T.M", "F", "C"]
    assert names("a.js", "export default function (x) {}\nexport { a as b };\nfunction hidden() {}\n"
                         "module.exports.k = function (q) {};\n") == ["default", "b", "k"]
    assert names("A.java", "public class A { public void a() {} void p() {} protected int f; "
                           "interface I { void m(); } }\nclass B { public void b() {} }\n") == ["A", "A.a", "A.f"]
    assert names("a.hpp", "static int s();\nnamespace { int anon(); }\nint pub(int);\nstruct S { int x; private: "
                          "int y; };\nclass C { int p; public: void q(); };\n") == ["pub", "S", "S::x", "C", "C::q"]
    assert names("m.lua", "local function p() end\nfunction M.f(a) end\nM.g = function(b) end\n"
                          "return { h = function(c) end }\n") == ["M.f", "M.g", "h"]


JUNK = ["{", "}", "(", ")", "pub ", "export ", "public ", "def ", "class ", "\n", "fn ", "<", ">", "::",
        "template<", "'", '"', "`", "impl ", "func ", "function ", "namespace "]


@settings(max_examples=120, deadline=None, database=None, derandomize=True)
@given(lang=st.sampled_from(list(LANGS)), cuts=st.lists(
    st.tuples(st.integers(0, 300), st.integers(0, 20), st.sampled_from(JUNK)), max_size=10))
def test_broken_code_gets_a_surface_never_an_error(lang, cuts):
    """An edit that leaves a file unparsable is still rated (tree-sitter reads what it can)."""
    path, before, body, sig, _, _ = LANGS[lang]
    text = body + sig
    for at, drop, junk in cuts:
        at = min(at, len(text))
        text = text[:at] + junk + text[at + drop:]
    got = surface.compare(path, before, text)
    assert got["how"] == "tree-sitter" and all(isinstance(x, list) for x in (got["removed"], got["changed"], got["added"]))


def test_a_file_no_parser_reads_falls_back_to_its_exported_names():
    before = "public fun area(r: Double): Double = r\npublic fun other() = 1\nfun local() = 2\n"
    changed = surface.compare("src/Shape.kt", before, before.replace("r: Double", "r: Float"))
    assert changed["how"] == "text" and (changed["removed"], changed["changed"]) == ([], [])
    removed = surface.compare("src/Shape.kt", before, "public fun other() = 1\n")
    assert [r["name"] for r in removed["removed"]] == ["area"]


# ---------------------------------------------------------------- the policy: risk.lua

POLICY = """
local risk = require("lib.agent.risk")
local specs, surfaces = ...
local level, reason = risk.batch(specs, surfaces)
return moss.dict { level = level, reason = reason }
"""


@pytest.fixture(scope="module")
def rt():
    with builtin_lua() as (runtime, _root):
        yield runtime


def rate(rt, specs, surfaces) -> tuple[str, str]:
    out = rt.to_py(rt.execute(POLICY, "=(policy)", specs, surfaces))
    return out["level"], out["reason"]


def test_the_reason_names_the_item_and_what_changed(rt):
    path, before, _, sig, _, _ = LANGS["rust"]
    level, reason = rate(rt, [{"target": path, "action": "replace", "content": sig}],
                         [surface.compare(path, before, sig)])
    assert level == "high"
    assert "pub fn scale(x: i32) -> i32 → (x: i64, by: i64) -> i64" in reason and path in reason


def test_a_rename_and_a_removal_are_high_and_say_which(rt):
    path, before = "src/lib.rs", "pub fn scale(x: i32) -> i32 { x }\npub fn keep() {}\n"
    renamed = before.replace("scale", "scale_by")
    level, reason = rate(rt, [{"target": path, "action": "replace", "content": renamed}],
                         [surface.compare(path, before, renamed)])
    assert level == "high" and "pub fn scale(x: i32) -> i32 renamed to scale_by" in reason
    level, reason = rate(rt, [{"target": path, "action": "replace", "content": "pub fn keep() {}\n"}],
                         [surface.compare(path, before, "pub fn keep() {}\n")])
    assert level == "high" and "pub fn scale(x: i32) -> i32 removed" in reason


@pytest.mark.parametrize("lang", list(LANGS))
def test_a_body_rewrite_or_new_public_items_stay_medium(rt, lang):
    path, before, body, _, _, _ = LANGS[lang]
    assert rate(rt, [{"target": path, "action": "replace", "content": body}],
                [surface.compare(path, before, body)])[0] == "medium"
    more = before + "\n" + before  # the same items again: nothing removed or changed
    assert rate(rt, [{"target": path, "action": "append", "content": before}],
                [surface.compare(path, before, more)])[0] in ("low", "medium")


def test_the_rules_that_do_not_read_the_surface_still_hold(rt):
    """Deletions, config/build files and entry points stay high whatever the surface says."""
    nothing = [{"path": "x", "how": "tree-sitter", "removed": [], "changed": [], "added": []}]
    assert rate(rt, [{"target": "src/lib.rs/helper", "action": "delete"}], nothing)[0] == "high"
    assert rate(rt, [{"target": "Cargo.toml", "action": "text", "content": "x"}], nothing)[0] == "high"
    assert rate(rt, [{"target": "src/main.rs/main", "action": "replace", "content": "fn main() {}"}], nothing)[0] \
        == "high"


# ------------------------------------------------------- the real CLI, at --auto-approve medium

CRATE = "pub fn add(a: i32, b: i32) -> i32 {\n    todo!()\n}\n\npub fn scale(x: i32) -> i32 {\n    x\n}\n"
SHAPE = ("export class Shape {\n  constructor(w, h) { this.w = w; this.h = h; }\n"
         "  area() { throw new Error('implement me'); }\n}\n\nexport function perimeter(s) {\n"
         "  throw new Error('implement me');\n}\n")
SHAPE_DONE = ("export class Shape {\n  constructor(w, h) { this.w = w; this.h = h; }\n"
              "  area() { return this.w * this.h; }\n}\n\nexport function perimeter(s) {\n"
              "  return 2 * (s.w + s.h);\n}\n")


@pytest.mark.needs_sandbox
def test_body_rewrites_apply_at_medium_and_a_changed_signature_is_refused_naming_it(project, api, subtests):
    """Rust and JavaScript: implementing what was left to do (a symbol replace, a whole-file
    replace) keeps every public signature and is applied at --auto-approve medium in -n; changing
    a public signature is refused there, and the model is told which item and how it changed."""
    project.write("src/lib.rs", CRATE)
    project.write("web/shape.js", SHAPE)
    replies = [
        "$(edit src/lib.rs/add replace ```rust\npub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n```)\n"
        f"$(edit web/shape.js replace ```javascript\n{SHAPE_DONE}```)",
        "$(edit src/lib.rs/scale replace ```rust\npub fn scale(x: i64, by: i64) -> i64 {\n    x * by\n}\n```)\n"
        "$(edit web/shape.js --old ```\nexport function perimeter(s) {\n``` --new ```\n"
        "export function perimeter(s, unit) {\n```)",
        "$(answer done)",
    ]
    told: list[str] = []

    def model(body):
        if state_of(body) == "planner":
            return "1. Implement.\nReady to refactor."
        told.append(last_user_text(body))
        return replies.pop(0) if len(replies) > 1 else replies[0]

    api.push(*[model] * 8)
    r = project.moss("@agent", "--provider", "anthropic", "--v1", "-n", "--refactor", "--auto-approve", "medium",
                     "--validate", "true", "--output-format", "json", "implement", env=api.env(), timeout=120)
    assert json.loads(r.stdout)["reason"] == "answered", r.stderr
    with subtests.test("rust_body_applied"):
        assert (project.root / "src/lib.rs").read_text() == CRATE.replace("todo!()", "a + b")
    with subtests.test("javascript_body_applied"):
        assert (project.root / "web/shape.js").read_text() == SHAPE_DONE
    refusals = told[2]
    with subtests.test("rust_signature_refused_naming_it"):
        assert "pub fn scale(x: i32) -> i32 → (x: i64, by: i64) -> i64" in refusals
    with subtests.test("javascript_signature_refused_naming_it"):
        assert "export function perimeter(s) → (s, unit)" in refusals
    assert refusals.count("(REFUSED)") == 2 and "--auto-approve medium" in refusals

"""moss.code.view: trees, skeletons, line ranges, symbols, fuzzy paths, caps."""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from moss.errors import MossError
from moss.tools.caps import cap
from moss.tools.resolve import resolve_path
from moss.tools.treesitter import find_symbol, language_for, symbols_of
from moss.tools.view import view

FIXTURE = Path(__file__).parent / "fixtures" / "rustcrate"

PROVIDERS = ["Anthropic", "OpenAI", "Azure", "Gemini", "Cohere", "DeepSeek", "Groq",
             "Mistral", "Ollama", "OpenRouter", "Perplexity", "Together", "XAI"]
COMMANDS = ["View", "TextSearch", "Edit", "Analyze", "Package", "Init", "Config",
            "Sessions", "Script", "Index", "Serve"]


def make_crate(dest: Path) -> Path:
    """A copy of the fixture crate plus files that are git-ignored (so cannot be
    committed): target/ build output and a *.log, and a hidden directory."""
    root = dest / "rustcrate"
    shutil.copytree(FIXTURE, root)
    (root / "target" / "debug").mkdir(parents=True)
    (root / "target" / "debug" / "build.rs").write_text("// Provider generated\nfn x() {}\n")
    (root / "debug.log").write_text("Provider log line\n")
    (root / ".github" / "workflows").mkdir(parents=True)
    (root / ".github" / "workflows" / "ci.yml").write_text("name: ci\n")
    return root


@pytest.fixture(scope="module")
def crate(tmp_path_factory) -> Path:
    return make_crate(tmp_path_factory.mktemp("crate"))


def write(root: Path, rel: str, text: str) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(textwrap.dedent(text).lstrip("\n"))
    return p


# ------------------------------------------------------------------------------ tree

def test_tree_of_the_crate(crate):
    assert view(crate, ".") == textwrap.dedent("""\
        # . (rustcrate)
        .github/workflows/
          ci.yml
        src/
          workflow/
            llm.rs
            mod.rs
          config.rs
          main.rs
        .gitignore
        Cargo.toml
        README.md

        4 directories, 8 files
        """)


def test_tree_never_shows_ignored_files(crate):
    out = view(crate, ".")
    assert "target" not in out and "debug.log" not in out


def test_tree_of_a_subdirectory_fuzzy(crate):
    assert view(crate, "workflow") == "# src/workflow/\nllm.rs\nmod.rs\n\n0 directories, 2 files\n"
    assert view(crate, "src/") .startswith("# src/\nworkflow/\n  llm.rs\n")


def test_tree_in_a_git_repo_hides_dot_git(tmp_path):
    root = make_crate(tmp_path)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    out = view(root, ".")
    assert ".git/" not in out and ".git\n" not in out
    assert ".gitignore" in out and ".github/workflows/" in out
    assert "target" not in out
    assert out.endswith("\n4 directories, 8 files\n")


def test_tree_sorts_dirs_first_case_insensitively_and_collapses_chains(tmp_path):
    for rel in ["b.txt", "A.txt", "c.txt", "zdir/x.txt", "Adir/y.txt",
                "deep/er/est/leaf.txt", ".hidden"]:
        write(tmp_path, rel, "x\n")
    assert view(tmp_path, ".") == textwrap.dedent(f"""\
        # . ({tmp_path.name})
        Adir/
          y.txt
        deep/er/est/
          leaf.txt
        zdir/
          x.txt
        .hidden
        A.txt
        b.txt
        c.txt

        5 directories, 7 files
        """)


def test_big_tree_folds_deeper_levels_with_a_note(tmp_path):
    for d in range(30):
        for f in range(15):
            write(tmp_path, f"pkg{d:02}/sub/file{f:02}.py", "x = 1\n")
    out = view(tmp_path, ".")
    assert "pkg00/sub/ (15 files)" in out
    assert "file00.py" not in out
    assert "30 directories" not in out  # every sub dir is counted too
    assert "60 directories, 450 files" in out
    assert "deeper directories folded" in out
    full = view(tmp_path, ".", depth=-1, max_chars=0)
    assert full.count("file00.py") == 30


def test_huge_directory_lists_first_entries_then_a_count(tmp_path):
    for i in range(130):
        write(tmp_path, f"f{i:03}.txt", "")
    out = view(tmp_path, ".")
    assert "f099.txt" in out and "f100.txt" not in out
    assert "… 30 more (0 dirs, 30 files)" in out
    assert out.endswith("0 directories, 130 files\n")


def test_tree_depth_2_lists_symbols_under_files(crate):
    out = view(crate, "src/workflow", depth=2)
    assert "llm.rs\n  pub enum Provider L6-21\n  impl Provider L23-72\n" in out


# -------------------------------------------------------------------------- skeletons

def test_rust_skeleton_shows_all_13_provider_variants(crate):
    out = view(crate, "src/workflow/llm.rs")
    lines = out.splitlines()
    assert lines[0] == "# src/workflow/llm.rs"
    assert lines[1] == "Lines: 78"
    assert "pub enum Provider L6-21" in lines
    assert "  /// The LLM providers moss can talk to." in lines
    for i, name in enumerate(PROVIDERS):
        assert f"  {name} L{8 + i}" in lines
    assert "impl Provider L23-72" in lines
    assert "  pub fn default_model(&self) -> &'static str L25-41" in lines
    assert "    /// The model used when none is configured." in lines
    assert "  pub fn env_var(&self) -> &'static str L44-60" in lines
    assert "impl fmt::Display for Provider L74-78" in lines


def test_rust_skeleton_main_has_cli_first_with_fields_and_11_commands(crate):
    out = view(crate, "src/main.rs")
    lines = out.splitlines()
    structs = [ln for ln in lines if ln.startswith("pub struct")]
    assert structs[0] == "pub struct Cli L13-24"
    assert "  pub root: Option<PathBuf> L17-18" in lines
    assert "    /// Project root (defaults to the current directory)." in lines
    assert "  pub json: bool L20-21" in lines
    start = lines.index("pub enum Commands L27-67")
    variants = [ln for ln in lines[start + 2:] if ln.startswith("  ") and not ln.startswith("   ")]
    variants = [v for v in variants if v.strip().split()[0] in COMMANDS]
    assert [v.strip().split()[0] for v in variants] == COMMANDS
    assert "  View { target: Option<String>, depth: i32 } L30-34" in lines
    assert "    /// View a directory tree, a file skeleton or a symbol." in lines
    assert "  Init L50" in lines
    assert "fn main() -> anyhow::Result<()> L69-74" in lines


def test_skeleton_depth_0_and_minus_1(crate):
    shallow = view(crate, "src/workflow/llm.rs", depth=0)
    assert "pub enum Provider L6-21 (+13 more)" in shallow
    assert "  Anthropic L8" not in shallow
    deep = view(crate, "src/main.rs", depth=-1)
    assert "    target: Option<String> L31" in deep  # a struct variant's own fields


def test_python_skeleton(tmp_path):
    write(tmp_path, "pkg/__init__.py", "")
    write(tmp_path, "pkg/agent.py", '''
        """The agent loop and its helpers.

        Longer text that is not part of the summary.
        """
        from dataclasses import dataclass


        @dataclass
        class Agent(Base):
            """Runs one task to completion.

            Details here.
            """

            name: str = "moss"
            turns: int = 0

            def run(self, task: str) -> str:
                """Run `task` and return the answer."""
                def helper():
                    pass
                return task

            @property
            async def busy(self) -> bool:
                return False


        def main(
            argv: list[str] | None = None,
        ) -> int:
            return 0
        ''')
    out = view(tmp_path, "agent.py")
    assert out == textwrap.dedent('''\
        # pkg/agent.py
        Lines: 32
        """The agent loop and its helpers."""

        @dataclass class Agent(Base) L8-26
          """Runs one task to completion."""
          name: str = "moss" L15
          turns: int = 0 L16
          def run(self, task: str) -> str L18-22 (+1 more)
            """Run `task` and return the answer."""
          @property async def busy(self) -> bool L24-26
        def main(argv: list[str] | None = None) -> int L29-32
        ''')


def test_javascript_typescript_tsx_skeletons(tmp_path):
    write(tmp_path, "web/app.js", """
        /** Renders the app. */
        export class App extends Base {
          count = 0;
          render() { return null; }
        }
        export const start = async (el) => { new App(); };
        function helper(a, b) { return a + b; }
        """)
    write(tmp_path, "web/types.ts", """
        export interface Options {
          root: string;
          depth?: number;
        }
        export type Mode = "tree" | "file";
        export enum Kind { File, Dir = 2 }
        export function view(opts: Options): string { return ""; }
        """)
    write(tmp_path, "web/Button.tsx", """
        export function Button(props: { label: string }) {
          return <button>{props.label}</button>;
        }
        """)
    js = view(tmp_path, "app.js")
    assert "export class App extends Base L2-5\n  /** Renders the app. */\n" \
           "  count = 0 L3\n  render() L4\n" in js
    assert "export const start = async (el) => L6" in js
    assert "function helper(a, b) L7" in js
    ts = view(tmp_path, "types.ts")
    assert "export interface Options L1-4\n  root: string L2\n  depth?: number L3\n" in ts
    assert 'export type Mode = "tree" | "file" L5' in ts
    assert "export enum Kind L6\n  File L6\n  Dir = 2 L6\n" in ts
    assert "export function view(opts: Options): string L7" in ts
    tsx = view(tmp_path, "Button.tsx")
    assert "export function Button(props: { label: string }) L1-3" in tsx


def test_go_and_lua_skeletons(tmp_path):
    write(tmp_path, "cmd/agent.go", """
        package main

        // Agent runs tasks.
        type Agent struct {
        \tName  string
        \tTurns int
        }

        // Run does one task.
        func (a *Agent) Run(task string) error {
        \treturn nil
        }

        func main() {}
        """)
    write(tmp_path, "scripts/agent.lua", """
        local M = {}

        --- Run the agent loop.
        ---@param task string
        function M.run(task)
          return task
        end

        local function helper() end

        return M
        """)
    go = view(tmp_path, "agent.go")
    assert "type Agent struct L4-7\n  // Agent runs tasks.\n  Name string L5\n" \
           "  Turns int L6\n" in go
    assert "func (a *Agent) Run(task string) error L10-12\n  // Run does one task.\n" in go
    lua = view(tmp_path, "agent.lua")
    assert "function M.run(task) L5-7\n  --- Run the agent loop.\n" in lua
    assert "local function helper() L9" in lua
    assert find_symbol(tmp_path / "scripts/agent.lua", "M.run").start_line == 5
    assert find_symbol(tmp_path / "cmd/agent.go", "Agent/Run").kind == "method"


def test_plain_text_file_shows_line_count_and_head(crate, tmp_path):
    out = view(crate, "Cargo.toml")
    assert out.startswith("# Cargo.toml\nLines: 15\n\n 1 | [package]\n 2 | name = \"moss\"\n")
    write(tmp_path, "notes.txt", "".join(f"line {i}\n" for i in range(1, 101)))
    out = view(tmp_path, "notes.txt")
    assert "40 | line 40\n" in out and "line 41" not in out
    assert out.rstrip().endswith("… 60 more lines (view notes.txt:41-100)")


def test_markdown_outline(crate):
    assert view(crate, "README.md") == (
        "# README.md\nLines: 14\n\n# moss L1-14\n  ## Usage L5-11\n  ## Configuration L12-14\n")


def test_binary_and_oversized_files_get_one_line(tmp_path):
    (tmp_path / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + bytes(range(256)))
    out = view(tmp_path, "logo.png")
    assert out == "# logo.png: binary file (272 bytes), not shown"
    (tmp_path / "latin.txt").write_bytes(b"caf\xe9 cr\xe8me\n")
    assert "not shown" in view(tmp_path, "latin.txt")
    big = tmp_path / "big.py"
    big.write_text("x = 1\n" * 400_000)  # 2.4 MB
    out = view(tmp_path, "big.py")
    assert out.count("\n") == 0 and "too large" in out and "big.py:A-B" in out
    assert view(tmp_path, "big.py:399999-400000") == (
        "# big.py:399999-400000\n399999 | x = 1\n400000 | x = 1\n")


def test_empty_file(tmp_path):
    (tmp_path / "empty.py").write_text("")
    assert view(tmp_path, "empty.py") == "# empty.py\nLines: 0\n(empty file)\n"


# ------------------------------------------------------------------- lines and symbols

def test_line_range_has_a_gutter(crate):
    assert view(crate, "src/main.rs:13-16") == textwrap.dedent("""\
        # src/main.rs:13-16
        13 | #[derive(Parser, Debug)]
        14 | #[command(name = "moss", version, about)]
        15 | pub struct Cli {
        16 |     /// Project root (defaults to the current directory).
        """)


def test_line_range_is_clamped_with_a_note(crate):
    out = view(crate, "llm.rs:77-500")
    assert out == "# src/workflow/llm.rs:77-78 (file has 78 lines; asked for 77-500)\n" \
                  "77 |     }\n78 | }\n"
    assert view(crate, "llm.rs:78-").startswith("# src/workflow/llm.rs:78-78\n")
    with pytest.raises(MossError) as e:
        view(crate, "llm.rs:900-910")
    assert e.value.kind == "usage" and "78 lines" in str(e.value)
    with pytest.raises(MossError) as e:
        view(crate, "src:1-2")
    assert e.value.kind == "usage"


def test_line_n_shows_the_enclosing_symbol(crate):
    out = view(crate, "llm.rs:47")
    lines = out.splitlines()
    assert lines[0] == "# src/workflow/llm.rs:47 in Provider/env_var (L43-60)"
    assert lines[1] == "43 |     /// The environment variable holding the API key."
    assert "47 >             Provider::OpenAI => \"OPENAI_API_KEY\"," in lines
    assert lines[-1] == "60 |     }"
    # a line in no symbol: the line with context
    out = view(crate, "src/main.rs:4")
    assert out.startswith("# src/main.rs:4 (not inside a symbol; lines 1-14)\n")
    assert " 4 > use std::path::PathBuf;" in out


def test_symbol_view(crate):
    out = view(crate, "src/workflow/llm.rs/Provider/default_model")
    lines = out.splitlines()
    assert lines[0] == "# src/workflow/llm.rs/Provider/default_model (L24-41)"
    assert lines[1] == "# in impl Provider L23-72"
    assert lines[2] == "    /// The model used when none is configured."
    assert lines[3] == "    pub fn default_model(&self) -> &'static str {"
    assert lines[-1] == "    }"
    out = view(crate, "main.rs/Cli")
    assert out.splitlines()[0] == "# src/main.rs/Cli (L12-24)"
    assert "pub struct Cli {" in out and "pub command: Commands," in out
    enum = view(crate, "llm.rs/Provider")
    assert enum.splitlines()[1] == ("# also: impl Provider L23-72; "
                                    "impl fmt::Display for Provider L74-78")
    assert all(f"    {p}," in enum for p in PROVIDERS)
    assert view(crate, "llm.rs/Provider::env_var") == view(crate, "llm.rs/Provider.env_var")


def test_symbol_missing_or_ambiguous_in_a_file(crate):
    with pytest.raises(MossError) as e:
        view(crate, "llm.rs/default_modle")
    assert e.value.kind == "not_found"
    assert "Provider/default_model" in str(e.value)
    out = view(crate, "llm.rs/fmt")  # a method of a trait impl, under the type's name
    assert out.startswith("# src/workflow/llm.rs/Provider/fmt (L75-77)\n"
                          "# in impl fmt::Display for Provider L74-78\n")
    with pytest.raises(MossError) as e:
        view(crate, "Cargo.toml/package")
    assert e.value.kind == "not_found"


def test_ambiguous_symbol_lists_candidates(tmp_path):
    write(tmp_path, "a.py", """
        class Agent:
            def run(self): pass
        class Tool:
            def run(self): pass
        """)
    with pytest.raises(MossError) as e:
        view(tmp_path, "a.py/run")
    assert e.value.kind == "ambiguous"
    assert "  Agent/run (method, L2)\n  Tool/run (method, L4)" in str(e.value)
    assert view(tmp_path, "a.py/Tool.run").startswith("# a.py/Tool/run (L4)\n")


def test_bare_symbol_is_found_anywhere(crate):
    out = view(crate, "Provider")
    assert out.startswith("# src/workflow/llm.rs/Provider (L5-21)\n")
    out = view(crate, "Workflow/push")
    assert out.startswith("# src/workflow/mod.rs/Workflow/push (L30-34)\n")
    out = view(crate, "workflow/Step")  # dir/Symbol: searched under that directory
    assert out.startswith("# src/workflow/mod.rs/Step (L7-16)\n")


def test_treesitter_api(crate):
    syms = symbols_of(crate / "src/workflow/llm.rs")
    provider = syms[0]
    assert (provider.name, provider.kind, provider.start_line, provider.end_line) == (
        "Provider", "enum", 6, 21)
    assert [c.name for c in provider.children] == PROVIDERS
    assert provider.children[0].parent is provider
    assert provider.doc == "The LLM providers moss can talk to."
    src = (crate / "src/workflow/llm.rs").read_bytes()
    assert src[provider.start_byte:provider.end_byte].startswith(b"#[derive(Debug")
    sym = find_symbol(crate / "src/workflow/llm.rs", "Provider/env_var")
    assert (sym.kind, sym.path) == ("method", "Provider/env_var")
    assert find_symbol(crate / "src/workflow/llm.rs", "Provider").kind == "enum"
    assert language_for("x.tsx") == "tsx" and language_for("Makefile") is None
    assert symbols_of(Path("x.py"), b"def f():\n    pass\n")[0].signature == "def f()"



HIDING_PLACES = """\
import sys

class Outer(Base):
    \"\"\"Doc.\"\"\"
    limit = 3
    name: str = "x"
    a = b = 1
    limit + 1

    @property
    def size(self):
        def helper():
            class Local:
                pass
            return Local
        return helper

if sys.platform == "linux":
    def on_linux(): pass
elif sys.platform == "win32":
    def on_windows(): pass
else:
    async def elsewhere(): pass

for i in range(3):
    def in_for(): pass
else:
    def for_else(): pass
while False:
    def in_while(): pass
try:
    def in_try(): pass
except ValueError:
    def in_except(): pass
except* KeyError:
    def in_except_star(): pass
finally:
    def in_finally(): pass
with open("f") as f:
    class InWith:
        x = 1
match sys.argv:
    case [_]:
        def in_case(): pass
handler = lambda: 0
"""

BROKEN = """\
def ok():
    return 1

x = foo(def inner(): pass)
class Half(
    def lost(self): pass

print(1 +
def after():
    pass
d = {
 'a': 1,
 def in_dict(): pass
}
@dec(
def decorated_badly(): pass
"""


def test_python_symbols_are_the_ones_the_query_finds(tmp_path):
    """Python files are walked statement by statement rather than queried node by node
    (twice as fast); every place a def or class can hide, and the broken parts of a file
    that does not parse, give exactly the symbols the language's query gives."""
    import tree_sitter as ts

    from moss.tools import treesitter

    for src in (HIDING_PLACES, BROKEN, HIDING_PLACES + BROKEN + HIDING_PLACES):
        tree = treesitter.parse(src.encode(), "python")
        queried = ts.QueryCursor(treesitter.query("python")).captures(tree.root_node).get("s", [])
        walked = treesitter.python.captures(tree.root_node)
        assert sorted((n.start_byte, n.end_byte, n.type) for n in walked) == \
            sorted((n.start_byte, n.end_byte, n.type) for n in queried)
    names = [s.path for s in treesitter.walk_all(symbols_of(Path("x.py"), HIDING_PLACES.encode()))]
    assert names == ["Outer", "Outer/limit", "Outer/name", "Outer/a", "Outer/size", "Outer/size/helper",
                     "Outer/size/helper/Local", "on_linux", "on_windows", "elsewhere", "in_for",
                     "for_else", "in_while", "in_try", "in_except", "in_except_star", "in_finally",
                     "InWith", "InWith/x", "in_case"]

# ------------------------------------------------------------------------ fuzzy paths

def test_fuzzy_suffix_and_underscore_dash(crate, tmp_path):
    assert resolve_path(crate, "llm.rs") == (crate / "src/workflow/llm.rs").resolve()
    assert resolve_path(crate, "workflow/llm.rs") == (crate / "src/workflow/llm.rs").resolve()
    assert view(crate, "llm.rs").startswith("# src/workflow/llm.rs\n")
    write(tmp_path, "pkg/my_module.py", "def f(): pass\n")
    assert view(tmp_path, "my-module.py").startswith("# pkg/my_module.py\n")
    assert view(tmp_path, "MY_MODULE.py").startswith("# pkg/my_module.py\n")


def test_ambiguous_path_lists_candidates(tmp_path):
    root = make_crate(tmp_path)
    write(root, "src/tools/mod.rs", "pub fn x() {}\n")
    with pytest.raises(MossError) as e:
        view(root, "mod.rs")
    assert e.value.kind == "ambiguous"
    assert "  src/tools/mod.rs (file)\n  src/workflow/mod.rs (file)" in str(e.value)


def test_missing_path_suggests_close_matches(crate):
    with pytest.raises(MossError) as e:
        view(crate, "lmm.rs")
    assert e.value.kind == "not_found"
    assert "src/workflow/llm.rs (file)" in str(e.value)
    with pytest.raises(MossError) as e:
        view(crate, "src/confg.rs")
    assert "src/config.rs" in str(e.value)


def test_ignored_files_are_not_fuzzy_candidates_but_exact_paths_work(crate):
    with pytest.raises(MossError):
        view(crate, "build.rs")
    assert view(crate, "target/debug/build.rs").startswith("# target/debug/build.rs\n")


def test_paths_outside_the_root_are_refused(crate, tmp_path):
    outside = tmp_path / "secret.txt"
    outside.write_text("secret\n")
    for target in ["../secret.txt", str(outside), "src/../../secret.txt", "/etc/passwd"]:
        with pytest.raises(MossError) as e:
            view(crate, target)
        assert e.value.kind == "denied", target
    link = crate / "leak.txt"
    os.symlink(outside, link)
    try:
        with pytest.raises(MossError) as e:
            view(crate, "leak.txt")
        assert e.value.kind == "denied"
        with pytest.raises(MossError) as e:
            view(crate, "leak.txt:1-1")
        assert e.value.kind == "denied"
    finally:
        link.unlink()


# ------------------------------------------------------------------------------- caps

def test_cap_keeps_head_and_tail_with_a_marker():
    text = "".join(f"line {i:04}\n" for i in range(1, 1001))  # 10,000 chars
    out = cap(text, 1000)
    assert len(out) <= 1000
    assert out.startswith("line 0001\nline 0002\n")
    assert out.endswith("line 1000\n")
    marker = [ln for ln in out.splitlines() if ln.startswith("…")]
    assert len(marker) == 1
    head_last = int([ln for ln in out.splitlines() if ln.startswith("line")][
        out.splitlines().index(marker[0]) - 1][5:])
    tail_first = int(out.splitlines()[out.splitlines().index(marker[0]) + 1][5:])
    cut_chars = (tail_first - head_last - 1) * 10
    assert marker[0] == (f"… [{cut_chars:,} characters cut: lines {head_last + 1}-"
                         f"{tail_first - 1} of 1,000] …")
    assert cap("short", 1000) == "short"
    assert cap(text, 0) == text


def test_cap_a_single_huge_line():
    out = cap("x" * 50_000, 500)
    assert len(out) <= 500 and "characters cut: line 1 of 1" in out


def test_view_output_is_capped(crate):
    out = view(crate, "src/main.rs:1-104", max_chars=800)
    assert len(out) <= 800 and "characters cut: lines" in out
    assert out.startswith("# src/main.rs:1-104\n")
    assert out.rstrip().endswith("104 | }")


def test_line_numbers_count_newlines_only(tmp_path):
    (tmp_path / "win.py").write_bytes(b"a = 1\r\nb = '\x0c'\r\n\r\ndef f():\r\n    pass\r\n")
    assert view(tmp_path, "win.py:2-4") == "# win.py:2-4\n2 | b = '\x0c'\n3 |\n4 | def f():\n"
    assert "def f() L4-5" in view(tmp_path, "win.py")


def test_grammars_are_imported_lazily():
    import sys as _sys
    code = ("import sys, moss.tools.view, moss.tools.search; "
            "print(sorted(m for m in sys.modules if m.startswith('tree_sitter')))")
    out = subprocess.run([_sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


# ------------------------------------------------- symbol lookup without a whole outline

def test_symbol_view_is_the_same_with_or_without_cached_outlines(crate, tmp_path):
    """A lookup extracts only the symbols around the name's occurrences unless the file's
    outline is cached: what it shows (the class line, the impls, the source) is the same."""
    from moss.tools import treesitter

    write(tmp_path, "m.py", '''
        """Module."""
        import functools


        class Base:
            """The base."""

            @functools.cache
            def run(self, x: int) -> int:
                """Run it."""
                return x  # run, RUN, Run: occurrences in other case too


        class Other(Base):
            def run(self):  # the same name in another class
                pass

            class Inner:
                def helper(self):
                    return "run"
        ''')
    cases = [(tmp_path, "m.py", t) for t in ("m.py/Base/run", "m.py/Other.run", "m.py/helper",
                                             "m.py/Inner", "m.py/BASE", "m.py/other/RUN")]
    cases += [(crate, "src/workflow/llm.rs", f"src/workflow/llm.rs/{t}")
              for t in ("Provider", "fmt", "Provider/default_model")]
    cases += [(crate, "src/main.rs", "src/main.rs/Cli")]
    for root, rel, target in cases:
        treesitter.clear_caches()
        cold = view(root, target)
        treesitter.outline(root / rel)  # now cached whole
        assert view(root, target) == cold, target
    assert view(tmp_path, "m.py/Other/Inner/helper").splitlines()[:2] == [
        "# m.py/Other/Inner/helper (L19-20)", "# in class Inner L18-20"]
    assert view(tmp_path, "m.py/Base/run").splitlines()[:3] == [
        "# m.py/Base/run (L8-11)", "# in class Base L5-11", "    @functools.cache"]
    with pytest.raises(MossError) as e:
        view(tmp_path, "m.py/run")
    assert e.value.kind == "ambiguous" and "  Base/run (method, L8-11)\n  Other/run (method, L15-16)" in str(e.value)
    with pytest.raises(MossError) as e:  # no occurrence at all: the whole file is listed
        view(tmp_path, "m.py/Zzzqx")
    assert e.value.kind == "not_found" and "it defines: Base, Other" in str(e.value)


def test_symbol_lookup_in_a_non_ascii_file(tmp_path):
    write(tmp_path, "u.py", '''
        def straße():
            return "ſtart"


        class Kelvin:
            def ſtart(self):
                pass
        ''')
    assert view(tmp_path, "u.py/straße").startswith("# u.py/straße (L1-2)\n")
    assert view(tmp_path, "u.py/Kelvin/start").startswith("# u.py/Kelvin/ſtart (L6-7)\n# in class Kelvin")
    assert view(tmp_path, "u.py/kelvin").startswith("# u.py/Kelvin (L5-7)\n")  # any case
    assert view(tmp_path, "u.py/STRASSE").startswith("# u.py/straße (L1-2)\n")  # ß folds to ss


def test_an_exact_file_path_wins_over_a_fuzzy_one_for_file_symbol(tmp_path):
    """`a.py/Foo` is the symbol Foo of the file a.py, even when a directory named a.py
    elsewhere holds a file Foo (which a fuzzy path match would also find)."""
    write(tmp_path, "a.py", "class Foo:\n    pass\n")
    write(tmp_path, "vendor/a.py/Foo", "not python\n")
    assert view(tmp_path, "a.py/Foo") == "# a.py/Foo (L1-2)\nclass Foo:\n    pass\n"
    assert view(tmp_path, "vendor/a.py/Foo").startswith("# vendor/a.py/Foo\n")

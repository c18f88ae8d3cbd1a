"""moss.code.search: ripgrep hits grouped by file, labelled with their enclosing symbol."""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

from moss.errors import MossError
from moss.tools import resolve
from moss.tools.search import search

FIXTURE = Path(__file__).parent / "fixtures" / "rustcrate"


@pytest.fixture(scope="module")
def crate(tmp_path_factory) -> Path:
    """The fixture crate plus git-ignored files (target/, *.log) and a hidden file."""
    root = tmp_path_factory.mktemp("crate") / "rustcrate"
    shutil.copytree(FIXTURE, root)
    (root / "target" / "debug").mkdir(parents=True)
    (root / "target" / "debug" / "build.rs").write_text("// env_var generated\n")
    (root / "debug.log").write_text("env_var in a log\n")
    (root / ".env.example").write_text("ANTHROPIC_API_KEY=\n")
    return root


def test_hits_grouped_by_file_with_enclosing_symbols(crate):
    assert search(crate, r"env_var") == textwrap.dedent("""\
        src/workflow/llm.rs:
          44 (Provider/env_var L44-60): pub fn env_var(&self) -> &'static str {

        1 match in 1 file
        """)
    out = search(crate, r"Provider::from_name|fn (load|push)\b")
    assert out == textwrap.dedent("""\
        src/config.rs:
          19 (Config/load L19-27): pub fn load(root: &Path) -> anyhow::Result<Config> {
        src/main.rs:
          87 (run L77-93): let provider = Provider::from_name(key.as_deref().unwrap_or("anthropic"));
        src/workflow/mod.rs:
          31 (Workflow/push L31-34): pub fn push(&mut self, step: Step) -> &mut Self {

        3 matches in 3 files
        """)


def test_hits_outside_any_symbol_have_no_label(crate):
    out = search(crate, r"^use std::path")
    assert "src/main.rs:\n  4: use std::path::PathBuf;\n" in out
    assert "src/config.rs:\n  4: use std::path::Path;\n" in out


def test_ignored_files_are_not_searched_hidden_files_are(crate):
    out = search(crate, "env_var|ANTHROPIC_API_KEY")
    assert "target/" not in out and "debug.log" not in out
    assert ".env.example:\n  1: ANTHROPIC_API_KEY=\n" in out


def test_only_globs(crate):
    out = search(crate, "Provider", only=["*.toml"])
    assert out == "No matches for Provider in *.toml\n"
    out = search(crate, "name", only=["*.toml"])
    assert out.startswith("Cargo.toml:\n  2: name = \"moss\"\n")
    out = search(crate, "pub struct", only=["src/workflow/**"])
    assert out.startswith("src/workflow/mod.rs:\n") and "src/main.rs" not in out
    assert search(crate, "pub struct", only=["src/workflow"]) == out   # a directory
    out = search(crate, "pub struct", only=["!src/workflow/**"])
    assert "src/main.rs:" in out and "src/config.rs:" in out and "workflow" not in out


def test_only_never_brings_back_ignored_files(crate):
    assert search(crate, "env_var", only=["*.log"]).startswith("No matches")
    assert search(crate, "env_var", only=["target/**"]).startswith("No matches")
    assert search(crate, "env_var", only=["*.rs"]).startswith("src/workflow/llm.rs:")


def test_limit_says_what_was_cut(crate):
    out = search(crate, r"Provider::\w+ =>", limit=3)
    lines = out.splitlines()
    assert lines[:4] == [
        "src/workflow/llm.rs:",
        '  27 (Provider/default_model L25-41): Provider::Anthropic => "claude-sonnet-4-5",',
        '  28 (Provider/default_model L25-41): Provider::OpenAI => "gpt-4o",',
        '  29 (Provider/default_model L25-41): Provider::Azure => "gpt-4o",',
    ]
    assert lines[-1].startswith("26 matches in 1 file (showing the first 3 in 1 file:")
    assert "limit" in lines[-1]


def test_ignore_case(crate):
    assert search(crate, "ANTHROPIC\\b", only=["*.rs"]).startswith("No matches")
    out = search(crate, "ANTHROPIC\\b", only=["*.rs"], ignore_case=True)
    assert "Provider::Anthropic" in out and out.endswith("8 matches in 3 files\n")
    assert '  13 (Config/provider L14): /// The LLM provider used by the agent, e.g. "anthropic".' in out


def test_bad_regex_is_a_usage_error(crate):
    with pytest.raises(MossError) as e:
        search(crate, "(unclosed")
    assert e.value.kind == "usage"
    assert "unclosed group" in str(e.value)


def test_no_matches_is_a_plain_result(crate):
    assert search(crate, "definitely_not_here_42") == "No matches for definitely_not_here_42\n"


def test_python_and_long_lines(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "agent.py").write_text(textwrap.dedent('''\
        class Agent:
            """Runs tasks."""

            def run(self, task):
                return self.step(task)

            def step(self, task):
                return task
        '''))
    (tmp_path / "bundle.js").write_text("var a=1;" * 200 + "NEEDLE();" + "var b=2;" * 200 + "\n")
    out = search(tmp_path, r"self\.step|def step")
    assert out == textwrap.dedent("""\
        pkg/agent.py:
          5 (Agent/run L4-5): return self.step(task)
          7 (Agent/step L7-8): def step(self, task):

        2 matches in 1 file
        """)
    out = search(tmp_path, "NEEDLE")
    hit = out.splitlines()[1]
    assert "NEEDLE();" in hit and len(hit) < 260 and hit.endswith("…")


def test_output_is_capped(crate):
    out = search(crate, r"\w", limit=1000, max_chars=1500)
    assert len(out) <= 1500 and "characters cut" in out
    assert out.rstrip().splitlines()[-1].endswith("files")


def test_missing_ripgrep_names_the_package(monkeypatch, tmp_path):
    monkeypatch.setattr(resolve, "_RG_CACHE", [])
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(MossError) as e:
        search(tmp_path, "x")
    assert "ripgrep" in str(e.value) and "pip" in str(e.value)


def test_the_same_hits_whether_moss_runs_in_the_project_or_elsewhere(crate, tmp_path, monkeypatch):
    """ripgrep's paths and globs are relative to the project. moss started in the project
    (where ripgrep is spawned as it is) and anywhere else (where ripgrep is given the project
    as its working directory) show the same hits: paths, an anchored --only glob, an
    exclusion, ignored files left out."""
    cases = [("env_var|ANTHROPIC_API_KEY", None), ("pub struct", ["src/workflow/**"]),
             ("pub struct", ["!src/workflow/**"]), ("env_var", ["target/**"])]
    monkeypatch.chdir(crate)
    inside = [search(crate, pattern, only=only) for pattern, only in cases]
    monkeypatch.chdir(tmp_path)
    assert [search(crate, pattern, only=only) for pattern, only in cases] == inside
    monkeypatch.chdir(crate / "src")
    assert [search(crate, pattern, only=only) for pattern, only in cases] == inside
    assert inside[0].startswith(".env.example:\n") and "target/" not in inside[0]
    assert inside[1].startswith("src/workflow/mod.rs:\n") and "src/main.rs" not in inside[1]
    assert "src/main.rs:" in inside[2] and "workflow" not in inside[2]
    assert inside[3].startswith("No matches")


def test_a_binary_file_with_a_hit_leaves_the_next_files_their_names(tmp_path, monkeypatch):
    """ripgrep stops reading a binary file after a hit and says so on a line of its own;
    hits in the files printed after it keep their own names (they were shown under a name
    made of that warning and theirs, in a file that does not exist)."""
    for i in range(8):
        (tmp_path / f"b{i}.bin").write_bytes(b"needle\n" + b"x\n" * 100_000 + b"\0 needle\n")
        (tmp_path / f"t{i}.txt").write_text(f"needle {i}\n")
    for where in (tmp_path, tmp_path.parent):  # ripgrep spawned here, or started in the project
        monkeypatch.chdir(where)
        out = search(tmp_path, "needle")
        assert "WARNING" not in out
        assert [ln for ln in out.splitlines() if ln.endswith(":")] == [
            *(f"b{i}.bin:" for i in range(8)), *(f"t{i}.txt:" for i in range(8))]
        assert out.endswith("\n16 matches in 16 files\n")


def test_a_name_made_to_look_like_ripgreps_warning_is_shown_as_it_is(tmp_path):
    """A file named like ripgrep's binary-file warning about the file before it, then a
    newline and another name, is still shown under its whole name (escaped), never as the
    other name."""
    names = []
    for i in range(8):
        (tmp_path / f"a{i}").write_text("needle\n")
        fake = f"a{i}: WARNING: stopped searching binary file after match\nb{i}"
        (tmp_path / fake).write_text("needle\n")
        names += [f"a{i}:", f"a{i}: WARNING: stopped searching binary file after match\\x0ab{i}:"]
    out = search(tmp_path, "needle")
    assert [ln for ln in out.splitlines() if ln.endswith(":")] == sorted(names)
    assert out.endswith("\n16 matches in 16 files\n")


def test_a_search_past_its_time_is_stopped_and_says_so(crate, monkeypatch):
    """A search that runs out of time (TIMEOUT_S) stops ripgrep and says its results are
    partial, or that it found nothing before the time was up."""
    from moss.tools import search as search_mod

    monkeypatch.setattr(search_mod, "TIMEOUT_S", 0.0)
    out = search(crate, "fn ")
    assert out.endswith("(search timed out)\n") or "(search stopped after 0s; results are partial)" in out


# ------------------------------------------------------------- labels, order and caches

_PY_MODULE = '''\
"""A module with nested and decorated symbols (the hit lines say where they are)."""


class Outer:
    attr = "HIT class attribute"

    @staticmethod
    @decorated("HIT decorator line")
    def method(self):
        return "HIT in method"

    class Inner:
        def deep(self):
            x = 1; y = "HIT after a semicolon"
            return x, y


def top():
    """HIT in a docstring"""
    return 1
'''


def _expected_labels(root: Path, rel: str) -> dict[int, str | None]:
    """line -> label as the whole file's outline gives it (what search must show)."""
    from moss.tools import treesitter

    syms = treesitter.outline(root / rel)[0]
    out = {}
    for n, line in enumerate((root / rel).read_text().splitlines(), 1):
        if "HIT" in line:
            sym = treesitter.innermost(syms, n)
            out[n] = f"{sym.path} {sym.lines}" if sym else None
    return out


@pytest.mark.parametrize("keep", [True, False])
def test_more_matches_than_the_limit_every_shown_one_labelled(tmp_path, keep):
    from moss.tools import treesitter

    for i in range(12):
        (tmp_path / f"m{i:02d}.py").write_text(_PY_MODULE)
    want = _expected_labels(tmp_path, "m00.py")
    treesitter.clear_caches()
    out = search(tmp_path, "HIT", limit=15, keep=keep)
    lines = out.splitlines()
    # 5 hits a file: m00 and m01 whole, the first 5 of m02, in path then line order.
    assert [ln for ln in lines if ln.endswith(".py:")] == ["m00.py:", "m01.py:", "m02.py:"]
    shown = [ln for ln in lines if ln.startswith("  ")]
    assert len(shown) == 15
    for ln in shown:
        num = int(ln.split()[0])
        label = want[num]
        assert ln.startswith(f"  {num} ({label}): " if label else f"  {num}: "), ln
    assert {int(ln.split()[0]) for ln in shown} == set(want)
    assert "(Outer/method L7-10): @decorated(" in out  # a decorator line belongs to its function
    assert "(Outer/Inner/deep L13-15): x = 1;" in out
    assert lines[-1] == ("60 matches in 12 files (showing the first 15 in 3 files: raise limit, "
                         "or narrow the pattern or the files with only)")


def test_hits_come_in_ripgreps_path_order(tmp_path):
    """Directory by directory, names compared as bytes ("a/b" before "a b/c", "B" before "a"),
    whatever order ripgrep's parallel walk finds them in."""
    names = ["a/b", "a.b/c", "a b/c", "B/x", "a-", "a0", "z/y/w", "z/y.txt", "z/y0", "é/x", "e/x"]
    for n in names:
        (tmp_path / n).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / n).write_text("hit\n")
    want = sorted(names, key=lambda n: [p.encode() for p in n.split("/")])
    for limit in (1, 3, 100):
        out = search(tmp_path, "hit", limit=limit)
        assert [ln[:-1] for ln in out.splitlines() if ln.endswith(":")] == want[:limit]


def test_a_file_changed_between_searches_gets_fresh_labels(tmp_path):
    from moss.tools import treesitter

    treesitter.clear_caches()
    f = tmp_path / "mod.py"
    f.write_text("def first():\n    return 'needle'\n")
    assert "2 (first L1-2): return 'needle'" in search(tmp_path, "needle")  # now cached
    f.write_text("import os\n\n\nclass Moved:\n    def second(self):\n        return 'needle'\n")
    assert "6 (Moved/second L5-6): return 'needle'" in search(tmp_path, "needle")
    # The same size, written a second later (the cache goes by mtime and size, and the
    # file clock may not tick between two writes this close: move the mtime on).
    before = f.stat().st_mtime_ns
    f.write_text("import os\n\n\nclass MOVED:\n    def SECOND(self):\n        return 'needle'\n")
    os.utime(f, ns=(before + 1_000_000_000, before + 1_000_000_000))
    assert "6 (MOVED/SECOND L5-6): return 'needle'" in search(tmp_path, "needle")

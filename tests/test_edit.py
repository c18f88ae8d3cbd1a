"""moss.tools.edit: symbol, exact-text and whole-file edits on real files, all or nothing."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from moss.errors import MossError
from moss.tools import edit as edit_mod
from moss.tools.edit import apply, preview

FIXTURE = Path(__file__).parent / "fixtures" / "rustcrate"
LLM = "src/workflow/llm.rs"

AGENT_PY = '''\
"""Agent module."""

import os


class Agent:
    """An agent."""

    def __init__(self, name):
        self.name = name

    @property
    def label(self):
        return self.name.upper()

    def run(self, task):
        """Run a task."""
        return f"{self.name}: {task}"


def helper(x):
    return x + 1


def other():
    return 2
'''


@pytest.fixture
def crate(tmp_path: Path) -> Path:
    root = tmp_path / "rustcrate"
    shutil.copytree(FIXTURE, root)
    return root


@pytest.fixture
def py(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "agent.py").write_text(AGENT_PY)
    return root


def read(root: Path, rel: str) -> str:
    return (root / rel).read_text()


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


def fails(root: Path, specs, kind: str) -> str:
    with pytest.raises(MossError) as info:
        apply(root, specs)
    assert info.value.kind == kind, str(info.value)
    return str(info.value)


# ----------------------------------------------------------------------------- Python

def test_python_delete_method_takes_its_blank_line(py):
    apply(py, [{"target": "pkg/agent.py/Agent/run", "action": "delete"}])
    assert read(py, "pkg/agent.py") == AGENT_PY.replace('''\
        return self.name.upper()

    def run(self, task):
        """Run a task."""
        return f"{self.name}: {task}"
''', '''\
        return self.name.upper()
''')


def test_python_delete_decorated_and_top_level(py):
    apply(py, [{"target": "pkg/agent.py/label", "action": "delete"},
               {"target": "pkg/agent.py/helper", "action": "delete"}])
    text = read(py, "pkg/agent.py")
    assert "@property" not in text and "label" not in text
    assert "        self.name = name\n\n    def run(self, task):" in text
    # two blank lines stay between top-level definitions, never three or four
    assert 'return f"{self.name}: {task}"\n\n\ndef other():\n    return 2\n' in text


def test_python_replace_method_reindents_relative_content(py):
    apply(py, [{"target": "pkg/agent.py/Agent/run", "action": "replace",
                "content": "def run(self, task):\n    return task.strip()\n"}])
    text = read(py, "pkg/agent.py")
    assert "    def run(self, task):\n        return task.strip()\n\n\ndef helper(x):" in text
    assert "Run a task" not in text


def test_python_replace_content_copied_with_absolute_indentation(py):
    """The first line lost its indentation (as when pasted after `replace `)."""
    apply(py, [{"target": "pkg/agent.py/Agent/run", "action": "replace",
                "content": "def run(self, task):\n        return task\n"}])
    assert "\n    def run(self, task):\n        return task\n" in read(py, "pkg/agent.py")


def test_python_replace_keeps_decorator_unless_content_has_one(py):
    apply(py, [{"target": "pkg/agent.py/Agent/label", "action": "replace",
                "content": "def label(self):\n    return 'x'"}])
    assert "    @property\n    def label(self):\n        return 'x'\n\n    def run" in \
        read(py, "pkg/agent.py")
    apply(py, [{"target": "pkg/agent.py/Agent/label", "action": "replace",
                "content": "@cached\ndef label(self):\n    return 'y'"}])
    text = read(py, "pkg/agent.py")
    assert "@property" not in text
    assert "    @cached\n    def label(self):\n        return 'y'\n" in text


def test_python_insert_after_method_and_before_function(py):
    apply(py, [
        {"target": "pkg/agent.py/Agent/run", "action": "insert", "position": "after",
         "content": "def stop(self):\n    return None"},
        {"target": "pkg/agent.py/helper", "action": "insert", "position": "before",
         "content": "def first():\n    return 0\n"},
    ])
    assert read(py, "pkg/agent.py").endswith('''\
        return f"{self.name}: {task}"

    def stop(self):
        return None


def first():
    return 0


def helper(x):
    return x + 1


def other():
    return 2
''')


def test_python_insert_class_attribute_keeps_attribute_spacing(py):
    (py / "k.py").write_text("class K:\n    x = 1\n    y = 2\n\n    def m(self):\n"
                             "        pass\n")
    apply(py, [{"target": "k.py/K/y", "action": "insert", "content": "z = 3"}])
    assert read(py, "k.py") == ("class K:\n    x = 1\n    y = 2\n    z = 3\n\n"
                                "    def m(self):\n        pass\n")


def test_python_ambiguous_symbol_lists_candidates_with_lines(py):
    (py / "two.py").write_text("class A:\n    def run(self):\n        pass\n\n\n"
                               "class B:\n    def run(self):\n        pass\n")
    msg = fails(py, [{"target": "two.py/run", "action": "delete"}], "ambiguous")
    assert "A/run" in msg and "B/run" in msg and "L2-3" in msg and "L7-8" in msg


# ------------------------------------------------------------------------------- Rust

def test_rust_delete_impl_method(crate):
    apply(crate, [{"target": f"{LLM}/Provider/default_model", "action": "delete"}])
    text = read(crate, LLM)
    assert "default_model" not in text
    assert "impl Provider {\n    /// The environment variable holding the API key.\n" \
        "    pub fn env_var(&self)" in text


def test_rust_delete_last_method_leaves_no_blank_before_brace(crate):
    apply(crate, [{"target": f"{LLM}/Provider/from_name", "action": "delete"}])
    text = read(crate, LLM)
    assert "from_name" not in text
    assert '            Provider::XAI => "XAI_API_KEY",\n        }\n    }\n}\n\nimpl fmt' in text


def test_rust_delete_enum_with_doc_and_attribute(crate):
    apply(crate, [{"target": f"{LLM}/Provider", "action": "delete"}])
    assert read(crate, LLM).startswith(
        "//! LLM providers and their defaults.\n\nuse std::fmt;\n\nimpl Provider {\n")


def test_rust_replace_keeps_doc_and_attributes(crate):
    apply(crate, [{"target": f"{LLM}/Provider", "action": "replace",
                   "content": "pub enum Provider {\n    Anthropic,\n}"}])
    assert read(crate, LLM).startswith(
        "//! LLM providers and their defaults.\n\nuse std::fmt;\n\n"
        "/// The LLM providers moss can talk to.\n"
        "#[derive(Debug, Clone, Copy, PartialEq, Eq)]\n"
        "pub enum Provider {\n    Anthropic,\n}\n\nimpl Provider {\n")


def test_rust_replace_with_doc_comment_replaces_doc_too(crate):
    apply(crate, [{"target": f"{LLM}/Provider/env_var", "action": "replace",
                   "content": "/// The key variable.\npub fn env_var(&self) -> &'static str {\n"
                              "    \"KEY\"\n}"}])
    text = read(crate, LLM)
    assert "holding the API key" not in text
    assert "    }\n\n    /// The key variable.\n    pub fn env_var(&self) -> &'static str {\n" \
        "        \"KEY\"\n    }\n\n    /// Parse a provider name" in text


def test_rust_replace_method_copied_from_view(crate):
    """First line unindented, the rest at the file's absolute indentation."""
    apply(crate, [{"target": f"{LLM}/Provider/env_var", "action": "replace",
                   "content": "pub fn env_var(&self) -> &'static str {\n        \"K\"\n    }"}])
    assert "    /// The environment variable holding the API key.\n" \
        "    pub fn env_var(&self) -> &'static str {\n        \"K\"\n    }\n" in read(crate, LLM)


def test_rust_insert_variant_and_method(crate):
    apply(crate, [
        {"target": f"{LLM}/Provider/XAI", "action": "insert", "position": "after",
         "content": "Local,"},
        {"target": f"{LLM}/Provider/env_var", "action": "insert", "position": "before",
         "content": "pub fn is_local(&self) -> bool {\n    matches!(self, Provider::Local)\n}"},
    ])
    text = read(crate, LLM)
    assert "    Together,\n    XAI,\n    Local,\n}\n" in text
    assert "        }\n    }\n\n    pub fn is_local(&self) -> bool {\n" \
        "        matches!(self, Provider::Local)\n    }\n\n" \
        "    /// The environment variable holding the API key.\n" in text


def test_rust_field_replace_keeps_comma(crate):
    apply(crate, [{"target": "src/config.rs/Config/provider", "action": "replace",
                   "content": "pub provider: String"}])
    assert '    /// The LLM provider used by the agent, e.g. "anthropic".\n' \
        "    pub provider: String,\n}\n" in read(crate, "src/config.rs")


def test_symbol_not_found_lists_top_level_symbols(crate):
    msg = fails(crate, [{"target": "src/config.rs/Settings", "action": "delete"}], "not_found")
    assert "edit 1 of 1" in msg and "src/config.rs/Settings" in msg
    assert "Config" in msg


def test_fuzzy_path_is_not_used_for_edits(crate):
    before = snapshot(crate)
    msg = fails(crate, [{"target": "llm.rs/Provider", "action": "delete"}], "not_found")
    assert f"did you mean {LLM}/Provider" in msg
    assert snapshot(crate) == before


# ------------------------------------------------------------------------ exact text

def test_text_edit_found_once(crate):
    r = apply(crate, [{"target": LLM, "action": "text",
                       "old": '=> "gpt-4o",\n            Provider::Azure',
                       "content": '=> "gpt-5",\n            Provider::Azure'}])
    assert 'Provider::OpenAI => "gpt-5",' in read(crate, LLM)
    assert r["changes"][0]["added"] == 1 and r["changes"][0]["removed"] == 1


def test_text_edit_not_found_names_closest_line(crate):
    msg = fails(crate, [{"target": LLM, "action": "text",
                         "old": 'Provider::Gemini => "gemini-9",', "content": "x"}],
                "not_found")
    assert "closest line is 30" in msg and "gemini-2.0-flash" in msg


def test_text_edit_ambiguous_gives_count(crate):
    msg = fails(crate, [{"target": LLM, "action": "text", "old": '"gpt-4o"',
                         "content": '"gpt-5"'}], "ambiguous")
    assert "occurs 2 times" in msg and "lines 28, 29" in msg


def test_text_edit_inside_symbol_and_deletion(crate):
    apply(crate, [{"target": f"{LLM}/Provider/env_var", "action": "text",
                   "old": "            Provider::Ollama => \"OLLAMA_HOST\",\n", "content": ""}])
    text = read(crate, LLM)
    assert "OLLAMA_HOST" not in text and 'Provider::Ollama => "llama3.2"' in text


# ------------------------------------------------------------------- whole files

def test_create_append_prepend(crate):
    r = apply(crate, [
        {"target": "notes/plan/new.md", "action": "create", "content": "# Plan"},
        {"target": "notes/plan/new.md", "action": "append", "content": "- step"},
        {"target": "notes/plan/new.md", "action": "prepend", "content": "<!-- top -->\n"},
    ])
    assert read(crate, "notes/plan/new.md") == "<!-- top -->\n# Plan\n- step\n"
    assert r["files"] == ["notes/plan/new.md"]
    assert r["diff"].startswith("--- /dev/null\n+++ b/notes/plan/new.md\n")
    msg = fails(crate, [{"target": "notes/plan/new.md", "action": "create", "content": "x"}],
                "conflict")
    assert "already exists" in msg


def test_whole_file_replace_and_delete(crate):
    apply(crate, [{"target": "README.md", "action": "replace", "content": "new readme"},
                  {"target": "src/workflow/mod.rs", "action": "delete"}])
    assert read(crate, "README.md") == "new readme\n"
    assert not (crate / "src/workflow/mod.rs").exists()


# ---------------------------------------------------------------------- batches

def test_batch_across_two_files_applies_in_order(crate):
    r = apply(crate, [
        {"target": f"{LLM}/Provider/from_name", "action": "insert", "position": "after",
         "content": "pub fn label(&self) -> String {\n    self.to_string()\n}"},
        {"target": f"{LLM}/Provider/label", "action": "replace",  # found only after edit 1
         "content": "pub fn label(&self) -> String {\n    format!(\"{self}\")\n}"},
        {"target": "src/config.rs/Config/limit", "action": "delete"},
    ])
    assert r["files"] == [LLM, "src/config.rs"]
    assert [c["action"] for c in r["changes"]] == ["insert", "replace", "delete"]
    text = read(crate, LLM)
    assert "        all.into_iter().find(|p| p.to_string().eq_ignore_ascii_case(name))\n" \
        "    }\n\n    pub fn label(&self) -> String {\n        format!(\"{self}\")\n    }\n}\n" \
        in text
    assert "fn limit" not in read(crate, "src/config.rs")
    assert "+++ b/src/workflow/llm.rs" in r["diff"] and "+++ b/src/config.rs" in r["diff"]


def test_batch_with_bad_third_spec_changes_nothing(crate):
    before = snapshot(crate)
    msg = fails(crate, [
        {"target": f"{LLM}/Provider/env_var", "action": "delete"},
        {"target": "src/config.rs", "action": "text", "old": "view_depth", "content": "depth"},
        {"target": "src/config.rs/Config/nonexistent", "action": "delete"},
    ], "not_found")
    assert "edit 3 of 3" in msg and "src/config.rs/Config/nonexistent" in msg
    assert snapshot(crate) == before


def test_failed_write_restores_files_already_written(crate, monkeypatch):
    before = snapshot(crate)
    from moss.tools.safefs import Tree

    real = Tree.write_atomic
    calls = []

    def flaky(self, path, data, mode=None, **kw):
        calls.append(path)
        if len(calls) == 3:  # the disk fills up at the third file written
            raise OSError(28, "No space left on device")
        real(self, path, data, mode, **kw)

    monkeypatch.setattr(Tree, "write_atomic", flaky)
    msg = fails(crate, [{"target": "README.md", "action": "append", "content": "more"},
                        {"target": "src/config.rs/Config/limit", "action": "delete"},
                        {"target": "new/file.txt", "action": "create", "content": "x"}], "io")
    assert "restored" in msg and "new/file.txt" in msg
    assert len(calls) == 5  # 2 written, 1 failed, 2 restored
    assert snapshot(crate) == before
    assert not (crate / "new").exists()
    assert not [p for p in crate.rglob("*.tmp")]


def test_file_changed_on_disk_meanwhile_is_a_conflict(crate, monkeypatch):
    real_plan = edit_mod._plan

    def plan_then_touch(root, specs):
        plan = real_plan(root, specs)
        (crate / "README.md").write_text("someone else\n")
        return plan

    monkeypatch.setattr(edit_mod, "_plan", plan_then_touch)
    fails(crate, [{"target": "README.md", "action": "append", "content": "x"}], "conflict")
    assert read(crate, "README.md") == "someone else\n"


def test_preview_writes_nothing_and_shows_the_diff(crate):
    before = snapshot(crate)
    r = preview(crate, [{"target": "src/config.rs/Config/limit", "action": "replace",
                         "content": "pub fn limit(&self) -> usize {\n    100\n}"}])
    assert snapshot(crate) == before
    assert r["files"] == ["src/config.rs"]
    d = r["diff"]
    assert d.startswith("--- a/src/config.rs\n+++ b/src/config.rs\n@@ ")
    assert "-        if self.search_limit == 0 { 100 } else { self.search_limit }\n" in d
    assert "+        100\n" in d
    assert r["changes"][0] == {"path": "src/config.rs", "diff": d, "added": 1, "removed": 1,
                               "target": "src/config.rs/Config/limit", "action": "replace"}


# ------------------------------------------------------------------- confinement

@pytest.mark.parametrize("target", ["../outside.rs", "OUTSIDE_ABS", "link.rs",
                                    "link.rs/f", ".git/config", "sub/../../outside.rs"])
@pytest.mark.parametrize("action", ["replace", "append", "create"])
def test_escapes_are_denied_and_nothing_written(tmp_path, target, action):
    root = tmp_path / "proj"
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "config").write_text("[core]\n")
    (root / "sub").mkdir()
    outside = tmp_path / "outside.rs"
    outside.write_text("fn f() {}\n")
    (root / "link.rs").symlink_to(outside)
    target = target.replace("OUTSIDE_ABS", str(outside))
    before, outside_before = snapshot(root), outside.read_bytes()
    with pytest.raises(MossError) as info:
        apply(root, [{"target": target, "action": action, "content": "pwned\n"}])
    assert info.value.kind == "denied", str(info.value)
    assert snapshot(root) == before and outside.read_bytes() == outside_before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outside.rs", "proj"]


# ------------------------------------------------------------- bytes on disk

def test_crlf_and_missing_final_newline_preserved(tmp_path):
    (tmp_path / "w.py").write_bytes(b"def a():\r\n    return 1\r\n\r\n\r\ndef b():\r\n"
                                    b"    return 2")
    apply(tmp_path, [
        {"target": "w.py/a", "action": "insert", "position": "after",
         "content": "def c():\n    return 3\n"},
        {"target": "w.py", "action": "text", "old": "return 2", "content": "return 22"},
    ])
    assert (tmp_path / "w.py").read_bytes() == (
        b"def a():\r\n    return 1\r\n\r\n\r\ndef c():\r\n    return 3\r\n\r\n\r\n"
        b"def b():\r\n    return 22")


def test_mode_preserved(tmp_path):
    script = tmp_path / "run.py"
    script.write_text("#!/usr/bin/env python3\ndef main():\n    pass\n")
    script.chmod(0o751)
    apply(tmp_path, [{"target": "run.py/main", "action": "replace",
                      "content": "def main():\n    print('hi')"}])
    assert stat.S_IMODE(script.stat().st_mode) == 0o751
    assert script.read_text().endswith("def main():\n    print('hi')\n")


def test_new_file_gets_umask_mode(tmp_path):
    apply(tmp_path, [{"target": "n.txt", "action": "create", "content": "x"}])
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE((tmp_path / "n.txt").stat().st_mode) == 0o666 & ~umask


def test_binary_and_huge_files_refused(tmp_path):
    (tmp_path / "b.bin").write_bytes(b"\x00\x01\x02")
    (tmp_path / "big.txt").write_bytes(b"x\n" * (edit_mod.MAX_BYTES // 2 + 1))
    assert "binary" in fails(tmp_path, [{"target": "b.bin", "action": "append",
                                         "content": "x"}], "usage")
    assert "MB" in fails(tmp_path, [{"target": "big.txt", "action": "text", "old": "x",
                                     "content": "y"}], "usage")


# ---------------------------------------------------------------- warnings, usage

def test_syntax_warning_reported_but_edit_applied(crate):
    r = apply(crate, [{"target": "src/config.rs/Config/limit", "action": "replace",
                       "content": "pub fn limit(&self) -> usize {\n    if {\n}"}])
    assert "pub fn limit(&self) -> usize {\n        if {\n    }" in read(crate, "src/config.rs")
    assert r["syntax_warning"].startswith("src/config.rs: parse error near line ")
    ok = apply(crate, [{"target": "src/main.rs", "action": "append", "content": "// end"}])
    assert "syntax_warning" not in ok


def test_bad_specs_are_usage_errors(crate):
    assert "unknown key" in fails(crate, [{"target": "README.md", "action": "text",
                                           "old": "a", "new": "b"}], "usage")
    assert "action" in fails(crate, [{"target": "README.md", "action": "rename"}], "usage")
    assert "text" in fails(crate, [{"target": "README.md/Intro", "action": "delete"}], "usage")
    fails(crate, [{"target": f"{LLM}/Provider", "action": "insert", "position": "inside",
                   "content": "x"}], "usage")
    fails(crate, [], "usage")

"""Real code, any language: what a model writes through moss's grammar reaches the file exactly.

The code is not written for the test: 43 files of each of Python, Rust, Go, JavaScript, C++, Java
and Lua, read from what is installed on the machine (tests/corpus.py says where; a language that
is missing is an error naming what to install, never a skip). A scripted model writes them the way
the prompts teach, each in a fence longer than any run of backticks inside it, through the real
CLI against the fake API, at `--auto-approve medium` in `-n`: every one of the 301 files through
`$(edit F replace ...)`, and one of each language through every other form (create, append,
insert before and after, --old/--new, batch-edit, `$(run cat > F <<'EOF' ...)`, and a symbol
insert). Each file must then hold the code's bytes exactly.

Cost: one CLI run of two replies, many commands each ([agent] max_commands_per_reply): about 20 s
of CPU and 21 s alone on the 2-core test machine, half of it the two shadow captures each of the
~350 edits takes (host/tools/shadow/: a walk of the tree and ~1,050 git processes in all).
"""

from __future__ import annotations

import json

import pytest
from fakeapi import state_of

import corpus

PER_LANG = 43  # 7 languages: 301 files through replace
CONFIG = """
[agent]
max_commands_per_reply = 400
max_tokens = 4000000
[llm]
max_output_tokens = 4000000
context_window = 40000000
"""
pytestmark = pytest.mark.needs_sandbox  # the refactorer runs at edit access: its shell and validation are sandboxed


def fenced(src: corpus.Source) -> str:
    """The code as a model writes it: a fence longer than any run of backticks inside it."""
    f = src.fence()
    return f"{f}{src.lang}\n{src.text}{'' if src.text.endswith(chr(10)) else chr(10)}{f}"


def placeholder(src: corpus.Source, text: str = "placeholder") -> bytes:
    """A file the model rewrites: its line endings and final-newline habit are the source's (a
    whole-file replace keeps a file's own; see host/tools/edit/files.py)."""
    eol = "\r\n" if "\r\n" in src.text else "\n"
    return (text.replace("\n", eol) + (eol if src.text.endswith("\n") else "")).encode()


def run(project, api, replies: list[str]) -> tuple[dict, list[dict]]:
    """The refactorer with a model that plans, writes each reply in turn, then answers. Returns
    the JSON result and the session's `command` events."""
    queue = list(replies) + ["$(answer done)"]

    def model(body):
        if state_of(body) == "planner":
            return "1. Write the files.\nReady to refactor."
        return queue.pop(0) if len(queue) > 1 else queue[0]

    project.write(".moss/config.toml", CONFIG)
    api.push(*[model] * (len(replies) + 4))
    r = project.moss("@agent", "--provider", "anthropic", "--v1", "-n", "--refactor", "--auto-approve", "medium",
                     "--validate", "true", "--output-format", "json", "write the files", env=api.env(), timeout=600)
    assert r.stdout.strip(), r.stderr
    result = json.loads(r.stdout)
    log = project.root / f".moss/agent/logs/{result['session_id']}.jsonl"
    return result, [e for e in map(json.loads, log.read_text().splitlines()) if e["event"] == "command"]


def mismatches(project, expected: dict[str, bytes]) -> list[str]:
    """Each file that does not hold its expected bytes, with its first differing line."""
    out = []
    for rel, want in expected.items():
        path = project.root / rel
        got = path.read_bytes() if path.exists() else None
        if got == want:
            continue
        if got is None:
            out.append(f"{rel}: missing")
            continue
        a, b = got.split(b"\n"), want.split(b"\n")
        line = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        out.append(f"{rel}: line {line + 1}: got {a[line][:80] if line < len(a) else b'<end>'!r}, "
                   f"want {b[line][:80] if line < len(b) else b'<end>'!r}")
    return out


def replaces(project, sources) -> tuple[list[str], dict[str, tuple[str, bytes]]]:
    """Every file through `$(edit F replace <fence>)`, into a placeholder: (commands, path ->
    (subtest, bytes))."""
    cmds, expected = [], {}
    for lang, files in sources.items():
        for i, src in enumerate(files):
            rel = f"corpus/{lang}/{i:02d}-{src.name}"
            project.write(rel, "")
            (project.root / rel).write_bytes(placeholder(src))
            cmds.append(f"$(edit {rel} replace {fenced(src)})")
            expected[rel] = (f"replace/{lang}", src.data)
    return cmds, expected


def other_forms(project, sources) -> tuple[list[str], dict[str, tuple[str, bytes]]]:
    """A file of each language through each other form (LF files: a file that is not all CRLF
    takes the target's line endings), and real Python inserted after a function."""
    cmds, expected, batch = [], {}, []
    for lang, files in sources.items():
        src = next(s for s in files if "\r" not in s.text)
        name, base = src.name, f"forms/{lang}"
        code = src.text if src.text.endswith("\n") else src.text + "\n"  # the code's lines
        cmds.append(f"$(edit {base}/created-{name} create {fenced(src)})")
        expected[f"{base}/created-{name}"] = ("create", code.encode())
        # append, and insert after / before a whole file: the code on lines of its own
        for form, head in (("append", "head\n"), ("insert --after", "head\n"), ("insert --before", "tail\n")):
            rel = f"{base}/{form.replace(' --', '-')}-{name}"
            project.write(rel, head)
            cmds.append(f"$(edit {rel} {form} {fenced(src)})")
            expected[rel] = (form, (code + head if form == "insert --before" else head + code).encode())
        # --old and --new, both fenced: a marker line (a comment) becomes the code
        rel, f = f"{base}/oldnew-{name}", src.fence()
        c = {"python": "#", "lua": "--"}.get(lang, "//")
        project.write(rel, f"{c} before\n{c} MOSS-MARKER\n{c} after\n")
        cmds.append(f"$(edit {rel} --old {f}\n{c} MOSS-MARKER\n{f} --new {fenced(src)})")
        expected[rel] = ("--old/--new", (f"{c} before\n" + code + f"{c} after\n").encode())
        # batch-edit: several whole-file replaces, all or nothing
        rel = f"{base}/batch-{name}"
        project.write(rel, "")
        (project.root / rel).write_bytes(placeholder(src))
        batch.append(f"{rel} replace {fenced(src)}")
        expected[rel] = ("batch-edit", src.data)
        # run with a heredoc: the shell writes its body as it is
        rel = f"{base}/heredoc-{name}"
        cmds.append(f"$(run mkdir -p {base} && cat > {rel} <<'MOSS_EOF'\n{code}MOSS_EOF\n)")
        expected[rel] = ("run heredoc", code.encode())
    cmds.append(f"$(batch-edit {' | '.join(batch)})")
    # a symbol insert: real Python after a function, at its level (re-indented: host/tools/edit/layout.py),
    # blank lines around it aside; a module without __all__, which would make the function private
    py = next(s for s in sources["python"][1:] if "__all__" not in s.text and "\r" not in s.text)
    project.write("forms/anchor.py", "def anchor():\n    return 1\n")
    cmds.append(f"$(edit forms/anchor.py/anchor insert --after {fenced(py)})")
    lines = [line if line.strip() else "" for line in py.text.strip("\n").split("\n")]
    expected["forms/anchor.py"] = ("symbol insert", ("def anchor():\n    return 1\n\n\n" + "\n".join(lines) + "\n").encode())
    return cmds, expected


def test_real_files_in_seven_languages_arrive_byte_exact_through_every_form(project, api, subtests):
    """One session: a reply that writes every file through replace, then one through each other
    form. A subtest per language and per form."""
    sources = {lang: corpus.pick(lang, PER_LANG) for lang in corpus.LANGS}
    first, replaced = replaces(project, sources)
    second, formed = other_forms(project, sources)
    result, commands = run(project, api, ["I will write every file.\n" + "\n".join(first),
                                          "Now the other forms.\n" + "\n".join(second)])
    failed = [f"{c['cmd'][:80]}: {c.get('output', '')[:300]}" for c in commands if not c["ok"]]
    for expected in (replaced, formed):
        for group in dict.fromkeys(g for g, _ in expected.values()):
            with subtests.test(group):
                want = {rel: data for rel, (g, data) in expected.items() if g == group}
                bad = mismatches(project, want)
                assert not bad, f"{len(bad)} of {len(want)} files differ:\n" + "\n".join(bad[:20] + failed[:5])
    assert len(replaced) == PER_LANG * len(corpus.LANGS)
    assert len(commands) == len(first) + len(second) and not failed, failed[:5]  # all applied, none refused
    assert result["reason"] == "answered", result

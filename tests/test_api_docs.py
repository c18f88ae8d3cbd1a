"""Every moss.* primitive is declared once (host/api/declarations.lua); its checks, editor
stubs and the docs' reference tables are made from that declaration and cannot drift."""

from __future__ import annotations

import functools
import json

import pytest
from conftest import REPO

from moss import api
from moss.context import Context

NAMES = sorted(api.functions(Context(root=REPO, config={})))
DOC = (REPO / "docs" / "lua-api.md").read_text()
TYPES = (REPO / "scripts" / "types" / "moss.lua").read_text()


@pytest.mark.parametrize("name", NAMES)
def test_primitive_is_documented(name):
    assert any(f"moss.{name}{end}" in DOC for end in ("(", "{", "`")), f"moss.{name} missing from docs/lua-api.md"


@pytest.mark.parametrize("name", NAMES)
def test_primitive_has_type_annotation(name):
    assert f"function moss.{name}(" in TYPES, f"moss.{name} missing from scripts/types/moss.lua"


def test_luarc_points_at_the_annotations():
    luarc = json.loads((REPO / ".luarc.json").read_text())
    assert "scripts/types" in luarc["workspace.library"]
    assert luarc["runtime.version"] == "Lua 5.4"


def test_init_writes_luarc_for_project_scripts(project):
    cwd = project.root.parent / "fresh"
    cwd.mkdir()
    project.moss("init", cwd=cwd)
    luarc = json.loads((cwd / ".moss/scripts/.luarc.json").read_text())
    types_dir = luarc["workspace.library"][0]
    assert types_dir.endswith("types") and (REPO / "scripts" / "types" / "moss.lua").samefile(types_dir + "/moss.lua")


def test_every_test_named_in_security_md_exists():
    """docs/security.md backs each promise with a test; a renamed or deleted test breaks it here."""
    import ast
    import re

    doc = (REPO / "docs/security.md").read_text()
    cited = set(re.findall(r"tests/(test_\w+\.py)::(test_\w+)", doc))
    assert len(cited) > 30
    missing = []
    for file, name in sorted(cited):
        path = REPO / "tests" / file
        names = {n.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.FunctionDef)} \
            if path.exists() else set()
        if name not in names:
            missing.append(f"{file}::{name}")
    assert not missing, missing


# ---- the one declaration ------------------------------------------------------------------

from moss.api import declare  # noqa: E402

DECL = declare.declarations()


@pytest.mark.parametrize("name", NAMES)
def test_primitive_is_declared(name):
    if name == "parallel":
        assert "parallel" in DECL.functions
        return
    fn = DECL.functions.get(name)
    assert fn is not None, f"moss.{name} is not declared in host/api/declarations.lua"
    assert fn.doc, f"moss.{name} has no doc comment in host/api/declarations.lua"


def test_every_declared_primitive_exists():
    """A declaration with no primitive behind it (a renamed or removed one) is an error too;
    the helpers defined in Lua (moss.dict, moss.error, ...) and handle methods are not primitives."""
    import re

    lua_side = set(re.findall(r"^\s*function moss\.([\w.]+)\(", (REPO / "host/bootstrap.lua").read_text(), re.M))
    lua_side |= {"dict", "error", "error_kind", "fmt"}
    stale = [n for n in DECL.functions if ":" not in n and n not in NAMES and n not in lua_side]
    assert not stale, stale


def test_registration_is_held_to_the_declaration(monkeypatch):
    """A primitive is a top-level function of host/api/NAME.py marked @primitive, named by its
    module and its own name. One registered under a name no declaration has, or a declared
    primitive with no function behind it (in Python or in bootstrap.lua), stops the API from
    being prepared (preload, the first functions(ctx)), naming each."""
    from moss.api import registry

    assert registry.unmatched(registry.primitives(), DECL, registry.lua_side()) == []
    monkeypatch.setattr(registry, "_REGISTERED", {})

    def list_(ctx):
        return []

    list_.__module__ = "moss.api.demo"
    registry.primitive(list_)
    assert list(registry._REGISTERED) == ["demo.list"]  # a trailing _ (a name Python keeps) dropped

    def other(ctx):
        return []

    other.__module__, other.__name__, other.__qualname__ = "moss.api.demo", "list", "list"
    with pytest.raises(RuntimeError, match="moss.demo.list is registered twice"):
        registry.primitive(other)

    decl = declare.parse("---@param x string\nfunction moss.demo.go(x) end\nfunction moss.demo.made_in_lua() end")
    assert registry.unmatched(registry._REGISTERED, decl, {"demo.made_in_lua"}) == [
        "moss.demo.list is registered (host/api/demo.py) but not declared in host/api/declarations.lua",
        "moss.demo.go is declared in host/api/declarations.lua but no function of host/api is registered for it "
        "(@primitive)"]
    with pytest.raises(RuntimeError) as e:  # what preload meets: the real declaration, this registration
        registry.primitives.__wrapped__()
    assert "moss.demo.list is registered" in str(e.value) and "moss.runs.start is declared" in str(e.value)


def test_generated_files_match_the_declaration_byte_for_byte():
    """scripts/types/moss.lua and the tables in docs/lua-api.md are what `python -m moss.api`
    makes from host/api/declarations.lua; edit that file and rerun it."""
    for path, text in declare.outputs(REPO).items():
        assert path.read_text(encoding="utf-8") == text, f"{path.relative_to(REPO)} is stale: run python -m moss.api"


def test_every_error_kind_raised_anywhere_is_declared():
    """The kinds raised by the host (kind="...") and by the scripts (moss.error("...")) are all
    in moss.ErrorKind, so the table in docs/lua-api.md lists every kind a script can meet."""
    import re

    raised = set()
    for path in (REPO / "host").rglob("*.py"):
        raised |= set(re.findall(r'kind="([a-z_]+)"', path.read_text(encoding="utf-8")))
    for path in (REPO / "scripts").rglob("*.lua"):
        raised |= set(re.findall(r'moss\.error\("([a-z_]+)"', path.read_text(encoding="utf-8")))
    declared = {k for k, _ in DECL.error_kinds}
    assert raised - declared == set(), f"raised but not declared in moss.ErrorKind: {sorted(raised - declared)}"
    assert {"io", "conflict", "locked", "stopped", "syntax", "memory"} <= declared


@pytest.fixture
def rt():
    from conftest import builtin_lua

    with builtin_lua() as (runtime, _root):
        yield runtime


def test_an_argument_that_does_not_fit_its_declaration_is_a_usage_error_naming_it(rt):
    out = rt.to_py(rt.execute("""
      local calls = {
        function() return moss.code.view(5) end,
        function() return moss.code.view(".", "deep") end,
        function() return moss.access.set("root") end,
        function() return moss.fs.read() end,
        function() return moss.json.encode({ a = 1 }) end,
      }
      local out = {}
      for i, call in ipairs(calls) do
        local ok, err = pcall(call)
        out[i] = { ok = ok, kind = moss.error_kind(err), message = (not ok) and err.message or "" }
      end
      return out
    """, "=(checks)"))
    view_num, view_opts, access, read_none, fine = out
    assert view_num["kind"] == "usage"
    assert view_num["message"] == "moss.code.view: argument 1 (target) must be string, got an integer"
    assert view_opts["message"].startswith("moss.code.view: argument 2 (opts) must be {depth?: integer")
    assert view_opts["message"].endswith("or nil, got a string")
    assert access["kind"] == "usage" and '"read-only"|"read-shell"|"edit"|"full"' in access["message"]
    assert read_none["message"] == "moss.fs.read: argument 1 (path) must be string, got nothing"
    assert fine["ok"] is True


def test_a_host_fault_is_internal_with_its_traceback_in_the_session_log(tmp_path):
    """A primitive whose body fails in a way no check foresaw (here a ZeroDivisionError) is
    reported as kind `internal`, never as the script's `usage`, and the session's log has the
    traceback to report."""
    from moss.api import _guarded

    root = tmp_path / "proj"
    (root / ".moss" / "agent" / "logs").mkdir(parents=True)
    ctx = Context(root=root, config={}, options={})
    ctx.session_id = "s1"
    broken = _guarded(ctx, "demo.divide", lambda _ctx, a, b: a / b, declare.checker(
        declare.parse("---@param a number\n---@param b number\nfunction moss.demo.divide(a, b) end").functions[
            "demo.divide"], {}))
    with pytest.raises(Exception) as e:
        broken(1, 0)
    assert e.value.kind == "internal" and "ZeroDivisionError" in e.value.message
    with pytest.raises(Exception) as e2:
        broken("1", 0)
    assert e2.value.kind == "usage" and "argument 1 (a) must be number" in e2.value.message
    [event] = [json.loads(line) for line in (root / ".moss/agent/logs/s1.jsonl").read_text().splitlines()]
    assert event["event"] == "internal_error" and event["primitive"] == "moss.demo.divide"
    assert "ZeroDivisionError" in event["traceback"] and "Traceback" in event["traceback"]


def test_the_order_of_access_levels_is_written_once():
    """The host declares the access levels (tools/sandbox.py ACCESS_LEVELS); every other place
    that ranks them, Python or Lua, takes that order (moss.access.levels() on the Lua side)."""
    import re

    literal = re.compile(r"""["']read-only["'][^\n]{0,40}["']read-shell["'][^\n]{0,20}["']?edit["']?[^\n]{0,20}["']?full""")
    places = [str(p.relative_to(REPO)) for d in ("host", "scripts") for p in (REPO / d).rglob("*.*")
              if p.suffix in (".py", ".lua") and "types" not in p.parts and p.name != "declarations.lua"
              and literal.search(p.read_text(encoding="utf-8"))]
    assert places == ["host/tools/sandbox.py"], places


# ---- error kinds per primitive ----------------------------------------------------------

from errorreach import reachable_kinds  # noqa: E402


@functools.cache
def reach() -> dict[str, dict[str, list[str]]]:
    """tests/errorreach.py's analysis of host/ (~2.6 s of CPU), made on first use rather than at
    import, so that a worker that runs none of the tests below does not make it; conftest's
    ONE_WORKER keeps those tests on one worker."""
    return reachable_kinds(REPO / "host")


# The primitives the analysis must find a function behind: every one but `parallel`, made in
# host/api/__init__.py rather than registered by a module of host/api (it hands back each call's
# error in its result, and raises only `usage` itself).
ANALYSED = sorted(set(NAMES) - {"parallel"})
# Any primitive can meet these, so no list names them: a Ctrl-C (not catchable) and a bug.
EVERYWHERE = {"interrupted", "internal"}
# Kinds the source analysis finds on a path no call takes, and why not.
NOT_RAISED = {
    ("locks.acquire", "locked"): "a lock still held after the timeout comes back as nil and the holder",
    ("memory.all", "usage"): "it reads only the files whose names are valid kinds",
    ("memory.files", "usage"): "it reads only the files whose names are valid kinds",
    ("runs.list", "usage"): "a run's executor name is checked before it is looked up",
    ("agents.merge", "ambiguous"): "the write it ends is the one it began, by its full id",
}


def test_the_source_analysis_follows_calls_into_the_tools():
    """The floor below is real: the analysis finds kinds several calls deep (an edit that
    waits for a lock, a shell command that cannot start, a git failure in the shadow
    repository) and sees that moss.fs.exists catches every error."""
    found = reach()
    assert {"locked", "conflict", "ambiguous"} <= set(found["edit.apply"])
    assert {"io", "locked", "denied"} <= set(found["shell.run"])
    assert "io" in found["shadow.snapshot"] and "locked" in found["shadow.restore"]
    assert found["fs.exists"] == {}
    unseen = set(ANALYSED) - set(found)
    assert not unseen, f"tests/errorreach.py finds no function behind {sorted(unseen)} (registered another way?)"
    unknown = set(found) - set(ANALYSED)
    assert not unknown, f"tests/errorreach.py finds primitives moss.* does not have: {sorted(unknown)}"


@pytest.mark.parametrize("name", ANALYSED)
def test_a_primitive_declares_every_error_kind_its_code_can_raise(name):
    """Each kind the host's code can raise on a call of the primitive (followed through
    host/tools, the storage layer, the lock manager, ...) is in its `---@errors` list, so the
    reference table in docs/lua-api.md tells a script what to catch."""
    found = reach()
    assert name in found, f"tests/errorreach.py finds no function behind moss.{name}"
    declared = set(DECL.functions[name].errors)
    missing = {k: " > ".join(path) for k, path in found[name].items()
               if k not in declared | EVERYWHERE and (name, k) not in NOT_RAISED}
    assert not missing, f"moss.{name}: add to its ---@errors in host/api/declarations.lua: {missing}"
    for key in NOT_RAISED:
        if key[0] == name:
            assert key[1] in found[name] and key[1] not in declared, f"NOT_RAISED{key} is stale"


def test_a_primitive_that_takes_arguments_declares_usage():
    """An argument that does not fit its declaration is a `usage` error, so every primitive
    with a parameter lists `usage`; every listed kind is one moss.ErrorKind names."""
    kinds = {k for k, _ in DECL.error_kinds}
    for name, fn in DECL.functions.items():
        assert set(fn.errors) <= kinds, f"moss.{name} lists an unknown kind: {set(fn.errors) - kinds}"
        checked = name in reach() or name == "parallel"
        if checked and fn.params:
            assert "usage" in fn.errors, f"moss.{name} takes arguments but does not list usage"


# ---- options and fields the code reads ----------------------------------------------------

def test_the_host_options_are_the_declared_moss_options():
    """Every option the host takes out of a script's arguments (host/hostoptions.py) is a field of
    moss.Options, with its flag, and a type that matches how it is parsed; nothing is
    declared that the host does not parse; `--help` lists each one."""
    from moss.hostoptions import HOST_FLAGS, HOST_OPTIONS, HOST_OPTIONS_HELP, NUMERIC

    fields = {f.name: f for f in DECL.classes["moss.Options"]}
    parsed = {**{key: flag for flag, key in HOST_OPTIONS.items()}, **{key: flag for flag, key in HOST_FLAGS.items()}}
    assert set(fields) == set(parsed), f"host/run.py parses {sorted(set(parsed) - set(fields))}, " \
                                       f"moss.Options declares {sorted(set(fields) - set(parsed))}"
    for key, flag in parsed.items():
        f = fields[key]
        assert f.optional and f.note.startswith(flag + (":" if flag in HOST_FLAGS else " ")), (key, f.note)
        want = "boolean" if flag in HOST_FLAGS else {int: "integer", float: "number"}.get(NUMERIC.get(key), "string")
        assert f.type == want or (want == "string" and f.type.startswith('"')), (key, f.type)
        assert flag in HOST_OPTIONS_HELP, f"{flag} is missing from the host options' --help"


def _opts_read(fn, param: str) -> set[str]:
    """The keys a primitive's body reads from its parameter `param` (`param.get("k")`,
    `param["k"]`, and the same through a local name assigned from it)."""
    import ast

    names = {param}

    def same(value) -> bool:  # `param`, `param or {}`, `param if ... else {}`
        if isinstance(value, ast.BoolOp):
            value = value.values[0]
        if isinstance(value, ast.IfExp):
            value = value.body
        return isinstance(value, ast.Name) and value.id in names

    for node in ast.walk(fn.node):
        if isinstance(node, ast.Assign) and same(node.value):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    keys = set()
    for node in ast.walk(fn.node):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and isinstance(node.func.value, ast.Name) and node.func.value.id in names \
                and node.args and isinstance(node.args[0], ast.Constant):
            keys.add(node.args[0].value)
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and isinstance(node.value, ast.Name) \
                and node.value.id in names and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            keys.add(node.slice.value)
    return keys


def _declared_keys(type_: str) -> set[str] | None:
    """The fields a parameter's declared type names: an inline `{a?: T, b: T}` (also among
    alternatives, `string|{cmd: string}`), or a declared class; None for anything else."""
    import re

    keys: set[str] = set()
    for part in declare._split(type_, "|"):
        part = part.strip().rstrip("?")
        if part.startswith("{") and part.endswith("}"):
            keys |= {re.match(r"\s*(\w+)", f)[1] for f in declare._split(part[1:-1], ",") if f.strip()}
        elif part in DECL.classes:
            keys |= {f.name for f in DECL.classes[part]}
        elif part.endswith("[]") and part[:-2] in DECL.classes:
            keys |= {f.name for f in DECL.classes[part[:-2]]}
    return keys or None


def test_every_option_a_primitive_reads_is_declared():
    """A key a primitive reads from its options table (`opts.get("locks")`) is a field of
    that parameter's declared type, so the stubs and docs/lua-api.md show every option."""
    from errorreach import Graph

    g = Graph(REPO / "host")
    checked, missing = 0, {}
    for name, fn in g.primitives().items():
        spec = DECL.functions.get(name)
        for arg, param in zip(fn.node.args.args[1:], spec.params if spec else []):  # after ctx
            declared = _declared_keys(param.type)
            if declared is None:
                continue
            checked += 1
            read = _opts_read(fn, arg.arg) - declared
            if read:
                missing[f"moss.{name}({param.name})"] = sorted(read)
    assert checked > 15
    assert not missing, f"read but not declared in host/api/declarations.lua: {missing}"

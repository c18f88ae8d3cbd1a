"""The moss.* API, declared once.

`declarations.lua` (beside this file) is the one place a primitive is declared: its doc
comment, typed parameters (`---@param`), return (`---@return`) and error kinds
(`---@errors usage, not_found`), in lua-language-server's annotation syntax, plus the
classes and aliases they use and `moss.ErrorKind`, the table of error kinds. From it:

- the argument checks every primitive runs before its body (`checker`): a wrong type is a
  `usage` error naming the argument; nothing else a primitive raises is called `usage`;
- `scripts/types/moss.lua`, the editor stubs (`types_file`);
- the reference tables of docs/lua-api.md, between `<!-- api: NAMESPACE -->` and
  `<!-- /api -->` markers, its table of error kinds, and the fields of `moss`,
  `moss.options` and `moss.trust` (`<!-- fields: PATH -->`) (`update_doc`).

`events.lua` (beside it) declares the events moss writes the same way, one `---@class` per
event: the stream-json lines (`moss.stream.NAME`) and the session-log records
(`moss.log.NAME`). From it: docs/events.schema.json (`events_schema`), the tables of
docs/events.md (and the LLM client's in docs/llm.md) between `<!-- events: stream|log [PREFIX] -->`
and `<!-- /events -->` (`update_events_doc`), and host/streamevents.py, the stream-json
events as the Python types the host's readers of an agent process use (`stream_types`).

`python -m moss.api` rewrites the generated files; tests/test_api_docs.py fails when
they differ from what the declarations make.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Callable

from ..errors import MossError

HERE = Path(__file__).resolve().parent
DECLARATIONS = HERE / "declarations.lua"
GENERATED = "-- GENERATED from host/api/declarations.lua by `python -m moss.api`: edit that file, not this one."


@dataclass
class Param:
    name: str
    type: str
    optional: bool
    note: str = ""


@dataclass
class Function:
    name: str                      # "code.view" (moss. left off), or "AgentHandle:wait" for a method
    doc: list[str]
    params: list[Param]
    returns: list[str]
    errors: list[str]

    @property
    def namespace(self) -> str:
        return self.name.rsplit(".", 1)[0] if "." in self.name else ""


@dataclass
class Declarations:
    text: str
    functions: dict[str, Function] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)
    error_kinds: list[tuple[str, str]] = field(default_factory=list)
    classes: dict[str, list[Param]] = field(default_factory=dict)  # each `---@class`'s `---@field`s


_FUNCTION = re.compile(r"^function (?:moss\.)?([\w.:]+)\((.*)\) end$")
_PARAM = re.compile(r"^---@param (\.\.\.|\w+)(\??) (.+?)(?:\s+#\s*(.*))?$")
_RETURN = re.compile(r"^---@return (.+?)(?:\s+#.*)?$")
_ALIAS = re.compile(r"^---@alias ([\w.]+)(?: (.+))?$")
_CLASS = re.compile(r"^---@class ([\w.]+)")
_FIELD = re.compile(r"^---@field (\w+)(\??) (.+?)(?:\s+#\s*(.*))?$")
_MEMBER = re.compile(r'^---\| "([\w-]+)"\s*#\s*(.*)$')


def parse(text: str) -> Declarations:
    """Read the declaration file: its functions, aliases and error kinds."""
    out = Declarations(text)
    doc: list[str] = []
    params: list[Param] = []
    returns: list[str] = []
    errors: list[str] = []
    alias = None
    cls: str | None = None
    for line in text.splitlines():
        if alias and line.startswith("---|"):
            m = _MEMBER.match(line)
            if m:
                out.aliases[alias] = (out.aliases[alias] + "|" if out.aliases[alias] else "") + f'"{m[1]}"'
                if alias == "moss.ErrorKind":
                    out.error_kinds.append((m[1], m[2].strip()))
            continue
        alias = None
        if m := _CLASS.match(line):
            cls = m[1]
            out.classes[cls] = []
        elif (m := _FIELD.match(line)) and cls:
            out.classes[cls].append(Param(m[1], m[3].strip(), m[2] == "?", (m[4] or "").strip()))
        elif m := _ALIAS.match(line):
            alias = m[1]
            out.aliases[alias] = (m[2] or "").strip()
        elif m := _PARAM.match(line):
            params.append(Param(m[1], m[3].strip(), m[2] == "?", (m[4] or "").strip()))
        elif m := _RETURN.match(line):
            returns.append(m[1].strip())
        elif line.startswith("---@errors "):
            errors = [k.strip() for k in line[len("---@errors "):].split(",") if k.strip()]
        elif line.startswith("--- ") or line == "---":
            doc.append(line[4:])
        elif m := _FUNCTION.match(line):
            out.functions[m[1]] = Function(m[1], doc, params, returns, errors)
        if not line.startswith("---"):  # a declaration's comment block ends here
            doc, params, returns, errors, cls = [], [], [], [], None
    return out


@cache
def declarations() -> Declarations:
    return parse(DECLARATIONS.read_text(encoding="utf-8"))


@cache
def checkers() -> dict[str, Callable[[tuple], None]]:
    """Each declared primitive's argument check (`checker`), made once per process."""
    decl = declarations()
    return {name: checker(spec, decl.aliases) for name, spec in decl.functions.items()}


# ---- argument checks ----------------------------------------------------------------------

def _split(expr: str, sep: str) -> list[str]:
    """`expr` split at `sep` outside brackets and quotes."""
    parts, depth, quote, start = [], 0, None, 0
    for i, ch in enumerate(expr):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch in "{(<[":
            depth += 1
        elif ch in "})>]":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(expr[start:i])
            start = i + 1
    parts.append(expr[start:])
    return [p.strip() for p in parts]


def lua_kind(value: Any) -> str:
    """The Lua type of a value as a primitive receives it (converted, or a raw Lua object)."""
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, (str, bytes)):
        return "string"
    if isinstance(value, (dict, list, tuple)):
        return "table"
    from lupa import lua54

    return lua54.lua_type(value) or "userdata"  # a raw Lua value: "table", "function", ...


_SIMPLE = {
    "any": lambda k, v: True,
    "nil": lambda k, v: k == "nil",
    "boolean": lambda k, v: k == "boolean",
    "integer": lambda k, v: k == "integer",
    "number": lambda k, v: k in ("integer", "number"),
    "string": lambda k, v: k == "string",
    "table": lambda k, v: k == "table",
    "function": lambda k, v: k == "function",
    "true": lambda k, v: v is True,
    "false": lambda k, v: v is False,
}


def compile_type(expr: str, aliases: dict[str, str], _depth: int = 0) -> Callable[[str, Any], bool]:
    """A test (lua kind, value) -> bool for a lua-language-server type expression. Shapes
    inside a table (`{a?: integer}`, `string[]`) are the primitive's own business: this says
    only that a table came."""
    expr = expr.strip()
    if expr.startswith("(") and expr.endswith(")"):
        expr = expr[1:-1].strip()
    parts = _split(expr, "|")
    if len(parts) > 1:
        tests = [compile_type(p, aliases, _depth) for p in parts]
        return lambda k, v: any(t(k, v) for t in tests)
    if expr.endswith("?"):
        inner = compile_type(expr[:-1], aliases, _depth)
        return lambda k, v: k == "nil" or inner(k, v)
    if expr.endswith("[]") or expr.startswith("{") or expr.startswith("table<"):
        return _SIMPLE["table"]
    if expr.startswith("fun("):
        return _SIMPLE["function"]
    if expr.startswith('"') and expr.endswith('"'):
        literal = expr[1:-1]
        return lambda k, v: k == "string" and (v.decode() if isinstance(v, bytes) else v) == literal
    if expr in _SIMPLE:
        return _SIMPLE[expr]
    if expr in aliases and aliases[expr] and _depth < 8:
        return compile_type(aliases[expr], aliases, _depth + 1)
    return _SIMPLE["table"]  # a declared class: a table


def _shown(expr: str, aliases: dict[str, str]) -> str:
    return aliases.get(expr, expr) if expr in aliases and len(aliases[expr]) < 80 else expr


def checker(fn: Function, aliases: dict[str, str]) -> Callable[[tuple], None]:
    """check(args): raise a `usage` MossError when an argument does not fit the declaration."""
    fixed = [p for p in fn.params if p.name != "..."]
    tests = [(i, p, compile_type(p.type + ("?" if p.optional else ""), aliases)) for i, p in enumerate(fixed, 1)]
    varargs = any(p.name == "..." for p in fn.params)

    def check(args: tuple) -> None:
        if not varargs and len(args) > len(fixed) and any(a is not None for a in args[len(fixed):]):
            raise MossError(f"takes at most {len(fixed)} argument{'s' if len(fixed) != 1 else ''}, got {len(args)}",
                            kind="usage")
        for i, p, test in tests:
            value = args[i - 1] if i <= len(args) else None
            kind = lua_kind(value)
            if not test(kind, value):
                got = "nothing" if kind == "nil" else f"a {kind}" if kind != "integer" else "an integer"
                if kind == "string" and '"' in _shown(p.type, aliases):  # a word that is not one of the choices
                    got = f'"{value}"'
                raise MossError(f"argument {i} ({p.name}) must be {_shown(p.type, aliases)}"
                                f"{' or nil' if p.optional else ''}, got {got}", kind="usage")
    return check


# ---- generated files ------------------------------------------------------------------------

def types_file(decl: Declarations) -> str:
    """scripts/types/moss.lua: the declaration as editors read it."""
    lines: list[str] = []
    for line in decl.text.splitlines():
        if line.startswith("---@errors "):
            kinds = ", ".join(f"`{k.strip()}`" for k in line[len("---@errors "):].split(","))
            if lines and lines[-1].startswith("--- "):
                lines.append("---")  # its own paragraph in an editor's hover
            lines.append(f"--- Errors: {kinds}.")
        else:
            lines.append(line)
    if lines and lines[0].startswith("---@meta"):
        return "\n".join([lines[0], GENERATED, *lines[1:]]) + "\n"
    return "\n".join([GENERATED, *lines]) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def signature(fn: Function) -> str:
    params = ", ".join(f"{p.name}{'?' if p.optional else ''}: {p.type}" if p.name != "..." else "..."
                       for p in fn.params)
    return f"moss.{fn.name}({params})"


def api_table(decl: Declarations, namespace: str) -> str:
    """The reference table of one namespace ("" for moss.* itself) as markdown: the
    signature, what it returns, the error kinds it declares, and its doc."""
    rows = ["| function | returns | errors | what |", "|---|---|---|---|"]
    for fn in decl.functions.values():
        if fn.namespace != namespace or ":" in fn.name:
            continue
        returns = ", ".join(f"`{_cell(r)}`" for r in fn.returns) or "—"
        errors = ", ".join(f"`{e}`" for e in fn.errors) or "—"
        rows.append(f"| `{_cell(signature(fn))}` | {returns} | {errors} | {_cell(' '.join(fn.doc))} |")
    return "\n".join(rows)


def error_table(decl: Declarations) -> str:
    rows = ["| kind | meaning |", "|---|---|"]
    rows += [f"| `{k}` | {_cell(v)} |" for k, v in decl.error_kinds]
    return "\n".join(rows)


def fields_table(decl: Declarations, path: str) -> str:
    """The fields of the value at `path` ("moss", "moss.options", ...) as markdown: its
    class is `moss`'s, then each field's declared type."""
    cls = "moss"
    for part in path.split(".")[1:]:
        cls = next(f.type for f in decl.classes[cls] if f.name == part)
    rows = ["| field | type | what |", "|---|---|---|"]
    rows += [f"| `{path}.{f.name}` | `{_cell(f.type)}` | {_cell(f.note)} |" for f in decl.classes[cls]]
    return "\n".join(rows)


# a generated block: its opening marker, what it holds (empty in a fresh one), its closing marker
_BLOCK = re.compile(r"(<!-- (api: ?([\w.]*)|error-kinds|fields: ([\w.]+)) -->\n)(.*?)(<!-- /(?:api|error-kinds|fields) -->)",
                    re.S)


def update_doc(doc: str, decl: Declarations) -> str:
    """docs/lua-api.md with every generated block made anew from the declaration."""
    def block(m: re.Match) -> str:
        body = (error_table(decl) if m[2] == "error-kinds" else fields_table(decl, m[4]) if m[4]
                else api_table(decl, m[3] or ""))
        return m[1] + body + "\n" + m[6]
    return _BLOCK.sub(block, doc)


# ---- events ---------------------------------------------------------------------------------

@dataclass
class EventField:
    name: str
    type: str
    optional: bool
    note: str = ""
    schema: dict = field(default_factory=dict)  # a `---@schema` line after it: more constraints


@dataclass
class EventType:
    """One block of events.lua: an event (`moss.stream.NAME`, `moss.log.NAME`) or a helper
    type (`moss.events.NAME`: a class, or an alias with its JSON schema)."""
    group: str                     # "stream", "log" or "events"
    name: str
    doc: str
    parent: str = ""               # "moss.events.result_fields" for `---@class X : Y`
    fields: list[EventField] = field(default_factory=list)
    schema: dict | None = None     # an alias's


_EVENT_CLASS = re.compile(r"^---@class moss\.(stream|log|events)\.(\w+)(?:\s*:\s*([\w.]+))?$")
_EVENT_ALIAS = re.compile(r"^---@alias moss\.events\.(\w+) .+$")
_EVENT_FIELD = re.compile(r"^---@field (\w+)(\??) (.+?)(?:\s+#\s*(.*))?$")


def parse_events(text: str) -> dict[tuple[str, str], EventType]:
    """The blocks of events.lua, keyed by (group, name), in the order written."""
    import json

    out: dict[tuple[str, str], EventType] = {}
    doc: list[str] = []
    current: EventType | None = None
    for line in text.splitlines():
        if not line.startswith("---"):
            doc, current = [], None
            continue
        if m := _EVENT_CLASS.match(line):
            current = out[(m[1], m[2])] = EventType(m[1], m[2], " ".join(doc), m[3] or "")
        elif m := _EVENT_ALIAS.match(line):
            current = out[("events", m[1])] = EventType("events", m[1], " ".join(doc), schema={})
        elif (m := _EVENT_FIELD.match(line)) and current is not None:
            current.fields.append(EventField(m[1], m[3].strip(), m[2] == "?", (m[4] or "").strip()))
        elif line.startswith("---@schema ") and current is not None:
            extra = json.loads(line[len("---@schema "):])
            if current.fields:
                current.fields[-1].schema.update(extra)
            else:
                current.schema = {**(current.schema or {}), **extra}
        elif line.startswith("--- ") and current is None:
            doc.append(line[4:])
    return out


def _type_schema(expr: str) -> dict:
    """The JSON schema of a type written in events.lua."""
    parts = _split(expr.strip(), "|")
    nullable = "nil" in parts
    parts = [p for p in parts if p != "nil"]
    if all(p.startswith('"') and p.endswith('"') for p in parts):
        words = [p[1:-1] for p in parts]
        out: dict = {"const": words[0]} if len(words) == 1 else {"enum": words}
    elif len(parts) > 1:
        out = {"anyOf": [_type_schema(p) for p in parts]}
    else:
        t = parts[0]
        simple = {"string": "string", "integer": "integer", "number": "number", "boolean": "boolean"}
        if t in simple:
            out = {"type": simple[t]}
        elif t == "any":
            out = {}
        elif t == "table":
            out = {"type": ["object", "array"]}
        elif t.endswith("[]"):
            out = {"type": "array", "items": _type_schema(t[:-2])}
        elif t.startswith("moss.events."):
            out = {"$ref": f"#/$defs/{t[len('moss.events.'):]}"}
        elif re.fullmatch(r"-?\d+", t):
            out = {"const": int(t)}
        else:
            raise ValueError(f"events.lua: unknown type {t!r}")
    if nullable:
        if isinstance(out.get("type"), str):
            out = {**out, "type": [out["type"], "null"]}
        else:
            out = {"anyOf": [out, {"type": "null"}]}
    return out


def _object(ev: EventType, implied: dict[str, dict]) -> dict:
    props = dict(implied)
    for f in ev.fields:
        props[f.name] = {**_type_schema(f.type), **f.schema, **({"description": f.note} if f.note else {})}
    required = [*implied, *(f.name for f in ev.fields if not f.optional)]
    out: dict = {"description": ev.doc} if ev.doc else {}
    if ev.parent:
        out["allOf"] = [_type_schema(ev.parent)]
    else:
        out["type"] = "object"
    if required:
        out["required"] = required
    out["properties"] = props
    return out


def _helper_defs(events: dict[tuple[str, str], EventType]) -> dict[str, dict]:
    return {name: ({"description": ev.doc} if ev.doc else {}) | (ev.schema if ev.schema is not None else _object(ev, {}))
            for (group, name), ev in events.items() if group == "events"}


def log_schema(events: dict[tuple[str, str], EventType], name: str) -> dict:
    """The JSON schema of one session-log record (`moss.log.NAME`), for checking real logs."""
    ev = events[("log", name)]
    record = _object(ev, {"event": {"const": name}, "ts": {"type": "number"}})
    for f in ev.fields:  # the host writes a field it does not know as null
        if f.optional:
            record["properties"][f.name] = {"anyOf": [record["properties"][f.name], {"type": "null"}]}
    record["properties"] |= {"session": {"type": ["string", "null"]}, "parent": {"type": ["string", "null"]}}
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **record, "$defs": _helper_defs(events)}


def events_schema(events: dict[tuple[str, str], EventType]) -> str:
    """docs/events.schema.json: the stream-json events and the helper types they use."""
    import json

    defs: dict[str, dict] = _helper_defs(events)
    for (group, name), ev in events.items():
        if group == "stream":
            if name in defs:
                raise ValueError(f"events.lua: moss.stream.{name} and moss.events.{name} share a name in the schema")
            defs[name] = _object(ev, {"type": {"const": name}})
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://github.com/moss-agent/moss/docs/events.schema.json",
        "title": "moss stream-json events, schema version 1",
        "description": "One JSON object per line on stdout of `moss @agent --output-format stream-json` "
                       "(docs/events.md). Consumers must ignore fields and event types they do not know. "
                       "GENERATED from host/api/events.lua by `python -m moss.api`.",
        "type": "object",
        "required": ["type"],
        "oneOf": [{"$ref": f"#/$defs/{name}"} for (group, name) in events if group == "stream"],
        "$defs": defs,
    }
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def _fields(ev: EventType, events: dict[tuple[str, str], EventType]) -> list[EventField]:
    inherited = events.get(("events", ev.parent.removeprefix("moss.events."))) if ev.parent else None
    merged = {f.name: f for f in (inherited.fields if inherited else [])}
    merged.update((f.name, f) for f in ev.fields)  # a field of its own overrides the inherited one
    return list(merged.values())


def events_table(events: dict[tuple[str, str], EventType], group: str, prefix: str = "") -> str:
    """The events of `group` (those whose name starts with `prefix`) as markdown: name,
    when, and each field with its type (and its note)."""
    rows = ["| event | when | fields |", "|---|---|---|"]
    for (g, name), ev in events.items():
        if g != group or not name.startswith(prefix):
            continue
        fields = ", ".join(f"`{f.name}{'?' if f.optional else ''}: {_cell(f.type.replace('moss.events.', ''))}`"
                           + (f" ({_cell(f.note)})" if f.note else "") for f in _fields(ev, events)) or "—"
        rows.append(f"| `{name}` | {_cell(ev.doc)} | {fields} |")
    return "\n".join(rows)


_EVENTS_BLOCK = re.compile(r"(<!-- events: (stream|log) ?(\w*) -->\n)(.*?)(<!-- /events -->)", re.S)


def update_events_doc(doc: str, events: dict[tuple[str, str], EventType]) -> str:
    """A doc with its generated event tables (`<!-- events: stream|log [PREFIX] -->`) made
    anew from events.lua."""
    return _EVENTS_BLOCK.sub(lambda m: m[1] + events_table(events, m[2], m[3]) + "\n" + m[5], doc)


_ROW_BLOCK = re.compile(r"(<!-- row: (\w+) -->\n)(.*?)(<!-- /row -->)", re.S)


def row_table(events: dict[tuple[str, str], EventType], name: str) -> str:
    """A helper type of events.lua (`moss.events.NAME`) as markdown: each field, its type and
    what it is (a row the host reads of what an agent script gives it)."""
    rows = ["| field | type | what it is |", "|---|---|---|"]
    for f in events[("events", name)].fields:
        rows.append(f"| `{f.name}{'?' if f.optional else ''}` | `{_cell(f.type.replace('moss.events.', ''))}` "
                    f"| {_cell(f.note)} |")
    return "\n".join(rows)


def update_rows_doc(doc: str, events: dict[tuple[str, str], EventType]) -> str:
    """A doc with its generated field tables (`<!-- row: NAME -->`) made anew from events.lua."""
    return _ROW_BLOCK.sub(lambda m: m[1] + row_table(events, m[2]) + "\n" + m[4], doc)


_PY_SIMPLE = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "any": "Any",
              "table": "list[Any] | dict[str, Any]"}
STREAM_TYPES = "host/streamevents.py"


def _camel(name: str) -> str:
    return "".join(w.capitalize() for w in name.split("_"))


def _py_type(expr: str, events: dict[tuple[str, str], EventType]) -> str:
    """The Python annotation of a type written in events.lua."""
    parts = _split(expr.strip(), "|")
    nullable = "nil" in parts
    parts = [p for p in parts if p != "nil"]
    if all(p.startswith('"') and p.endswith('"') for p in parts):
        out = [f"Literal[{', '.join(parts)}]"]
    else:
        out = []
        for t in parts:
            if t in _PY_SIMPLE:
                out.append(_PY_SIMPLE[t])
            elif t.endswith("[]"):
                out.append(f"list[{_py_type(t[:-2], events)}]")
            elif re.fullmatch(r"-?\d+", t):
                out.append(f"Literal[{t}]")
            elif t.startswith("moss.events."):
                helper = events[("events", t[len("moss.events."):])]
                if helper.schema is not None:  # an alias: its JSON type
                    out.append(_PY_SIMPLE[helper.schema["type"]])
                else:
                    out.append(_camel(helper.name))
            else:
                raise ValueError(f"events.lua: unknown type {t!r}")
    if "Any" in out:
        return "Any"
    return " | ".join(out + (["None"] if nullable else []))


def _typed_dict(name: str, doc: str, fields: list[tuple[str, str, str]]) -> str:
    lines = [f"# {doc}"] if doc else []
    lines.append(f'{name} = TypedDict("{name}", {{')
    for field_name, annotation, note in fields:
        lines.append(f'    "{field_name}": {annotation},' + (f"  # {note}" if note else ""))
    return "\n".join(lines + ["})"])


def stream_types(events: dict[tuple[str, str], EventType]) -> str:
    """host/streamevents.py: each stream-json event and each helper class (those its fields
    use, and what the host reads of a saved session) as a TypedDict, for the host's own
    readers of what an agent script writes (host/agentproc.py, host/sessions/row.py)."""
    blocks = []
    for (group, name), ev in events.items():
        if group == "events" and ev.schema is None:
            fields = [(f.name, f"NotRequired[{_py_type(f.type, events)}]", f.note) for f in ev.fields]
            blocks.append(_typed_dict(_camel(name), ev.doc, fields))
    streams = [(name, ev) for (group, name), ev in events.items() if group == "stream"]
    for name, ev in streams:
        fields = [("type", f'Literal["{name}"]', "")]
        fields += [(f.name, f"NotRequired[{_py_type(f.type, events)}]", f.note) for f in _fields(ev, events)]
        blocks.append(_typed_dict(_camel(name), ev.doc, fields))
    union = "".join(f"\n    {_camel(name)}," for name, _ in streams)
    table = "".join(f'\n    "{name}": {_camel(name)},' for name, _ in streams)
    return f'''"""The stream-json events of `moss @agent --output-format stream-json` as Python types.

GENERATED from host/api/events.lua by `python -m moss.api`: edit that file, not this one.

One TypedDict per event, keyed by its `type` (`StreamEvent` is any of them, `EVENTS` each by
name), for the host's readers of an agent process's stream (host/agentproc.py), and one per
helper type, among them what the host reads of a saved session (`SessionRow`,
`SessionTimeline`: host/sessions/row.py). Read through host/typedjson.py, every field
but `type` is NotRequired whatever events.lua says, because that is all a reader can promise:
an agent script may leave a field out (a nil in Lua), and the reader leaves out a field whose
value is not of its declared type; a field that is there has its declared type.
"""

from typing import Any, Literal, NotRequired, TypedDict, Union

{(chr(10) * 3).join(blocks)}


StreamEvent = Union[{union}
]

EVENTS: dict[str, Any] = {{{table}
}}
'''


def outputs(root: Path) -> dict[Path, str]:
    """Every generated file under the repository `root`, with the text it should have."""
    decl = parse((root / "host/api/declarations.lua").read_text(encoding="utf-8"))
    events = parse_events((root / "host/api/events.lua").read_text(encoding="utf-8"))
    doc_path, events_doc, llm_doc = root / "docs/lua-api.md", root / "docs/events.md", root / "docs/llm.md"
    agent_doc = root / "docs/agent.md"
    return {root / "scripts/types/moss.lua": types_file(decl),
            doc_path: update_doc(doc_path.read_text(encoding="utf-8"), decl),
            root / "docs/events.schema.json": events_schema(events),
            events_doc: update_events_doc(events_doc.read_text(encoding="utf-8"), events),
            llm_doc: update_events_doc(llm_doc.read_text(encoding="utf-8"), events),
            agent_doc: update_rows_doc(agent_doc.read_text(encoding="utf-8"), events),
            root / STREAM_TYPES: stream_types(events)}


USAGE = """usage: python -m moss.api [--check]

Make scripts/types/moss.lua and the reference tables of docs/lua-api.md from
host/api/declarations.lua, and docs/events.schema.json, the event tables of
docs/events.md and docs/llm.md, the session rows' tables of docs/agent.md and
host/streamevents.py from host/api/events.lua (run it
after editing either).
--check writes nothing and exits 1 when a generated file is stale."""


def main(argv: list[str] | None = None) -> int:
    argv = list(argv or [])
    if any(a in ("-h", "--help") for a in argv):
        print(USAGE)
        return 0
    unknown = [a for a in argv if a != "--check"]
    if unknown:
        print(f"python -m moss.api: unknown argument {unknown[0]!r}\n\n{USAGE}", file=sys.stderr)
        return 2
    root = HERE.parent.parent
    stale = [(path, text) for path, text in outputs(root).items() if path.read_text(encoding="utf-8") != text]
    for path, text in stale:
        if "--check" in argv:
            print(f"stale: {path.relative_to(root)}")
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(root)}")
    if not stale:
        print("generated files are up to date")
    return 1 if stale and "--check" in argv else 0

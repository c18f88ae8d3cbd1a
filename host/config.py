"""Layered TOML config: the project's .moss/config.toml over the user's config.toml.

Every field reaches Lua as `moss.config`, including ones no Python code knows about.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .roots import display_path, user_config_dir

PROJECT_FILE = Path(".moss") / "config.toml"


def user_config_file(env=os.environ) -> Path:
    return user_config_dir(env) / "config.toml"


def project_config_file(root: Path) -> Path:
    return Path(root) / PROJECT_FILE


def read_toml(path: Path) -> dict:
    """Parse one TOML file; a syntax error names file:line:column and the reason.

    Everything else that would only fail later, deep inside the runtime, fails here with
    the file's name: a path that is not a readable regular file (`.moss` itself a file, a
    pipe that would block), and integers beyond Lua's 64 bits."""
    from .tools.resolve import special_kind

    shown = display_path(path)
    kind = special_kind(path)
    if kind is not None:
        raise ConfigError(f"{shown} is {kind}, not a config file")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except NotADirectoryError:
        parent = next((p for p in path.parents if p.exists() and not p.is_dir()), path.parent)
        raise ConfigError(f"{display_path(parent)} is a file, but moss keeps its config, scripts and "
                          f"sessions in a directory there: rename or remove {display_path(parent)}") from None
    except IsADirectoryError:
        raise ConfigError(f"{shown} is a directory, not a config file") from None
    except OSError as e:
        raise ConfigError(f"{shown}: cannot read it ({e.strerror or e})") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{shown}: not valid UTF-8 ({e.reason} at byte {e.start})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        msg = str(e)
        m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
        if m:
            reason = msg[: m.start()].strip()
            raise ConfigError(f"{shown}:{m.group(1)}:{m.group(2)}: {reason}") from None
        m = re.search(r"\(at end of document\)", msg)
        if m:
            lines = text.splitlines() or [""]
            reason = msg[: m.start()].strip()
            raise ConfigError(f"{shown}:{len(lines)}:{len(lines[-1]) + 1}: {reason}") from None
        raise ConfigError(f"{shown}: {msg}") from None
    _check_integers(data, [], shown, text)
    _check_tables(data, shown, text)
    _check_limits(data, shown, text)
    return data


def _check_limits(data: dict, shown: str, text: str) -> None:
    """A limit (host/trust/rules.py's limit_keys: `[runs] max_parallel`, `[agent.wild]
    max_time_s`, ...) given as a number is 0 or more, and finite. Below 0 its consumer reads no
    limit, or nonsense: refused at its line, in the user's config and a project's alike, so a
    project cannot pass one off as narrowing."""
    import math

    # rules.py imports nothing of this module; but importing it runs the trust package's
    # __init__ first, whose other modules read configs through this one, so it is imported
    # when a file is read rather than while this module loads.
    from .trust.rules import limit_keys

    for path, _rule in limit_keys():
        node: Any = data
        for part in path:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, bool) or not isinstance(node, (int, float)):
            continue  # not a number: its consumer says what it takes (and trust waits for it)
        if not math.isfinite(node) or node < 0:
            raise ConfigError(f"{shown}{_position_of_key(text, path)}: {dotted_key(path)} must be a number, 0 or "
                              f"more, not {_toml_value(node)}")


# Keys whose value must be a table ("*": any name). A scalar there (`agent = 5`) would
# otherwise fail deep inside the runtime, naming neither this file nor the key.
TABLES = (("agent",), ("agent", "wild"), ("llm",), ("llm", "providers"), ("llm", "providers", "*"),
          ("llm", "pricing"), ("llm", "pricing", "*"), ("mcp",), ("mcp", "servers"), ("mcp", "servers", "*"),
          ("shadow",), ("sandbox",), ("lua",), ("trust",), ("runs",))
_EXAMPLE = {"agent": "max_turns = 20", "llm": 'provider = "anthropic"', "mcp": "[mcp.servers.NAME]",
            "shadow": "max_total_mb = 200", "sandbox": 'env = ["CARGO_HOME"]', "lua": "max_memory_mb = 256",
            "trust": 'max_access = "edit"', "runs": "max_parallel = 4"}


def _check_tables(data: dict, shown: str, text: str) -> None:
    """A key that must hold a table but holds something else is an error at its line."""
    def walk(node: Any, pattern: tuple, path: tuple) -> None:
        if not pattern:
            return
        head, rest = pattern[0], pattern[1:]
        for name in (node if head == "*" else ([head] if head in node else [])):
            value, here = node[name], path + (name,)
            if not rest:
                if not isinstance(value, dict):
                    table = dotted_key(here)
                    example = _EXAMPLE.get(here[0], "KEY = VALUE") if len(here) == 1 else "KEY = VALUE"
                    raise ConfigError(f"{shown}{_position_of_key(text, here)}: {table} must be a table "
                                      f"([{table}] with lines like {example}), not {_toml_value(value)}")
            elif isinstance(value, dict):
                walk(value, rest, here)

    for pattern in TABLES:
        walk(data, pattern, ())


def _toml_value(value: Any) -> str:
    import json

    if isinstance(value, bool):
        return "true" if value else "false"
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 40 else text[:39] + "…"


def _position_of_key(text: str, parts: tuple) -> str:
    """':line:column' where the key `parts` is set (`a = ...` under [x], or `x.a = ...`), or ''."""
    table: list[str] = []
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        m = re.match(r"^\[\[?\s*([^\]]+?)\s*\]\]?", stripped)
        if m:
            table = [p.strip().strip('"\'') for p in m.group(1).split(".")]
            continue
        m = re.match(r"^(\s*)([A-Za-z0-9_\-.\"' ]+?)\s*=", line)
        if m:
            key = table + [p.strip().strip('"\'') for p in m.group(2).split(".")]
            if tuple(key) == tuple(parts):
                return f":{n}:{len(m.group(1)) + 1}"
    return ""


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_TOML_INT = re.compile(r"(?<![\w.+-])[+-]?(?:0x[0-9A-Fa-f_]+|0o[0-7_]+|0b[01_]+|\d[\d_]*)(?![\w.:-])")


def _check_integers(value: Any, keys: list[str], shown: str, text: str) -> None:
    """Lua integers are 64-bit: a larger TOML integer is an error at its line and column."""
    if isinstance(value, dict):
        for k, v in value.items():
            _check_integers(v, keys + [str(k)], shown, text)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_integers(v, keys[:-1] + [f"{keys[-1] if keys else ''}[{i}]"], shown, text)
    elif isinstance(value, int) and not isinstance(value, bool) and not INT64_MIN <= value <= INT64_MAX:
        raise ConfigError(f"{shown}{_position_of(text, value)}: {'.'.join(keys)} = {value} is too large: "
                          f"integers must lie between {INT64_MIN} and {INT64_MAX} (write a float, e.g. "
                          f"{float(value):.1e}, if you mean an approximate number)")


def _position_of(text: str, value: int) -> str:
    """':line:column' of the first integer literal in `text` equal to `value`, or ''."""
    for m in _TOML_INT.finditer(text):
        try:
            if int(m.group().replace("_", ""), 0) == value:
                line = text.count("\n", 0, m.start()) + 1
                return f":{line}:{m.start() - (text.rfind(chr(10), 0, m.start()) + 1) + 1}"
        except ValueError:  # a decimal with leading zeros is no TOML integer
            continue
    return ""


def deep_merge(base: dict, over: dict) -> dict:
    """Tables merge key by key; any other value from `over` wins."""
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def load(root: Path | None, env=os.environ) -> dict:
    return load_layers(root, env)[0]


def load_layers(root: Path | None, env=os.environ) -> tuple[dict, dict]:
    """(merged config, the user's config alone), as the files say: no trust applied.

    A script run uses trust.evaluate instead, which keeps what an untrusted project may not
    set out of the merge; this raw view is for `moss config get`."""
    user, project = read_layers(root, env)
    return deep_merge(user, project), user


def read_layers(root: Path | None, env=os.environ) -> tuple[dict, dict]:
    """(the user's config, the project's config), each parsed on its own, so callers can
    tell who set what: the user's file alone decides permissions such as [agent]
    allow_full, and a project's commands and endpoints wait for trust (host/trust/)."""
    user = read_toml(user_config_file(env))
    project = read_toml(project_config_file(root)) if root is not None else {}
    return user, project


def dotted_key(path: tuple | list) -> str:
    """A key path as one dotted name, quoting parts that are not bare TOML keys."""
    import json

    return ".".join(p if BARE.match(p) else json.dumps(p) for p in path)


def lookup(config: dict, dotted: str) -> Any:
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(dotted)
        node = node[part]
    return node


def parse_value(text: str) -> Any:
    """A TOML value if the text is one (true, 3, 1.5, "s", [1, 2], {a = 1}); else the text."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def set_value(path: Path, dotted: str, value: Any) -> bool:
    """Set a dotted key in one TOML file, keeping every other key and table.

    The file is edited in place when that is safe (comments and layout stay); otherwise it
    is rewritten with tomli-w. Returns whether comments and layout were kept."""
    import tomli_w

    from .tools.safefs import replace_file as write_atomic

    data = read_toml(path)
    parts = dotted.split(".")
    if not all(parts):
        raise ConfigError(f"bad key {dotted!r}: use dotted names like agent.max_turns")
    node = data
    for i, part in enumerate(parts[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"cannot set {dotted}: {'.'.join(parts[: i + 1])} is a {type(child).__name__}, not a table")
        node = child
    if isinstance(node.get(parts[-1]), dict) and not isinstance(value, dict):
        raise ConfigError(f"{dotted} is a table; set one of its keys instead (e.g. {dotted}.KEY VALUE)")
    node[parts[-1]] = value
    _check_tables(data, display_path(path), "")  # `moss config set agent 5` writes nothing
    path.parent.mkdir(parents=True, exist_ok=True)
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    edited = _edit_in_place(old, parts, value)
    if edited is not None:
        try:
            if tomllib.loads(edited) == data:
                write_atomic(path, edited)
                return True
        except tomllib.TOMLDecodeError:
            pass
    write_atomic(path, tomli_w.dumps(data))
    return not re.search(r"(?m)^\s*#", old)


BARE = re.compile(r"^[A-Za-z0-9_-]+$")
HEADER = re.compile(r"^\s*\[([A-Za-z0-9_.-]+)\]\s*(#.*)?$")


def _edit_in_place(text: str, parts: list[str], value: Any) -> str | None:
    """`text` with one `key = value` line set, or None when a safe in-place edit is not clear."""
    import tomli_w

    if isinstance(value, dict) or not all(BARE.match(p) for p in parts):
        return None
    key, table = parts[-1], parts[:-1]
    line = tomli_w.dumps({key: value}).strip()
    if "\n" in line:
        return None
    lines = text.splitlines()
    current: list[str] = []
    section_end = None  # index after the last key line of the target table
    key_re = re.compile(r"^(\s*)" + re.escape(key) + r"\s*=")
    for i, ln in enumerate(lines):
        m = HEADER.match(ln)
        if m:
            current = m.group(1).split(".")
            if current == table:
                section_end = i + 1
            continue
        if ln.lstrip().startswith("["):
            current = ["?"]  # an array-of-tables or a quoted header: not ours
            continue
        if current == table:
            km = key_re.match(ln)
            if km:
                lines[i] = km.group(1) + line
                return "\n".join(lines) + "\n"
            if ln.strip() and not ln.lstrip().startswith("#"):
                section_end = i + 1
    if not table:
        first_header = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("[")), len(lines))
        lines.insert(first_header, line)
    elif section_end is not None:  # the table's header is in the file
        lines.insert(section_end, line)
    else:
        lines += ["", "[" + ".".join(table) + "]", line]
    return "\n".join(lines).lstrip("\n") + "\n"


def template() -> str:
    """The commented config `moss init` writes. It documents the agent's settings, which are
    policy, so it lives with the Lua (scripts/init/config.toml; a user copy overrides it)."""
    from .roots import ScriptRoots

    for root in ScriptRoots(None).roots:
        p = root.path / "init" / "config.toml"
        if p.is_file():
            return p.read_text(encoding="utf-8")
    raise ConfigError("the built-in config template (scripts/init/config.toml) is missing from this install")



GITIGNORE = """\
# Written by `moss init`: keep sessions, logs and snapshots out of git, but version the
# config, the long-term memory and project scripts.
*
!.gitignore
!config.toml
!memory/
!memory/**
!scripts/
!scripts/**
scripts/.luarc.json
"""

"""moss as an MCP client: the servers named in `[mcp.servers.NAME]`, started lazily.

    [mcp.servers.docs]
    command = ["python", "docs_server.py"]   # a stdio server (its `env` added), or
    url = "http://127.0.0.1:9000/mcp"        # a streamable HTTP endpoint
    timeout = 60                             # seconds per call (default 120)
    access = "read-only"                     # only from the USER's config: see below

A server started here runs as the user, outside the sandbox, so using its tools needs access
`full`, unless the user's own config (never a project's) declares the server
`access = "read-only"` and its command or URL came from the user's config too. A project's
`[mcp.servers.*]` command or url needs trust like any command (host/trust/).

One `Client` per server through an anyio blocking portal, so synchronous Lua primitives can
call it; `close()` (run at exit through ctx.services) stops every server. A stdio server gets
a scrubbed environment (host/tools/sandbox.command_env) plus its own `env`, PYTHONSAFEPATH=1
and MOSS_PROJECT_ROOT (the project's root); it starts in a folder of moss's own in the user's
data folder (neutral_folder), never in the project; its stderr goes to
`.moss/agent/mcp/NAME.log`. What a server sends is untrusted: tool names that are not
plain identifiers are left out, descriptions and schemas are sanitised and capped, results are
sanitised like the model's text (ui.sanitize) and capped like every tool output, and every
call has a deadline.
"""

from __future__ import annotations

import json
import re
import threading
import time
import unicodedata
from pathlib import Path
from typing import Any

from ..errors import MossError
from ..tools.caps import cap
from ..tools.sandbox import ACCESS_LEVELS
from ..ui import sanitize

NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
TOOL_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-/]{0,127}$")
CONNECT_TIMEOUT = 30.0
CALL_TIMEOUT = 120.0
MAX_RESULT = 20_000
MAX_DESCRIPTION = 1_000
MAX_SCHEMA = 8_000
MAX_TOOLS = 200
LEVELS = ACCESS_LEVELS  # weakest first, declared once in tools/sandbox.py


def neutral_folder() -> Path:
    """Where stdio servers start: moss's folder in the user's data folder, never the project.

    `python -m x` and `python -c` put their working folder first on sys.path, `npx` and
    `uv run` look for a local node_modules or pyproject.toml from it upwards: started in the
    project, the user's own server would import a repository's `json.py` or run its
    `node_modules/.bin`. The project's root reaches the server as MOSS_PROJECT_ROOT."""
    from ..roots import user_data_dir

    folder = user_data_dir() / "mcp"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return Path("/")  # a home that cannot be written: the root folder is as neutral
    return folder


def clean(text: Any, limit: int = MAX_DESCRIPTION) -> str:
    """Text from a server made safe for a prompt and a terminal: control and format
    characters (escapes, bidi overrides, zero-width) shown as \\uXXXX, capped."""
    text = str(text or "")
    out = "".join(c if c in "\n\t" or unicodedata.category(c) not in ("Cc", "Cf", "Zl", "Zp", "Co", "Cs")
                  else f"\\u{ord(c):04x}" for c in text)
    return out if len(out) <= limit else out[: limit - 1] + "…"


def _depth(value, limit: int = 32) -> bool:
    from ..storage import depth_ok

    return depth_ok(value, limit)


def _schema(raw: Any) -> tuple[dict, str]:
    """(input schema as a table, a one-line summary of its parameters) from whatever a
    server sent: anything that is not a small JSON object becomes {} with a note."""
    if not isinstance(raw, dict):
        return {}, "(no usable schema)"
    try:
        text = json.dumps(raw, ensure_ascii=False)
    except (TypeError, ValueError):
        return {}, "(no usable schema)"
    if len(text) > MAX_SCHEMA or not _depth(raw):
        return {}, f"(schema too large: {len(text):,} characters)"
    props = raw.get("properties")
    required = raw.get("required")
    required = required if isinstance(required, list) else []
    parts = []
    if isinstance(props, dict):
        for name, spec in list(props.items())[:20]:
            kind = spec.get("type") if isinstance(spec, dict) else None
            kind = kind if isinstance(kind, str) else "any"
            parts.append(f'"{clean(name, 40)}"{"" if name in required else "?"}: {clean(kind, 20)}')
    return json.loads(text), "{" + ", ".join(parts) + "}"


def _content_text(result) -> str:
    parts = []
    for block in result.content or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource":
            res = block.resource
            parts.append(getattr(res, "text", None) or f"[resource {getattr(res, 'uri', '')}: binary]")
        elif kind == "resource_link":
            parts.append(f"[resource link {getattr(block, 'uri', '')}]")
        else:
            parts.append(f"[{kind or 'content'}: {getattr(block, 'mime_type', '') or 'not shown'}]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, default=str))
    return "\n".join(str(p) for p in parts)


class Servers:
    """The MCP servers of one moss run (ctx.services["mcp"])."""

    def __init__(self, ctx):
        self.ctx = ctx
        self._portal = None
        self._portal_cm = None
        self._clients: dict[str, tuple] = {}  # name -> (client, context manager, stderr log)
        self._tools: dict[str, list[dict]] = {}
        self._lock = threading.RLock()

    # -- configuration ---------------------------------------------------------------
    def _table(self, cfg) -> dict:
        mcp = cfg.get("mcp") if isinstance(cfg, dict) else None
        servers = mcp.get("servers") if isinstance(mcp, dict) else None
        return servers if isinstance(servers, dict) else {}

    def specs(self) -> dict[str, dict]:
        return {k: v for k, v in self._table(self.ctx.config).items() if isinstance(v, dict)}

    def spec(self, name: str) -> dict:
        if not isinstance(name, str) or not NAME_RE.match(name):
            raise MossError(f"bad MCP server name {clean(name, 80)!r}: letters, digits, '_', '-' and '.'",
                            kind="usage")
        spec = self.specs().get(name)
        if spec is None:
            known = ", ".join(sorted(self.specs())) or "none"
            raise MossError(f"no MCP server {name!r} in [mcp.servers] (configured: {known})", kind="not_found")
        return spec

    def needed(self, name: str) -> str:
        """The access level using this server's tools needs: "read-only" when the user's own
        config says so for a server whose command/url the project did not set; else "full"."""
        user = self._table(self.ctx.user_config).get(name)
        if not isinstance(user, dict) or user.get("access") != "read-only":
            return "full"
        prefix = f"mcp.servers.{name}."
        if any(k.startswith(prefix) and k[len(prefix):].split(".")[0] in ("command", "args", "env", "url", "cwd")
               for k in self.ctx.project_keys):
            return "full"  # the project changed what runs: the user's read-only no longer describes it
        return "read-only"

    def transport(self, spec: dict) -> str | None:
        if spec.get("command") and not spec.get("url"):
            return "stdio"
        if spec.get("url") and not spec.get("command"):
            return "http"
        return None

    def describe(self) -> list[dict]:
        out = []
        for name, spec in sorted(self.specs().items()):
            if not NAME_RE.match(name):
                continue
            t = self.transport(spec)
            row = {"name": name, "transport": t or "unusable", "access": self.needed(name)}
            if t is None:
                row["error"] = self._why_unusable(name, spec)
            if isinstance(spec.get("description"), str):
                row["description"] = clean(spec["description"], 300)
            out.append(row)
        return out

    def _why_unusable(self, name: str, spec: dict) -> str:
        if spec.get("command") and spec.get("url"):
            return f"[mcp.servers.{name}] has both command and url; keep one"
        ignored = [line for line in (self.ctx.trust.ignored if self.ctx.trust else []) if f"mcp.servers.{name}." in line]
        if ignored:
            return f"[mcp.servers.{name}] comes from this project, which is not trusted (`moss trust`)"
        return f"[mcp.servers.{name}] needs command = [...] or url = \"...\""

    def check_access(self, name: str) -> None:
        need = self.needed(name)
        have = self.ctx.access
        if LEVELS.index(have) < LEVELS.index(need):
            raise MossError(
                f"MCP server {name!r} needs access {need} (it runs outside the sandbox); this session has "
                f"{have}. Declare it access = \"read-only\" under [mcp.servers.{name}] in your user config "
                f"(~/.config/moss/config.toml) if its tools only read", kind="denied")

    # -- connections -----------------------------------------------------------------
    def _ensure_portal(self):
        if self._portal is None:
            from anyio.from_thread import start_blocking_portal

            self._portal_cm = start_blocking_portal()
            self._portal = self._portal_cm.__enter__()
        return self._portal

    def _timeout(self, spec: dict, key: str, default: float) -> float:
        v = spec.get(key, default)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
            raise MossError(f"[mcp.servers] {key} must be a number of seconds above 0, got {v!r}", kind="config")
        return float(v)

    def _params(self, name: str, spec: dict):
        from mcp import StdioServerParameters

        from ..llm.providers import key_variables
        from ..tools.sandbox import command_env, setup_from_config

        cmd = spec.get("command")
        if isinstance(cmd, str):
            cmd = [cmd]
        args = spec.get("args") or []
        if not (isinstance(cmd, list) and cmd and all(isinstance(c, str) and c for c in cmd)) or \
                not (isinstance(args, list) and all(isinstance(a, str) for a in args)):
            raise MossError(f"[mcp.servers.{name}] command must be a list of strings, e.g. "
                            f"command = [\"python\", \"server.py\"]", kind="config")
        extra = spec.get("env") or {}
        if not isinstance(extra, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in extra.items()):
            raise MossError(f"[mcp.servers.{name}] env must be a table of strings", kind="config")
        # PYTHONSAFEPATH: a Python 3.11+ server, and every Python it starts, puts neither its working
        # folder nor its script's folder first on sys.path; the server's own `env` may set it to "".
        extra = {"PYTHONSAFEPATH": "1", **extra, "MOSS_PROJECT_ROOT": str(self.ctx.workdir)}
        env = command_env(extra, setup_from_config(self.ctx.user_config, keys=key_variables(self.ctx.config)), sandboxed=False)
        from ..tools.worktree import wait_ready

        wait_ready(self.ctx.workdir, self.ctx.cancelled)  # an isolated child's servers start once its copy is whole, and are told its copy
        return StdioServerParameters(command=cmd[0], args=[*cmd[1:], *args], env=env, cwd=str(neutral_folder()))

    def _log_file(self, name: str):
        from ..storage import agent_dir, open_append

        f = open_append(agent_dir(self.ctx.root) / "mcp" / f"{name}.log")  # never through a planted link
        f.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} moss starts {name}\n")
        f.flush()
        return f

    def client(self, name: str):
        """The connected client for `name`, starting the server on first use."""
        with self._lock:
            if name in self._clients:
                return self._clients[name][0]
            spec = self.spec(name)
            t = self.transport(spec)
            if t is None:
                raise MossError(self._why_unusable(name, spec), kind="config")
            from mcp import Client

            timeout = self._timeout(spec, "connect_timeout", CONNECT_TIMEOUT)
            if t == "stdio":
                from mcp.client.stdio import stdio_client

                errlog = self._log_file(name)
                session = Client(stdio_client(self._params(name, spec), errlog=errlog),
                                 read_timeout_seconds=timeout)
            else:
                url = spec["url"]
                if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                    raise MossError(f"[mcp.servers.{name}] url must be an http(s) URL", kind="config")
                session, errlog = Client(url, read_timeout_seconds=timeout), None
            portal = self._ensure_portal()
            started = time.monotonic()
            cm = portal.wrap_async_context_manager(session)
            try:
                client = cm.__enter__()
            except KeyboardInterrupt:
                raise
            except BaseException as e:
                if errlog:
                    errlog.close()
                raise MossError(f"MCP server {name!r} did not start: {_reason(e)}"
                                + (f" (its stderr: .moss/agent/mcp/{name}.log)" if t == "stdio" else ""),
                                kind="config") from None
            self._clients[name] = (client, cm, errlog)
            self.ctx.log("mcp_start", {"server": name, "transport": t,
                                       "seconds": round(time.monotonic() - started, 3)})
            return client

    # -- the primitives ----------------------------------------------------------------
    def tools(self, name: str) -> list[dict]:
        self.spec(name)
        self.check_access(name)
        if name in self._tools:
            return self._tools[name]
        client = self.client(name)
        try:
            listing = self._ensure_portal().call(client.list_tools)
        except KeyboardInterrupt:
            raise
        except BaseException as e:
            raise MossError(f"MCP server {name!r}: listing its tools failed: {_reason(e)}", kind="config") from None
        out, skipped = [], []
        for tool in listing.tools:
            tname = getattr(tool, "name", "")
            if not isinstance(tname, str) or not TOOL_NAME_RE.match(tname):
                skipped.append(clean(tname, 80))
                continue
            schema, params = _schema(getattr(tool, "input_schema", None))
            out.append({"name": tname, "description": clean(getattr(tool, "description", "") or ""),
                        "input_schema": schema, "params": params})
            if len(out) >= MAX_TOOLS:
                break
        if skipped:
            self.ctx.log("mcp_tools_skipped", {"server": name, "names": skipped[:20], "count": len(skipped)})
        self._tools[name] = out
        return out

    def call(self, name: str, tool: str, args: dict | None, max_chars: int = MAX_RESULT) -> dict:
        spec = self.spec(name)
        self.check_access(name)
        if not isinstance(tool, str) or not TOOL_NAME_RE.match(tool):
            raise MossError(f"bad tool name {clean(tool, 80)!r}", kind="usage")
        if args is None or args == []:
            args = {}
        if not isinstance(args, dict):
            raise MossError("moss.mcp.call: arguments must be a table of named values", kind="usage")
        known = {t["name"] for t in self.tools(name)}
        if tool not in known:
            shown = ", ".join(sorted(known)[:30]) or "none"
            raise MossError(f"MCP server {name!r} has no tool {tool!r} (its tools: {shown})", kind="not_found")
        timeout = self._timeout(spec, "timeout", CALL_TIMEOUT)
        client = self.client(name)
        started = time.monotonic()
        try:
            result = self._ensure_portal().call(_call_with_deadline, client, tool, args, timeout)
        except KeyboardInterrupt:
            raise
        except BaseException as e:
            self.ctx.log("mcp_call", {"server": name, "tool": tool, "ok": False, "error": _reason(e)})
            if _is_timeout(e):  # like a shell command's timeout: a result, not a script deadline
                return {"text": f"MCP {name}/{tool} gave no answer within {timeout:g} s (the call was "
                                f"cancelled; set timeout = N under [mcp.servers.{name}])",
                        "is_error": True, "timed_out": True, "chars": 0}
            raise MossError(f"MCP {name}/{tool} failed: {_reason(e)}", kind="config") from None
        raw = _content_text(result)
        text = sanitize(raw)  # like the model's text: no escape or bidi control reaches a prompt or a terminal
        out = {"text": cap(text, max_chars) if max_chars else text, "is_error": bool(result.is_error),
               "chars": len(raw)}
        self.ctx.log("mcp_call", {"server": name, "tool": tool, "ok": not result.is_error, "chars": len(raw),
                                  "seconds": round(time.monotonic() - started, 3)})
        return out

    def close(self) -> None:
        with self._lock:
            for _client, cm, errlog in list(self._clients.values()):
                try:
                    cm.__exit__(None, None, None)
                except BaseException:
                    pass
                if errlog:
                    try:
                        errlog.close()
                    except Exception:
                        pass
            self._clients.clear()
            self._tools.clear()
            if self._portal_cm is not None:
                try:
                    self._portal_cm.__exit__(None, None, None)
                except BaseException:
                    pass
                self._portal = self._portal_cm = None


async def _call_with_deadline(client, tool: str, args: dict, timeout: float):
    import anyio

    with anyio.fail_after(timeout):
        return await client.call_tool(tool, args, read_timeout_seconds=timeout)


def _is_timeout(e: BaseException) -> bool:
    text = f"{type(e).__name__} {e}".lower()
    return isinstance(e, TimeoutError) or "timeout" in text or "timed out" in text


def _reason(e: BaseException) -> str:
    if isinstance(e, BaseExceptionGroup) and e.exceptions:
        return _reason(e.exceptions[0])
    text = str(e) or type(e).__name__
    return clean(" ".join(text.split()), 300)

"""moss.mcp: tools of the MCP servers in [mcp.servers.NAME] (host/mcp/client.py).

A server runs outside the sandbox, so its tools need access `full` unless the user's own
config declares it `access = "read-only"`; the host enforces that here, for listing (which
starts the server) and for calls."""

from __future__ import annotations

from .registry import primitive


def _servers(ctx):
    svc = ctx.services.get("mcp")
    if svc is None:
        from ..mcp.client import Servers

        svc = ctx.services["mcp"] = Servers(ctx)
    return svc


@primitive
def servers(ctx):
    """{name, transport, access, description?, error?} for each configured server (none started)."""
    mcp = ctx.config.get("mcp") if isinstance(ctx.config, dict) else None
    if not (isinstance(mcp, dict) and mcp.get("servers")):
        return []  # nothing configured: no need to load the MCP client (~15 ms)
    return _servers(ctx).describe()


@primitive
def tools(ctx, server):
    """{name, description, input_schema, params} for each tool of `server` (starts it)."""
    return _servers(ctx).tools(server)


@primitive
def call(ctx, server, tool, args=None, opts=None):
    """Call one tool: {text, is_error, chars}; text capped at max_chars (default 20000)."""
    max_chars = 20_000
    if isinstance(opts, dict) and opts.get("max_chars") is not None:
        max_chars = int(opts["max_chars"])
    return _servers(ctx).call(server, tool, args, max_chars=max_chars)

"""moss.llm: chat with the configured provider; usage, cost and budgets per session."""

from __future__ import annotations

import sys


def _service(ctx):
    svc = ctx.services.get("llm")
    if svc is None:
        from ..errors import ConfigError
        from ..llm import LLM

        if not isinstance(ctx.config.get("llm", {}), dict):
            raise ConfigError("[llm] in the config must be a table, e.g. [llm] provider = \"anthropic\"")

        if ctx.parent_llm is not None:  # a child agent: the tree's budget and clients
            svc = ctx.services["llm"] = ctx.parent_llm.child(on_event=ctx.log)
            return svc
        verbose = bool(ctx.options.get("verbose"))
        stream = _stderr_stream if (verbose or sys.stderr.isatty()) else None
        svc = LLM(ctx.config, ctx.options, env=ctx.env, on_event=ctx.log, stream=stream,
                  project_keys=ctx.project_keys, project_trusted=ctx.project_trusted, announce=_announce)
        ctx.services["llm"] = svc
    return svc


def _announce(text: str) -> None:
    from .. import ui

    ui.console().print(f"[yellow]{ui.escape(text)}[/]")


def _stderr_stream(delta: str) -> None:
    from ..ui import sanitize

    sys.stderr.write(sanitize(delta))  # the model's text must not drive the terminal
    sys.stderr.flush()


def functions(ctx):
    def chat(request):
        if not isinstance(request, dict):
            raise ValueError("moss.llm.chat takes a table: {messages=..., system=..., ...}")
        svc = _service(ctx)
        result = svc.chat(request)
        if svc.stream is not None and result.get("text") and not result.get("text", "").endswith("\n"):
            sys.stderr.write("\n")
        return result

    def usage():
        svc = ctx.services.get("llm")
        if svc is None:
            return {"input_tokens": 0, "output_tokens": 0, "cache_read_tokens": 0, "cache_write_tokens": 0,
                    "cost_usd": 0.0, "calls": 0}
        return svc.usage

    def provider():
        """Resolve the provider now (a local server is looked for when none is configured), so a
        script fails before its first turn rather than in it."""
        p = _service(ctx).provider()
        return {"name": p.name, "model": p.model, "base_url": p.base_url, "is_local": bool(p.local),
                "detected": p.detected}

    def budget():
        svc = ctx.services.get("llm")
        return svc.budget_reason() if svc else None

    return {"llm.chat": chat, "llm.usage": usage, "llm.budget": budget, "llm.provider": provider}

"""What particular models accept, by name (so requests do not fail with a 400)."""

from __future__ import annotations

import re

_CLAUDE = re.compile(r"^claude-(opus|sonnet|haiku|fable|mythos)-(\d+)(?:-(\d{1,2}))?(?:-|$)")
_OPENAI_REASONING = re.compile(r"^(o\d|gpt-([5-9]|\d\d))")


def _base(model: str) -> str:
    return (model or "").lower().rsplit("/", 1)[-1].replace(".", "-")


def is_openai_reasoning(model: str | None) -> bool:
    """o-series and gpt-5 onwards: no temperature, no stop sequences (unless reasoning is off)."""
    return bool(_OPENAI_REASONING.match((model or "").lower().rsplit("/", 1)[-1]))


def rejects_temperature(model: str | None) -> bool:
    """Claude Opus/Sonnet 4.7+, Haiku 5+, Fable, Mythos and OpenAI reasoning models answer a
    non-default temperature with a 400 error."""
    if is_openai_reasoning(model):
        return True
    name = _base(model or "")
    if name.startswith("claude-mythos"):
        return True
    m = _CLAUDE.match(name)
    if not m:
        return False
    if m.group(1) in ("fable", "mythos"):
        return True
    return (int(m.group(2)), int(m.group(3) or 0)) >= (4, 7)

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


# Context windows (input + output, in tokens) of model families moss ships defaults for, by
# name prefix of the bare model name (provider prefix and dots removed, lower case); the
# first match wins. `[llm] context_window` overrides; unknown models get None (no automatic
# compaction unless configured). Local servers are left out on purpose: the window they run
# with is the server's setting (Ollama's num_ctx, llama-server's -c), not the model's.
CONTEXT_WINDOWS: list[tuple[str, int]] = [
    ("claude-", 200_000),             # Claude Opus/Sonnet/Haiku (the 1M beta is opt-in)
    ("gpt-4o", 128_000),
    ("gpt-4-1", 1_047_576),
    ("gpt-5", 400_000), ("gpt-6", 400_000),
    ("o1", 200_000), ("o3", 200_000), ("o4", 200_000),
    ("gpt-oss", 131_072),
    ("gemini-", 1_048_576),
    ("deepseek-", 128_000),
    ("mistral-large", 128_000),
    ("grok-4", 256_000),
    ("llama-3-3", 131_072),
]


def context_window(model: str | None) -> int | None:
    """The context window of a known model (tokens), else None."""
    name = _base(model or "")
    for prefix, size in CONTEXT_WINDOWS:
        if name.startswith(prefix):
            return size
    return None

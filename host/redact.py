"""Credentials out of what moss writes down: session logs keep what happened, not secrets.

Two nets: the values of secret-looking environment variables this process holds (an API
key is caught even when it has no recognisable shape), and the shapes of well-known
credentials (provider keys, tokens, private keys, `password=...` assignments).
"""

from __future__ import annotations

import os
import re

MASK = "[REDACTED]"
_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|AUTH)", re.I)
_SHAPES = re.compile(
    r"""(
        sk-(?:ant-)?[A-Za-z0-9_-]{16,}                 # Anthropic / OpenAI style keys
      | (?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}       # GitHub tokens
      | github_pat_[A-Za-z0-9_]{20,}
      | xox[abprs]-[A-Za-z0-9-]{10,}                   # Slack
      | AKIA[0-9A-Z]{16}                               # AWS access key id
      | AIza[0-9A-Za-z_-]{30,}                         # Google API key
      | glpat-[A-Za-z0-9_-]{20,}                       # GitLab
      | hf_[A-Za-z0-9]{30,}                            # Hugging Face
      | -----BEGIN[ A-Z]*PRIVATE\ KEY-----[\s\S]*?(?:-----END[ A-Z]*PRIVATE\ KEY-----|\Z)
    )""",
    re.X,
)
# `Authorization: Bearer x`, `api_key = "x"`, `PASSWORD=x`, `aws_secret_access_key: x`: keep the
# name, hide the value. The pattern starts at the keyword itself (no open-ended prefix to
# backtrack over) and takes the rest of the name (`_access_key`: at most 6 parts, possessively),
# so it stays linear on long outputs.
_ASSIGNED = re.compile(
    r"""(?P<name>(?:api[_-]?key|token|secret|password|passwd|authorization)(?![a-z])(?:[_-][a-z0-9]{1,24}){0,6}+
            ["']?\s*[:=]\s*(?:bearer\s+)?["']?|bearer\s+)(?P<value>[^\s"',;]{8,})""",
    re.X | re.I,
)


# Substrings every _SHAPES match contains: most text has none, and `in` is far cheaper.
_SHAPE_MARKERS = ("sk-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "xox", "AKIA", "AIza",
                  "glpat-", "hf_", "PRIVATE KEY")


def _env_secrets(env=os.environ) -> list[str]:
    values = {v for k, v in env.items() if _SECRET_NAME.search(k) and len(v) >= 8}
    return sorted(values, key=len, reverse=True)


_known_values: list[str] | None = None


def _known() -> list[str]:
    """The secret values of this process's environment, computed once: moss's environment
    is fixed for its run, and this runs for every log line."""
    global _known_values
    if _known_values is None:
        _known_values = _env_secrets()
    return _known_values


_ASSIGN_WORDS = ("key", "token", "secret", "passw", "authorization", "bearer")
# No _SHAPES or _ASSIGNED match is shorter than this: "token=" and an 8-character value.
_SHORTEST = 14


def text(s: str) -> str:
    """`s` with anything that looks like a credential replaced by [REDACTED]."""
    if len(s) < 8:
        return s  # too short to hold a credential
    for value in _known():
        if value in s:
            s = s.replace(value, MASK)
    if len(s) < _SHORTEST:
        return s  # holds no shape and no assignment (most logged names, states and ids)
    for marker in _SHAPE_MARKERS:  # loops, not any(genexpr): this runs for every logged string
        if marker in s:
            s = _SHAPES.sub(MASK, s)
            break
    low = s.lower()
    for word in _ASSIGN_WORDS:
        if word in low:
            return _ASSIGNED.sub(lambda m: m.group("name") + (MASK if m.group("value") != MASK else m.group("value")),
                                 s)
    return s  # the common case: a quick look says no assignment can match


_PLAIN = (int, float, bool, type(None))


def value(v):
    """Redact every string inside a JSON-like value (dict keys are names, left alone)."""
    t = type(v)
    if t is str:
        return text(v)
    if t in _PLAIN:
        return v
    if t is dict:
        return {k: value(x) for k, x in v.items()}
    if t is list or t is tuple:
        return [value(x) for x in v]
    if isinstance(v, str):
        return text(v)
    if isinstance(v, dict):
        return {k: value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [value(x) for x in v]
    return v

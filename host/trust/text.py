"""What a person is shown of what a project brings: text with its hidden characters written
as escapes, and values as JSON through the same rule (a trust question, a diff, a note)."""

from __future__ import annotations

import json
import unicodedata
from typing import Any


def visible(text: str) -> str:
    """Text with control, format (bidi overrides, zero-width) and line-separator characters
    written as escapes, so what a person is asked to trust reads as what it is."""
    return "".join(f"\\u{ord(c):04x}" if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") else c
                   for c in text)


def visible_json(value: Any) -> str:
    """A value as JSON (non-ASCII kept, keys sorted), shown through `visible`."""
    return visible(json.dumps(value, ensure_ascii=False, sort_keys=True, default=str))

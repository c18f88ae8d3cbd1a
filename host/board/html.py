"""Pages as text, escaped by construction.

A template (``templates/NAME.html``) has ``$name`` / ``${name}`` places (string.Template).
``render`` fills every place with ``esc(value)``, unless the value is ``Html``: markup this
package built, itself from ``render`` or ``tag``. So a value from a log, a checkpoint, a run
record or an eval row can only reach a page escaped; nothing here marks text as safe but
``Html(...)`` around literals and the output of these functions.
"""

from __future__ import annotations

import html
import string
from functools import lru_cache
from importlib import resources


class Html(str):
    """Markup that is safe to put in a page as it is (built here, never text from outside).
    Joined with anything else by `+`, the other side is escaped first: `Html + text` stays
    markup with the text as text."""

    def __add__(self, other) -> "Html":
        return Html(str.__add__(self, esc(other)))

    def __radd__(self, other) -> "Html":
        return Html(str.__add__(esc(other), self))


def esc(value) -> str:
    """Any value as text safe in HTML text and in a double-quoted attribute."""
    if isinstance(value, Html):
        return str(value)
    return html.escape("" if value is None else str(value), quote=True)


@lru_cache(maxsize=None)
def _template(name: str) -> string.Template:
    text = resources.files(__package__).joinpath("templates", name + ".html").read_text(encoding="utf-8")
    return string.Template(text)


def render(name: str, **values) -> Html:
    """Template `name` with every value escaped (Html values as they are)."""
    return Html(_template(name).substitute({k: esc(v) for k, v in values.items()}))


def tag(name: str, text="", **attrs) -> Html:
    """<name attr="...">text</name>, attributes and text escaped; `class_` is `class`."""
    a = "".join(f' {k.rstrip("_").replace("_", "-")}="{esc(v)}"' for k, v in attrs.items() if v is not None)
    return Html(f"<{name}{a}>{esc(text)}</{name}>")


def join(parts) -> Html:
    """Pieces of markup as one (each escaped unless it is Html already)."""
    return Html("".join(esc(p) for p in parts))

"""A scripted model for agent tests: it answers like a model would, from what its context shows.

It knows which state it is in (planner, explorer, evaluator, or the V1 agent) from the label
moss sends with each request (never from prompt wording, which users are invited to edit), and
reads the user message to see the results, then writes $(...) commands. It never
knows the answer in advance: the 13 comes from counting variants in a view it was shown.
"""

from __future__ import annotations

import re

from fakeapi import last_user_text, state_of  # state_of is used by tests too


def _headings() -> dict[str, str]:
    """The context's section titles as the built-in Lua names them (lib/machine/context.lua
    M.HEADINGS): tests find sections by these, never by copying moss's words."""
    from conftest import builtin_lua

    with builtin_lua() as (rt, _root):
        return rt.to_py(rt.execute('return require("lib.machine.context").HEADINGS'))


H = _headings()


def section(text: str, title: str) -> str:
    """The text of one **Title** section of the context, up to the next bold heading."""
    m = re.search(r"\*\*" + re.escape(title) + r"[^*]*\*\*(.*?)(?=\n\*\*[A-Z][^*]*:?\*\*|\Z)", text, re.S)
    return m.group(1) if m else ""


def count_variants(text: str, enum: str) -> int | None:
    m = re.search(r"enum " + enum + r" \{\n(.*?)\n\}", text, re.S)
    if not m:
        return None
    return sum(1 for ln in m.group(1).splitlines() if re.match(r"\s+[A-Z]\w*\s*(\{.*\}|\(.*\))?,\s*$", ln))


def first_struct(text: str) -> str | None:
    m = re.search(r"^(?:pub )?struct (\w+)", text, re.M)
    return m.group(1) if m else None


class Model:
    """Callable reply for FakeAPI: model(body) -> text. Records which state each call was."""

    def __init__(self, question: str = "provider"):
        self.question = question
        self.calls: list[str] = []

    def __call__(self, body) -> str:
        state = state_of(body)
        self.calls.append(state)
        user = last_user_text(body)
        if state == "planner":
            return "1. Find the definition with a text search.\n2. View it and count.\nReady to explore."
        if state == "explorer":
            return self.explore(user, section(user, H["new_results"]))
        if state == "evaluator":
            return self.evaluate(section(user, H["new_results"]) + section(user, H["memory"]))
        seen = section(user, H["new_results"]) + section(user, H["memory"])
        found = self.conclusion(seen)
        if found:
            return f"$(note {found}) $(answer {found})"
        return self.explore(user, seen)

    def explore(self, user: str, last: str) -> str:
        if self.question == "provider":
            hit = re.search(r"^(\S+\.rs):\n\s+\d+ .*enum Provider", last, re.M)
            if hit:
                return f"The enum is in {hit.group(1)}. $(view {hit.group(1)}/Provider)"
            if "view" in last and "Provider" in last:
                return "$(view src/workflow/llm.rs/Provider)"
            return 'I will search for the definition. $(text-search "enum Provider")'
        if self.question == "struct":
            return "$(view src/main.rs)"
        raise AssertionError(self.question)

    def conclusion(self, seen: str) -> str | None:
        if self.question == "provider":
            n = count_variants(seen, "Provider")
            return str(n) if n else None
        if self.question == "struct":
            name = first_struct(seen)
            return name
        return None

    def evaluate(self, seen: str) -> str:
        found = self.conclusion(seen)
        if found:
            return f"$(keep 1) $(note answer is {found}) $(answer {found})"
        if seen.strip():
            return "$(keep 1) This shows where it is but not the definition; we need to see the enum itself."
        return "Nothing useful yet; search for the definition."

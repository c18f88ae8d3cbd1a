"""What the model is shown of a look is compact, and what was left out is one named command away.

Each story runs the real agent (V1, the fake API server, the fixture crate): the model's first
reply looks, the test reads the compact result in the request that follows, finds the command
the result names for what it cut, and the model's second reply runs exactly that command.
"""

from __future__ import annotations

import json
import re

from fakeapi import last_user_text

PY = '''"""Tools for the fixture."""


class Loader:
    """Loads things.

    A long story about loading
    that the model rarely needs
    spread over several lines.
    """

    def load(self, path, *, strict=False):
        """Read one path.

        Strictness: raise on a bad path when strict.
        Otherwise return None.
        """
        if strict and not path:
            raise ValueError(path)
        return path
'''


def run_two_looks(project, api, first, second_from):
    """The model writes `first`, then the command `second_from(result text)` picks, then answers.
    Returns (what it saw after the first look, what it saw after the second)."""
    seen: list[str] = []

    def look_again(body):
        seen.append(last_user_text(body))
        return f"$({second_from(seen[0])})"

    def answer(body):
        seen.append(last_user_text(body))
        return "$(answer done)"

    api.push(f"$({first})", look_again, answer)
    r = project.moss("@agent", "--provider", "anthropic", "--v1", "-n", "--output-format", "json", "look",
                     env=api.env(), timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["answer"] == "done"
    return seen[0], seen[1]


def named(text, pattern):
    m = re.search(pattern, text)
    assert m, f"no {pattern!r} in:\n{text}"
    return m.group(1)


def test_a_skeleton_shows_first_lines_and_full_shows_the_ends_and_docstrings(crate, api):
    """The compact skeleton gives each symbol's first line and no docstring summaries; the
    `--full` view it names shows each symbol's end line and its docstring summary again."""
    crate.write("tools.py", PY)
    compact, full = run_two_looks(crate, api, "view tools.py",
                                  lambda seen: "view tools.py " + named(seen, r"`(--full)`"))
    assert "class Loader L4\n" in compact and "load(path, *, strict=False) L12\n" in compact
    assert "Loads things" not in compact and "L4-20" not in compact
    assert "class Loader L4-20" in full and '"""Loads things."""' in full
    assert "def load(self, path, *, strict=False) L12-20" in full


def test_a_symbols_long_docstring_is_cut_to_its_first_line_and_the_cut_lines_are_named(crate, api):
    """A method's docstring beyond its first line is left out, and the line range the result
    names shows exactly the lines that were cut."""
    crate.write("tools.py", PY)
    compact, cut = run_two_looks(crate, api, "view tools.py/Loader/load",
                                 lambda seen: named(seen, r"cut: (view tools\.py:\d+-\d+)"))
    assert '"""Read one path.' in compact and "raise ValueError(path)" in compact
    assert "Strictness" not in compact
    assert "Strictness: raise on a bad path when strict." in cut and "Otherwise return None." in cut


def test_a_long_hit_list_shows_a_few_hits_a_file_and_the_search_that_lists_the_rest(crate, api):
    """A file with many hits shows the first few, how many more, and the exact search for
    that file; running it lists the hits that were left out."""
    crate.write("many.txt", "".join(f"needle {i}\n" for i in range(1, 21)))
    compact, rest = run_two_looks(crate, api, 'text-search "needle [0-9]+"',
                                  lambda seen: named(seen, r"more here: (text-search .*)"))
    assert "needle 8" in compact and "needle 9\n" not in compact and "… 12 more here" in compact
    assert "needle 9\n" in rest and "needle 20" in rest


def test_a_cli_view_and_search_keep_the_full_form(crate):
    """`moss view` and `moss text-search` on the command line are not the model's view: they
    show end lines, docstrings and every hit's symbol extent as before; `--compact` shows the
    model's form."""
    crate.write("tools.py", PY)
    r = crate.moss("view", "tools.py")
    assert r.returncode == 0, r.stderr
    assert "class Loader L4-20" in r.stdout and '"""Loads things."""' in r.stdout
    r = crate.moss("text-search", "ValueError")
    assert "(Loader/load L12-20)" in r.stdout
    r = crate.moss("view", "tools.py", "--compact")  # the model's form, on request
    assert "class Loader L4\n" in r.stdout and "Loads things" not in r.stdout

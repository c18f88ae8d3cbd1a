"""What moss writes down never holds a credential, even the shortest one a pattern knows:
the redactor skips strings too short to hold any (a speed-up for the thousands of names
and ids a session logs), and these tests pin that shortcut to the patterns."""

from __future__ import annotations

import pytest

from moss import redact

SHORTEST = [
    "token=abcdefgh",          # an assignment: the keyword, '=', eight characters
    "secret:abcdefgh",
    "Bearer abcdefgh",
    "xoxb-abcdefghij",         # Slack
    "sk-abcdefghijklmnop",     # provider keys
    "AKIAABCDEFGHIJKLMNOP",    # AWS
]


@pytest.mark.parametrize("secret", SHORTEST)
def test_the_shortest_credential_of_each_kind_is_redacted(secret):
    assert redact.text(secret) != secret
    assert redact.MASK in redact.text(secret)
    assert redact.value({"out": [secret]}) == {"out": [redact.text(secret)]}


def test_short_plain_strings_pass_unchanged():
    for s in ("explorer", "view a.py", "token=short", "turn_start"):
        assert redact.text(s) == s

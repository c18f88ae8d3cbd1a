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


AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"  # AWS's documented example secret


@pytest.mark.parametrize("line", [
    f"aws_secret_access_key = {AWS_SECRET}",            # ~/.aws/credentials
    f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}",              # an env file, `env` output
    f'aws_secret_access_key = "{AWS_SECRET}"',          # quoted
    f"aws_secret_access_key: '{AWS_SECRET}'",           # YAML
    f'{{"aws_secret_access_key": "{AWS_SECRET}"}}',     # JSON
    f"export AWS_SESSION_TOKEN={AWS_SECRET}",
])
def test_aws_secret_keys_are_redacted_in_every_spelling(line):
    out = redact.text(line)
    assert AWS_SECRET not in out and redact.MASK in out
    assert out.lower().startswith(line[:line.lower().index("aws")].lower() + "aws")  # the name stays readable


def test_words_that_only_begin_with_a_keyword_keep_their_values():
    for s in ("tokenizer = bert-base-uncased", "secretary: JonathanSmith", "passwordless = enabled-for-all"):
        assert redact.text(s) == s

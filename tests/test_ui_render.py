"""What a person reads on stderr: each reply once, markdown rendered on a terminal, plain text
elsewhere, and the way back into an interrupted session."""

from __future__ import annotations

import json


def test_verbose_with_stderr_piped_shows_each_reply_once(project):
    """`moss @agent --verbose ... 2>log`: the model's reply streams into the log once, not
    streamed and then printed again."""
    script = project.root / "answers.json"
    script.write_text(json.dumps(["Let me look around first.\n$(note the crate is small)",
                                  "Now I know.\n$(answer it is small)"]))
    r = project.moss("@agent", "--verbose", "-n", "--provider", "script", "--script", str(script), "how big?")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "it is small\n"
    assert r.stderr.count("Let me look around first.") == 1, r.stderr
    assert r.stderr.count("Now I know.") == 1, r.stderr

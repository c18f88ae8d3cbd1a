"""Shell completion through click's own mechanism (`_MOSS_COMPLETE=bash_source moss`): the
subcommands, and `@NAME` for every runnable script (built-in, user, project)."""

from __future__ import annotations


def complete(project, line: str, shell: str = "bash") -> list[str]:
    words = line.split(" ")
    r = project.moss(env={"_MOSS_COMPLETE": f"{shell}_complete", "COMP_WORDS": line,
                          "COMP_CWORD": str(len(words) - 1)})
    assert r.returncode == 0, r.stderr
    return [ln.split(",", 1)[1] for ln in r.stdout.splitlines() if "," in ln]


def test_bash_source_prints_a_completion_function(project):
    r = project.moss(env={"_MOSS_COMPLETE": "bash_source"})
    assert r.returncode == 0 and "_moss_completion()" in r.stdout and "complete -o" in r.stdout


def test_subcommands_and_scripts_complete(project):
    project.script("deploy-notes", "-- Print the notes.\nprint('x')\n")
    project.user_file("scripts/mine.lua", "print('mine')\n")
    assert complete(project, "moss do") == ["doctor"]
    assert set(complete(project, "moss @")) >= {"@agent", "@deploy-notes", "@mine"}
    assert complete(project, "moss @de") == ["@deploy-notes"]
    everything = complete(project, "moss ")
    assert "doctor" in everything and "trust" in everything and "@agent" in everything
    assert complete(project, "moss sessions ") == ["clean", "list", "show"]

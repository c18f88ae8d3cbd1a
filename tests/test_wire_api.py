"""A third wire API is one module and a registration (host/llm/wire.py, docs/llm.md#wire-apis).

tests/tinywire.py speaks a wire format of its own to its own server; installed the way a
package installs one (a `moss.wire_apis` entry point), a whole `moss @agent` session runs
through it, and moss's retries, usage, log and `moss doctor` work for it as for the two
APIs moss ships. A repository cannot register one.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import tinywire
from tinywire import Cut, Fault, TinyServer

from moss.errors import MossError
from moss.llm import LLM, wire
from moss.llm.providers import resolve_provider

HERE = Path(__file__).resolve().parent


def _install(site: Path, module: str, source: Path) -> None:
    """`module` (a copy of `source`) installed in `site` as a package that registers it under
    its own name in the moss.wire_apis entry point group: what `pip install` leaves."""
    site.mkdir(parents=True, exist_ok=True)
    shutil.copy(source, site / f"{module}.py")
    info = site / f"{module}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[moss.wire_apis]\n{module} = {module}\n")


@pytest.fixture
def tiny():
    with TinyServer() as server:
        yield server


def test_a_session_runs_through_a_wire_api_an_installed_package_registers(project, tiny, tmp_path):
    site = tmp_path / "site"
    _install(site, "tinywire", HERE / "tinywire.py")
    project.user_file("config.toml", f"""
        [llm.providers.tiny]
        api = "tinywire"
        base_url = "{tiny.url}"
        api_key_env = "TINY_KEY"
        model = "tiny-1"
    """)
    tiny.push("$(answer 42)")
    env = {"PYTHONPATH": str(site), "TINY_KEY": "tiny-secret"}
    r = project.moss("@agent", "--provider", "tiny", "--v1", "-n", "--output-format", "json",
                     "What is six times seven?", env=env)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["success"] is True and "42" in str(result["answer"])
    [request] = tiny.requests
    assert request["path"] == "/tiny/generate" and request["headers"]["X-Tiny-Key"] == "tiny-secret"
    body = request["body"]
    assert body["model"] == "tiny-1" and body["system"] and body["limit"] > 0
    assert body["turns"][0][0] == "user" and "What is six times seven?" in body["turns"][0][1]
    events = [json.loads(line) for line in
              (project.root / f".moss/agent/logs/{result['session_id']}.jsonl").read_text().splitlines()]
    [done] = [e for e in events if e["event"] == "llm_response"]
    assert done["provider"] == "tiny" and done["model"] == "tiny-1"
    # the usage the tiny server reported, in its own words, as moss counts it
    assert done["usage"]["input_tokens"] == sum(len(t) for _, t in body["turns"]) // 4
    assert done["usage"]["output_tokens"] == len(tinywire.pieces_of("$(answer 42)"))

    doctor = project.moss("doctor", "--provider", "tiny", env=env)
    assert f"llm\tok\ttiny, model tiny-1 at {tiny.url} answers; model listed" in doctor.stdout, doctor.stdout


def test_a_repository_cannot_register_a_wire_api(project, tmp_path):
    """A repository that ships an installed-looking package at its root (a module and an
    entry point naming it) and a config choosing it: `python -m moss` puts the working
    directory first on the module path, but moss does not look for wire APIs there. The run
    stops with an error naming the wire APIs there are; the repository's module never runs."""
    marker = tmp_path / "ran"
    source = tmp_path / "evil_source.py"
    source.write_text(f"open({str(marker)!r}, 'w').close()\n")
    _install(project.root, "evilwire", source)
    project.write(".moss/config.toml", """
        [llm.providers.anthropic]
        api = "evilwire"
    """)
    r = project.moss("@agent", "--provider", "anthropic", "-n", "hello", env={"ANTHROPIC_API_KEY": "k"})
    assert r.returncode == 2, r.stderr
    assert "unknown wire API 'evilwire': known are anthropic, openai" in r.stderr
    assert not marker.exists()


# -- the same seam in-process: what moss does around any wire API -----------------------------

@pytest.fixture
def registered(monkeypatch):
    """tinywire registered in this process under a name of its own (as a package's entry point
    registers it in another)."""
    monkeypatch.setattr(wire, "_paths", {**wire._paths})
    monkeypatch.setattr(wire, "_wires", {**wire._wires})
    wire.register("tiny-inproc", "tinywire")
    return "tiny-inproc"


def _llm(tiny, api, events, **opts):
    config = {"llm": {"max_retries": 1, "providers": {"tiny": {"api": api, "base_url": tiny.url, "model": "tiny-1"}}}}
    return LLM(config, {"provider": "tiny", **opts}, env={}, on_event=lambda n, f: events.append((n, f)),
               stream=None)


def test_retries_streaming_and_cut_replies_work_for_a_third_wire_api(tiny, registered, monkeypatch):
    monkeypatch.setattr("moss.llm.chat.backoff", lambda _n: 0.0)
    events: list = []
    llm = _llm(tiny, registered, events)
    shown: list[str] = []
    llm.stream = shown.append
    tiny.push(Fault(503), "a reply in pieces")
    out = llm.chat({"messages": [{"role": "user", "content": "hi"}], "label": "agent/act"})
    assert out["text"] == "a reply in pieces" and "".join(shown) == "a reply in pieces" and len(shown) > 1
    assert out["provider"] == "tiny" and out["usage"]["output_tokens"] == len(tinywire.pieces_of(out["text"]))
    retry = [f for n, f in events if n == "llm_retry"]
    assert [(f["reason"], f["status"]) for f in retry] == [("status", 503)]
    assert tiny.requests[-1]["headers"]["X-Moss-Label"] == "agent/act"

    tiny.push(Cut("half a rep"), Cut("half again"))
    with pytest.raises(MossError, match="was cut off before it finished") as e:
        llm.chat({"messages": [{"role": "user", "content": "again"}]})
    assert e.value.kind == "llm" and len(tiny.requests) == 4  # a cut reply is retried once, as a whole


def test_an_unknown_or_broken_wire_api_is_a_config_error_naming_what_there_is(monkeypatch, tmp_path):
    with pytest.raises(MossError) as e:
        resolve_provider({"llm": {"providers": {"w": {"api": "grpc", "base_url": "http://h", "model": "m"}}}},
                         {"provider": "w"}, {})
    assert e.value.kind == "config"
    assert "api = 'grpc': unknown wire API 'grpc': known are anthropic, openai" in e.value.message
    assert "moss.wire_apis" in e.value.message

    monkeypatch.setattr(wire, "_paths", {**wire._paths})
    wire.register("anthropic", "halfwire")  # a name registered twice keeps its first module
    assert wire.get("anthropic").path == "moss.llm.anthropic_client"
    (tmp_path / "halfwire.py").write_text("def make_client(provider, timeout):\n    return None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    wire.register("half", "halfwire")
    with pytest.raises(MossError, match=r"the half wire API \(halfwire\) has no send") as e:
        wire.get("half")
    assert e.value.kind == "config"

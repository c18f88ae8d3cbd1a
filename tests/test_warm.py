"""The SDK client made ahead of the first call (host/llm/warm.py) is handed over only for
exactly the provider, endpoint, key and timeout the call uses, and only once."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time

import pytest
from fakeapi import FakeAPI

from moss.errors import MossError
from moss.llm import LLM, warm
from moss.llm.providers import resolve_provider


@pytest.fixture(autouse=True)
def _own_jobs(monkeypatch):
    """Each test sees only the clients it prepared itself. A client an earlier test in the same
    process prepared and never took stays in warm._jobs (below, the prices test in which no
    call waits does that), and a test that counts what is left over would then fail or pass
    by the order the tests ran in."""
    monkeypatch.setattr(warm, "_jobs", {})


def _provider(key="k-1", url="http://127.0.0.1:9"):
    return resolve_provider({}, {"provider": "anthropic"}, {"ANTHROPIC_API_KEY": key, "ANTHROPIC_BASE_URL": url})


def test_prepared_client_only_for_the_same_key_and_endpoint():
    p = _provider()
    warm.start(p, 300.0)
    assert warm.take(_provider(key="k-2"), 300.0) is None  # another key: never this client
    assert warm.take(_provider(url="http://127.0.0.1:10"), 300.0) is None
    assert warm.take(p, 120.0) is None  # another timeout
    client = warm.take(p, 300.0)
    assert client is not None and client.api_key == "k-1"
    assert warm.take(p, 300.0) is None  # handed over once
    assert warm.settled.is_set()


def test_offline_providers_prepare_nothing():
    script = resolve_provider({}, {"provider": "script"}, {})
    warm.start(script, 300.0)
    assert warm.settled.is_set() and warm.take(script, 300.0) is None


def test_llm_uses_the_client_prepared_for_its_provider():
    env = {"ANTHROPIC_API_KEY": "k-3", "ANTHROPIC_BASE_URL": "http://127.0.0.1:11"}
    llm = LLM({}, {"provider": "anthropic", "timeout": 42}, env=env)
    p = llm.provider()
    llm.prepare(p)
    warm.settled.wait(30)
    client = llm._client(p)
    assert client.api_key == "k-3" and str(client.base_url).startswith("http://127.0.0.1:11")
    assert llm._client(p) is client
    assert not warm._jobs  # the prepared one was taken, none is left over
    llm.prepare(p)  # it exists: nothing more is made
    assert not warm._jobs and warm.settled.is_set()


# -- the prepared client trusts what the SDK's own would --------------------------------------

def _self_signed(tmp_path):
    """(certificate, key) files for 127.0.0.1 that no CA bundle trusts."""
    pytest.importorskip("cryptography")
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "moss test server")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = tmp_path / "server.pem", tmp_path / "server.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_file), str(key_file)


@pytest.mark.parametrize("api", ["anthropic", "openai"])
def test_ssl_cert_file_is_honoured_by_the_prepared_client(api, tmp_path, monkeypatch):
    """An endpoint whose certificate is trusted only through SSL_CERT_FILE answers the first
    call (made with the client prepared in the background); without it, it is refused."""
    cert, key = _self_signed(tmp_path)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    taken = []
    real = warm.take
    monkeypatch.setattr(warm, "take", lambda *a: taken.append(real(*a)) or taken[-1])
    with FakeAPI(tls=(cert, key)) as fake:
        env = {"ANTHROPIC_API_KEY": "k", "OPENAI_API_KEY": "k", "ANTHROPIC_BASE_URL": fake.anthropic_url,
               "OPENAI_BASE_URL": fake.openai_url}

        def first_call(**opts):
            llm = LLM({"llm": {"max_retries": 0}}, {"provider": api, "model": "m", **opts}, env=env)
            p = llm.provider()
            llm.prepare(p)
            return llm, p, llm.chat({"messages": [{"role": "user", "content": "hi"}]})

        monkeypatch.setenv("SSL_CERT_FILE", cert)
        fake.push("hello over TLS")
        llm, p, out = first_call()
        assert out["text"] == "hello over TLS"
        assert taken[-1] is not None and llm._client(p) is taken[-1]  # the prepared one

        monkeypatch.delenv("SSL_CERT_FILE")
        with pytest.raises(MossError) as e:
            first_call(timeout=41)  # another timeout: a new client, made with the default CA bundle
        assert "certificate" in e.value.message.lower()
        assert taken[-1] is not None


# -- genai-prices' preload keeps off the first request's path ----------------------------------

@pytest.fixture
def preload(monkeypatch):
    """A fresh preload (it runs once per process), recording when it imports genai-prices."""
    from moss.llm import pricing

    monkeypatch.setattr(warm, "_awaited", threading.Event())
    monkeypatch.setattr(warm, "_sent", threading.Event())
    monkeypatch.setattr(pricing, "_preload", None)
    started: list[float] = []
    monkeypatch.setattr(pricing, "_genai", lambda: started.append(time.monotonic()))
    yield started
    if pricing._preload is not None:  # done before the next test's fresh preload
        pricing._preload.join(5)


def _slow_client(monkeypatch, seconds=0.3):
    """The prepared client takes a while, so the first call waits for it (as in a fresh process)."""
    from moss.llm import anthropic_client

    make = anthropic_client.make_client
    monkeypatch.setattr(anthropic_client, "make_client", lambda *a: (time.sleep(seconds), make(*a))[1])


def test_prices_load_after_the_first_request_is_sent(api, preload, monkeypatch):
    """The first call waits for its SDK client, then sends at once: loading prices (~0.1 s of
    Python) must not run between the client being ready and the request going out."""
    _slow_client(monkeypatch)
    received: list[float] = []
    api.push(lambda body: received.append(time.monotonic()) or "ok")
    llm = LLM({}, {"provider": "anthropic", "model": "m"}, env=api.env())
    p = llm.provider()
    llm.prepare(p)
    assert llm.chat({"messages": [{"role": "user", "content": "hi"}]})["text"] == "ok"
    assert received and preload and preload[0] > received[0]


def test_prices_load_once_the_sdk_is_ready_when_no_call_waits(api, preload, monkeypatch):
    """A session that sets its provider up and then waits (for the user's task) loads prices
    meanwhile, without a request."""
    _slow_client(monkeypatch, 0.05)
    llm = LLM({}, {"provider": "anthropic", "model": "m"}, env=api.env())
    llm.prepare(llm.provider())
    deadline = time.monotonic() + 10  # (it waits at most 30 s for a request that never comes)
    while not preload and time.monotonic() < deadline:
        time.sleep(0.01)
    assert preload and not api.requests


def test_the_collector_rests_while_the_sdk_imports_and_skips_it_afterwards():
    """The SDK's import makes ~150,000 objects that live as long as the process; the cyclic
    collector walked them again and again meanwhile (~0.1 s of the first request's wait).
    It now rests during the import, runs again afterwards, and leaves those objects out."""
    code = textwrap.dedent("""
        import gc, sys
        from moss.llm import warm
        from moss.llm.providers import resolve_provider
        runs = []
        gc.callbacks.append(lambda phase, info: phase == "stop" and runs.append(info["generation"]))
        p = resolve_provider({}, {"provider": "anthropic"},
                             {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"})
        warm.start(p, 300.0)
        assert warm.take(p, 300.0) is not None and "anthropic" in sys.modules
        print(len(runs), gc.isenabled(), len(gc.get_objects()), gc.get_freeze_count())
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    collections, enabled, walked, left_out = int(out[0]), out[1], int(out[2]), int(out[3])
    assert collections == 0 and enabled == "True"
    assert left_out > 100_000 and walked < left_out / 10


# -- what a zygote makes once for every process it forks ----------------------------------------

@pytest.mark.parametrize("api", ["anthropic", "openai"])
def test_each_sdks_first_replies_are_read_ahead_through_moss_own_send(api, monkeypatch):
    """The warm-up a zygote runs before forking (`_first_response_types`, in zygote.SDKS) is the
    real read of a reply: one plain and one streamed, through the same `send` every call takes,
    served inside the process: it opens no connection (here every connect fails) and carries a
    placeholder key, never the one in the environment. Were the SDK to change what a reply
    looks like, this says so here instead of the warm-up failing quietly in every zygote."""
    import importlib
    import socket

    import httpx2

    from moss import zygote

    def refuse(*_a, **_kw):
        raise AssertionError("the warm-up tried to connect")

    seen = []

    class Recording(httpx2.MockTransport):
        def handle_request(self, request):
            seen.append(request)
            return super().handle_request(request)

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(httpx2, "MockTransport", Recording)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-the-users-own")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-the-users-own")
    mod = importlib.import_module(f"moss.llm.{api}_client")
    assert f"moss.llm.{api}_client:_first_response_types" in zygote.SDKS[api]
    replies = mod._first_response_types()
    assert [r["text"] for r in replies] == ["ok", "ok"]
    assert {r["stop_reason"] for r in replies} == {"end_turn"}
    assert all(r["usage"]["output_tokens"] == 1 for r in replies)
    assert len(seen) == 2 and all(r.url.host == "moss.invalid" for r in seen)
    assert not any("sk-the-users-own" in str(r.headers) for r in seen)
    assert all("warm" in (r.headers.get("x-api-key") or r.headers.get("authorization")) for r in seen)


def test_clients_share_one_tls_context_until_ssl_cert_file_changes(monkeypatch, tmp_path):
    """Reading the CA bundle (~50 ms of CPU) happens once per process, not once per client, and
    again only for another SSL_CERT_FILE or SSL_CERT_DIR (the honoured file itself: above)."""
    import httpx2

    from moss.llm import anthropic_client, openai_client, tls

    made = []
    real = httpx2.create_ssl_context
    monkeypatch.setattr(httpx2, "create_ssl_context", lambda *a, **kw: made.append(1) or real(*a, **kw))
    monkeypatch.setattr(tls, "_made", {})
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    anth = resolve_provider({}, {"provider": "anthropic"}, {"ANTHROPIC_API_KEY": "k"})
    oai = resolve_provider({}, {"provider": "openai"}, {"OPENAI_API_KEY": "k"})
    for _ in range(2):
        anthropic_client.make_client(anth, 30.0).close()
        openai_client.make_client(oai, 30.0).close()
    assert len(made) == 1
    cert, _key = _self_signed(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", cert)
    anthropic_client.make_client(anth, 30.0).close()
    openai_client.make_client(oai, 30.0).close()
    assert len(made) == 2

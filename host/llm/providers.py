"""Provider presets and the rules that pick one (flag, then config, then environment).

Nothing here imports an SDK: resolving a provider is cheap and can run at start-up so a
configuration mistake is reported before any work is done.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Mapping

from ..config import dotted_key
from ..errors import MossError
from . import wire

# api: the wire API that speaks to it (wire.py: "anthropic" Messages, "openai" Chat
# Completions, or one an installed package registers), or one of the offline providers
# (OFFLINE_APIS, cassette.py). key_env None: no key needed (local servers).
# base_url_env: the SDK's own variable, honoured for the two first-party providers.
PRESETS: dict[str, dict] = {
    "anthropic": {"api": "anthropic", "base_url": "https://api.anthropic.com", "key_env": "ANTHROPIC_API_KEY",
                  "base_url_env": "ANTHROPIC_BASE_URL", "model": "claude-sonnet-5-5"},
    "openai": {"api": "openai", "base_url": "https://api.openai.com/v1", "key_env": "OPENAI_API_KEY",
               "base_url_env": "OPENAI_BASE_URL", "model": "gpt-6.2-sol"},
    "ollama": {"api": "openai", "base_url": "http://localhost:11434/v1", "key_env": None, "model": "llama3.2",
               "local": True},
    "llamacpp": {"api": "openai", "base_url": "http://localhost:8080/v1", "key_env": None, "model": "local",
                 "local": True},
    "vllm": {"api": "openai", "base_url": "http://localhost:8000/v1", "key_env": None, "model": None,
             "local": True},
    "lmstudio": {"api": "openai", "base_url": "http://localhost:1234/v1", "key_env": None, "model": None,
                 "local": True},
    "openrouter": {"api": "openai", "base_url": "https://openrouter.ai/api/v1", "key_env": "OPENROUTER_API_KEY",
                   "model": "anthropic/claude-sonnet-5.5"},
    "groq": {"api": "openai", "base_url": "https://api.groq.com/openai/v1", "key_env": "GROQ_API_KEY",
             "model": "openai/gpt-oss-120b"},
    "deepseek": {"api": "openai", "base_url": "https://api.deepseek.com/v1", "key_env": "DEEPSEEK_API_KEY",
                 "model": "deepseek-chat"},
    "together": {"api": "openai", "base_url": "https://api.together.xyz/v1", "key_env": "TOGETHER_API_KEY",
                 "model": "meta-llama/Llama-3.3-70B-Instruct-Turbo"},
    "mistral": {"api": "openai", "base_url": "https://api.mistral.ai/v1", "key_env": "MISTRAL_API_KEY",
                "model": "mistral-large-latest"},
    "xai": {"api": "openai", "base_url": "https://api.x.ai/v1", "key_env": "XAI_API_KEY", "model": "grok-4"},
    "gemini": {"api": "openai", "base_url": "https://generativelanguage.googleapis.com/v1beta/openai/",
               "key_env": "GEMINI_API_KEY", "model": "gemini-3.7-flash"},
    # Offline, deterministic providers (see cassette.py).
    "replay": {"api": "replay", "model": None, "key_env": None, "local": True},
    "script": {"api": "script", "model": None, "key_env": None, "local": True},
}


def key_variables(config: dict | None) -> set[str]:
    """The environment variables that hold LLM keys: every preset's, and any a provider
    section of `config` (merged) names (`api_key_env`, `key_env`). The sandbox keeps each out
    of every command's environment (tools/sandbox.py `setup_from_config`)."""
    names = {p["key_env"] for p in PRESETS.values() if p.get("key_env")}

    def walk(node):
        if isinstance(node, dict):
            for k, v in node.items():
                if k in ("api_key_env", "key_env") and isinstance(v, str):
                    names.add(v)
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    if isinstance(config, dict):
        walk(config.get("llm"))
    return names


OFFLINE_APIS = ("replay", "script")  # answered from a file, without any server

ALIASES = {"claude": "anthropic", "gpt": "openai", "chatgpt": "openai", "google": "gemini",
           "llama.cpp": "llamacpp", "llama-cpp": "llamacpp",
           "lm-studio": "lmstudio", "grok": "xai", "together-ai": "together"}

HOW_TO_CONFIGURE = """\
No LLM provider is configured{tried}. Choose one of:
  1. a flag:         moss @agent --provider anthropic --model claude-sonnet-5-5 "task"
  2. the config file (.moss/config.toml or ~/.config/moss/config.toml):
                     [llm]
                     provider = "anthropic"      # or openai, ollama, openrouter, ...
                     model = "claude-sonnet-5-5"
  3. an environment variable:
                     export ANTHROPIC_API_KEY=...   (or OPENAI_API_KEY=...;
                     ANTHROPIC_BASE_URL / OPENAI_BASE_URL for a local server)
  4. a local server on its usual port, found by itself:
                     ollama serve && ollama pull llama3.2   (or llama.cpp's llama-server,
                     LM Studio, vLLM)"""


_ProviderBase = namedtuple("_ProviderBase",
                           "name api model base_url api_key key_env local max_tokens_param base_url_source detected",
                           defaults=(None, None, None, False, "max_tokens", None, None))


class Provider(_ProviderBase):
    """A resolved provider: name, api (a wire API's name, wire.py, or "replay" | "script"), model,
    base_url, api_key, key_env (the variable the key came from, named in auth errors),
    local (runs on the user's machine: cost 0), max_tokens_param (OpenAI API spelling),
    base_url_source (who chose a base URL other than the preset's: "--base-url",
    "$ANTHROPIC_BASE_URL", "your config", "the project's .moss/config.toml"; None for the
    preset's own endpoint), detected (the server's name, "Ollama", when nothing chose a
    provider and moss found this local server running; see detect.py)."""

    __slots__ = ()

    @property
    def label(self) -> str:
        return f"{self.name} ({self.base_url})" if self.base_url else self.name


def _set(env: Mapping, name: str | None) -> str | None:
    value = env.get(name) if name else None
    return value or None


def _nonempty(value):
    return value if value not in (None, "") else None


def auto_provider(env: Mapping) -> str | None:
    """The first of ANTHROPIC_API_KEY, OPENAI_API_KEY (or their *_BASE_URL) that is set."""
    if _set(env, "ANTHROPIC_API_KEY") or _set(env, "ANTHROPIC_AUTH_TOKEN") or _set(env, "ANTHROPIC_BASE_URL"):
        return "anthropic"
    if _set(env, "OPENAI_API_KEY") or _set(env, "OPENAI_BASE_URL"):
        return "openai"
    return None


def resolve_provider(config: Mapping | None, options: Mapping | None = None, env: Mapping | None = None,
                     provider: str | None = None, model: str | None = None, *,
                     project_keys: frozenset | set = frozenset(), project_trusted: bool = True,
                     detect=None) -> Provider:
    """Pick the provider and model for a call.

    provider/model (a chat{} request's own) win, then options (CLI flags), then the config
    [llm] table, then the environment. Raises MossError(kind="config") with a message
    that says how to fix it.

    project_keys names the config keys that came from the project's .moss/config.toml: an
    API key goes only to the provider's own endpoint or to one the user chose (flag, user
    config, *_BASE_URL), unless the project is trusted (host/trust/), and a project's
    key variable is read only then. The config a script run gets already lacks what an
    untrusted project set; this check holds for any caller.

    detect: when nothing chose a provider, a callable returning the local servers that
    answer (detect.scan); None keeps this function free of network access and raises.
    """
    import os

    env = os.environ if env is None else env
    options = options or {}
    llm_cfg = (config or {}).get("llm") or {}
    cfg_provider = _nonempty(llm_cfg.get("provider"))
    explicit = (_nonempty(provider) or _nonempty(options.get("provider"))) is not None
    name = _provider_name(provider, options, cfg_provider, env)
    if name is None:
        wanted = _nonempty(model) or _nonempty(options.get("model")) or _nonempty(llm_cfg.get("model"))
        return _local(detect, wanted)
    name = ALIASES.get(name.lower(), name.lower())

    overrides = dict((llm_cfg.get("providers") or {}).get(name) or {})
    from_project = {k for k in ("base_url", "api_key_env")
                    if dotted_key(("llm", "providers", name, k)) in project_keys}
    if not project_trusted:
        for k in from_project:
            overrides.pop(k, None)
    if name not in PRESETS and not overrides:
        known = ", ".join(sorted(PRESETS))
        raise MossError(f"unknown LLM provider {name!r}. Known: {known}; or define it in the config:\n"
                        f'  [llm.providers.{name}]\n  base_url = "http://host:port/v1"\n'
                        f'  api_key_env = "MY_KEY"   # omit for a server without a key\n  model = "model-name"',
                        kind="config")
    preset = {**PRESETS.get(name, {"api": "openai", "key_env": None, "model": None}), **_renamed(overrides)}

    # The model: the call's, the flag's, the config's (when it is about this provider), the preset's.
    cfg_model = _nonempty(llm_cfg.get("model"))
    if cfg_model and explicit and cfg_provider and ALIASES.get(cfg_provider, cfg_provider) != name:
        cfg_model = None  # [llm] model belongs to another provider than the one asked for
    chosen_model = (_nonempty(model) or _nonempty(options.get("model")) or cfg_model or _nonempty(preset.get("model")))
    api = preset.get("api", "openai")
    if api in OFFLINE_APIS:
        return Provider(name=name, api=api, model=chosen_model, local=True)
    if not chosen_model:
        raise MossError(f"provider {name!r} has no default model: pass --model NAME or set\n"
                        f'  [llm.providers.{name}]\n  model = "served-model-name"', kind="config")

    base_url, source = _base_url(name, preset, overrides, from_project, options, provider, env)
    key_env = preset.get("key_env")
    api_key = _api_key(name, key_env, base_url, overrides, env)
    return Provider(name=name, api=api, model=chosen_model, base_url=base_url, api_key=api_key,
                    key_env=key_env, local=bool(preset.get("local")),
                    max_tokens_param=preset.get("max_tokens_param") or max_tokens_param(base_url),
                    base_url_source=source)


def _provider_name(provider: str | None, options: Mapping, cfg_provider: str | None, env: Mapping) -> str | None:
    """The provider asked for: the call's, the flag's, replay's or a script's, the config's, the
    environment's keys'; None when nothing chose one."""
    name = _nonempty(provider) or _nonempty(options.get("provider"))
    if name is not None:
        return name
    if _nonempty(options.get("replay")):
        return "replay"
    if _nonempty(options.get("script")):
        return "script"
    return cfg_provider or auto_provider(env)


def _base_url(name: str, preset: dict, overrides: dict, from_project: set, options: Mapping,
              provider: str | None, env: Mapping) -> tuple[str, str | None]:
    """The endpoint and who chose it (None: the provider's own): --base-url (unless the call
    named its provider), the config, the preset's *_BASE_URL variable, the preset."""
    base_url, source = None, None
    if _nonempty(options.get("base_url")) and not _nonempty(provider):
        base_url, source = options["base_url"], "--base-url"
    elif _nonempty(overrides.get("base_url")):
        base_url = overrides["base_url"]
        source = "the project's .moss/config.toml" if "base_url" in from_project else "your config"
    elif _set(env, preset.get("base_url_env")):
        base_url, source = _set(env, preset["base_url_env"]), "$" + preset["base_url_env"]
    else:
        base_url = preset.get("base_url")
    if base_url == PRESETS.get(name, {}).get("base_url"):
        source = None  # the provider's own endpoint, however it was named
    if not base_url:
        raise MossError(f"provider {name!r} has no base_url: set [llm.providers.{name}] base_url", kind="config")
    return base_url, source


def _api_key(name: str, key_env: str | None, base_url: str, overrides: dict, env: Mapping) -> str:
    """The key from the preset's variable; "no-key" for a server of one's own that needs none."""
    api_key = _set(env, key_env)
    if name == "anthropic" and not api_key and key_env == "ANTHROPIC_API_KEY":
        api_key = _set(env, "ANTHROPIC_AUTH_TOKEN")
    if api_key:
        return api_key
    # A server of one's own (a base URL other than the preset's) may need no key,
    # unless the config names a key variable for it explicitly.
    own_server = base_url != PRESETS.get(name, {}).get("base_url") and "api_key_env" not in overrides
    if key_env and not own_server:
        raise MossError(f"provider {name!r} needs an API key: {key_env} is not set.\n"
                        f"  export {key_env}=...   (or pick another provider with --provider)",
                        kind="config")
    return "no-key"  # local or self-hosted server: the SDKs insist on some key


def max_tokens_param(base_url: str | None) -> str:
    """How a Chat Completions endpoint spells the reply limit: OpenAI's own API wants
    `max_completion_tokens` (its reasoning models refuse `max_tokens`); every other
    OpenAI-compatible server (llama.cpp, Ollama, vLLM, LM Studio, OpenRouter, ...) knows
    only `max_tokens` and ignores the other. `[llm.providers.NAME] max_tokens_param` overrides."""
    from urllib.parse import urlsplit

    host = (urlsplit(base_url or "").hostname or "").lower()
    return "max_completion_tokens" if host == "api.openai.com" else "max_tokens"


def _local(detect, wanted: str | None) -> Provider:
    """The local server detection found (see detect.py), or the error that says what was tried."""
    from . import detect as detect_mod

    if detect is None:
        raise MossError(HOW_TO_CONFIGURE.format(tried=""), kind="config")
    found = detect()
    picked = detect_mod.choose(found, wanted)
    if picked is None:
        if found:
            f = found[0]
            hint = "ollama pull llama3.2" if f.name == "ollama" else "load a model in it"
            raise MossError(f"{f.label} answers at {f.base_url} but serves no model: {hint}, or pass "
                            f"--model NAME", kind="config")
        tried = ", and no local server answered on " + detect_mod.tried_text()
        raise MossError(HOW_TO_CONFIGURE.format(tried=tried), kind="config")
    server, chosen = picked
    return Provider(name=server.name, api="openai", model=chosen, base_url=server.base_url, api_key="no-key",
                    key_env=None, local=True, max_tokens_param="max_tokens", detected=server.label)


def _renamed(overrides: Mapping) -> dict:
    """Config spells the key variable `api_key_env`; presets call it `key_env`."""
    out = {k: v for k, v in overrides.items() if k in ("api", "base_url", "model", "local", "max_tokens_param")}
    if "api_key_env" in overrides:
        out["key_env"] = overrides["api_key_env"] or None
    if out.get("api") is not None and not wire.known(out["api"]):
        raise MossError(f"[llm.providers] api = {out['api']!r}: {wire.unknown_message(out['api'])}",
                        kind="config")
    return out

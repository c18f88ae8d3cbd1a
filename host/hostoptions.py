"""The options the host itself understands among any script's words (`--provider`, `--max-cost`,
`--trust`, ...): they configure mechanism (which LLM, budgets, limits) for every script alike.

The script runner (host/run.py) takes them out of a script's words; so does whoever must know
before an agent starts what it will use (an eval's zygote preloads the SDK of its attempts'
provider: host/eval/executors.py), without reaching up to the runner. Each is a field of `moss.Options` in host/api/declarations.lua
(tests/test_api_docs.py).
"""

from __future__ import annotations

from .errors import MossError

# Anywhere among a script's arguments (before `--`).
HOST_OPTIONS = {
    "--provider": "provider",
    "--model": "model",
    "--record": "record",
    "--replay": "replay",
    "--script": "script",
    "--max-cost": "max_cost",
    "--max-tokens": "max_tokens",
    "--memory-mb": "memory_mb",
    "--timeout": "timeout",
    "--seed": "seed",
    "--base-url": "base_url",
    "--input-format": "input_format",
    "--entry": "entry",
}
HOST_FLAGS = {"--verbose": "verbose", "--allow-full": "allow_full", "--trust": "trust",
              "--include-partial": "include_partial"}
NUMERIC = {"max_cost": float, "max_tokens": int, "memory_mb": int, "timeout": float, "seed": int}

HOST_OPTIONS_HELP = """\
Host options (any script):
  --provider NAME      LLM provider (anthropic, openai, ollama, ..., replay, script)
  --model NAME         model name
  --record FILE        append every LLM request/response to a JSONL cassette
  --replay FILE        with --provider replay: answer from a cassette
  --script FILE        with --provider script: answer a list of responses in order
  --max-cost USD       end cleanly once this much was spent
  --max-tokens N       end cleanly once this many tokens were used
  --memory-mb N        Lua memory cap (default 256)
  --timeout SECONDS    LLM request timeout
  --base-url URL       send the LLM requests (and your key) to this endpoint instead
  --seed N             seed Lua's math.random (--record, replay and script use 0)
  --allow-full         permit the unrestricted `full` tool access level
  --trust              trust this project's .moss/ (scripts, commands, endpoints) for
                       this run only, e.g. in CI for a checkout you vouch for
  --verbose            stream model output and show more detail
  --entry NAME         call the script's entry NAME (a function of the table it returns)
                       with the words instead of main (docs/agent.md: the entry points)
  --input-format F     stream-json: read {"type":"user"|"control"|"answer",...} lines on stdin
                       (messages, pause/stop/resume, answers to questions) while the agent works
  --include-partial    also write the model's text as it streams, as {"type": "partial"}
                       lines on stdout (with --output-format stream-json; docs/events.md)"""


def split_host_options(args: list[str]) -> tuple[dict, list[str]]:
    """Pull host options out of a script's words; everything else stays for the script."""
    options: dict = {}
    rest: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--":
            rest.extend(args[i:])
            break
        name, eq, inline = word.partition("=")
        if name in HOST_FLAGS and not eq:
            options[HOST_FLAGS[name]] = True
        elif name in HOST_OPTIONS:
            key = HOST_OPTIONS[name]
            if eq:
                value = inline
            elif i + 1 < len(args):
                i += 1
                value = args[i]
            else:
                raise MossError(f"{name} needs a value", kind="usage")
            if key in NUMERIC:
                try:
                    value = NUMERIC[key](value)
                except ValueError:
                    raise MossError(f"{name} expects a number, got {value!r}", kind="usage") from None
            options[key] = value
        else:
            rest.append(word)
        i += 1
    if options.get("entry") is not None:
        from .entries import check_name

        check_name(options["entry"], "--entry")
    if options.get("input_format") not in (None, "text", "stream-json"):
        raise MossError(f"--input-format must be text or stream-json, got {options['input_format']!r}",
                        kind="usage")
    return options, rest

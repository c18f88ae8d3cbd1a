"""Runs in the peers' venv: count tokens with tiktoken's o200k_base, offline.

stdin: {"texts": [...]}; stdout: {"encoding": "o200k_base", "counts": [...]}.
litellm (a mini-swe-agent dependency) ships tiktoken's encoding files; pointing
TIKTOKEN_CACHE_DIR at them avoids any download.
"""

import importlib.util
import json
import os
import sys

spec = importlib.util.find_spec("litellm")
if spec and spec.submodule_search_locations and "TIKTOKEN_CACHE_DIR" not in os.environ:
    os.environ["TIKTOKEN_CACHE_DIR"] = os.path.join(spec.submodule_search_locations[0], "litellm_core_utils",
                                                    "tokenizers")
import tiktoken  # noqa: E402

enc = tiktoken.get_encoding("o200k_base")
texts = json.load(sys.stdin)["texts"]
counts = [len(enc.encode(t, disallowed_special=())) for t in texts]
print(json.dumps({"encoding": "o200k_base", "counts": counts}))

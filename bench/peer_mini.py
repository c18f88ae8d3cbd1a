"""Runs in the peers' venv: drive mini-swe-agent with its own DeterministicModel.

stdin (JSON):
  config       "textbased" (mini_textbased.yaml) or "default" (mini.yaml: tool calls)
  task         the task text
  cwd          where the shell commands run (the stdlib copy)
  steps        [{"thought": ..., "command": ...}] one per model turn
  answer       the final answer (submitted with mini's COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT)
  trajectory   a path: mini saves its trajectory there after every step, as the `mini`
               command does by default (null: no saving)
  path_prepend a directory put first on PATH (for the same-outputs control: moss's CLI)

stdout (one JSON line):
  messages     [{"role", "content"}] the final history (what the API would be sent, in order)
  calls        for each model call, how many messages of that history it was sent
  extra_prompt text sent with every request besides the messages (the bash tool schema for
               the tool-call config), or ""
  exit_status, submission, elapsed (seconds inside agent.run), import_s
"""

import json
import os
import sys
import time

t_import = time.perf_counter()
from pathlib import Path  # noqa: E402

import yaml  # noqa: E402
from minisweagent.agents.default import DefaultAgent  # noqa: E402
from minisweagent.config import builtin_config_dir  # noqa: E402
from minisweagent.environments.local import LocalEnvironment  # noqa: E402
from minisweagent.models.test_models import DeterministicModel, make_output  # noqa: E402

import_s = time.perf_counter() - t_import


def main() -> None:
    req = json.load(sys.stdin)
    textbased = req.get("config", "textbased") == "textbased"
    cfg = yaml.safe_load((builtin_config_dir / ("mini_textbased.yaml" if textbased else "mini.yaml")).read_text())
    agent_cfg = {k: v for k, v in cfg["agent"].items() if k in ("system_template", "instance_template")}
    env_cfg = dict(cfg.get("environment", {}))
    env_vars = dict(env_cfg.get("env") or {})
    if req.get("path_prepend"):
        env_vars["PATH"] = req["path_prepend"] + os.pathsep + os.environ.get("PATH", "")
    extra_prompt = ""
    if not textbased:
        from minisweagent.models.utils.actions_toolcall import BASH_TOOL

        extra_prompt = json.dumps([BASH_TOOL])

    def reply(thought: str, command: str) -> dict:
        if textbased:
            content = f"THOUGHT: {thought}\n\n```mswea_bash_command\n{command}\n```"
        else:  # tool calls: the command travels as the tool call's JSON arguments
            content = thought + "\n" + json.dumps({"command": command})
        return make_output(content, [{"command": command}], cost=0.0)

    outputs = [reply(s["thought"], s["command"]) for s in req["steps"]]
    answer = req.get("answer", "done").replace("'", "")
    outputs.append(reply("I have what I need; submitting the answer.",
                         f"printf '%s\\n' COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT '{answer}'"))

    calls: list[int] = []

    class Recording(DeterministicModel):
        def query(self, messages, **kwargs):
            calls.append(len(messages))
            return super().query(messages, **kwargs)

    model = Recording(outputs=outputs, observation_template=cfg["model"]["observation_template"], cost_per_call=0.0)
    env = LocalEnvironment(cwd=req["cwd"], env=env_vars, timeout=60)
    traj = req.get("trajectory")
    agent = DefaultAgent(model, env, **agent_cfg, step_limit=0, cost_limit=0,
                         output_path=Path(traj) if traj else None)
    t0 = time.perf_counter()
    result = agent.run(req["task"])
    elapsed = time.perf_counter() - t0
    messages = [{"role": m.get("role"), "content": m.get("content") or ""} for m in agent.messages]
    print(json.dumps({"messages": messages, "calls": calls, "extra_prompt": extra_prompt,
                      "exit_status": result.get("exit_status"), "submission": result.get("submission", ""),
                      "elapsed": elapsed, "import_s": import_s}))


if __name__ == "__main__":
    main()

"""moss.runs: background runs (long commands under the session's access level) and their alerts.

Mechanism only (see moss.tools.runs): start, list, stop, log tails, an event queue to wait
on, and alert rules checked on every new log line. What to run, when, and what to do about
an alert is policy (the Wild Loop in scripts/machines/wild.lua is one).
"""

from __future__ import annotations

from ..errors import MossError
from .registry import primitive
from ..storage import ensure_dir

START_KEYS = {"cmd", "name", "workdir", "alerts", "detach", "timeout", "meta", "env", "executor", "address",
              "resources", "results"}
ALERT_KEYS = {"severity", "message", "choices", "source"}


def manager(ctx):
    """This run's RunManager (`ctx.services["runs"]`), made on first use."""
    m = ctx.services.get("runs")
    if m is None:
        cfg = ctx.config.get("runs") or {}
        from ..tools.runs import RunManager

        from .shell import report_git

        m = RunManager(ctx.root, max_parallel=int(cfg.get("max_parallel") or 0), log=ctx.log,
                       prepare_dir=ensure_dir,
                       report=lambda notes, data: report_git(ctx, "runs", notes, log=False, **data))
        ctx.services["runs"] = m  # closed (attached runs stopped) when the script ends
    return m


@primitive
def start(ctx, spec):
    from ..llm.providers import key_variables
    from ..tools.sandbox import setup_from_config

    if ctx.workdir != ctx.root:
        raise MossError("moss.runs.start: an isolated child cannot start background runs (a run outlives the "
                        "session, its copy of the tree does not); run the command with moss.shell.run",
                        kind="denied")
    if isinstance(spec, str):
        spec = {"cmd": spec}
    if not isinstance(spec, dict):
        raise MossError("moss.runs.start expects {cmd=, name=, workdir=, alerts=, detach=, timeout=, "
                        "meta=, env=, executor=, address=, resources=, results=}", kind="usage")
    unknown = sorted(set(spec) - START_KEYS)
    if unknown:
        raise MossError(f"moss.runs.start: unknown field(s) {', '.join(map(str, unknown))}; known: "
                        + ", ".join(sorted(START_KEYS)), kind="usage")
    alerts = spec.get("alerts")
    if alerts is not None and not isinstance(alerts, list):
        alerts = [alerts]
    env = spec.get("env")
    if env is not None and not isinstance(env, dict):
        if env == []:
            env = {}
        else:
            raise MossError("moss.runs.start: env must be a table of NAME = value", kind="usage")
    return manager(ctx).start(
        spec.get("cmd"),
        access=ctx.access,
        allow_full=ctx.allow_full,
        unsandboxed_ok=ctx.unsandboxed_ok,
        name=spec.get("name"),
        workdir=spec.get("workdir"),
        alerts=alerts,
        detach=bool(spec.get("detach")),
        timeout=spec.get("timeout"),
        meta=spec.get("meta"),
        env=env,
        setup=setup_from_config(ctx.user_config, keys=key_variables(ctx.config)),
        executor=spec.get("executor") or "local",
        address=spec.get("address"),
        resources=spec.get("resources") if isinstance(spec.get("resources"), dict) else None,
        results=spec.get("results"),
    )


@primitive
def list_(ctx):
    return manager(ctx).list()


@primitive
def status(ctx, run_id):
    return manager(ctx).status(run_id)


@primitive
def log_tail(ctx, run_id, chars=None):
    return manager(ctx).log_tail(run_id, 2000 if chars is None else int(chars))


@primitive
def stop(ctx, run_id):
    return manager(ctx).stop(run_id)


@primitive
def wait(ctx, timeout=None):
    if timeout is not None and not isinstance(timeout, (int, float)):
        raise MossError("moss.runs.wait(timeout): timeout is a number of seconds (or nil)", kind="usage")
    said = {"stop": False}

    def cancel():  # Ctrl-C, or the user asked the session to stop or pause (moss.inbox)
        if ctx.cancelled():
            return True
        said["stop"] = ctx.user_interrupt()
        return said["stop"]

    try:
        return manager(ctx).wait(timeout, cancel=cancel)
    except MossError:
        if said["stop"]:
            raise MossError("stopped by the user while waiting for runs", kind="stopped") from None
        raise


@primitive
def alerts(ctx, filter_=None):
    f = filter_ if isinstance(filter_, dict) else {}
    return manager(ctx).alerts(status=f.get("status"), run_id=f.get("run_id"))


@primitive
def resolve(ctx, alert_id, choice):
    return manager(ctx).resolve(alert_id, choice)


@primitive
def alert(ctx, run_id, spec=None):
    if isinstance(spec, str):
        spec = {"message": spec}
    if not isinstance(spec, dict):
        raise MossError("moss.runs.alert(run_id, {message=, severity=, choices=, source=})", kind="usage")
    unknown = sorted(set(spec) - ALERT_KEYS)
    if unknown:
        raise MossError(f"moss.runs.alert: unknown field(s) {', '.join(map(str, unknown))}; known: "
                        + ", ".join(sorted(ALERT_KEYS)), kind="usage")
    choices = spec.get("choices")
    if choices is not None and not isinstance(choices, list):
        choices = [choices]
    return manager(ctx).alert(run_id, spec.get("message"), severity=spec.get("severity") or "warning",
                           choices=choices, source=spec.get("source") or "script")

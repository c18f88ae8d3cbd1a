"""`moss eval`: run a suite of tasks across a matrix of cells and say how often the agent succeeded.

The host's half is mechanism, one job per module: ``copies`` (an attempt's fresh copy of a
task's repository with its own ``.moss/``), ``attempt`` (one attempt: the pre-check, the
agent as a subprocess, the check), ``executors`` (how attempts are carried out, chosen by
name: ``local`` here; a cluster plugs in beside it), ``runner`` (attempts in parallel under one
budget, stopped cleanly), ``session`` (one eval run as ``moss.eval``
drives it), ``results`` (the JSONL file, resume, the statistics), ``progress`` (what a person
sees while it runs), ``suite`` (moss's TOML suites: loading, answers, reference solutions) and
``exercises`` (the exercise-directory layout of public polyglot benchmarks). What an attempt is, what counts as a pass and how the
summary reads is policy: ``scripts/eval.lua``, through ``moss.eval`` (host/api/eval.py).
"""

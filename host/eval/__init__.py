"""Mechanism for `moss eval`: loading suites (suite.py: moss's TOML format; exercises.py: the
exercise-directory layout), comparing answers and applying reference solutions. What counts
as a pass, and how a suite becomes attempts, is Lua policy."""

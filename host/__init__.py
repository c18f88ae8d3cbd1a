"""moss: a coding-agent host whose agent is a Lua program."""

__version__ = "0.1.0"

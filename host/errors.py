"""Errors that carry a message a person can act on.

Every host primitive raises MossError (or a subclass) for anything the user or a script
can fix. The runtime turns it into an ordinary Lua error string; the CLI turns it into an
exit status. `kind` is a short stable word scripts may branch on.
"""


class MossError(Exception):
    """A failure with a readable message and a stable `kind`.

    The kinds, each with its meaning, are `moss.ErrorKind` in host/api/declarations.lua; a
    new kind goes there first (tests/test_api_docs.py fails on one raised but not declared).
    """

    def __init__(self, message: str, kind: str = "error", **data):
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.data = data

    def __str__(self) -> str:
        return self.message


# The exit statuses of the contract, and which error kinds are the user's to fix (exit 2).
EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_BLOCKED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
USER_KINDS = frozenset({"usage", "config", "not_found", "ambiguous", "denied"})


def exit_status(kind: str) -> int:
    """The exit status for an error of `kind`: 2 for usage and configuration problems, else 1."""
    return EXIT_USAGE if kind in USER_KINDS else EXIT_FAIL


class ConfigError(MossError):
    def __init__(self, message: str, **data):
        super().__init__(message, kind="config", **data)


class UsageError(MossError):
    def __init__(self, message: str, **data):
        super().__init__(message, kind="usage", **data)

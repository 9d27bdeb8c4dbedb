"""Errors that portcheck reports to the user as a message and an exit status, never a traceback."""


class UsageError(Exception):
    """Bad input from the user (a flag, a file, a name): exit status 2, nothing written."""

    exit_code = 2

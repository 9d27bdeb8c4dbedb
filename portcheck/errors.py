"""Errors that portcheck reports to the user as a message and an exit status, never a traceback."""


class UsageError(Exception):
    """Bad input from the user (a flag, a file, a name): exit status 2, nothing written."""

    exit_code = 2


def type_names(types) -> str:
    """What a usage error says a value must be: 'an int', 'a float or int' (the types' names)."""
    names = " or ".join(t.__name__ for t in types)
    return ("an " if names[:1] in "aeiou" else "a ") + names

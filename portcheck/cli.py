"""`portcheck <command>`: each command lives in portcheck/commands/<name>.py.

A command module defines NAME, HELP, `add_arguments(parser)` and `main(args) -> int`. Bad input
raises UsageError, printed as one line with exit status 2, never a traceback.
"""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from . import commands
from .errors import UsageError
from .workers import keep_bytecode


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's own usage errors: exit 2 with the usage line
        self.print_usage(sys.stderr)
        raise UsageError(message)


def _command_modules():
    for mod in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if not mod.name.startswith("_"):
            yield importlib.import_module(f"{commands.__name__}.{mod.name}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="portcheck", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for mod in _command_modules():
        p = sub.add_parser(mod.NAME, help=getattr(mod, "HELP", None) or argparse.SUPPRESS,
                           description=getattr(mod, "HELP", None))
        mod.add_arguments(p)
        p.set_defaults(_main=mod.main)
    return parser


def main(argv: list[str] | None = None) -> int:
    keep_bytecode()   # before the commands' imports
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if not getattr(args, "_main", None):
            parser.print_help(sys.stderr)
            return 2
        return args._main(args)
    except UsageError as exc:
        print(f"portcheck: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("portcheck: interrupted", file=sys.stderr)
        return 130

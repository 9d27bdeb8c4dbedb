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


DESCRIPTION = ("check Triton kernels against float64 oracles on NVIDIA, AMD and the CPU interpreter, "
               "and report accuracy and speed per architecture")


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        """argparse's own usage errors: one line like every other, naming the command and its help
        (argparse would print the whole multi-line usage block first)."""
        raise UsageError(f"{message} (see '{self.prog} --help')")


def _command_modules():
    for mod in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if not mod.name.startswith("_"):
            yield importlib.import_module(f"{commands.__name__}.{mod.name}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="portcheck", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for mod in _command_modules():
        p = sub.add_parser(mod.NAME, help=getattr(mod, "HELP", None) or argparse.SUPPRESS,
                           description=getattr(mod, "HELP", None))
        mod.add_arguments(p)
        p.set_defaults(_main=mod.main, _parser=p)
    return parser


def _parse(parser: argparse.ArgumentParser, argv):
    """parse_args, but an argument no command knows is blamed on the command it was given to
    (argparse's top-level parser would report it under `portcheck` with the top usage)."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        getattr(args, "_parser", parser).error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def main(argv: list[str] | None = None) -> int:
    keep_bytecode()   # before the commands' imports
    parser = build_parser()
    try:
        args = _parse(parser, argv)
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

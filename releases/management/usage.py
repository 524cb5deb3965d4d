"""Exit codes of the commands a pipeline runs (`verdict`, `backtest`), as the CI client's: a
usage error is 64 (BSD's EX_USAGE), said in one line without a traceback (issue 37).

Django parses a command's arguments outside the `try` that turns a `CommandError` into a
message and an exit status, so an unknown option raised through it showed a traceback and
exited 1, which for `verdict` means "at or above the bar".
"""

from __future__ import annotations

import sys
from typing import Any, NoReturn

from django.core.management.base import BaseCommand, CommandError, CommandParser

USAGE = 64


def usage_error(message: str) -> NoReturn:
    # argparse would exit 2, which for `verdict` means "waits for a person".
    raise CommandError(f"Error: {message}", returncode=USAGE)


class UsageCommand(BaseCommand):
    """A command whose usage errors, the arguments' included, exit 64 with one line."""

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.error = usage_error  # type: ignore[method-assign]
        return parser

    def run_from_argv(self, argv: list[str]) -> None:
        try:
            super().run_from_argv(argv)
        except CommandError as error:
            # Raised while the arguments were read, where Django does not catch it.
            self.stderr.write(f"{argv[1] if len(argv) > 1 else 'manage.py'}: {error}")
            self.stderr.write("Run with --help for the usage.")
            sys.exit(error.returncode)

#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

from __future__ import annotations

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "detective_site.settings")
    from django.core.management import execute_from_command_line
    from django.db import OperationalError

    from detective_site.config import ConfigError, prepare_up_environment

    prepare_up_environment(sys.argv, os.environ)
    try:
        execute_from_command_line(sys.argv)
    except ConfigError as exc:
        sys.exit(f"error: {exc}")
    except OperationalError as exc:
        # A database that does not answer is a set-up problem, not a bug: one line, unless
        # the traceback is asked for.
        if "--traceback" in sys.argv:
            raise
        lines = str(exc).strip().splitlines() or [type(exc).__name__]
        sys.exit(
            f"error: the database did not answer ({lines[0]}); check DATABASE_URL and that the "
            "database server runs (--traceback shows where it failed)."
        )


if __name__ == "__main__":
    main()

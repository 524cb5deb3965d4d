#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

from __future__ import annotations

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "detective_site.settings")
    from django.core.management import execute_from_command_line

    from detective_site.config import ConfigError, prepare_up_environment

    prepare_up_environment(sys.argv, os.environ)
    try:
        execute_from_command_line(sys.argv)
    except ConfigError as exc:
        sys.exit(f"error: {exc}")


if __name__ == "__main__":
    main()

"""`uv run python -m agent`: the Detective command line (see agent/cli.py)."""

import sys

from agent.cli import main

sys.exit(main())

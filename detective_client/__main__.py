import sys

from detective_client.cli import main

sys.exit(main())

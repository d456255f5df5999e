"""`python -m eval ...`: see eval/cli.py."""

import sys

from eval.cli import main

sys.exit(main())

"""`python -m eval ...`: see eval/cli.py."""

import sys

from eval.process import cli_imports

with cli_imports():  # numpy with one OpenBLAS thread; the imports' objects kept out of the collector's way
    from eval.cli import main

sys.exit(main())

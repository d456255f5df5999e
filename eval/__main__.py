"""`python -m eval ...`: see eval/cli.py."""

import sys

from eval.process import load_numpy_single_threaded

load_numpy_single_threaded()

from eval.cli import main  # noqa: E402  (after numpy is loaded as above)

sys.exit(main())

"""Memory growth measured where it can be seen: a fresh interpreter's peak resident set.

A test process's peak only ever rises: after a suite has run a 900 MB step, a later step that
allocates 300 MB reads 0 growth. So a bounded-memory check runs its setup and then the measured code in
a fresh `python -c` (cwd: the repository) and reads that process's peak before and after: VmHWM from
/proc/self/status, the high-water mark of the process's own memory. (Not ru_maxrss: Linux carries the
parent's peak at the fork into the child's ru_maxrss across exec, so a child of a big test process
would read 0 growth too.)"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def peak_growth_mb(setup: str, measured: str, *, timeout: float = 300) -> float:
    """MB by which `measured` raised the peak resident memory of a fresh process that ran `setup`."""
    code = "\n".join([
        "def _peak_kb():",
        "    with open('/proc/self/status') as fh:",
        "        return next(int(line.split()[1]) for line in fh if line.startswith('VmHWM:'))",
        textwrap.dedent(setup),
        "_before = _peak_kb()",
        textwrap.dedent(measured),
        "_after = _peak_kb()",
        "print('GROWTH_MB', (_after - _before) / 1024)",
    ])
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(line for line in reversed(done.stdout.splitlines()) if line.startswith("GROWTH_MB "))
    return float(line.split()[1])


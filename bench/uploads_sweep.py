"""The Space's upload sweep, per upload, as the upload folder fills: the ledger (`UploadFolder`: note the
upload, sweep back to the caps) against a walk of the whole folder, what each sweep cost before the
ledger (twice per upload).

    python -m bench.uploads_sweep --kept 100,1000,4000 --uploads 200

Each size starts from a folder of `kept` files of 1 KB, each in its own `<sha>/` folder as Gradio writes
them, with the files cap at `kept`: every upload adds one file and the sweep removes the oldest.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import machine, result, table, write_json
from space.diningspace.uploads import UploadFolder


def _upload(root: Path, k: int) -> str:
    path = root / f"{k:064x}" / "photo.jpg"
    path.parent.mkdir()
    path.write_bytes(b"\xff" * 1024)
    return str(path)


def measure(kept: int, uploads: int) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for k in range(kept):
            _upload(root, k)
        ledger = UploadFolder(root)
        ledger.sweep(max_files=kept)  # its first walk
        spent = 0.0
        for k in range(kept, kept + uploads):
            path = _upload(root, k)  # Gradio's write, not the sweep's cost
            started = time.perf_counter()
            ledger.note([path])
            ledger.sweep(max_files=kept)
            spent += time.perf_counter() - started
        walks = max(uploads // 10, 1)
        started = time.perf_counter()
        for _ in range(walks):
            sum(1 for _, _, names in os.walk(root) for name in names)  # the walk alone, without stat
        walk = (time.perf_counter() - started) / walks
    return [result(f"sweep per upload, {kept:,} kept", spent / uploads * 1000, 2 * walk * 1000, unit="ms",
                   note=f"{uploads} uploads; reference: two walks of the folder")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kept", default="100,1000,4000", help="files kept in the folder, comma-separated")
    parser.add_argument("--uploads", type=int, default=200)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    rows = [row for kept in (int(k) for k in args.kept.split(",")) for row in measure(kept, args.uploads)]
    print(table(rows))
    write_json(args.json, {"machine": machine(), "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The one JSON-lines reader of the project, with a policy (strict or skip-and-name) and bounds."""

from __future__ import annotations

import json
import math
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

from dataset.schema import DatasetError

JsonlPolicy = Literal["strict", "skip"]
# How deep a JSON value read from a file someone else wrote may nest (the project's own lines nest 3 deep).
MAX_JSON_DEPTH = 32


def json_depth_within(value: Any, limit: int) -> bool:
    """Whether `value` nests dicts and lists at most `limit` levels deep (without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return False
            stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
    return True


MAX_JSON_FILE_BYTES = 64 << 20  # a run.json or metrics.json from elsewhere (the harness's own are kilobytes)


def read_json_file(path: Path | str, *, max_bytes: int = MAX_JSON_FILE_BYTES, max_depth: int = MAX_JSON_DEPTH,
                   want: type | None = dict) -> Any:
    """A JSON file someone else may have written (a run.json, a metrics.json): its value, or a
    ValueError of one line naming the file: too large, not JSON, nested deeper than `max_depth`, or
    not a `want` (a JSON object by default).

    >>> import tempfile, os
    >>> with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
    ...     _ = fh.write("[" * 50000 + "]" * 50000)
    >>> try:
    ...     read_json_file(fh.name)
    ... except ValueError as exc:
    ...     print(str(exc).split(": ", 1)[1])
    nested deeper than 32 levels
    >>> os.unlink(fh.name)
    """
    path = Path(path)
    name = path.name
    if (why := file_problem(path, max_bytes=max_bytes)) is not None:
        raise ValueError(f"{name}: {why}")
    try:
        value = json.loads(path.read_bytes())
    except RecursionError:
        raise ValueError(f"{name}: nested deeper than {max_depth} levels") from None
    except UnicodeDecodeError:
        raise ValueError(f"{name}: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{name}: not valid JSON ({exc.msg})") from None
    if not json_depth_within(value, max_depth):
        raise ValueError(f"{name}: nested deeper than {max_depth} levels")
    if want is not None and not isinstance(value, want):
        raise ValueError(f"{name}: not a JSON {'object' if want is dict else want.__name__}")
    return value


def finite_number(value: Any, minimum: float | None = None) -> bool:
    """Whether a value read from a file someone else wrote is a finite number (a bool is none), at least
    `minimum` when given: what a count, a figure or a nutrient must be before it is computed with.

    >>> [finite_number(v, 0) for v in (3, 0.5, -1, True, float("inf"), "2", None)]
    [True, True, False, False, False, False, False]
    """
    return (isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
            and (minimum is None or value >= minimum))


def file_problem(path: Path, folder: Path | None = None, *, max_bytes: int | None = None) -> str | None:
    """Why a file someone else may have made must not be read (None when it may): not a regular file (a
    fifo or a device would block or never end, a folder is no file), a link leading out of `folder` (the
    run folder it was sent in: a scores.jsonl linked to another file of the machine's), or past `max_bytes`.
    A missing file is the caller's to report (None); one that cannot be looked at raises OSError."""
    try:
        found = path.stat()
        if folder is not None and not path.resolve().is_relative_to(Path(folder).resolve()):
            return "a link to a file outside its folder; not read"
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(found.st_mode):
        return "not a regular file; not read"
    if max_bytes is not None and found.st_size > max_bytes:
        return f"{found.st_size:,} bytes; at most {max_bytes:,} are read"
    return None


def iter_jsonl_objects(source: Path | bytes, name: str | None = None, *, policy: JsonlPolicy = "strict",
                       problems: list[str] | None = None, error: Callable[[str], Exception] | None = None,
                       loads: Callable[[bytes], Any] = json.loads, max_line_bytes: int | None = None,
                       max_depth: int | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    r"""(line number, object) for each non-blank line of a JSON-lines file (a path, read line by line: a
    10k-row file is never one string in memory; or its bytes). The one JSON-lines reader of the project.

    A line that is not UTF-8, not JSON, not an object, longer than `max_line_bytes` or nested deeper
    than `max_depth` is, by `policy`:
    - "strict": an error naming the file (`name`, default its file name) and the line: `error(text)`
      (default DatasetError), raised at the first such line;
    - "skip": left out, and named in `problems` (`name:N: why`) when a list is given.
    `loads` parses one line's bytes (a caller may pass a faster parser with the same results).

    >>> list(iter_jsonl_objects(b'{"a": 1}\n\n[2]\n{"b": 2}\n', "x.jsonl", policy="skip", problems=(seen := [])))
    [(1, {'a': 1}), (4, {'b': 2})]
    >>> seen
    ['x.jsonl:3: not a JSON object']
    """
    name = name or (source.name if isinstance(source, Path) else "the file")
    make_error = error or DatasetError
    if isinstance(source, Path) and (why := file_problem(source)) is not None:
        if policy == "strict":
            raise make_error(f"{name}: {why}")
        if problems is not None:
            problems.append(f"{name}: {why}")
        return
    for lineno, raw_line in _numbered_lines(source, max_line_bytes):
        if raw_line is not None and not raw_line.strip():
            continue
        why = None
        row: Any = None
        if raw_line is None:
            why = f"longer than {max_line_bytes:,} bytes"
        else:
            try:  # the parser decodes the bytes once (json.loads: UnicodeDecodeError; orjson: its own error)
                row = loads(raw_line)
            except UnicodeDecodeError as exc:
                why = f"not UTF-8 ({exc.reason} at byte {exc.start})"
            except RecursionError:
                why = "nested too deeply"
            except ValueError as exc:  # json.JSONDecodeError, orjson.JSONDecodeError
                column = getattr(exc, "colno", None)
                where = f", column {column}" if isinstance(column, int) else ""
                why = f"invalid JSON ({getattr(exc, 'msg', None) or str(exc).splitlines()[0][:80]}{where})"
            else:
                if not isinstance(row, dict):
                    why = "not a JSON object"
                elif max_depth is not None and not json_depth_within(row, max_depth):
                    why = f"nested deeper than {max_depth} levels"
        if why is None:
            yield lineno, row
        elif policy == "strict":
            raise make_error(f"{name} line {lineno}: {why}")
        elif problems is not None:
            problems.append(f"{name}:{lineno}: {why}")


_SKIP_CHUNK = 1 << 20  # what is read at a time of a line past the bound, and dropped


def _numbered_lines(source: Path | bytes, bound: int | None = None) -> Iterator[tuple[int, bytes | None]]:
    """(line number, the line's bytes) per line, None for a line longer than `bound` bytes (its newline
    not counted). A file is read at most `bound` + 1 bytes of a line at a time: the rest of a longer line
    is read in chunks and dropped, so an endless line (a 300 MB one, a sparse file of zeros) costs at most
    the bound in memory, however long it runs."""
    if isinstance(source, bytes | bytearray | memoryview):
        for number, line in enumerate(bytes(source).split(b"\n"), 1):
            yield number, None if bound is not None and len(line) > bound else line
        return
    with Path(source).open("rb") as fh:
        if bound is None:
            yield from enumerate(fh, 1)
            return
        number = 0
        while line := fh.readline(bound + 1):
            number += 1
            if len(line) <= bound or line.endswith(b"\n"):
                yield number, line
                continue
            yield number, None  # a strict reader stops here, before a byte more is read
            while (rest := fh.readline(_SKIP_CHUNK)) and not rest.endswith(b"\n"):
                pass

"""Fixtures for the reliability tests: fault plans over the fake servers, hostile releases, a CLI
runner, a slow oracle for kill tests and servers that echo the caller's key in their errors.

Everything builds on tests/fakes (real HTTP on 127.0.0.1) and the tiny hand-checked release of
tests/helpers_harness.py, so a failure here points at the harness, not at a fixture.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

import diningbench
from eval import requests, tasks
from eval.settings import RunSettings
from tests.fakes.base import RecordedRequest, answer_key
from tests.fakes.gemini_server import FakeGeminiServer
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers_harness import classification_rows, nutrition_rows, read_jsonl, vqa_rows

ROOT = Path(__file__).resolve().parents[1]
Key = tuple[str, str]  # (task, id)

# Faults a runner must survive (retry) and faults that must end a sample at once.
TRANSIENT_FAULTS = ("429", "500", "503", "hang", "drop", "malformed", "empty")
FATAL_FAULTS = ("401", "400", "403", "content_filter")


# ------------------------------------------------------------------ which request is which item
def item_keys(release: Path, settings: RunSettings) -> dict[str, Key]:
    """answer_key (prompt text + image bytes) -> (task, id), built the way the harness builds requests."""
    keys: dict[str, Key] = {}
    for task in diningbench.CONFIGS:
        for row in diningbench.load(task, str(release), decode_images=False):
            request = requests.build_request(tasks.get(task), row, settings)
            images = [p.data for p in request.messages[0].images]
            keys[answer_key(request.messages[0].text, images)] = (task, str(row["id"]))
    return keys


# ------------------------------------------------------------------ fault plans
@dataclass
class FaultPlan:
    """Faults injected into the first attempts of a seeded share of the items.

    `per_item[(task, id)]` lists the faults that item meets, in order (one or two per chosen item);
    the attempt after its last fault is answered normally.
    """

    per_item: dict[Key, list[str]] = field(default_factory=dict)

    @property
    def injected(self) -> int:
        return sum(len(kinds) for kinds in self.per_item.values())


def inject_fault_plan(server: FakeOpenAIServer | FakeGeminiServer, keys: dict[str, Key], *, rate: float,
                      seed: int, kinds: Iterable[str] = TRANSIENT_FAULTS, hang_s: float = 3.5,
                      retry_after: float = 0.05) -> FaultPlan:
    """Fault the first attempt of `rate` of the items (a third of those twice), cycling through `kinds`.

    429s alternate between carrying Retry-After and not, so both code paths run.
    """
    rng = random.Random(seed)
    items = sorted(keys.items(), key=lambda kv: kv[1])
    chosen = rng.sample(items, max(1, round(rate * len(items))))
    cycle = list(kinds)
    plan = FaultPlan()
    n = 0
    for key, item in chosen:
        faults = []
        for _ in range(2 if len(plan.per_item) % 3 == 0 else 1):  # every third item fails twice
            kind = cycle[n % len(cycle)]
            options: dict[str, Any] = {}
            if kind == "hang":
                options["seconds"] = hang_s
            if kind == "429" and n % 2 == 0:
                options["retry_after"] = retry_after
            server.inject(kind, times=1, match=lambda r, k=key: r.key == k, **options)
            faults.append(kind)
            n += 1
        plan.per_item[item] = faults
    return plan


def requests_per_item(server: FakeOpenAIServer | FakeGeminiServer, keys: dict[str, Key]) -> dict[Key, int]:
    counts: dict[Key, int] = {}
    for request in list(server.requests):
        item = keys.get(request.key, ("?", "?"))
        counts[item] = counts.get(item, 0) + 1
    return counts


def predictions_by_item(out: Path) -> dict[Key, dict[str, Any]]:
    return {(p["task"], p["id"]): p for p in read_jsonl(out / "predictions.jsonl")}


def answers(out: Path) -> dict[Key, tuple[Any, Any, Any]]:
    """What a run concluded per item: (raw, parsed, error); latency and attempts left out."""
    return {k: (p["raw"], p["parsed"], p["error"]) for k, p in predictions_by_item(out).items()}


# ------------------------------------------------------------------ slow oracle (kill tests)
def slow(oracle: Callable[[RecordedRequest], str], seconds: float) -> Callable[[RecordedRequest], str]:
    """The same answers after `seconds`: keeps requests in flight long enough to kill a run mid-way."""
    def answer(request: RecordedRequest) -> str:
        time.sleep(seconds)
        return oracle(request)
    return answer


# ------------------------------------------------------------------ servers that echo the key
class _EchoKey:
    """Error bodies quote the credential the client sent, as careless real servers do."""

    _seen = threading.local()

    def parse(self, path: str, body: Any, request: RecordedRequest) -> None:
        headers = request.headers
        self._seen.credential = (headers.get("authorization", "").removeprefix("Bearer ")
                                 or headers.get("x-goog-api-key", "") or "?")
        super().parse(path, body, request)  # type: ignore[misc]

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        # Padded so that the key straddles the 200 characters a shown message is cut to: a scrub
        # after the cut would leave the key's first half behind.
        head = f"{message}: Incorrect API key provided: "
        leaked = f"{head:.<186}{getattr(self._seen, 'credential', '?')}"
        return super().error_body(status, leaked)  # type: ignore[misc]


class KeyEchoingOpenAIServer(_EchoKey, FakeOpenAIServer):
    pass


class KeyEchoingGeminiServer(_EchoKey, FakeGeminiServer):
    pass


# ------------------------------------------------------------------ hostile releases
def _rows() -> dict[str, list[dict[str, Any]]]:
    return {"classification": classification_rows(), "nutrition": nutrition_rows(), "vqa": vqa_rows()}


def _defect_corrupt_image(rows: dict[str, list[dict[str, Any]]]) -> None:
    rows["classification"][1]["images"][1] = {"bytes": b"\xff\xd8\xff\xe0 truncated, not a JPEG", "path": "v1.jpg"}


def _defect_empty_images(rows: dict[str, list[dict[str, Any]]]) -> None:
    rows["classification"][2]["images"], rows["classification"][2]["image_roles"] = [], []


def _defect_answer_beyond_options(rows: dict[str, list[dict[str, Any]]]) -> None:
    rows["classification"][3]["answer"] = "K"


def _defect_nan_nutrition(rows: dict[str, list[dict[str, Any]]]) -> None:
    rows["nutrition"][1]["protein"] = float("nan")


def _defect_roles_mismatch(rows: dict[str, list[dict[str, Any]]]) -> None:
    rows["nutrition"][2]["image_roles"] = rows["nutrition"][2]["image_roles"][:-1]


def _defect_negative_calories(rows: dict[str, list[dict[str, Any]]]) -> None:
    rows["nutrition"][3]["calories"] = -300.0


def _defect_zero_byte_image(rows: dict[str, list[dict[str, Any]]]) -> None:
    rows["vqa"][0]["images"][0] = {"bytes": b"", "path": "empty.jpg"}


@dataclass(frozen=True)
class Defect:
    """One hostile change to the tiny release: the item it breaks and words the error must use."""

    name: str
    task: str
    item: str
    words: tuple[str, ...]
    apply: Callable[[dict[str, list[dict[str, Any]]]], None]


DEFECTS = (
    Defect("corrupt image", "classification", "c2", ("decode",), _defect_corrupt_image),
    Defect("empty images list", "classification", "c3", ("no images",), _defect_empty_images),
    Defect("answer letter beyond the options", "classification", "c4", ("'K'",), _defect_answer_beyond_options),
    Defect("NaN nutrition", "nutrition", "n2", ("protein", "nan"), _defect_nan_nutrition),
    Defect("image_roles shorter than images", "nutrition", "n3", ("image_roles",), _defect_roles_mismatch),
    Defect("negative calories", "nutrition", "n4", ("calories",), _defect_negative_calories),
    Defect("zero-byte image", "vqa", "v1", ("image",), _defect_zero_byte_image),
)
MISSING_COLUMNS = {"classification": "answer", "nutrition": "protein"}


def write_hostile_release(folder: Path, defects: Iterable[Defect]) -> Path:
    rows = _rows()
    for defect in defects:
        defect.apply(rows)
    return diningbench.write_release(folder, {c: (len(r), iter(r)) for c, r in rows.items()})


def write_release_missing_columns(folder: Path) -> Path:
    """A release whose Parquet lost a column (written directly with pyarrow, as a broken export would)."""
    release = write_hostile_release(folder, ())
    for config, column in MISSING_COLUMNS.items():
        for path in sorted((release / "data" / config).glob("*.parquet")):
            pq.write_table(pq.read_table(path).drop_columns([column]), path)
    return release


def write_long_release(folder: Path, copies: int) -> Path:
    """The tiny release with `copies` times its classification items (ids c1-1, c1-2, ...; each copy
    has its own option names, so every item is a distinct request): enough work to kill mid-run."""
    rows = _rows()
    longer = []
    for copy in range(1, copies + 1):
        for row in classification_rows():
            longer.append({**row, "id": f"{row['id']}-{copy}", "options": [f"{o}/{copy}" for o in row["options"]]})
    rows["classification"] = longer
    return diningbench.write_release(folder, {c: (len(r), iter(r)) for c, r in rows.items()})


# ------------------------------------------------------------------ the CLI as a user runs it
def cli_env(**overrides: str | None) -> dict[str, str]:
    """A clean environment for a subprocess: no real keys, offline Hub, the given variables set/unset."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "OPENAI_BASE_URL", "HF_TOKEN")}
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", PYTHONUNBUFFERED="1")
    for name, value in overrides.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def run_cli(args: list[str], *, env: dict[str, str] | None = None, timeout: float = 120.0,
            module: str = "eval") -> subprocess.CompletedProcess[str]:
    """`python -m eval ARGS` (or `python diningbench.py ARGS`) from the repository root."""
    command = [sys.executable, "-m", module, *args] if module == "eval" else [sys.executable, module, *args]
    return subprocess.run(command, cwd=ROOT, env=env or cli_env(), capture_output=True, text=True,
                          timeout=timeout, check=False)


def start_cli(args: list[str], *, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """A run in the background (for kill -9 tests); stdout and stderr go to `log`."""
    with log.open("ab") as fh:
        return subprocess.Popen([sys.executable, "-m", "eval", *args], cwd=ROOT, env=env, stdout=fh,
                                stderr=subprocess.STDOUT)


def assert_one_line_error(proc: subprocess.CompletedProcess[str], *words: str) -> str:
    """Non-zero exit, exactly one non-empty stderr line starting `error:`, no traceback, naming `words`."""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode != 0, f"exit 0 for a bad invocation; stderr={proc.stderr!r}"
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    for word in words:
        assert word.lower() in lines[0].lower(), f"{word!r} not in {lines[0]!r}"
    return lines[0]


def files_containing(folder: Path, secret: str) -> list[Path]:
    """Every file under `folder` (any depth, binary too) whose bytes contain `secret`."""
    needle = secret.encode()
    return [p for p in folder.rglob("*") if p.is_file() and needle in p.read_bytes()]

"""A run folder submitted to the Space (a zip) may hold any value. The demo run's run.json (three levels
down), metrics.json and the first scores and predictions lines (two down) have each place given a value of
another type and one out of range, in turn; each submission is verified or refused in one line (a
SubmissionError, a guard's or a user error), and the leaderboard then reads the results folder. Anything
else, a traceback, is listed by the file, the place and the value."""

from __future__ import annotations

import json
import shutil
import traceback
import zipfile
from pathlib import Path
from typing import Any

import pytest
from helpers_space import write_baseline_run

from eval.types import UserError
from space.diningspace.guard import GuardError
from space.diningspace.leaderboard import local_rows
from space.diningspace.submissions import Caps, Releases, SubmissionError, Submissions, submit
from tests.test_security_run_folder_values import OF_ANOTHER_TYPE, OUT_OF_RANGE, _paths, _replaced

FILES = (("run.json", 3), ("metrics.json", 2), ("scores.jsonl", 2), ("predictions.jsonl", 2))


def _zip(folder: Path, out: Path) -> Path:
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.iterdir()):
            if path.is_file():
                archive.write(path, "demo/" + path.name)
    return out


@pytest.mark.slow
def test_a_submitted_run_of_odd_values_is_verified_or_refused_in_one_line(tmp_path):
    demo = write_baseline_run(tmp_path / "runs", "demo", "all", "baseline:category-mean")
    releases = Releases(None)
    failures: dict[str, str] = {}
    k = 0
    for name, depth in FILES:
        text = (demo / name).read_text(encoding="utf-8")
        lines = [json.loads(line) for line in text.splitlines()] if name.endswith(".jsonl") else [json.loads(text)]
        for n, path in enumerate(_paths(lines[0], depth)):
            for odd in (OF_ANOTHER_TYPE[n % len(OF_ANOTHER_TYPE)], OUT_OF_RANGE[n % len(OUT_OF_RANGE)]):
                k += 1
                folder = tmp_path / f"f{k}"
                shutil.copytree(demo, folder)
                changed: list[Any] = [_replaced(lines[0], path, odd), *lines[1:]]
                (folder / name).write_text("".join(json.dumps(line) + "\n" for line in changed)
                                           if name.endswith(".jsonl") else json.dumps(changed[0]), encoding="utf-8")
                results = tmp_path / f"results{k}"
                try:
                    submit(zip_path=_zip(folder, tmp_path / f"z{k}.zip"), hub_repo=None, repo_type="model",
                           store=Submissions(results), release_for=releases.get, caps=Caps(), judge=None,
                           dataset_id=None)
                    local_rows(results)
                except (SubmissionError, GuardError, UserError) as exc:
                    assert "\n" not in str(exc), (name, path)
                except Exception:  # noqa: BLE001  (any other exception is what this test looks for)
                    where = f"{name} {'.'.join(map(str, path))} = {odd!r:.40}"
                    failures.setdefault(where, traceback.format_exc().strip().splitlines()[-1])
                shutil.rmtree(folder)
                shutil.rmtree(results, ignore_errors=True)
    assert k > 150
    assert not failures, "\n".join(f"{where}: {error}" for where, error in failures.items())

"""`eval import` reads files from anywhere: the authors' prediction files (`--from official`) and lmms-eval's
samples files. Genuine ones have each place of their first line (two levels down for the authors', three for
lmms-eval's) given each odd value in turn; the import either makes a run folder or refuses in one line (a
UserError, which the CLI prints as `error: ...`). Anything else, a traceback, is listed by the place and the
value's type."""

from __future__ import annotations

import json
import shutil
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from eval.importer import import_run
from eval.official_io import import_official
from eval.types import UserError
from tests.helpers_official import write_folder
from tests.test_adapters_import import classification_answer, write_samples
from tests.test_security_run_folder_values import _paths, _replaced

CORPUS = Path(__file__).resolve().parent / "corpus" / "official"
ODD: tuple[Any, ...] = ("x", [], {"a": {"b": 1}}, True, None, "<b>x</b>", [1, "a"], -1, 10**12, float("inf"),
                        float("nan"), 1.5, 0, "9" * 400)


def _first_line_changed(lines: list[dict[str, Any]], path: tuple[Any, ...], odd: Any) -> str:
    return "".join(json.dumps(_replaced(line, path, odd) if n == 0 else line) + "\n" for n, line in enumerate(lines))


def _tried(make: Callable[[], Any], where: str, failures: dict[str, str]) -> None:
    try:
        make()
    except UserError as exc:
        assert "\n" not in str(exc), where
    except Exception:  # noqa: BLE001  (any other exception is what this test looks for)
        failures.setdefault(where, traceback.format_exc().strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize(("task", "file"), [("classification", "classification_pred.jsonl"),
                                            ("nutrition", "nutrition_pred.jsonl"), ("vqa", "vqa_judged_pred.jsonl")])
def test_an_authors_prediction_file_of_odd_values_imports_or_is_refused_in_one_line(task, file, tmp_path):
    release = write_folder(tmp_path / "release")
    lines = [json.loads(line) for line in (CORPUS / file).read_text(encoding="utf-8").splitlines()]
    failures: dict[str, str] = {}
    for k, (path, odd) in enumerate((path, odd) for path in _paths(lines[0], 2) for odd in ODD):
        source = tmp_path / f"p{k}.jsonl"
        source.write_text(_first_line_changed(lines, path, odd), encoding="utf-8")
        _tried(lambda: import_official(source, task, tmp_path / f"o{k}", dataset=str(release), n_boot=20),  # noqa: B023
               f"{'.'.join(map(str, path))} = {type(odd).__name__}", failures)
        shutil.rmtree(tmp_path / f"o{k}", ignore_errors=True)
    assert not failures, "\n".join(f"{where}: {error}" for where, error in failures.items())


@pytest.mark.slow
def test_an_lmms_eval_samples_file_of_odd_values_imports_or_is_refused_in_one_line(tmp_path):
    genuine = tmp_path / "genuine"
    write_samples(genuine, "classification", classification_answer)
    samples = next(genuine.glob("*_samples_*.jsonl"))
    lines = [json.loads(line) for line in samples.read_text(encoding="utf-8").splitlines()]
    failures: dict[str, str] = {}
    for k, (path, odd) in enumerate((path, odd) for path in _paths(lines[0], 3) for odd in ODD):
        logs = tmp_path / f"l{k}"
        shutil.copytree(genuine, logs)
        (logs / samples.name).write_text(_first_line_changed(lines, path, odd), encoding="utf-8")
        _tried(lambda: import_run(logs, "lmms-eval", tmp_path / f"o{k}"),  # noqa: B023
               f"{'.'.join(map(str, path))} = {type(odd).__name__}", failures)
        shutil.rmtree(logs)
        shutil.rmtree(tmp_path / f"o{k}", ignore_errors=True)
    assert not failures, "\n".join(f"{where}: {error}" for where, error in failures.items())

"""A release in the authors' layout may come from anywhere, with any value in its rows. The corpus release has
each place of the first row of each file (two levels down) given odd values in turn; validating it,
summarising it and `eval run` on it (a baseline) either work or refuse in one line (a UserError or the
data contract's DatasetError). Anything else, a traceback, is listed by the task, the place, the value's type
and the step."""

from __future__ import annotations

import json
import shutil
import traceback
from pathlib import Path
from typing import Any

import pytest

import diningbench
from eval import api
from eval.settings import RunSettings
from eval.types import UserError
from tests.helpers_official import FILES, write_folder
from tests.test_security_run_folder_values import _paths, _replaced

ODD: tuple[Any, ...] = ("x", [], {"a": {"b": 1}}, True, None, "<b>x</b>", [1, "a"], -1, 10**12, float("inf"), 1.5, 0,
                        "9" * 400, "../../etc/passwd")


@pytest.mark.slow
def test_a_release_in_the_authors_layout_of_odd_values_is_read_or_refused_in_one_line(tmp_path: Path) -> None:
    genuine = write_folder(tmp_path / "genuine")
    failures: dict[str, str] = {}
    k = 0
    for task, name in FILES.items():
        lines = [json.loads(line) for line in (genuine / name).read_text(encoding="utf-8").splitlines() if line.strip()]
        for n, path in enumerate(_paths(lines[0], 2)):
            for odd in ODD[n % 2::2]:  # half of the values at each place, the other half at the next
                k += 1
                release = tmp_path / f"r{k}"
                shutil.copytree(genuine, release)
                (release / name).write_text("".join(json.dumps(_replaced(line, path, odd) if i == 0 else line,
                                                               ensure_ascii=False) + "\n"
                                                    for i, line in enumerate(lines)), encoding="utf-8")
                settings = RunSettings(task=task, model="baseline:first", dataset=str(release), out=tmp_path / f"o{k}",
                                       n_boot=20)
                for step, run in (("validate", lambda: diningbench.validate(str(release))),  # noqa: B023
                                  ("summary", lambda: diningbench.summary(str(release))),  # noqa: B023
                                  ("run", lambda: api.run(settings, progress=False))):  # noqa: B023
                    try:
                        run()
                    except (UserError, diningbench.DatasetError) as exc:
                        assert "\n" not in str(exc).strip(), (task, path, step)
                    except Exception:  # noqa: BLE001  (any other exception is what this test looks for)
                        where = f"{task} {'.'.join(map(str, path))} = {type(odd).__name__} [{step}]"
                        failures.setdefault(where, traceback.format_exc().strip().splitlines()[-1])
                shutil.rmtree(release)
                shutil.rmtree(tmp_path / f"o{k}", ignore_errors=True)
    assert k > 100
    assert not failures, "\n".join(f"{where}: {error}" for where, error in failures.items())

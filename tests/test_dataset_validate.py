"""`validate` on the clean sample and on a deliberately broken copy: every problem itemised by id."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

import diningbench
from tests.helpers_dataset import copy_sample, rewrite

ROOT = Path(diningbench.__file__).parent


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "diningbench.py", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def test_the_sample_is_clean() -> None:
    assert diningbench.validate(diningbench.SAMPLE_DIR) == []
    done = _cli("validate", "diningbench")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 error(s), 0 warning(s)" in done.stdout


def _break_classification(rows: list[dict]) -> list[dict]:
    rows[0]["images"][1]["bytes"] = b"\xff\xd8 this is not a jpeg"
    rows[1]["answer"] = "J"
    rows[2]["id"] = rows[3]["id"]
    rows[4]["images"], rows[4]["image_roles"] = [], []
    rows[5]["image_roles"] = rows[5]["image_roles"][:-1]
    rows[6]["options"] = [rows[6]["options"][0]] * 8
    return rows


def _break_nutrition(rows: list[dict]) -> list[dict]:
    rows[0]["calories"] = math.nan
    rows[1]["protein"] = -3.0
    rows[2].update(calories=500.0, protein=10.0, carbohydrates=10.0, fat=5.0)  # Atwater says 125 kcal
    return rows


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = copy_sample(tmp_path_factory.mktemp("broken") / "release")
    rewrite(folder, "classification", _break_classification)
    rewrite(folder, "nutrition", _break_nutrition)
    schema = diningbench.features("vqa").arrow_schema
    without = pa.schema([f for f in schema if f.name != "rationale_en"])
    rewrite(folder, "vqa", lambda rows: [{k: v for k, v in r.items() if k != "rationale_en"} for r in rows], without)
    return folder


def _messages(problems: list[diningbench.Problem], level: str = "error") -> dict[tuple[str, str], str]:
    found: dict[tuple[str, str], str] = {}
    for p in problems:
        if p.level == level:
            found[(p.config, p.item_id)] = found.get((p.config, p.item_id), "") + " | " + p.message
    return found


def test_every_hostile_row_is_reported_by_config_and_id(broken: Path) -> None:
    errors = _messages(diningbench.validate(broken))
    c = "classification"
    assert "images[1]: image does not decode" in errors[(c, "classification-00001")]
    assert "answer 'J' is not a letter of an existing option" in errors[(c, "classification-00002")]
    assert "duplicate id (2 rows)" in errors[(c, "classification-00004")]
    assert "no images" in errors[(c, "classification-00005")]
    assert "image_roles has 0 entries" not in errors[(c, "classification-00005")]  # 0 roles for 0 images is fine
    assert "image_roles has 2 entries for 3 images" in errors[(c, "classification-00006")] or \
        "image_roles has 3 entries for 4 images" in errors[(c, "classification-00006")]
    assert "options must be 8 distinct" in errors[(c, "classification-00007")]
    assert "calories=nan" in errors[("nutrition", "nutrition-00001")]
    assert "protein=-3.0" in errors[("nutrition", "nutrition-00002")]
    assert "missing column(s) rationale_en" in errors[("vqa", "")]
    warnings = _messages(diningbench.validate(broken), "warning")
    assert "Atwater gap 75%" in warnings[("nutrition", "nutrition-00003")]


def test_cli_exits_non_zero_with_itemised_lines_and_no_traceback(broken: Path) -> None:
    done = _cli("validate", str(broken))
    assert done.returncode == 1
    out = done.stdout + done.stderr
    assert "Traceback" not in out
    assert "error: classification/classification-00002: answer 'J'" in out
    assert "warning: nutrition/nutrition-00003: Atwater gap" in out
    assert all(line.count("\n") == 0 for line in done.stdout.splitlines())


def test_unreadable_sources_are_one_line_errors(tmp_path: Path) -> None:
    (tmp_path / "data" / "vqa").mkdir(parents=True)
    (tmp_path / "data" / "vqa" / "test-00000-of-00001.parquet").write_bytes(b"PAR1 garbage")
    problems = diningbench.validate(tmp_path)
    text = "\n".join(map(str, problems))
    assert "README.md (dataset card with configs:) is missing" in text
    assert "error: classification: no data/classification/*.parquet files" in text
    assert "is not readable Parquet" in text
    done = _cli("validate", "no-such-owner/no-such-dataset")  # offline: the Hub is unreachable
    assert done.returncode == 1 and "Traceback" not in done.stdout + done.stderr
    assert "cannot read no-such-owner/no-such-dataset" in done.stdout


def test_answer_position_bias_is_a_warning(tmp_path: Path) -> None:
    folder = copy_sample(tmp_path / "release")

    def all_a(rows: list[dict]) -> list[dict]:
        for row in rows:
            k = "ABCDEFGH".index(row["answer"])
            row["options"].insert(0, row["options"].pop(k))
            row["options_en"].insert(0, row["options_en"].pop(k))
            row["answer"] = "A"
        return rows

    rewrite(folder, "classification", all_a)
    problems = diningbench.validate(folder)
    assert [p.level for p in problems] == ["warning"]
    assert "answer letters far from uniform" in problems[0].message and "A=40" in problems[0].message


def test_chi_square_matches_textbook_critical_values() -> None:
    # df = 7: the 5% and 0.1% critical values are 14.067 and 24.322.
    assert diningbench.chi_square_sf(14.067, 7) == pytest.approx(0.05, abs=1e-4)
    assert diningbench.chi_square_sf(24.322, 7) == pytest.approx(0.001, abs=1e-5)
    even = diningbench.position_bias(list("ABCDEFGH") * 2, [8] * 16)
    assert (even["statistic"], even["df"]) == (0.0, 7) and even["p_value"] == pytest.approx(1.0)
    bias = diningbench.position_bias(["A"] * 16, [8] * 16)  # (16-2)^2/2 + 7 * (0-2)^2/2 = 98 + 14
    assert bias["statistic"] == pytest.approx(112.0) and bias["p_value"] < 1e-15


def test_the_card_must_declare_every_config(tmp_path: Path) -> None:
    folder = copy_sample(tmp_path / "release")
    readme = folder / "README.md"
    text = readme.read_text(encoding="utf-8")
    readme.write_text(text.replace("- config_name: vqa\n", "- config_name: visual_qa\n", 1), encoding="utf-8")
    assert [str(p) for p in diningbench.validate(folder)] == ["error: vqa: config not declared under configs: in README.md"]
    readme.write_text("---\nconfigs: [unclosed\n---\n# card\n", encoding="utf-8")
    assert "YAML header does not parse" in str(diningbench.validate(folder)[0])

"""A source's layout is decided once (`diningbench.layout_of`) and asked, never tested again: reading,
fingerprints, validate, summary and convert go through the Layout. And a config is declared once
(`dataset/schema.py` DECLARED): a fourth one, of a shape the authors' layout already has, is one entry
there and nothing else, through writing, reading, validating and converting both layouts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import diningbench
from eval import tasks

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def official(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return diningbench.write_sample_official(tmp_path_factory.mktemp("layouts") / "official", tarball=False)


def test_each_source_has_one_layout_and_the_module_functions_ask_it(official: Path) -> None:
    ours, theirs, one_file = (diningbench.layout_of(s) for s in (None, official, official / "vqa_en.jsonl"))
    assert (type(ours), type(theirs), type(one_file)) == (diningbench.ParquetLayout, diningbench.OfficialLayout,
                                                          diningbench.OfficialLayout)
    assert ours.source == str(diningbench.SAMPLE_DIR) and {ours.name, theirs.name} == set(diningbench.LAYOUTS)
    assert (ours.by_language, theirs.by_language) == (False, True)
    assert ours.configs("en") == (list(diningbench.CONFIGS), "en")
    assert one_file.configs() == (["vqa"], "en")  # one file says its own config and language
    for config in diningbench.CONFIGS:
        assert theirs.read(config).rows == diningbench.read_release(config, official).rows
        assert theirs.fingerprint(config, lang="en") == diningbench.fingerprint(config, official, lang="en")
        assert ours.fingerprint(config) == diningbench.fingerprint(config)
    assert theirs.validate(lang="en") == diningbench.validate(official, lang="en")
    assert ours.summary() == diningbench.summary()
    assert theirs.published("both") == (list(diningbench.CONFIGS), "zh")
    with pytest.raises(diningbench.DatasetError, match="is not in the authors' layout"):
        ours.published()
    with pytest.raises(diningbench.DatasetError, match="--lang both reads a folder"):
        one_file.published("both")
    assert diningbench.is_official(official) and not diningbench.is_official(None)  # kept for older callers


def test_every_list_of_configs_is_read_from_the_declarations() -> None:
    declared = diningbench.DECLARED
    assert diningbench.CONFIGS == tuple(c.name for c in declared) == tasks.names()[:3]
    assert diningbench.PUBLISHED_ROWS == {"classification": 2884, "nutrition": 1650, "vqa": 804}
    assert {c.name: c.english for c in declared} == {
        "classification": {"options": "options_en"}, "nutrition": {"dish_name": "dish_name_en"},
        "vqa": {"question": "question_en", "answer": "answer_en", "rationale": "rationale_en"}}
    assert diningbench.OFFICIAL_FILES[("nutrition", "en")] == diningbench.config_of("nutrition").official_file("en")
    assert {c.shape for c in declared} == set(diningbench.SHAPES)
    with pytest.raises(diningbench.DatasetError, match="unknown config 'menus'; choose one of classification"):
        diningbench.config_of("menus")


# A fourth config, a second kind of question, declared as the three are: the one change to the product.
FOURTH = '''    Config("pairing", {"question": "string", "question_en": "string", "answer": "string", "answer_en": "string",
                       "rationale": "string", "rationale_en": "string", "vqa_category": "string"},
           shape="question", published_rows=3),
'''
FOURTH_RUN = r"""
import json, sys
from pathlib import Path
import diningbench
out = Path(sys.argv[1])
sample = {c: diningbench.read_release(c) for c in ("classification", "nutrition", "vqa")}
rows = {c: (len(r), r.iter_rows(range(len(r)))) for c, r in sample.items()}
vqa = list(sample["vqa"].iter_rows(range(3)))
rows["pairing"] = (3, iter({**r, "id": f"pairing-{k}"} for k, r in enumerate(vqa)))
release = diningbench.write_release(out / "ours", rows, "a release with a fourth config")
authors = diningbench.write_sample_official(out / "theirs", release)
converted = diningbench.convert(authors, out / "converted", lang="both")
print(json.dumps({
    "configs": diningbench.CONFIGS,
    "ours": [str(p) for p in diningbench.validate(release) if p.level == "error"],
    "files": sorted(p.name for p in authors.glob("*.jsonl")),
    "published": diningbench.PUBLISHED_ROWS["pairing"],
    "theirs": [str(p) for p in diningbench.validate(authors) if p.level == "error"],
    "read": [r["question"] for r in diningbench.read_release("pairing", authors).rows],
    "asked": [r["question"] for r in vqa],
    "converted": [str(p) for p in diningbench.validate(converted) if p.level == "error"],
    "english": [r["question_en"] for r in diningbench.read_release("pairing", converted).rows],
    "asked_en": [r["question_en"] for r in vqa],
}, ensure_ascii=False))
"""


def test_a_fourth_config_is_one_declaration(tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copytree(ROOT / "dataset", copy / "dataset")
    shutil.copytree(ROOT / "diningbench", copy / "diningbench")
    for name in ("diningbench.py", "dataset_card.md"):
        if (ROOT / name).exists():
            shutil.copy(ROOT / name, copy / name)
    schema = copy / "dataset" / "schema.py"
    text = schema.read_text(encoding="utf-8")
    end = text.index("\n)\nCONFIGS = ")
    schema.write_text(text[:end] + "\n" + FOURTH.rstrip("\n") + text[end:], encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(copy), "HF_DATASETS_CACHE": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-c", FOURTH_RUN, str(tmp_path / "out")], cwd=copy, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["configs"] == ["classification", "nutrition", "vqa", "pairing"]
    assert found["ours"] == [] and found["theirs"] == [] and found["converted"] == []
    assert {"pairing.jsonl", "pairing_en.jsonl"} <= set(found["files"]) and found["published"] == 3
    assert found["read"] == found["asked"] and found["english"] == found["asked_en"]

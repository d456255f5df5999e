"""A folder in the authors' layout built by hand for the official-protocol tests (not by the project's
own writer): the corpus rows of tests/corpus/official/ with a small JPEG for every path they name."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

from PIL import Image

CORPUS = Path(__file__).resolve().parent / "corpus" / "official"
FILES = {"classification": "classification.jsonl", "nutrition": "nutrition.jsonl", "vqa": "vqa.jsonl"}

# What the authors' scripts print for the corpus rows and the answers in *_pred.jsonl (run on their
# scripts at commit 9c9bdf7: eval_classification.py / eval_nutrition.py --evaluate, eval_vqa.py --evaluate
# for ROUGE and --evaluate --model_evaluate against a judge answering vqa_judge_replies.json), as numbers.
AUTHORS_PRINTED: dict[str, dict[str, Any]] = {
    "classification": {"acc": 0.5000, "cannot_read_option_ratio": 0.3333, "cannot_read_option_count": 4,
                       "matched": 6, "total_eval": 12},
    # classification_pred_gt_override.jsonl: the same answers, one line carrying its own gt_answer (H)
    "classification_gt_override": {"acc": 0.4167, "cannot_read_option_ratio": 0.3333, "cannot_read_option_count": 4,
                                   "matched": 5, "total_eval": 12},
    "nutrition": {"calories": {"mae": 351.2500, "rmse": 446.7801, "mape": 65.2679, "valid_count": 8},
                  "protein": {"mae": 15.0000, "rmse": 20.1432, "mape": 62.9932, "valid_count": 8},
                  "carbohydrates": {"mae": 43.5000, "rmse": 51.7325, "mape": 67.9514, "valid_count": 8},
                  "fat": {"mae": 16.1429, "rmse": 20.2520, "mape": 77.0408, "valid_count": 7},
                  "parse_fail_count": 5},
    "vqa_rouge": {"rouge1_precision": 0.5417, "rouge1_recall": 0.3841, "rouge1_f1": 0.3429,
                  "rouge2_precision": 0.2500, "rouge2_recall": 0.0972, "rouge2_f1": 0.1333,
                  "rougeL_precision": 0.5417, "rougeL_recall": 0.3841, "rougeL_f1": 0.3429},
    "vqa_judge": {"model_evaluate_accuracy": 0.5714, "model_evaluate_correct": 4, "model_evaluate_total": 7},
}
# SHA-256 (first 16 hex digits) of the judge prompts their eval_vqa.py sent for the corpus answers.
AUTHORS_JUDGE_PROMPTS = {"2ac22e0a51ce2f19", "b090f8b1091db924", "d21c342ff1100f03", "6da18ed29a44a2bb",
                         "999866a012d036e7"}


def corpus_rows(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (CORPUS / name).read_text(encoding="utf-8").splitlines() if line.strip()]


def answers(task: str) -> list[str]:
    """The hand-built answers of one task, in row order (what the fake model replays)."""
    return [p["model_pred"] for p in sorted(corpus_rows(f"{task}_pred.jsonl"), key=lambda p: p["idx"])]


def judge_replies() -> dict[str, str]:
    return json.loads((CORPUS / "vqa_judge_replies.json").read_text(encoding="utf-8"))


def _jpeg(seed: int) -> bytes:
    image = Image.new("RGB", (48, 32), ((seed * 37) % 256, (seed * 91) % 256, (seed * 53) % 256))
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=80)
    return buffer.getvalue()


def image_paths(row: dict[str, Any]) -> list[str]:
    if "images" in row:
        return list(row["images"])
    if "standard_image" in row or "user_images" in row:
        users = row.get("user_images") or []
        return ([row["standard_image"]] if row.get("standard_image") else []) + ([users] if isinstance(users, str) else list(users))
    return [f"images/{int(row['id']):05d}.jpg"]


def write_folder(folder: Path, *, tarball: bool = False, blank_lines: bool = True) -> Path:
    """The corpus as a release folder in the authors' layout (zh files; `_en` copies too); with
    `tarball` the images come as images.tar.gz instead of an images/ folder."""
    folder.mkdir(parents=True, exist_ok=True)
    files: dict[str, bytes] = {}
    seed = 0
    for name in FILES.values():
        rows = corpus_rows(name)
        text = ""
        for k, row in enumerate(rows):
            for path in image_paths(row):
                seed += 1
                files.setdefault(path, _jpeg(seed))
            text += json.dumps(row, ensure_ascii=False) + "\n"
            if blank_lines and k == 1:
                text += "\n"  # a blank line: not counted in idx, as their loader skips it
        (folder / name).write_text(text, encoding="utf-8")
        (folder / name.replace(".jsonl", "_en.jsonl")).write_text(text, encoding="utf-8")
    if tarball:
        for path, data in files.items():  # kept beside the release, for the tests to compare with what was sent
            (_kept(folder) / path).parent.mkdir(parents=True, exist_ok=True)
            (_kept(folder) / path).write_bytes(data)
        with tarfile.open(folder / "images.tar.gz", "w:gz") as archive:
            for path, data in sorted(files.items()):
                info = tarfile.TarInfo(path)
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
    else:
        for path, data in files.items():
            (folder / path).parent.mkdir(parents=True, exist_ok=True)
            (folder / path).write_bytes(data)
    return folder


def _kept(folder: Path) -> Path:
    return folder.parent / f"{folder.name}-images"


def image_bytes(folder: Path, path: str) -> bytes:
    """An image of the release as written (from images/, or from the copy kept beside a tarball)."""
    found = folder / path
    return found.read_bytes() if found.is_file() else (_kept(folder) / path).read_bytes()

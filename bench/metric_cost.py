"""Metric cost: scoring paper-size prediction sets (1,650 nutrition, 2,884 classification) through
the metrics' pure functions and through `evaluate.load(...).compute`.

    python -m bench.metric_cost [--nutrition 1650] [--classification 2884]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path
from typing import Any

from bench.common import REPO, result, table, write_json
from eval.types import LETTERS, NUTRIENTS


def nutrition_set(n: int, seed: int = 0) -> tuple[list[str], list[dict[str, float]]]:
    """Raw model text in the shapes the parsers meet (bare answers, JSON in fences or prose, chain of thought
    with a final line, units and ranges, some that do not parse), seeded so every run scores the same text."""
    rng = random.Random(seed)
    predictions, references = [], []
    for i in range(n):
        truth = {"calories": round(rng.uniform(150, 1100), 1), "protein": round(rng.uniform(0, 60), 1),
                 "carbohydrates": round(rng.uniform(5, 140), 1), "fat": round(rng.uniform(1, 70), 1)}
        guess = {k: round(v * rng.uniform(0.6, 1.4), 1) for k, v in truth.items()}
        shape = i % 6
        if shape == 0:
            text = json.dumps(guess)
        elif shape == 1:
            zh = {"热量": f"{guess['calories']} kcal", "蛋白质": f"{guess['protein']} g",
                  "碳水化合物": f"{guess['carbohydrates']} g", "脂肪": f"{guess['fat']} g"}
            text = "```json\n" + json.dumps(zh, ensure_ascii=False) + "\n```"
        elif shape == 2:
            text = (f"1. The plate holds rice and braised pork.\n2. About 300 g in all.\nFinal answer: "
                    f'{{"calories": "{guess["calories"] - 20}-{guess["calories"] + 20}", "protein": {guess["protein"]}, '
                    f'"carbs": {guess["carbohydrates"]}, "fat": "约{guess["fat"]}克"}}')
        elif shape == 3:
            text = (f"热量：{guess['calories']} kcal，蛋白质：{guess['protein']} g，"
                    f"碳水化合物：{guess['carbohydrates']} g，脂肪：{guess['fat']} g")
        elif shape == 4:
            text = json.dumps({"energy_kj": round(guess["calories"] * 4.184, 1),
                               **{k: guess[k] for k in NUTRIENTS[1:]}})
        else:
            text = "I cannot tell the portion size from these photos."
        predictions.append(text)
        references.append(truth)
    return predictions, references


def classification_set(n: int, seed: int = 0) -> tuple[list[str], list[str], list[list[str]]]:
    """As `nutrition_set`, for the choice metric."""
    rng = random.Random(seed)
    predictions, references, options = [], [], []
    for i in range(n):
        names = [f"菜品{i}-{k}" for k in range(8)]
        answer = rng.choice(LETTERS)
        guess = answer if rng.random() < 0.6 else rng.choice(LETTERS)
        shapes = (guess, f"Answer: {guess}", f"答案：{guess}", f"({guess})",
                  f"1. The sauce is dark.\n2. Thin noodles.\nFinal answer: {guess}. {names[LETTERS.index(guess)]}",
                  "A or D, hard to say")
        predictions.append(shapes[i % 6])
        references.append(answer)
        options.append(names)
    return predictions, references, options


def _timed(fn: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def scored(metric_name: str, score: Any, key: str, inputs: dict[str, Any]) -> list[dict[str, Any]]:
    """`score` (the metric's pure function) beside `evaluate.load(...).compute` on the same inputs."""
    import evaluate

    pure_s, pure = _timed(lambda: score(**inputs))
    load_s, metric = _timed(lambda: evaluate.load(str(REPO / "metrics" / metric_name)))
    compute_s, computed = _timed(lambda: metric.compute(**inputs))
    if computed[key] != pure[key]:
        raise RuntimeError(f"{metric_name}: evaluate.compute and {score.__name__} disagree")
    note = f"{len(inputs['predictions'])} predictions, {pure['parse_failures']} unparsed; evaluate.load {load_s:.2f} s"
    return [result(f"metric {metric_name}: {score.__name__}", pure_s, None, note=note),
            result(f"  {metric_name}: evaluate compute / pure", compute_s, pure_s, note="same figures")]


def run(n_nutrition: int = 1650, n_classification: int = 2884) -> list[dict[str, Any]]:
    from metrics.dining_accuracy.core import score_choices
    from metrics.nutrition_error.core import score_nutrition

    preds, refs = nutrition_set(n_nutrition)
    rows = scored("nutrition_error", score_nutrition, "avg_mape", {"predictions": preds, "references": refs})
    preds, refs, options = classification_set(n_classification)
    return rows + scored("dining_accuracy", score_choices, "accuracy",
                         {"predictions": preds, "references": refs, "options": options})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.metric_cost", description=__doc__.splitlines()[0])
    parser.add_argument("--nutrition", type=int, default=1650)
    parser.add_argument("--classification", type=int, default=2884)
    parser.add_argument("--json", type=Path, help="also write the results as JSON")
    args = parser.parse_args(argv)
    rows = run(args.nutrition, args.classification)
    print(table(rows))
    write_json(args.json, {"results": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

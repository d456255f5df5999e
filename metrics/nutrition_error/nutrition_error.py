"""DiningBench nutrition estimation error: parse a model's nutrition JSON, score MAE/RMSE/MAPE. The `evaluate` module.

The parsers and per-item scorers live in `core.py`, so the harness need not import `evaluate` (seconds:
it imports transformers).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import datasets
import evaluate

from .core import (
    NUTRIENTS,
    nutrition_figures,
    nutrition_from_mapping,
    parse_nutrition,
    score_item,
    score_nutrition,
    score_parsed_nutrition,
)

# The metric, and the parsers and scorers people import from the metric module (they live in core.py).
__all__ = ["NutritionError", "NUTRIENTS", "nutrition_figures", "nutrition_from_mapping", "parse_nutrition", "score_item", "score_nutrition", "score_parsed_nutrition"]

_CITATION = """\
@misc{diningbench,
  title = {DiningBench: A Hierarchical Multi-view Benchmark for Perception and Reasoning in the Dietary Domain}
}
"""

_DESCRIPTION = """\
Error of per-serving nutrition estimates (calories in kcal; protein, carbohydrates, fat in g).
Predictions are raw model text (JSON, fenced or in prose, zh/en keys, units, ranges) or dicts.
Per component MAE, RMSE, MAPE; `avg_mape` (mean of the four MAPEs) is the headline. An unparsed
prediction counts as predicting 0 for every component (APE 100%); `*_parsed_only` figures leave
those items out. A component whose ground truth is 0 is left out of that component's MAPE and
counted. All ratios are fractions (0.2445 = 24.45%).
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str` or `dict`): raw model outputs, or dicts of numbers
        (None for a sample that failed to generate).
    references (`list` of `dict`): `{"calories", "protein", "carbohydrates", "fat"}` per item.
Returns (flat keys; c in calories, protein, carbohydrates, fat):
    {c}_mae, {c}_rmse (kcal or g, >= 0), {c}_mape, {c}_median_ape, {c}_wmape (fractions, >= 0),
    avg_mape (mean of the 4 MAPEs), median_ape (over all item-component APEs), wmape (mean of
    the 4 pooled sum|e|/sum|y|), the same with the suffix `_parsed_only`, {c}_zero_gt and
    zero_gt_exclusions (ground-truth zeros left out of MAPE), n, parse_failures, and `per_item`.
Examples:
    >>> import evaluate
    >>> metric = evaluate.load("metrics/nutrition_error")
    >>> r = metric.compute(predictions=['{"calories": 450, "protein": 20, "carbohydrates": 50, "fat": 18}'],
    ...                    references=[{"calories": 500, "protein": 25, "carbohydrates": 50, "fat": 20}])
    >>> round(r["avg_mape"], 4)  # (0.1 + 0.2 + 0.0 + 0.1) / 4
    0.1
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class NutritionError(evaluate.Metric):
    """`evaluate` wrapper around `score_nutrition`. Dict predictions are stored as their JSON text (Arrow
    needs one type per column) and parsed back with the same parser, so text and dicts can be mixed."""

    def _enforce_nested_string_type(self, schema: Any, obj: Any) -> Any:
        """`evaluate` checks the type of a batch's first prediction only and refuses None there (while
        None later in the list passes): a failed answer is None wherever it falls, as documented."""
        if obj is None:
            return None
        return super()._enforce_nested_string_type(schema, obj)

    def _info(self) -> evaluate.MetricInfo:
        nutrient_features = {c: datasets.Value("float64") for c in NUTRIENTS}
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {"predictions": datasets.Value("string"), "references": nutrient_features}
            ),
            reference_urls=[],
        )

    @staticmethod
    def _as_text(prediction: Any) -> Any:
        if isinstance(prediction, Mapping):
            return json.dumps(dict(prediction), ensure_ascii=False, default=str)
        return prediction

    @staticmethod
    def _reference_only(reference: Any) -> Any:
        # Dataset rows carry more fields than the four nutrients; keep only what is scored.
        if isinstance(reference, Mapping):
            return {c: reference.get(c) for c in NUTRIENTS}
        return reference

    def add_batch(self, *, predictions: Any = None, references: Any = None, **kwargs: Any) -> None:
        """Add a batch of predictions (text or dicts) and reference dicts."""
        if predictions is not None:
            predictions = [self._as_text(p) for p in predictions]
        if references is not None:
            references = [self._reference_only(r) for r in references]
        super().add_batch(predictions=predictions, references=references, **kwargs)

    def add(self, *, prediction: Any = None, reference: Any = None, **kwargs: Any) -> None:
        """Add one prediction (text or dict) and its reference dict."""
        super().add(prediction=self._as_text(prediction), reference=self._reference_only(reference), **kwargs)

    def _compute(self, predictions: list[str | None], references: list[dict[str, float]]) -> dict[str, Any]:
        return score_nutrition(predictions, references)

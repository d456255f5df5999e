"""DiningBench fine-grained classification accuracy: parse a model's option letter, score it. The `evaluate` module.

The parsers and per-item scorers live in `core.py`, so the harness need not import `evaluate` (seconds:
it imports transformers).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import datasets
import evaluate

from .core import (
    parse_choice,
    score_choices,
    score_parsed_choices,
)

# The metric, and the parsers and scorers people import from the metric module (they live in core.py).
__all__ = ["DiningAccuracy", "parse_choice", "score_choices", "score_parsed_choices"]

_CITATION = """\
@misc{diningbench,
  title = {DiningBench: A Hierarchical Multi-view Benchmark for Perception and Reasoning in the Dietary Domain}
}
"""

_DESCRIPTION = """\
Accuracy of multiple-choice dish identification. Each prediction is a model's raw text; the option
letter is parsed strictly (the lone letter) and then leniently ("Answer: C", "答案：C", "(C)", "选C",
"C. name", "**C**", the exact text of one option). With chain of thought the final answer wins.
Ambiguous or unreadable answers are counted in `parse_failures` and scored as wrong, never guessed.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): raw model outputs (None for a sample that failed to generate).
    references (`list` of `str`): the correct letters, e.g. "C".
    n_options (`int`, default 8): number of options; letters are the first `n_options` of A-Z.
    options (`list` of `list` of `str`, optional): the option names of each item, so that an
        answer naming exactly one option counts; their length then sets the letters per item.
Returns:
    accuracy (`float` in [0, 1]): correct / n, unparsed counted as wrong.
    n (`int`): number of items.
    parse_failures (`int`): predictions from which no single letter could be read.
    correct (`list` of `bool`), parsed (`list` of `str` or None): per item, for analysis.
Examples:
    >>> import evaluate
    >>> metric = evaluate.load("metrics/dining_accuracy")
    >>> metric.compute(predictions=["C", "Answer: B", "maybe A or D"], references=["C", "A", "D"])["accuracy"]
    0.3333333333333333
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class DiningAccuracy(evaluate.Metric):
    """`evaluate` wrapper around `score_choices`."""

    def _enforce_nested_string_type(self, schema: Any, obj: Any) -> Any:
        """`evaluate` checks the type of a batch's first prediction only and refuses None there (while
        None later in the list passes): a failed answer is None wherever it falls, as documented."""
        if obj is None:
            return None
        return super()._enforce_nested_string_type(schema, obj)

    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {"predictions": datasets.Value("string"), "references": datasets.Value("string")}
            ),
            reference_urls=[],
        )

    def _compute(
        self,
        predictions: list[str | None],
        references: list[str],
        n_options: int = 8,
        options: Sequence[Sequence[str] | None] | None = None,
    ) -> dict[str, Any]:
        return score_choices(predictions, references, n_options=n_options, options=options)

"""DiningBench VQA accuracy: a binary LLM-as-a-judge verdict per answer, with a closed-form rule first. The `evaluate` module.

The parsers and per-item scorers live in `core.py`, so the harness need not import `evaluate` (seconds:
it imports transformers).
"""

from __future__ import annotations

import warnings
from typing import Any

import datasets
import evaluate

from .core import (
    JUDGE_PROMPT,
    JUDGE_PROMPT_VERSION,
    Judge,
    VerdictCache,
    build_judge_prompt,
    default_cache_dir,
    final_answer,
    injection_suspected,
    judge_items,
    parse_verdict,
    rule_verdict,
    score_verdicts,
)

# The metric, and the parsers and scorers people import from the metric module (they live in core.py).
__all__ = ["JudgeAccuracy", "JUDGE_PROMPT", "JUDGE_PROMPT_VERSION", "Judge", "VerdictCache", "build_judge_prompt", "default_cache_dir", "final_answer", "injection_suspected", "judge_items", "parse_verdict", "rule_verdict", "score_verdicts"]

_CITATION = """\
@misc{diningbench,
  title = {DiningBench: A Hierarchical Multi-view Benchmark for Perception and Reasoning in the Dietary Domain}
}
"""

_DESCRIPTION = f"""\
Accuracy of free-text answers to dietary questions, from a binary judge verdict against the
reference answer (judge prompt version {JUDGE_PROMPT_VERSION}, printed in the metric card). The
judge must end with `GRADE: C` or `GRADE: I`; the last such line wins; an unreadable verdict is
unscored (never counted as correct, never guessed). Closed-form references (comply / does not
comply, 符合/不符合, yes/no, 是/否) are decided by a deterministic rule when both sides are
unambiguous. Verdicts are cached by (judge model, prompt hash).
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): candidate answers (raw model text; None if generation failed).
    references (`list` of `str`): reference answers.
    questions (`list` of `str`): the questions.
    judge: a callable `judge(prompt) -> str` returning the judge's raw reply (it owns its
        retries), or None to decide by rule only. In a DiningBench checkout
        `eval.judge.make_judge("openai:gpt-4o")` builds one over any of the harness's backends.
    judge_model (`str`, optional): name used in the cache key; without it nothing is cached.
    cache_dir (`str`, optional): verdict cache folder (default ~/.cache/diningbench/judge).
    concurrency (`int`, default 1): judge calls in flight at once.
Returns:
    accuracy (`float` in [0, 1]): correct / n (unscored counts as not correct).
    accuracy_scored (`float` in [0, 1] or None): correct / scored items.
    n, unscored, decided_by_rule (`int`), verdicts (`list` of "C" / "I" / None),
    decided_by (`list` of "rule" / "judge" / "cache" / "no_answer" / "judge_error" / "none").
    injection_suspected (`int`): answers that carry text aimed at the judge (a `GRADE:` line, the
        fence's markers, "ignore previous instructions"); the candidate is always fenced and its
        verdict tokens neutralized, and this count says how often someone tried.
Examples:
    >>> import evaluate
    >>> metric = evaluate.load("metrics/judge_accuracy")
    >>> r = metric.compute(predictions=["No, it contains cheese."], references=["No. The sauce contains cheese."],
    ...                    questions=["Is this dish vegan?"], judge=lambda prompt: "Same conclusion.\\nGRADE: C")
    >>> r["accuracy"], r["decided_by_rule"]
    (1.0, 1)
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class JudgeAccuracy(evaluate.Metric):
    """`evaluate` wrapper around `judge_items` + `score_verdicts`."""

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
            features=datasets.Features({
                "predictions": datasets.Value("string"),
                "references": datasets.Value("string"),
                "questions": datasets.Value("string"),
            }),
            reference_urls=[],
        )

    def _compute(
        self,
        predictions: list[str | None],
        references: list[str],
        questions: list[str],
        judge: Judge | None = None,
        judge_model: str | None = None,
        cache_dir: str | None = None,
        concurrency: int = 1,
    ) -> dict[str, Any]:
        outcomes = judge_items(questions, references, predictions, judge, judge_model, cache_dir,
                               concurrency=concurrency)
        result = score_verdicts([v for v, _, _ in outcomes], [d for _, d, _ in outcomes])
        failed = sum(d == "judge_error" for _, d, _ in outcomes)
        if failed:  # the figure counts them as not correct: say so once, not silently
            warnings.warn(f"judge_accuracy: the judge failed on {failed} of {len(outcomes)} items (no key, a server "
                          f"error, an unreadable grade); they count as not correct (decided_by 'judge_error')",
                          RuntimeWarning, stacklevel=3)
        result["injection_suspected"] = sum(injection_suspected(final_answer(p)) for p in predictions)
        result["judge_prompt_version"] = JUDGE_PROMPT_VERSION
        return result

"""The authors' protocol (`--protocol official`): their three scripts' requests, readings and figures.

Their scripts differ per task: `RULES` holds each one's rules; their readings are `eval/official.py`'s.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, cast

import numpy as np

from diningbench import finite_number
from eval import numbers, tasks
from eval import official as rules
from eval.images import ImageError, ImagePart, stored_bytes
from eval.judge import BackendJudge, JudgeError
from eval.limiter import threads_for
from eval.numbers import one_sided_bound
from eval.protocols.base import Protocol, Tally, TaskScoring, register, request_hash
from eval.protocols.ours import left_out, records_of
from eval.protocols.records import (
    authors_rows,
    parsed_answers,
    score_prediction,
    score_task,
    set_verdict,
    unjudged,
    usable_reference,
)
from eval.settings import N_BOOT, RunSettings, UsageError
from eval.specs import SpecError, parse_spec
from eval.stats import cluster_bootstrap_column_means_ci, cluster_bootstrap_mean_ci
from eval.types import (
    NUTRIENTS,
    GenerationConfig,
    Message,
    OfficialReading,
    Prediction,
    PredictionLine,
    Request,
    Row,
    ScoreRecord,
    TaskFigures,
)
from metrics.judge_accuracy.core import VerdictCache, score_verdicts


def published(row: Mapping[str, Any]) -> Mapping[str, Any]:
    """The row as the authors published it (a converted release keeps it as JSON text); {} if none."""
    found = row.get("published")
    if isinstance(found, str):
        try:
            found = json.loads(found)
        except ValueError:
            return {}
    return found if isinstance(found, Mapping) else {}


# ------------------------------------------------------------------ each script's rules
class ScriptRules:
    """What one of their scripts does for its task. By default: every image the row lists is sent."""

    writes_gt_answer = False  # its inference writes the reference letter on each prediction line

    def headline(self, figures: Mapping[str, Any]) -> tuple[str, float | None]:
        """(name, value as a fraction) of the figure their script prints that Table 2 reports."""
        raise NotImplementedError

    def images(self, row: Mapping[str, Any], indices: Sequence[int]) -> list[int]:
        """Positions in the row's images that their script sends for `indices` (--num_images_idxs)."""
        return list(range(len(row.get("images") or row.get("image_paths") or [])))

    def fails(self, row: Mapping[str, Any], indices: Sequence[int]) -> str | None:
        """Why their script cannot make this row's request (a failed request in their files), or None."""
        return None

    def item(self, model_pred: str, row: Mapping[str, Any], gt_answer: str | None = None) -> OfficialReading:
        """What their script reads of one answer (`read`) and whether it counts as right (`correct`)."""
        raise NotImplementedError

    def figures(self, rows: Sequence[Mapping[str, Any]], preds: Mapping[int, PredictionLine]) -> dict[str, Any]:
        raise NotImplementedError

    def item_values(self, rows: Sequence[Mapping[str, Any]], preds: Mapping[int, PredictionLine]) -> np.ndarray:
        """Each item's share of the headline, as their script counts it: 1/0 for right/wrong (a vector whose
        mean is the headline), or per-component percentage errors (items x components, NaN = not counted),
        whose mean of column means is it. What the item bootstrap resamples."""
        raise NotImplementedError


class ClassificationRules(ScriptRules):
    writes_gt_answer = True

    def headline(self, figures: Mapping[str, Any]) -> tuple[str, float | None]:
        return "acc", figures.get("acc")

    def images(self, row: Mapping[str, Any], indices: Sequence[int]) -> list[int]:
        """Their classification script indexes the list [merchant photo (when there is one)] + customer
        photos, so a row without a merchant photo shifts every index; nothing valid: the first image."""
        n = len(row.get("images") or row.get("image_paths") or [])
        chosen = [k for k in indices if (k == 0 and n > 0) or (k != 0 and k < n)]
        return chosen or ([0] if n else [])

    def item(self, model_pred: str, row: Mapping[str, Any], gt_answer: str | None = None) -> OfficialReading:
        gt = gt_answer or rules.classification_gt(row)
        correct, unreadable, letter = rules.classification_item(model_pred, gt)
        return {"read": letter or None, "correct": correct, "unreadable": unreadable}

    def figures(self, rows: Sequence[Mapping[str, Any]], preds: Mapping[int, PredictionLine]) -> dict[str, Any]:
        return rules.classification_figures(rows, preds)

    def item_values(self, rows: Sequence[Mapping[str, Any]], preds: Mapping[int, PredictionLine]) -> np.ndarray:
        return np.array([float(hit) for hit, _, _ in rules.classification_items(rows, preds)])


class NutritionRules(ScriptRules):
    def headline(self, figures: Mapping[str, Any]) -> tuple[str, float | None]:
        value = figures.get("avg_mape")  # their MAPE is in percent; tables show fractions as percent
        return "avg_mape", None if value is None else value / 100

    def images(self, row: Mapping[str, Any], indices: Sequence[int]) -> list[int]:
        """Their nutrition script: 0 is the merchant photo (when there is one), k the k-th customer photo;
        nothing valid: the merchant photo, else the first customer photo."""
        roles = list(row.get("image_roles") or [])
        n = len(row.get("images") or row.get("image_paths") or roles)
        standard = 1 if roles[:1] == ["reference"] else 0
        chosen = [k - 1 + standard for k in indices if (k == 0 and standard) or (k > 0 and k - 1 < n - standard)]
        return chosen or ([0] if n else [])

    def fails(self, row: Mapping[str, Any], indices: Sequence[int]) -> str | None:
        """Their nutrition script indexes `user_images` as a list: one given as a single string is indexed
        by character, so a customer photo it picks (an index past 0, or its fallback when the row has no
        merchant photo) is a one-character path, which is no file, and the request fails."""
        found = published(row)
        if not isinstance(users := found.get("user_images"), str):
            return None
        standard = found.get("standard_image")
        picked = [users[k - 1] for k in indices if 0 < k <= len(users)]
        if not picked and not standard and users:
            picked = [users[0]]  # nothing chosen and no merchant photo: their fallback, the string's first character
        return f"Image does not exist: {picked[0]}" if picked else None

    def item(self, model_pred: str, row: Mapping[str, Any], gt_answer: str | None = None) -> OfficialReading:
        answer = rules.parse_nutrition_answer(model_pred.strip())
        read = None if answer is None else {k: answer[k] for k in NUTRIENTS}
        return {"read": read, "correct": None, "parse_failed": answer is None}

    def figures(self, rows: Sequence[Mapping[str, Any]], preds: Mapping[int, PredictionLine]) -> dict[str, Any]:
        return rules.nutrition_figures(rows, preds)

    def item_values(self, rows: Sequence[Mapping[str, Any]], preds: Mapping[int, PredictionLine]) -> np.ndarray:
        """Percentage errors per nutrient (an unread answer: 100; a zero reference: not counted)."""
        found = [[np.nan if errors.get(k) is None or errors[k][2] is None else errors[k][2] for k in NUTRIENTS]
                 for _, errors in filter(None, rules.nutrition_items(rows, preds))]  # ground truth missing: left out
        return np.array(found, dtype=float).reshape(-1, len(NUTRIENTS))


class VqaRules(ScriptRules):
    def headline(self, figures: Mapping[str, Any]) -> tuple[str, float | None]:
        if "model_evaluate_accuracy" in figures:
            return "model_evaluate_accuracy", figures["model_evaluate_accuracy"]
        return "rougeL_f1 (no judge)", figures.get("rougeL_f1")

    def fails(self, row: Mapping[str, Any], indices: Sequence[int]) -> str | None:
        """Their VQA script iterates `images` as a list: one given as a single string is split into
        characters, one-character paths that are no files, and the request fails."""
        images = published(row).get("images")
        return f"Image does not exist: {images[0]}" if isinstance(images, str) and images else None

    def item(self, model_pred: str, row: Mapping[str, Any], gt_answer: str | None = None) -> OfficialReading:
        """Before the judge: an empty or failed answer is wrong without a call; a row with an empty
        reference is left out of their total (`counted` False)."""
        answer = model_pred.strip()
        counted = bool(row.get("ground_truth", ""))
        failed = rules.is_error(answer) or not answer
        return {"read": answer, "correct": False if failed and counted else None, "counted": counted,
                "judged": counted and not failed}

    def figures(self, rows: Sequence[Mapping[str, Any]], preds: Mapping[int, PredictionLine]) -> dict[str, Any]:
        """ROUGE, and the judge's figures from each prediction's `eval_match` where the judge ran."""
        figures = rules.vqa_rouge_figures(rows, preds)
        if verdicts := self.verdicts(rows, preds):
            figures.update(rules.vqa_judge_figures(verdicts))
        return figures

    def verdicts(self, rows: Sequence[Mapping[str, Any]], preds: Mapping[int, PredictionLine]) -> dict[int, bool]:
        """Their judge's verdict (`eval_match`) per judged item, by `idx`."""
        return {i: bool(preds[i].get("eval_match")) for i, *_ in rules.vqa_tasks(rows, preds) if "eval_match" in preds[i]}

    def item_values(self, rows: Sequence[Mapping[str, Any]], preds: Mapping[int, PredictionLine]) -> np.ndarray:
        """Their judge's verdict per judged item (none before a judge ran: their figure is then ROUGE)."""
        return np.array([float(match) for match in self.verdicts(rows, preds).values()])


RULES: dict[str, ScriptRules] = {"classification": ClassificationRules(), "nutrition": NutritionRules(),
                                 "vqa": VqaRules()}


def rules_for(task: str) -> ScriptRules:
    try:
        return RULES[task]
    except KeyError:
        raise UsageError(f"--protocol official has no script for task {task!r} (theirs score "
                         f"{', '.join(RULES)})") from None


def item_interval(values: np.ndarray, n_boot: int) -> list[float] | None:
    """95% interval of their headline over item resamples (their release names no merchant), as a
    fraction; an all-right or all-wrong figure gets the one-sided bound, items counted as the trials."""
    if len(values) < 2:
        return None
    if values.ndim == 2:  # percentage errors: the mean of the components' means, as a fraction
        if np.isnan(values).all(axis=0).any():
            return None
        low, high = cluster_bootstrap_column_means_ci(values / 100, None, n_boot=n_boot)
    else:
        low, high = cluster_bootstrap_mean_ci(values, None, n_boot=n_boot)
        if low == high and low in (0.0, 1.0):
            low, high = one_sided_bound(low, len(values))
    return [float(low), float(high)]


def interval_figures(task: str, rows: Sequence[Mapping[str, Any]], preds: Mapping[int, PredictionLine],
                     n_boot: int) -> TaskFigures:
    """`official_ci95` (their headline's item-bootstrap interval, a fraction; null when it cannot be
    resampled) and `official_resampled` beside their figures in a task's entry."""
    return {"official_ci95": item_interval(rules_for(task).item_values(rows, preds), n_boot),
            "official_resampled": "items"}


# ------------------------------------------------------------------ their prediction lines
def served_name(spec: str | None) -> str:
    """The model name their scripts know a model by (`--model_name`): the spec's model part; of a
    framework's `provider/name` (inspect_ai's), the name the server was sent."""
    try:
        return parse_spec(spec or "")[1]
    except SpecError:
        return str(spec or "").rpartition("/")[2]


def official_preds(task: str, predictions: Sequence[Prediction], rows: Sequence[Row],
                   model: str | None, chosen: tuple[int, ...] = (0,)) -> dict[int, PredictionLine]:
    """Each answer as a line of their prediction file, by `idx`: `model_pred` (their cleaning of the
    text, or the failure marker) and, for classification, the `gt_answer` their inference writes.
    A request their script cannot make for a row (`ScriptRules.fails`) is their failure marker."""
    script, name = rules_for(task), served_name(model)
    found: dict[int, PredictionLine] = {}
    for p, row in zip(predictions, rows, strict=True):
        kept: PredictionLine = p.imported or {}  # an imported line: what their file says
        broken = script.fails(row, chosen)
        line: PredictionLine = {"model_pred": kept["model_pred"] if isinstance(kept.get("model_pred"), str)
                                else rules.infer_error(broken) if broken
                                else rules.model_pred(p.raw, p.error, name)}
        if script.writes_gt_answer:
            line["gt_answer"] = kept["gt_answer"] if "gt_answer" in kept else rules.classification_gt(row)
        if isinstance(kept.get("eval_match"), bool):
            line.update({"eval_match": kept["eval_match"], "eval_result": kept.get("eval_result")})
        found[int(row["idx"])] = line
    return found


def reading(task: str, line: PredictionLine, row: Mapping[str, Any]) -> OfficialReading:
    """A record's `official` object: their reading of one answer, beside ours."""
    return {"idx": int(row["idx"]), "model_pred": line["model_pred"],
            **rules_for(task).item(line["model_pred"], row, line.get("gt_answer"))}


def reading_of(record: Mapping[str, Any]) -> OfficialReading | None:
    """A scores.jsonl record's reading by their rules (its `official` object), None when it has none."""
    found = record.get("official")
    return cast(OfficialReading, found) if isinstance(found, dict) else None  # a line from a file: an object


# ------------------------------------------------------------------ their judge, ours beside it
def judge_prompt_of(row: Mapping[str, Any], mine: OfficialReading) -> str | None:
    """Their Chinese judge prompt for a VQA answer their judge step asks about; None for an answer it
    does not (an empty reference is left out; an empty or failed answer is wrong without a call)."""
    if not mine.get("judged"):
        return None
    return rules.judge_prompt(rules.vqa_question(row), str(row.get("ground_truth") or ""), mine["read"])


def take_reply(line: PredictionLine, record: ScoreRecord, reply: str | None) -> None:
    """Their verdict (`eval_match`, their keywords) and ours (the same reply read strictly) for one VQA
    answer. `reply` None: their step did not ask (a failed answer counts wrong, a row without a
    reference is left out), or the judge failed every attempt (wrong, as theirs)."""
    mine = record["official"]
    if mine.get("judged") and reply is not None:
        line.update({"eval_match": rules.keyword_verdict(reply), "eval_result": reply})
        mine.update({"correct": line["eval_match"], "judge_reply": reply, "strict": rules.strict_verdict(reply)})
    elif mine.get("counted"):
        marker = rules.facts()["error_marker"]["judge" if mine.get("judged") else "inference"]
        line.update({"eval_match": False, "eval_result": marker})
        mine.update({"correct": False, "judge_reply": marker})


def official_judge(records: list[ScoreRecord], preds: dict[int, PredictionLine],
                   file_rows: Sequence[Row], judge: BackendJudge | None, judge_model: str | None,
                   cache_dir: Path, concurrency: int) -> None:
    """Their judge step: the Chinese judge prompt for each answer that counts, its reply read by their
    keywords (`eval_match`, `eval_result` on the prediction line); an empty or failed answer is wrong
    without a call; a judge that fails its attempts gives `__EVAL_ERROR__` and counts wrong, as theirs."""
    by_idx = {r["official"]["idx"]: r for r in records if "official" in r}
    for i, record in by_idx.items():  # verdicts their file already holds (an imported, judged run)
        if "eval_match" in preds.get(i, {}):
            record["official"].update({"correct": preds[i]["eval_match"], "judge_reply": preds[i].get("eval_result"),
                                       "strict": rules.strict_verdict(preds[i].get("eval_result"))})
    if judge is None:
        return
    cache = VerdictCache(cache_dir, judge_model or "")
    error = rules.facts()["error_marker"]["judge"]
    pending = []
    for i, answer, reference, question, failed in rules.vqa_tasks(file_rows, preds):
        if "eval_match" in preds[i]:
            continue
        if failed:
            preds[i].update({"eval_match": False, "eval_result": rules.facts()["error_marker"]["inference"]})
        else:
            pending.append((i, rules.judge_prompt(question, reference, answer)))

    def ask(prompt: str) -> str:
        hit = cache.get(prompt)
        if hit is not None:
            return str(hit["raw"])
        try:
            reply = judge(prompt).strip()
        except JudgeError:
            return error
        cache.put(prompt, "C" if rules.keyword_verdict(reply) else "I", reply)
        return reply

    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        replies = list(pool.map(ask, [prompt for _, prompt in pending]))
    for (i, _), reply in zip(pending, replies, strict=True):
        match = reply != error and rules.keyword_verdict(reply)
        preds[i].update({"eval_match": match, "eval_result": reply})
        if (found := by_idx.get(i)) is not None:
            found["official"].update({"correct": match, "judge_reply": reply, "strict": rules.strict_verdict(reply)})


def strict_verdict_of(record: ScoreRecord) -> str | None:
    """Ours beside theirs for one judged answer, set on its record: wrong when their step did not judge
    it (empty or failed), else their judge's reply read strictly; None (unscored) for a reply that says
    neither yes nor no plainly, or none."""
    mine = record.get("official") or {}
    if mine.get("judged") is False:
        verdict: str | None = "I"
    elif mine.get("strict") is not None:
        verdict = "C" if mine["strict"] else "I"
    else:
        verdict = None
    set_verdict(record, verdict, "judge" if verdict else "unscored")
    return verdict


def score_strict_judged(task: tasks.Task, records: list[ScoreRecord], judge_model: str | None,
                        n_boot: int) -> TaskFigures:
    """Ours beside theirs for a judged task: the same judge reply read strictly (one word that says yes
    or no, `official.strict_verdict`); a failed or empty answer is wrong; a reply that says neither
    plainly leaves the item unscored."""
    verdicts = [strict_verdict_of(record) for record in records]
    if not any("judge_reply" in (r.get("official") or {}) for r in records):
        return unjudged(records)
    result = score_verdicts(verdicts, ["judge" if v else "unscored" for v in verdicts])
    found = numbers.task_figures(task, records, result, n_boot=n_boot)
    found.update({"scored": True, "judge": judge_model, "judge_errors": 0, "injection_suspected": 0})
    return found


def disagreements(task: tasks.Task, records: Sequence[ScoreRecord]) -> int:
    """Items on which their reading and ours differ: right against wrong (classification, VQA), or
    read against unread or other values (nutrition)."""
    count = 0
    for record in records:
        mine = record.get("official") or {}
        if task.measure == "ape":
            ours, theirs = record.get("parsed"), mine.get("read")
            if ours is None or theirs is None:
                same = ours is None and theirs is None
            else:
                same = all(rules.as_float(theirs.get(k)) == rules.as_float(ours.get(k)) for k in task.components)
            count += not same
        elif task.judged:
            strict = mine.get("strict")
            count += mine.get("correct") is not None and strict is not None and strict != mine.get("correct")
        else:
            count += bool(mine.get("correct")) != bool(record.get("correct"))
    return count


# ------------------------------------------------------------------ the protocol
JUDGE = rules.facts()["vqa"]


class Official(Protocol):
    name = "official"
    title = "the authors' protocol"
    recorded = ("protocol", "image_indices")
    asks_as_published = True

    def claims(self, rows: Sequence[Mapping[str, Any]]) -> bool:
        return authors_rows(rows)

    def check(self, settings: RunSettings) -> None:
        for task in settings.tasks:
            rules_for(task)
        for flag, value, default in (("--images", settings.images, None), ("--cot", settings.cot, False),
                                     ("--circular", settings.circular, False),
                                     ("--image-order", settings.image_order, "reference-first")):
            if value != default:
                raise UsageError(f"{flag} is this project's protocol; --protocol official sends each row's prompt "
                                 "verbatim with the images --image-indices names")

    def check_rows(self, task: tasks.Task, rows: Sequence[Mapping[str, Any]], settings: RunSettings) -> None:
        if not authors_rows(rows):
            raise UsageError(f"--protocol official asks each row's own prompt: {settings.dataset or 'the embedded sample'} "
                             "is not the authors' release (no prompt in its rows); drop --protocol or pass their files")

    def folder_parts(self, settings: RunSettings) -> list[str]:
        return ["official", "idx" + "-".join(map(str, settings.indices))]

    def describe(self, settings: RunSettings) -> str:
        return f"the authors' protocol, image indices {settings.image_indices or '0'}"

    def indices_sent(self, settings: RunSettings) -> tuple[int, ...] | None:
        return settings.indices

    def sweep_cell(self, cell: RunSettings, *, cot: bool, views: int) -> RunSettings:
        """A view count N is their image indices 0..N-1: the merchant's photo and the first N-1 customer
        photos, as their multi-view experiment sends them."""
        if cot:
            raise UsageError("--cot is this project's protocol; the authors' release is asked with its own prompts")
        return dataclasses.replace(cell, protocol=self.name, images=None,
                                   image_indices=",".join(str(k) for k in range(views)))

    # ------------------------------------------------------------ asking
    def generation(self, settings: RunSettings, epoch: int = 0) -> GenerationConfig:
        """Temperature 0 and their budget (14,336 tokens, unless --max-tokens says otherwise) and no seed,
        as their scripts send; a reasoning setting the user asked for is sent too (their scripts send none)."""
        budget = rules.facts()["generation"]
        theirs = settings.protocol_budget
        return GenerationConfig(temperature=budget["temperature"], max_tokens=budget["max_tokens"] if theirs
                                else settings.max_tokens, seed=settings.seed + epoch if epoch else None,
                                reasoning_effort=settings.reasoning_effort, thinking_budget=settings.thinking_budget,
                                fit_to_context=theirs)

    def views(self, task: tasks.Task, row: Row, settings: RunSettings) -> list[ImagePart]:
        """The images their scripts send for this row: chosen by the task's rule from --image-indices,
        each the file's bytes as stored, labelled image/jpeg as they label every image."""
        cells = row.get("images") or []
        roles = row.get("image_roles") or []
        mime = rules.facts()["generation"]["image_mime"]
        try:
            return [ImagePart(stored_bytes(cells[k], item_id=str(row["id"]), index=k), mime,
                              roles[k] if k < len(roles) else "user")
                    for k in rules_for(task.name).images(row, settings.indices)]
        except ImageError as exc:
            raise ImageError(f"{task.name}: {exc}") from None

    def request(self, task: tasks.Task, row: Row, settings: RunSettings, epoch: int = 0, rotation: int = 0,
                scope: str | None = None) -> Request | Callable[[], Request]:
        """The images, then the row's prompt verbatim, in one user turn: the stored bytes, never
        re-encoded, so it is built at once (microseconds)."""
        text = str(row.get("prompt") or "")
        views = self.views(task, row, settings)
        hashes = [hashlib.sha256(v.data).hexdigest() for v in views]
        digest = request_hash(settings, task.name, text, hashes, epoch, recorded=self.recorded)
        return Request(id=str(row["id"]), task=task.name, messages=(Message(role="user", content=(*views, text)),),
                       config=self.generation(settings, epoch), request_hash=digest,
                       metadata={"n_images": len(views), "epoch": epoch, "rotation": 0})

    def prompt_text(self, task: tasks.Task, row: Row, settings: RunSettings) -> str:
        return str(row.get("prompt") or "")  # the row's prompt verbatim, as `request` sends it

    # ------------------------------------------------------------ scoring
    def scores_row(self, task: tasks.Task, row: Mapping[str, Any], lang: str) -> bool:
        return usable_reference(task, row, lang)

    def judge_options(self) -> dict[str, Any]:
        """Their judge step: no seed, their attempts and token limit."""
        return {"seed": None, "max_attempts": int(JUDGE["judge_attempts"]), "max_tokens": int(JUDGE["judge_max_tokens"])}

    def judge_reply(self, record: Mapping[str, Any]) -> str | None:
        reply = (reading_of(record) or {}).get("judge_reply")  # their judge prompt's reply, kept by take_reply
        return reply if isinstance(reply, str) else None

    def score(self, job: TaskScoring) -> tuple[list[ScoreRecord], TaskFigures]:
        """Ours on the rows whose reference ours can read (its judged task from their judge's replies,
        read strictly), then theirs on every answer, as the `official` object of the entry."""
        answered = job.predictions  # every answer: the authors' scoring reads them all
        mine = [p for p in answered if usable_reference(job.spec, job.by_id[p.id], job.lang)]
        records = records_of(job, mine)
        entry: TaskFigures = {}
        if not job.spec.judged:
            rows = [job.by_id[p.id] for p in mine]
            entry = score_task(job.spec, records, parsed_answers(job.spec, mine, rows, job.lang, job.fresh), rows,
                               job.lang, job.n_boot)
        judge = BackendJudge.from_settings(job.judge, job.judge_base_url, job.settings, **self.judge_options()) \
            if job.spec.judged and job.judge else None
        try:
            found = self.figures_of(job, records, answered, judge)
            if job.spec.judged:
                entry = score_strict_judged(job.spec, records, job.judge, job.n_boot)
            entry.update(found)
            left_out(entry, answered, mine)
        finally:
            if judge is not None:
                judge.close()
        return records, entry

    def figures_of(self, job: TaskScoring, records: list[ScoreRecord], predictions: Sequence[Prediction],
                   judge: BackendJudge | None) -> TaskFigures:
        """The `official` object of a task's entry: exactly the figures their script prints for these
        answers (epoch 0), and each record's `official` reading beside ours."""
        file_rows = sorted(job.by_id.values(), key=lambda r: int(r["idx"]))
        plain = [p for p in predictions if p.epoch == 0 and not p.rotation]
        item_rows = [job.by_id[p.id] for p in plain]
        preds = official_preds(job.task, plain, item_rows, job.settings.model, job.settings.indices)
        scored = {r["id"]: r for r in records if r.get("epoch", 0) == 0}
        for p, row in zip(plain, item_rows, strict=True):
            if p.id in scored:
                scored[p.id]["official"] = reading(job.task, preds[int(row["idx"])], row)
        if job.spec.judged:
            official_judge(records, preds, file_rows, judge, job.judge, job.cache_dir,
                           threads_for(job.settings.concurrency, job.settings.max_concurrency))
        figures = rules_for(job.task).figures(file_rows, preds)
        return {"official": figures, **interval_figures(job.task, file_rows, preds, job.n_boot),
                "official_disagreements": disagreements(job.spec, list(scored.values()))}

    def tally(self, task: tasks.Task, model: str, lang: str) -> Tally:
        return OfficialTally(task, model, lang)

    # ------------------------------------------------------------ what a run reports
    def own_figures(self, entry: TaskFigures) -> Mapping[str, Any] | None:
        figures = entry.get("official")
        return figures if isinstance(figures, Mapping) else None

    def headline(self, task: tasks.Task, entry: TaskFigures) -> tuple[str, float | None] | None:
        """Their figure Table 2 reports, read from the entry; None where there is none, or where it is not a
        finite number (a folder from elsewhere may hold anything: its readers then show ours)."""
        figures = self.own_figures(entry)
        if figures is None:
            return None
        try:
            name, value = rules_for(task.name).headline(figures)
        except TypeError:  # a figure of another type, which a rule computes with (their MAPE in percent)
            return None
        return (name, value) if value is None or finite_number(value) else None

    def read_rows(self, task: tasks.Task, rows: Sequence[ScoreRecord]) -> list[ScoreRecord]:
        """Each record with their reading as its score: right or wrong as their script counts it, or their
        per-nutrient percentage errors (an unread answer penalised at 100%, a zero reference not counted).
        Records without their reading (epochs after the first) are left out, as their figures leave them."""
        found: list[ScoreRecord] = []
        for row in rows:
            mine = row.get("official")
            if not isinstance(mine, Mapping):
                continue
            if task.measure == "ape":
                reference = row["reference"] if isinstance(row.get("reference"), Mapping) else {}
                read = mine["read"] if isinstance(mine.get("read"), Mapping) else None
                errors = rules.nutrition_errors(reference, read)
                ape = {k: errors[k][2] if k in errors else None for k in task.components}
                found.append({**row, "ape": {k: None if v is None else v / 100 for k, v in ape.items()},
                              "abs_error": {k: errors[k][0] for k in task.components if k in errors}})
            elif mine.get("counted", True):
                found.append({**row, "correct": mine.get("correct") is True})
        return found

    def interval(self, entry: TaskFigures) -> tuple[float, float] | None:
        found = entry.get("official_ci95")
        if isinstance(found, list) and len(found) == 2 and all(finite_number(end) for end in found):
            return float(found[0]), float(found[1])
        return None

    def counted(self, task: tasks.Task, entry: TaskFigures) -> int | None:
        """The items their headline divides by, as their scripts print it beside the figure: their judge's
        accuracy counts the answers it judged (`model_evaluate_total`; a row with an empty reference is in
        `total_eval` but never judged), ROUGE the answers it scored; any other figure every paired row
        with a reference (`total_eval` less `gt_missing_count`)."""
        figures = self.own_figures(entry)
        if figures is None:
            return None
        name, _ = rules_for(task.name).headline(figures)
        own = {"model_evaluate_accuracy": "model_evaluate_total", "rougeL_f1 (no judge)": "rouge_scored"}.get(name)
        found = [figures.get(key) for key in (own or "total_eval", "gt_missing_count")]
        total, missing = (v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None for v in found)
        if total is None or own is not None:
            return total
        return max(total - (missing or 0), 0)

    def component(self, task: tasks.Task, entry: TaskFigures, part: str, stat: str) -> float | None:
        """Their per-nutrient MAE and RMSE (units) and MAPE (their percent, as a fraction)."""
        found = (self.own_figures(entry) or {}).get(part)
        value = found.get(stat) if isinstance(found, Mapping) else None
        if not isinstance(value, int | float) or isinstance(value, bool):
            return None
        return value / 100 if stat == "mape" else float(value)

    def headline_note(self, task: tasks.Task, entry: TaskFigures) -> str:
        left = entry.get("ours_left_out")
        left_text = f"; {left} items whose reference ours cannot read are left out of ours only" if left else ""
        return (f"{task.name}: the headline is the authors' scoring (their scripts' figures, metrics.json `official`); "
                f"ours reads answers with this project's strict parsers{left_text}")


class OfficialTally(Tally):
    """Their reading of each answer as it arrives (the same functions a run folder's scoring calls), ours
    beside it on the rows whose reference ours reads, and their figures for the items asked, as if their
    file held those rows alone."""

    def __init__(self, task: tasks.Task, model: str, lang: str) -> None:
        self.task, self.model, self.lang = task, model, lang
        self._answers: list[tuple[Row, PredictionLine]] = []  # each row and the line of their prediction file
        self._lines: dict[int, PredictionLine] = {}  # id(record) -> their line
        self.all_records: list[ScoreRecord] = []  # every answer's record, with its `official` reading
        self.records: list[ScoreRecord] = []  # ours: the rows whose reference ours reads
        self.rows: list[Row] = []
        self.decided: list[str] = []
        self._ours: set[int] = set()

    def add(self, prediction: Prediction, row: Row) -> ScoreRecord:
        ours = usable_reference(self.task, row, self.lang)
        record = score_prediction(self.task, prediction, row, self.lang) if ours else {"id": prediction.id,
                                                                            "reference": row.get("ground_truth")}
        line = official_preds(self.task.name, [prediction], [row], self.model)[int(row["idx"])]
        record["official"] = reading(self.task.name, line, row)
        self._answers.append((row, line))
        self._lines[id(record)] = line
        self.all_records.append(record)
        if ours:
            self.records.append(record)
            self.rows.append(row)
            self._ours.add(id(record))
        return record

    async def judge(self, record: ScoreRecord, prediction: Prediction, row: Row, judge: Any) -> None:
        """Their judge prompt, its reply read by their keywords and by ours strictly (`judge.reply`)."""
        prompt = judge_prompt_of(row, record["official"])
        take_reply(self._lines[id(record)], record, await judge.reply(prompt) if prompt else None)
        strict_verdict_of(record)  # ours, as a run folder's scoring reads it
        if id(record) in self._ours:
            self.decided.append("judge" if record.get("verdict") else "unscored")

    def figures(self) -> TaskFigures:
        """`official` (their figures for the items answered, in their file's order), `official_headline`
        ([name, fraction]: what Table 2 reports), `official_disagreements` and `ours_left_out`."""
        ordered = sorted(self._answers, key=lambda answer: int(answer[0]["idx"]))
        script = rules_for(self.task.name)
        rows, lines = [row for row, _ in ordered], {k: line for k, (_, line) in enumerate(ordered)}
        figures = script.figures(rows, lines)
        name, value = script.headline(figures)
        found: TaskFigures = {"protocol": "official", "official": figures, "official_headline": [name, value],
                 **interval_figures(self.task.name, rows, lines, N_BOOT),
                 "official_disagreements": disagreements(self.task, self.all_records)}
        if len(self.all_records) > len(self.records):
            found["ours_left_out"] = len(self.all_records) - len(self.records)
        return found


OFFICIAL = register(Official())

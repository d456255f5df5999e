"""The data contracts of the harness, on one screen.

A row becomes a `Request`, a backend's `Response`, a `Prediction` per sample (predictions.jsonl) and a
`ScoreRecord` per item (scores.jsonl, which every report reads).
"""

from __future__ import annotations

import dataclasses
import errno
import sys
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypedDict, TypeGuard, runtime_checkable

Task = str  # a registered task's name (eval/tasks/: the one task list)
# One release row as the release readers give it (dataset/): the columns dataset/schema.py declares for its
# config, and on the authors' layout their published fields too; `images` only where a row is read whole.
# Checked where the release is read; requests, scoring and reports index it by column name after. A
# TypedDict would not serve: readers index it by names they compute (`options_en`, a nutrient's column).
Row = dict[str, Any]
# The harness's constants, imported from here by eval/, space/ and bench/ (the tasks are the registry's,
# the release's configs the data contract's: dataset/schema.py DECLARED). Each metrics module is
# self-contained on purpose (each works copied alone, or loaded from the Hub), so it keeps its own copies;
# tests/test_architecture.py checks that they agree with these.
NUTRIENTS = ("calories", "protein", "carbohydrates", "fat")
LETTERS = "ABCDEFGH"
# Option labels for a list of any length (custom data may offer more than the benchmark's 8 options).
ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def within_alphabet(value: object) -> TypeGuard[int]:
    """Whether a line's option count or rotation is one the letters can name: a whole number from 0 to
    len(ALPHABET) (a bool is none). The one rule for both, wherever a line from elsewhere is read."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= len(ALPHABET)


NUTRIENT_UNITS = {"calories": "kcal", "protein": "g", "carbohydrates": "g", "fat": "g"}  # per serving


@dataclass(frozen=True)
class ImagePart:
    """One image, already resized and encoded once for transport (JPEG or PNG bytes)."""

    data: bytes
    mime_type: str = "image/jpeg"
    role: str = "user"  # `reference` (merchant photo) or `user` (customer photo)


Part = str | ImagePart


@dataclass(frozen=True)
class Message:
    """One chat turn: text and images in the order the model should see them."""

    role: Literal["system", "user", "assistant"]
    content: tuple[Part, ...]

    @property
    def images(self) -> tuple[ImagePart, ...]:
        return tuple(p for p in self.content if isinstance(p, ImagePart))

    @property
    def text(self) -> str:
        return "".join(p for p in self.content if isinstance(p, str))


DEFAULT_MAX_TOKENS = 16384  # the paper's generation budget: thinking models need room to think


@dataclass(frozen=True)
class GenerationConfig:
    """What the run asks for; each backend's request policy decides what is actually sent. The paper's
    protocol is greedy decoding (temperature 0) with 16,384 tokens. A reasoning model that only samples at its
    default temperature gets no temperature (the backend records that); `max_tokens` None leaves the limit to
    the server. `reasoning_effort` (OpenAI reasoning models) and `thinking_budget` (Gemini thinking models, in
    tokens; -1 dynamic, 0 off) are sent only by the backends that can use them: others refuse them at start-up
    with one line."""

    temperature: float = 0.0
    max_tokens: int | None = DEFAULT_MAX_TOKENS
    seed: int | None = 0  # None: none sent (the authors' protocol)
    reasoning_effort: str | None = None
    thinking_budget: int | None = None
    # The protocol's own budget may be lowered to what a small context leaves; a limit the user chose
    # (--max-tokens) is sent as asked, and refused at start-up when it cannot fit.
    fit_to_context: bool = True


@dataclass(frozen=True)
class BackendOptions:
    """How a backend is built: one type for every backend's `make(model, options)`. What a model generates is
    not here: it travels with every request (`Request.config`). `generation` is the run's config as its
    requests carry it, for the checks a backend makes before the first request (a setting it cannot send, a
    limit over a server's context) and for what it records."""

    base_url: str | None = None
    timeout: float = 120.0  # wall-clock seconds for one attempt
    api_key: str | None = field(default=None, repr=False)  # this instance only, over the environment; never recorded
    generation: GenerationConfig = field(default_factory=GenerationConfig)
    images_per_prompt: int | None = None  # the most views one prompt carries (local engines reserve for it)
    batch_size: int = 8  # local engines
    engine: dict[str, Any] = field(default_factory=dict)  # local engines' flags (RunSettings engine=True fields)
    lang: str = "zh"  # baseline: the language of the references it may see
    dataset_items: dict[str, list[Row]] | None = field(default=None, repr=False)  # baseline only


@dataclass(frozen=True)
class BackendTraits:
    """What a backend is, declared beside its `make` (`TRAITS` in its module): the Space, the leaderboard and
    the docs ask these, never a backend's name."""

    open_weights: bool = False  # runs the weights itself (hf:, vllm:): the model is open
    closed_weights: bool = False  # serves only its provider's own models (gemini:), wherever its base URL points
    key_env: tuple[str, ...] = ()  # environment variables its key is read from; () takes no key
    public_endpoint: str | None = None  # where a visitor's own key goes unless the operator allows another host
    packages: tuple[str, ...] = ()  # what it imports beyond requirements.txt's core, for `pip install`

    @property
    def takes_key(self) -> bool:
        return bool(self.key_env)


@dataclass(frozen=True)
class Request:
    """Everything a backend needs for one sample, and nothing about the task."""

    id: str
    task: Task
    messages: tuple[Message, ...]
    config: GenerationConfig
    request_hash: str  # identity of (model, prompt, images, settings): the resume key
    metadata: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass
class Response:
    """What a backend returns for one request. `usage` uses the keys `prompt_tokens`, `completion_tokens`
    (answer and thinking together, as billed) and `reasoning_tokens` (the thinking part, when the server
    says). `finish_reason` is normalised to OpenAI's words: `stop`, `length` (the limit cut the answer),
    `content_filter`, or the provider's own word. A cut answer is a `truncated` response, not an error: the
    runner does not ask again (the same request would be cut again) and scoring counts it apart."""

    text: str
    usage: dict[str, int] | None = None
    finish_reason: str | None = None
    # What the server said of its rate limits (`eval.limiter.Pacing`), for the runner's limiter; not stored.
    pacing: Any = field(default=None, compare=False, repr=False)

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"


class UserError(ValueError):
    """A mistake the user must fix, found where it is detected (a bad flag, a missing key, a release or
    run folder that cannot be used): the CLI prints its one line as `error: ...`, exit 2, no traceback.
    Anything that is not a UserError (or a file the system refused) is a bug of ours: a traceback, exit 1.
    Every such error of the harness derives from it."""


def is_user_error(exc: BaseException) -> bool:
    """Whether a CLI shows `exc` as one `error:` line: our UserError (or the data contract's
    DatasetError), or a file the system refused (missing, not allowed, a folder, a full or read-only
    disk). Everything else is a bug of ours and keeps its traceback."""
    schema = sys.modules.get("dataset.schema")  # only a loaded data contract can have raised its error
    return (isinstance(exc, UserError) or (schema is not None and isinstance(exc, schema.DatasetError))
            or (isinstance(exc, OSError) and exc.errno in _ENVIRONMENT_ERRNOS))


_ENVIRONMENT_ERRNOS = {errno.ENOENT, errno.EEXIST, errno.EACCES, errno.EPERM, errno.EISDIR, errno.ENOTDIR,
                       errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.ENAMETOOLONG, errno.EADDRINUSE}


class ConfigError(UserError):
    """A setup problem the user must fix (missing package or key, bad option): a one-line message
    that says what to install or set. The CLI prints it as `error: ...` without a traceback."""


class BackendError(Exception):
    """A failed generation. `retryable` errors are retried by the runner with backoff. Messages must be short
    and must never contain a key or token."""

    def __init__(self, message: str, *, retryable: bool, retry_after: float | None = None,
                 status: int | None = None, unreachable: bool = False, pacing: Any = None,
                 timed_out: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after
        self.status = status
        self.unreachable = unreachable  # no connection was made (DNS, refused): not an answer from a server
        self.pacing = pacing  # the rate-limit headers of the refusal (`eval.limiter.Pacing`), when it had any
        self.timed_out = timed_out  # the attempt ran out of time: the endpoint's limiter reads it as load


@runtime_checkable
class Backend(Protocol):
    """A model behind one of the `backend:model` specs. API backends implement `generate` (called concurrently
    by the runner). Local engines (`vllm:`, `hf:`) may also implement `generate_batch`, which the runner
    prefers when present. A backend that keeps connections open on the event loop also has `async aclose()`;
    whoever runs the loop calls it (`eval.backends.release`) before the loop ends."""

    spec: str

    async def generate(self, request: Request) -> Response: ...

    def describe(self) -> dict[str, Any]:
        """Settings and versions for run.json (never a key)."""
        ...


# The key of predictions.jsonl under which a line imported from the authors' prediction files keeps
# what their file says (`eval import --from official`).
IMPORTED_KEY = "official"


@dataclass
class Prediction:
    """One line of predictions.jsonl: what was asked (views sent, epoch, option rotation) and what came back.
    Scoring needs nothing else: `n_images` is the number of views sent, `finish_reason` and `truncated` say
    whether the limit cut the answer. Lines written before these fields existed read back with their
    defaults."""

    id: str
    task: Task
    raw: str | None
    parsed: Any
    error: str | None
    attempts: int
    latency_s: float
    usage: dict[str, int] | None
    request_hash: str
    finish_reason: str | None = None
    truncated: bool = False
    n_images: int | None = None
    epoch: int = 0
    rotation: int = 0  # `--circular`: the options were rotated left by this many places (0 = as stored)
    # A line imported from the authors' prediction files: what their file says (`model_pred` as their
    # inference cleaned it, `gt_answer`, and their judge's `eval_match`/`eval_result` when judged).
    imported: PredictionLine | None = None  # predictions.jsonl's IMPORTED_KEY

    def to_json(self) -> dict[str, Any]:
        # Not dataclasses.asdict: its deep copy of `parsed` and `usage` was a tenth of the runner's
        # CPU per sample, for a dict that is serialised at once.
        line = {"id": self.id, "task": self.task, "epoch": self.epoch, "raw": self.raw, "parsed": self.parsed,
                "error": self.error, "attempts": self.attempts, "latency_s": self.latency_s, "usage": self.usage,
                "finish_reason": self.finish_reason, "truncated": self.truncated, "n_images": self.n_images,
                "request_hash": self.request_hash, "rotation": self.rotation}
        if self.imported is not None:
            line[IMPORTED_KEY] = self.imported
        return line

    @classmethod
    def from_json(cls, row: dict[str, Any]) -> Prediction:
        values = {f.name: row[f.name] for f in _PREDICTION_FIELDS if f.name in row}
        imported = row.get(IMPORTED_KEY)
        values["imported"] = imported if isinstance(imported, dict) else None
        for f in _PREDICTION_FIELDS:
            if f.name not in values and f.default is dataclasses.MISSING:
                values[f.name] = None
        for name in ("epoch", "rotation"):
            if not isinstance(values.get(name), int) or isinstance(values.get(name), bool):
                values[name] = 0
        values["truncated"] = values.get("truncated") is True
        return cls(**values)


_PREDICTION_FIELDS = dataclasses.fields(Prediction)


Metrics = dict[str, "TaskFigures"]  # metrics.json: each scored task's name -> its entry


class RunDataset(TypedDict, total=False):
    """run.json's `dataset`: where the rows came from and each task's data fingerprint."""

    source: str  # the --dataset source, or "embedded sample"
    fingerprints: dict[str, str]  # task -> fingerprint of the rows it read (a Hub release: `hub:<id>@<commit>`)


class RunJudge(TypedDict):
    """run.json's `judge`: the judge a run was scored with, never its URL or key."""

    spec: str | None  # the --judge spec
    base_url_host: str | None  # the judge server's host (the URL is passed again to score again)


class RunImport(TypedDict, total=False):
    """run.json's `imported`: where an imported run's answers came from (`eval import`)."""

    framework: str  # "inspect_ai", "lmms-eval" or "official" (the authors' prediction files)
    logs: list[str]  # the logs or prediction files read
    left_out: list[str]  # settings a log held that run.json does not keep (credentials among them), by name


class RunInfo(TypedDict, total=False):
    """run.json: what produced a run folder (`eval.runinfo.build_run_json` writes the fields down to `counts`,
    for a run, an import or a kept submission; the ones after it are added where they apply). Never a key: the
    settings are the public ones. A run.json read back (`eval.runinfo.read_run_json`, `eval.report.runs`) is not
    checked: a folder from elsewhere may hold anything, so readers check each value they read
    (`RunData.setting`, `.source`, `.fingerprints`, `.revisions`)."""

    model: str  # the --model spec
    tasks: list[str]  # the tasks run, in the registry's order
    settings: dict[str, Any]  # RunSettings.to_json() less base URLs and keys (`RunSettings.from_saved` reads it)
    base_url_host: str | None  # the model server's host, never its path or a key
    backend: dict[str, Any]  # the backend's `describe()`: its engine, versions and what its request policy learnt
    judge: RunJudge | None
    prompt_version: str
    dataset: RunDataset
    identity: dict[str, Any]  # the settings that change answers, the prompt version and the fingerprints
    packages: dict[str, str | None]  # installed versions of the packages that make a run
    git_commit: str | None  # the code's commit (`+dirty` with local changes); None: unknown
    updated_at: str  # UTC, ISO 8601
    counts: dict[str, Any]  # task -> {predictions, failed, truncated} (a kept human sitting: its answers)
    dataset_revision: dict[str, str]  # task -> the Hub commit of the authors' release it was read from
    concurrency: dict[str, Any]  # what each server's limiter settled on, and its trace (`Limits.describe`)
    imported: RunImport
    submission: dict[str, Any]  # the Space: how a submitted run was checked (status, mismatch, flags, partial, ...)
    human: dict[str, Any]  # the Space's Take the test: {group, person, automated}


class ScoreRecord(TypedDict, total=False):
    """One line of scores.jsonl: one scored item (all tasks of a run folder in one file). Scoring
    (`eval.protocols.records.item_record`) writes every field down to `decided_by` on every line, in this
    order; the task's scoring fills `correct`/`ape`/`abs_error`/`verdict`. The fields after it are added
    later, where they apply. A line read back (`eval.report.runs`) is checked once for the fields every reader
    relies on (`id`, `task`, `epoch`, and the types of the values scores are read from); a line written before
    a field existed lacks it, hence total=False.

    rotations.jsonl (`run --circular` only) holds the classification answers to rotated options: the same
    fields (reference and parsed letters as that rotation showed them) plus `rotation`; scores.jsonl keeps
    rotation 0, the item as stored (eval/circular.py)."""

    id: str  # item id (unique within its task); a line from another tool may hold a number: readers str() it
    task: Task  # "classification" | "nutrition" | "vqa"
    epoch: int  # 0, or k for the k-th repeat of `--epochs`
    merchant_id: str | None  # the bootstrap cluster (None where the release names no merchant)
    cuisine: str | None
    category: str | None  # the menu category
    vqa_category: str | None  # vqa only (a task's `item_fields`: the row's value, else None)
    nutrition_source: str | None  # nutrition only (likewise)
    n_images: int | None  # images actually sent with the request
    n_options: int | None  # classification only: options offered (chance is 1 / n_options)
    # The task parser's output: letter | {calories, protein, carbohydrates, fat} | answer text (vqa);
    # None when unparsed or when the sample failed.
    parsed: Any
    error: str | None  # generation error (a failed sample: scored as a failure, never dropped)
    truncated: bool  # the token limit cut the answer (finish reason `length`)
    finish_reason: str | None  # as the backend normalised it (`stop`, `length`, ...)
    usage: dict[str, int] | None  # {prompt_tokens, completion_tokens, reasoning_tokens} as the server reported
    reference: Any  # letter | {calories, protein, carbohydrates, fat} | reference answer text (vqa)
    # classification: parsed == reference (unparsed/failed = False); vqa: verdict == "C" (None while
    # unscored); nutrition: None
    correct: bool | None
    # nutrition only: |pred - gt| / gt per component; None for a component whose gt == 0; 1.0 for every
    # component when unparsed or failed
    ape: dict[str, float | None] | None
    abs_error: dict[str, float] | None  # nutrition only: |pred - gt| per component (unparsed: |gt|)
    verdict: str | None  # vqa only: "C" | "I", the judge's or a rule's verdict; None = unscored
    decided_by: str | None  # vqa only: "rule" | "judge" | None, who decided the verdict
    # -- added later, where they apply
    injection_suspected: bool  # vqa only, when judged: the answer carried text aimed at the judge
    rotation: int  # rotations.jsonl only: the options were rotated left by this many places (1..n-1)
    official: OfficialReading  # the authors' protocol: their reading of the answer beside ours (eval/protocols/official.py)


class PredictionLine(TypedDict, total=False):
    """One line of the authors' prediction file (their inference writes it, their scripts score it), or what
    the authors' protocol makes of one answer as such a line (`eval.protocols.official.official_preds`: the
    fields their scoring reads, `model_pred` and where they apply `gt_answer`, `eval_match`, `eval_result`).

    A file their scripts wrote is read by `eval.official_io.read_official_file` (which checks the types of
    the fields it takes: a line may carry others, and null for a text field but `model_pred`), written by `export_official` in their field order
    (`idx`, `gt_answer`, `model_pred`, `model_full_pred`, `model_input`, `label`, the image paths, the
    verdict). An imported line keeps what the file says in predictions.jsonl (`Prediction.imported`:
    `model_pred`, `gt_answer`, `eval_match`, `eval_result`). Their scripts pair a line with its row by `idx`.
    """

    idx: int  # the row's place among the release file's non-blank lines (0-based)
    gt_answer: str | None  # classification only: the reference letter their inference writes ("" when none)
    model_pred: str  # the answer as their inference keeps it (thinking removed), or `__INFER_ERROR__: why`
    model_full_pred: str | None  # the model's whole text (a failed request: model_pred's marker)
    model_input: str | None  # the prompt sent (the row's prompt verbatim)
    label: Any  # nutrition and VQA: the row's reference as the release holds it
    image_path: str  # the one image sent (one image), else
    image_paths: list[str]  # the images sent, in order (none or several)
    eval_match: bool  # VQA, once judged: their judge's verdict read by their keywords (False on failure)
    eval_result: str | None  # VQA, once judged: the judge's reply, or their failure marker


class OfficialReading(TypedDict, total=False):
    """A scores.jsonl record's `official` object (`eval.protocols.official.reading`): the authors' reading of
    one answer, beside ours. `idx`, `model_pred` and `read` are on every reading; the others where a task's
    script has them (`ScriptRules.item`); the judge's fields are added once their judge step ran
    (`take_reply`, `official_judge`). Only the first epoch's, unrotated, answers carry one."""

    idx: int  # the row's place in their release file, as their scripts pair answers with rows
    model_pred: str  # the answer as their inference keeps it (PredictionLine.model_pred)
    # What their script reads: classification the first letter (None when none), nutrition the four values
    # ({calories, protein, carbohydrates, fat}: None when unparsed), VQA the stripped answer text
    read: Any
    # Right or wrong as their script counts it; None for nutrition, and for a VQA answer before their judge
    correct: bool | None
    unreadable: bool  # classification only: their script cannot read a letter A-Z (or the request failed)
    parse_failed: bool  # nutrition only: their JSON extraction did not find the four values
    counted: bool  # VQA only: the row has a reference, so it is in their total
    judged: bool  # VQA only: counted, and the answer neither empty nor failed: their judge is asked
    judge_reply: str | None  # VQA, judged: their judge's reply, or their failure marker
    strict: bool | None  # VQA, judged: the same reply read strictly by ours (None: says neither plainly)


class TaskFigures(TypedDict, total=False):
    """A task's entry in metrics.json: its figures, as scoring computed them (`eval.numbers.task_figures`,
    then the protocol's `score`). Which keys an entry holds depends on its task, its metric and its protocol,
    hence total=False; the declared keys are the ones the harness writes by name and the reports read.

    The escape: the metric's own per-component figures are in the entry too, undeclared, as the metric names
    them (nutrition: `calories_mae`, `protein_mape`, ..., `{nutrient}_{mae|rmse|mape|median_ape|wmape}` with
    and without `_parsed_only`, `{nutrient}_zero_gt`). `task_figures` copies them from the metric's result,
    whose keys vary by task; no report reads them from here (they recompute them from the items,
    `numbers.score_nutrition_rows` and `numbers.component`). An entry read back from metrics.json
    (`eval.report.runs.Run.entry`) is not checked: a folder from elsewhere may hold anything, so readers check
    each value they read."""

    # -- the metric's own figures (dining_accuracy, nutrition_error, judge_accuracy)
    n: int  # items scored (items x epochs with --epochs)
    accuracy: float | None  # classification, vqa: the headline (a fraction; None when nothing was answered)
    parse_failures: int  # classification, nutrition: answers the parser could not read
    accuracy_scored: float | None  # vqa: accuracy over the items the judge or a rule decided
    unscored: int  # vqa: items neither the judge nor a rule decided
    decided_by_rule: int  # vqa: verdicts a rule decided without the judge
    avg_mape: float | None  # nutrition: the headline, the mean of the four nutrients' MAPE (a fraction)
    median_ape: float | None  # nutrition: the median APE over every nutrient of every item
    wmape: float | None  # nutrition: the mean of the nutrients' weighted MAPE
    avg_mape_parsed_only: float | None  # nutrition: avg_mape over the parsed answers only
    median_ape_parsed_only: float | None
    wmape_parsed_only: float | None
    zero_gt_exclusions: int  # nutrition: references of 0, left out of that nutrient's MAPE
    # -- what every entry adds (`numbers.task_figures`)
    generation_failures: int  # items whose generation failed (scored as failures)
    truncated: int  # items the token limit cut off
    tokens: dict[str, int]  # prompt_tokens, completion_tokens, reasoning_tokens summed over items
    merchants: int  # the interval's clusters: merchants, or items where the release names none
    resampled: str  # what the interval resamples: "merchants" | "items"
    accuracy_ci95: list[float] | None  # classification, vqa: the headline's 95% interval (None: not resampled)
    avg_mape_ci95: list[float] | None  # nutrition: likewise
    epochs: dict[str, Any]  # --epochs K: {epochs, items, agreement} (`numbers.epoch_agreement`)
    # -- a judged task (`records.score_judged`; without a judge: scored False, n, the counts, tokens, note)
    scored: bool  # whether the judge ran
    judge: str | None  # the judge's spec
    judge_errors: int  # items the judge failed on every attempt
    injection_suspected: int  # answers that carried text aimed at the judge
    note: str  # why the task is unscored
    # -- our protocol (`eval.protocols.ours`)
    circular_accuracy: float | None  # --circular: items answered right under every rotation
    circular_accuracy_ci95: list[float] | None
    circular: dict[str, Any]  # --circular: the other circular figures (`eval.circular.circular_figures`)
    ours_left_out: int  # answers to rows whose reference ours cannot read (the authors' release)
    # -- the authors' protocol (`eval.protocols.official`)
    protocol: str  # a live tally's entry (the Space): "official"
    official: dict[str, Any]  # their script's printed figures, under the names it prints them
    official_headline: list[Any]  # a live tally's entry: [name, fraction], what Table 2 reports
    official_ci95: list[float] | None  # their headline's item-bootstrap 95% interval (a fraction)
    official_resampled: str  # "items": what official_ci95 resamples
    official_disagreements: int  # items their reading and ours read differently

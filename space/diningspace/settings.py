"""What the operator of a Space decides, read once from environment variables (Space secrets).

Every variable is documented in space/README.md; nothing else changes the Space's behaviour.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from eval import tasks as task_registry
from eval.backends import traits
from eval.backends.baseline import NAMES as BASELINE_NAMES
from eval.specs import BACKENDS

# Reference baselines need no key, so every one is offered for every task (each answers every task;
# what it does per task is in eval/backends/baseline.py). VQA is offered only with a judge.
BASELINES: dict[str, tuple[str, ...]] = {task: tuple(f"baseline:{name}" for name in BASELINE_NAMES)
                                         for task in task_registry.names()}
# Providers a visitor may use with a key of their own (the key is used for one request only): the backends
# that declare a key and a public endpoint, where such a key goes (eval.types.BackendTraits), in the
# registry's order.
KEY_PROVIDERS = tuple(name for name in BACKENDS if traits(name).takes_key and traits(name).public_endpoint)


class SettingsError(ValueError):
    """An environment variable the Space cannot use (one line naming the variable)."""


def _int_env(env: dict[str, str], name: str, default: int, *, minimum: int = 1) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not a whole number") from None
    if value < minimum:
        raise SettingsError(f"{name} must be at least {minimum} (got {value})")
    return value


def _str_env(env: dict[str, str], name: str) -> str | None:
    return env.get(name, "").strip() or None


def _list_env(env: dict[str, str], name: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in env.get(name, "").split(",") if part.strip())


MIN_TOKEN_CHARS = 16


def _token_env(env: dict[str, str], name: str) -> str | None:
    """A secret the operator types to prove who they are: long enough not to be guessed."""
    token = _str_env(env, name)
    if token and len(token) < MIN_TOKEN_CHARS:
        raise SettingsError(f"{name} must be at least {MIN_TOKEN_CHARS} characters (e.g. `openssl rand -hex 16`)")
    return token


def _dataset_id(env: dict[str, str]) -> str | None:
    """DININGBENCH_SPACE_DATASET_ID, else DININGBENCH_SOURCE when that is a Hub id (owner/name, not a folder)."""
    source = env.get("DININGBENCH_SOURCE", "").strip()
    if explicit := _str_env(env, "DININGBENCH_SPACE_DATASET_ID"):
        return explicit
    if source.count("/") == 1 and not Path(source).expanduser().exists() and not source.startswith((".", "/", "~")):
        return source.split("@", 1)[0]  # `meituan/DiningBench@REVISION`: model cards name the repository
    return None


@dataclass(frozen=True)
class SpaceSettings:
    """The operator's choices. `models` are `backend:model` specs served with the operator's keys."""

    models: tuple[str, ...] = ()
    judge: str | None = None
    allowed_hosts: tuple[str, ...] = ()
    default_items: int = 8
    max_items: int = 50
    eval_concurrency: int = 2
    request_concurrency: int = 4
    max_requests: int = 8  # model requests in flight across the whole Space
    jobs_per_visitor: int = 1  # evaluations running at once per browser session
    jobs_per_address: int = 2  # ... and per client address (0: not counted)
    proxy_hops: int = 0  # trusted proxies in front of the Space that append to X-Forwarded-For
    max_answer_chars: int = 8000  # of a model's answer kept for the table and the records
    dataset: str | None = None
    results_dir: Path = field(default_factory=lambda: Path("results"))
    reported_csv: Path | None = None
    human_repo: str | None = None  # Hub dataset repo that keeps people's test runs (CommitScheduler)
    review_work: Path | None = None  # construction work folder whose items the Review tab shows
    sittings_per_session: int = 3  # Take-the-test sittings one browser session may begin per hour
    sittings_per_address: int = 10  # ... one client address (0: not counted)
    sittings_per_hour: int = 120  # ... the whole Space (0: not counted)
    min_answer_seconds: int = 2  # a sitting answered faster than this an item is left out of the humans row
    reviewers: tuple[str, ...] = ()  # Hugging Face usernames allowed to review (signed in on a Space)
    review_token: str | None = field(default=None, repr=False)  # the operator's review token (a secret)
    on_space: bool = False  # running on a Hugging Face Space, where a sign-in is Hugging Face's own
    submit_repo: str | None = None  # Hub dataset repo that keeps accepted submissions (CommitScheduler)
    dataset_id: str | None = None  # the release's Hub id: model cards' model-index results must name it
    submit_max_mb: int = 20  # a submitted zip (or a Hub repo's zip)
    submit_unpacked_mb: int = 200  # what a submission may unpack to
    submits_per_hour: int = 5  # per visitor (browser session and client address)
    upload_mb_per_hour: int = 100  # bytes posted to Gradio's upload route per client address (0: not counted)
    submit_seconds: float = 120.0  # wall-clock budget of one submission's checks and re-scoring

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None, *, repo_root: Path | None = None) -> SpaceSettings:
        """Read the DININGBENCH_SPACE_* variables; a malformed one is a one-line SettingsError."""
        from eval.backends import SpecError, parse_spec

        env = dict(os.environ if env is None else env)
        root = repo_root or Path.cwd()
        models = _list_env(env, "DININGBENCH_SPACE_MODELS")
        judge = _str_env(env, "DININGBENCH_SPACE_JUDGE")
        for name, specs in (("DININGBENCH_SPACE_MODELS", models), ("DININGBENCH_SPACE_JUDGE", (judge,) if judge else ())):
            for spec in specs:
                try:
                    parse_spec(spec)
                except SpecError as exc:
                    raise SettingsError(f"{name}: {exc}") from None
        max_items = _int_env(env, "DININGBENCH_SPACE_MAX_ITEMS", 50)
        default_items = min(_int_env(env, "DININGBENCH_SPACE_DEFAULT_ITEMS", 8), max_items)
        results = Path(_str_env(env, "DININGBENCH_SPACE_RESULTS") or root / "results")
        # Gradio's own test (gradio.utils.get_space): elsewhere its sign-in is a local mock.
        on_space = env.get("SYSTEM") == "spaces" and bool(env.get("SPACE_ID"))
        reviewers = tuple(name.lower() for name in _list_env(env, "DININGBENCH_SPACE_REVIEWERS"))
        if reviewers and on_space and not env.get("OAUTH_CLIENT_ID"):
            raise SettingsError("DININGBENCH_SPACE_REVIEWERS: reviewers sign in with Hugging Face; add `hf_oauth: true` to "
                                "the Space's README metadata")
        eval_concurrency = _int_env(env, "DININGBENCH_SPACE_EVAL_CONCURRENCY", 2)
        request_concurrency = _int_env(env, "DININGBENCH_SPACE_REQUEST_CONCURRENCY", 4)
        review_work = _str_env(env, "DININGBENCH_SPACE_REVIEW_WORK")
        return cls(
            models=models, judge=judge,
            allowed_hosts=tuple(h.lower() for h in _list_env(env, "DININGBENCH_SPACE_ALLOWED_HOSTS")),
            default_items=default_items, max_items=max_items, eval_concurrency=eval_concurrency,
            request_concurrency=request_concurrency,
            max_requests=_int_env(env, "DININGBENCH_SPACE_MAX_REQUESTS", eval_concurrency * request_concurrency),
            jobs_per_visitor=_int_env(env, "DININGBENCH_SPACE_JOBS_PER_VISITOR", 1),
            jobs_per_address=_int_env(env, "DININGBENCH_SPACE_JOBS_PER_ADDRESS", 2, minimum=0),
            proxy_hops=_int_env(env, "DININGBENCH_SPACE_PROXY_HOPS", 0, minimum=0),
            max_answer_chars=_int_env(env, "DININGBENCH_SPACE_MAX_ANSWER_CHARS", 8000, minimum=200),
            dataset=_str_env(env, "DININGBENCH_SOURCE"), results_dir=results,
            reported_csv=root / "eval" / "data" / "table2_reported.csv",
            human_repo=_str_env(env, "DININGBENCH_SPACE_HUMAN_REPO"),
            review_work=Path(review_work) if review_work else None,
            sittings_per_session=_int_env(env, "DININGBENCH_SPACE_SITTINGS_PER_SESSION", 3),
            sittings_per_address=_int_env(env, "DININGBENCH_SPACE_SITTINGS_PER_ADDRESS", 10, minimum=0),
            sittings_per_hour=_int_env(env, "DININGBENCH_SPACE_SITTINGS_PER_HOUR", 120, minimum=0),
            min_answer_seconds=_int_env(env, "DININGBENCH_SPACE_MIN_ANSWER_SECONDS", 2, minimum=0),
            reviewers=reviewers, review_token=_token_env(env, "DININGBENCH_SPACE_REVIEW_TOKEN"),
            on_space=on_space,
            submit_repo=_str_env(env, "DININGBENCH_SPACE_SUBMIT_REPO"),
            dataset_id=_dataset_id(env),
            submit_max_mb=_int_env(env, "DININGBENCH_SPACE_SUBMIT_MAX_MB", 20),
            submit_unpacked_mb=_int_env(env, "DININGBENCH_SPACE_SUBMIT_UNPACKED_MB", 200),
            submits_per_hour=_int_env(env, "DININGBENCH_SPACE_SUBMITS_PER_HOUR", 5),
            upload_mb_per_hour=_int_env(env, "DININGBENCH_SPACE_UPLOAD_MB_PER_HOUR", 100, minimum=0),
            submit_seconds=float(_int_env(env, "DININGBENCH_SPACE_SUBMIT_SECONDS", 120)),
        )

    @property
    def is_synthetic_sample(self) -> bool:
        """No release was configured, so the embedded synthetic sample is what visitors see."""
        return self.dataset is None

    def offered_tasks(self) -> tuple[task_registry.Task, ...]:
        """The tasks visitors may take: VQA is scored by a judge model, so it is offered only when the
        operator configured one."""
        return tuple(t for t in task_registry.all_tasks() if self.judge or not t.judged)

    def tasks(self) -> tuple[str, ...]:
        """The names of `offered_tasks`."""
        return tuple(t.name for t in self.offered_tasks())

    def model_choices(self, task: str) -> list[str]:
        """Operator models first, then the baselines that make sense for `task`."""
        return [*self.models, *BASELINES.get(task, ())]


def settings_or_exit(repo_root: Path) -> SpaceSettings:
    """For the entry point: a misconfigured Space stops with one clear line, not a traceback."""
    try:
        return SpaceSettings.from_env(repo_root=repo_root)
    except SettingsError as exc:
        sys.exit(f"error: {exc}")

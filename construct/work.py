"""The work folder of a build: its settings (WORK/config.json), and per stage (WORK/<stage>/) its decisions
(decisions.jsonl: kept or dropped and why, for every item it saw), the items it passes on (items.jsonl) and
done.json, marking it finished with its inputs' key (`inputs_key`): a rerun skips it unless they changed."""

from __future__ import annotations

import argparse
import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from construct.errors import BuildError
from dataset.jsonl import iter_jsonl_objects
from eval.limiter import AUTO, MAX_CONCURRENCY
from eval.settings import concurrency_arg, opt
from eval.store import json_line, read_jsonl, write_atomically
from eval.types import DEFAULT_MAX_TOKENS

KEPT, DROPPED = "kept", "dropped"
URL_FIELDS = ("base_url", "photo_quality_base_url", "photo_match_base_url", "embed_base_url")


def comma_list(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def _caps(text: str) -> dict[str, int]:
    caps = {}
    for part in filter(None, text.split(",")):
        cuisine, _, n = part.partition("=")
        if not n.isdigit():
            raise argparse.ArgumentTypeError(f"--cuisine-caps wants cuisine=N[,cuisine=N], got {part!r}")
        caps[cuisine.strip()] = int(n)
    return caps


def _ratio(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value < 0:
        raise argparse.ArgumentTypeError(f"--cuisine-ratio wants a number >= 0 (0: off), got {text!r}")
    return value


def _price(text: str) -> tuple[float, float]:
    try:
        a, b = (float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--price-per-mtok wants PROMPT,COMPLETION in USD, got {text!r}") from None
    return a, b


# The keys of --vqa-mix: short names of the release's VQA categories, each mapped to the category's name.
MIX_NAMES = {"technique": "cuisine_technique", "dietary": "dietary_suggestion",
             "multi_image": "multi_image_analysis", "counterfactual": "counterfactual_reasoning"}
VQA_MIX_KEYS = tuple(MIX_NAMES)
PAPER_VQA_MIX = {"technique": 0.662, "dietary": 0.272, "multi_image": 0.044, "counterfactual": 0.022}


def parse_mix(text: str) -> dict[str, float]:
    """`--vqa-mix technique=0.662,...`: a share per VQA category, normalised to sum to 1.

    >>> parse_mix("technique=3,dietary=1")
    {'technique': 0.75, 'dietary': 0.25, 'multi_image': 0.0, 'counterfactual': 0.0}
    """
    shares = dict.fromkeys(VQA_MIX_KEYS, 0.0)
    for part in filter(None, (x.strip() for x in text.split(","))):
        name, _, value = part.partition("=")
        try:
            share = float(value)
        except ValueError:
            share = -1.0
        if name.strip() not in shares or share < 0:
            raise argparse.ArgumentTypeError(f"--vqa-mix wants CATEGORY=SHARE[,...] with categories "
                                             f"{', '.join(VQA_MIX_KEYS)}, got {part!r}")
        shares[name.strip()] = share
    total = sum(shares.values())
    if total <= 0:
        raise argparse.ArgumentTypeError(f"--vqa-mix gives no category a positive share: {text!r}")
    return {k: v / total for k, v in shares.items()}


@dataclass
class BuildSettings:
    """Every setting of a build, once: `python -m construct run`'s flags, defaults and help come from these
    fields (`eval.settings.add_arguments`, as the harness's RunSettings)."""

    raw: str = opt("", "raw export folder", cli=False)
    model: str = opt("", "backend:model for generation (and the photo checks and filters unless set)")
    photo_quality_model: str | None = opt(None, "backend:model of the image-quality check (default: --model); "
                                          "the paper uses a small distilled VLM here", metavar="SPEC")
    photo_match_model: str | None = opt(None, "backend:model of the reference-matching check (default: --model)",
                                        metavar="SPEC")
    filter_models: list[str] = opt([], "SPEC,SPEC: the two filter / audit models", type=comma_list)
    embed_model: str | None = opt(None, "an OpenAI-compatible /v1/embeddings model: dedupe also pairs by meaning",
                                  metavar="openai:MODEL")
    embed_base_url: str | None = opt(None, "where --embed-model answers, e.g. a `vllm serve` of an embedding model "
                                           "(default: --base-url)", metavar="URL")
    base_url: str | None = opt(None, "URL[,URL...] (or the flag repeated): replicas, e.g. of `vllm serve`, "
                                     "asked in turn", action="append")
    photo_quality_base_url: str | None = opt(None, "URL[,URL...] of --photo-quality-model (default: --base-url)",
                                             action="append")
    photo_match_base_url: str | None = opt(None, "URL[,URL...] of --photo-match-model (default: --base-url)",
                                           action="append")
    fdc: str | None = opt(None, "folder of the FoodData Central CSV download")
    concurrency: int | str = opt(AUTO, "model calls in flight per endpoint (each replica its own): auto (default: "
                                       "learnt from latency, refusals and rate-limit headers) or a fixed N",
                                 type=concurrency_arg, metavar="N|auto")
    max_concurrency: int = opt(MAX_CONCURRENCY, f"with --concurrency auto: the most calls in flight per endpoint "
                                                f"(default {MAX_CONCURRENCY})")
    seed: int = opt(0, "seed of the models' sampling and of the item draws (default 0)")
    timeout: float = opt(120.0, "wall-clock seconds for one attempt of one call (default 120)")
    connect_wait: float = opt(15.0, "seconds to wait for a server that is still starting before the first stage "
                                    "(default 15)")
    max_tokens: int = opt(DEFAULT_MAX_TOKENS, "generation limit per call; an answer cut at it is cached as cut "
                                              "and asked again only with a higher limit")
    min_side: int = opt(128, "px; smaller photos are dropped before any model sees them")
    dhash_distance: int = opt(6, "of 64 bits: at or below, two photos of one dish are the same upload", cli=False)
    min_user_photos: int = opt(3, "user photos a dish needs after the photo filters")
    cuisine_caps: dict[str, int] = opt({}, "e.g. chinese=2000,western=300: most dishes kept per cuisine", type=_caps)
    cuisine_ratio: float | None = opt(7.3, "a cuisine not in --cuisine-caps keeps at most R times the dishes of the "
                                           "largest other (default 7.3, the paper's Table 3 balance; 0: off)",
                                      type=_ratio, metavar="R")
    atwater_tolerance: float = opt(0.10, "largest relative gap of kcal vs 4P+4C+9F", cli=False)
    fdc_tolerance: float = opt(0.40, "largest relative kcal gap between an estimate and its FDC sum", cli=False)
    vqa_mix: dict[str, float] = opt(dict(PAPER_VQA_MIX), "target share of each dish's VQA category (the paper's: "
                                    "technique=0.662,dietary=0.272,multi_image=0.044,counterfactual=0.022)",
                                    type=parse_mix, metavar="CAT=SHARE,...")
    review_exempt: list[str] = opt([], "tasks released without human review", type=comma_list)
    price_per_mtok: tuple[float, float] | None = opt(None, "PROMPT,COMPLETION USD per million tokens", type=_price)
    engine: str = opt("local", "where the per-photo and per-call work runs: local (this process, a prefilter "
                               "process per core) or ray (Ray Data: requirements-ray.txt)", choices=("local", "ray"))
    ray_address: str | None = opt(None, "with --engine ray: the cluster to join (ray://HOST:10001 or auto); default: "
                                        "start a local Ray on this machine's cores for the build", metavar="ADDR")
    ray_actors: int = opt(2, "with --engine ray: call actors per phase, sharing --concurrency (default 2)")
    ray_min_asks: int = opt(500, "with --engine ray: a call phase of fewer asks runs on the driver's event loop "
                                 "(an actor pool costs seconds to start; default 500)", metavar="N")

    def filter_pair(self) -> list[str]:
        """The two filter / audit models: `--filter-models`, else two distinct models of those configured
        on the main server (--model, then --photo-match-model, --photo-quality-model); with one model
        only, it makes both passes (`filter_note` says so, on the card and in the run's first lines)."""
        given = list(self.filter_models)
        if len(given) >= 2:
            return given[:2]
        same_server = [getattr(self, f"{job}_model") for job in ("photo_match", "photo_quality")
                       if (getattr(self, f"{job}_base_url") or self.base_url) == self.base_url]
        distinct = list(dict.fromkeys(m for m in (*given, self.model, *same_server) if m))
        return distinct[:2] if len(distinct) >= 2 else [distinct[0], distinct[0]] if distinct else ["", ""]

    def filter_note(self) -> str | None:
        """None when the two filter passes are two models; else what the card and the run say."""
        a, b = self.filter_pair()
        return None if a != b else (f"both filter passes use one model ({a}); the paper's two passes are two "
                                    f"different models: give --filter-models A,B")

    def job(self, name: str) -> tuple[str, str | None]:
        """(model spec, base URLs) of one job: `generate`, `photo_quality` or `photo_match`."""
        if name == "generate":
            return self.model, self.base_url
        spec, url = getattr(self, f"{name}_model"), getattr(self, f"{name}_base_url")
        return spec or self.model, url or self.base_url

    def base_urls(self) -> dict[str, str]:
        """Every distinct base URL the build may ask (each comma-separated replica) -> the flag that gave it."""
        out: dict[str, str] = {}
        for name in URL_FIELDS:
            for url in comma_list(getattr(self, name) or ""):
                out.setdefault(url, "--" + name.replace("_", "-"))
        return out


def settings_from_args(args: argparse.Namespace, raw: str) -> BuildSettings:
    """A BuildSettings from `run`'s parsed flags (a repeated URL flag joined with commas)."""
    values = {f.name: getattr(args, f.name) for f in fields(BuildSettings) if hasattr(args, f.name)}
    for name in ("base_url", "photo_quality_base_url", "photo_match_base_url"):
        if isinstance(values.get(name), list):
            values[name] = ",".join(values[name])
    if values.get("fdc"):
        values["fdc"] = str(Path(values["fdc"]).resolve())
    if "cuisine_ratio" in values:
        values["cuisine_ratio"] = values["cuisine_ratio"] or None  # 0: off
    return BuildSettings(**{**values, "raw": raw})


def save_settings(work: Path, settings: BuildSettings) -> None:
    """config.json, with any user:password or query (a key someone put in a URL) cut from the base URLs."""
    work.mkdir(parents=True, exist_ok=True)
    values = asdict(settings)
    for name in URL_FIELDS:
        if values.get(name):
            values[name] = ",".join(_public_url(u) for u in comma_list(str(values[name])))
    write_json(work / "config.json", values)


def _public_url(url: str) -> str:
    """scheme://host[:port]/path of a URL: never its userinfo, query or fragment.

    >>> _public_url("http://user:sk-secret@127.0.0.1:8000/v1?api-key=sk-secret")
    'http://127.0.0.1:8000/v1'
    """
    parts = urlsplit(url.strip())
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def load_settings(work: Path) -> BuildSettings:
    path = work / "config.json"
    if not path.exists():
        raise BuildError(f"{work} is not a construction work folder (no config.json); run `python -m construct run` first")
    known = {f.name for f in fields(BuildSettings)}  # a retired setting (e.g. `shard`) is ignored
    values = {k: v for k, v in json.loads(path.read_text(encoding="utf-8")).items() if k in known}
    if values.get("price_per_mtok"):
        values["price_per_mtok"] = tuple(values["price_per_mtok"])
    return BuildSettings(**values)


def read_json(path: Path) -> dict[str, Any]:
    """A JSON record this build keeps (e.g. WORK/hosts.json); {} when it is missing or unreadable."""
    try:
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    except (OSError, ValueError):
        return {}


def write_json(path: Path, value: Any) -> None:
    """Write whole or not at all: a run killed mid-write leaves the old file."""
    write_atomically(path, [json.dumps(value, ensure_ascii=False, indent=1)])


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    """Write whole or not at all (a sibling temp file of this writer's own renamed over `path`)."""
    write_atomically(path, (json.dumps(row, ensure_ascii=False) + "\n" for row in rows))


def inputs_key(*parts: Any) -> str:
    """A short hash of what a stage's output depends on (its done.json records it)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()[:16]


@dataclass
class Decision:
    """One verdict of one stage on one item (a photo, a dish, a task item)."""

    item: str
    verdict: str  # kept | dropped
    reason: str  # "ok" when kept; a short snake_case reason when dropped
    task: str | None = None  # classification | nutrition | vqa, or None for the shared stages
    detail: dict[str, Any] = field(default_factory=dict)


def kept(item: str, task: str | None = None, **detail: Any) -> Decision:
    return Decision(item, KEPT, "ok", task, detail)


def dropped(item: str, reason: str, task: str | None = None, **detail: Any) -> Decision:
    return Decision(item, DROPPED, reason, task, detail)


MODEL_ERROR, MODEL_UNPARSED = "model_error", "model_unparsed"


def triage(item: str, error: str | None, parsed: Any, task: str | None = None, **detail: Any) -> Decision | None:
    """The one model-answer triage of every stage: a call that failed is `model_error` (the stage is then
    incomplete: the call is asked again on the next run), an answer whose text did not parse (`parsed` is
    None) is `model_unparsed`; None when the answer parsed and the stage's own check decides.

    >>> triage("d1", "HTTP 503", None).reason, triage("d1", None, None).reason, triage("d1", None, {"a": 1})
    ('model_error', 'model_unparsed', None)
    """
    if error:
        return dropped(item, MODEL_ERROR, task, **detail, error=error)
    if parsed is None:
        return dropped(item, MODEL_UNPARSED, task, **detail)
    return None


def screen(items: Iterable[str], answers: Mapping[str, Any], parse: Callable[[str | None], tuple[Any, ...]],
          own: Callable[..., Decision | None], decisions: dict[str, Decision], task: str | None = None,
          **detail: Any) -> list[str]:
    """The items whose answer passes, in order: each answer parsed (`parse`: a tuple, its first value None when
    the text did not parse), triaged (`triage`, with `detail`), then held to the stage's own check,
    `own(item, *parsed)`: its drop decision, or None. Each other item's decision goes to `decisions`."""
    passed = []
    for item in items:
        parsed = parse(answers[item].text)
        if decision := triage(item, answers[item].error, parsed[0], task, **detail) or own(item, *parsed):
            decisions[item] = decision
        else:
            passed.append(item)
    return passed


class Stage:
    """The files of one stage in the work folder."""

    def __init__(self, work: Path, name: str) -> None:
        self.name = name
        self.dir = work / name
        self.dir.mkdir(parents=True, exist_ok=True)

    def is_done(self, inputs: str) -> bool:
        path = self.dir / "done.json"
        return path.exists() and json.loads(path.read_text(encoding="utf-8")).get("inputs") == inputs

    def finish(self, decisions: Iterable[Decision], items: Iterable[dict[str, Any]], inputs: str, *, complete: bool) -> None:
        """Write the verdicts and items; mark done only when no model call failed (a rerun retries those)."""
        write_jsonl(self.dir / "decisions.jsonl", (asdict(d) for d in decisions))
        write_jsonl(self.dir / "items.jsonl", items)
        done = self.dir / "done.json"
        if complete:
            write_json(done, {"inputs": inputs})
        elif done.exists():
            done.unlink()

    def finish_task(self, decisions: dict[str, Decision], items: Iterable[dict[str, Any]], inputs: str, *,
                    complete: bool = True) -> None:
        """`finish` for a task stage: its decisions in item order; incomplete too if one is a model_error."""
        self.finish([decisions[k] for k in sorted(decisions)], items, inputs,
                    complete=complete and all(d.reason != MODEL_ERROR for d in decisions.values()))

    def decisions(self) -> list[dict[str, Any]]:
        return read_jsonl(self.dir / "decisions.jsonl")

    def items(self) -> list[dict[str, Any]]:
        return read_jsonl(self.dir / "items.jsonl")

    def iter_items(self) -> Iterator[dict[str, Any]]:
        """The items one at a time (the photo stage's run to millions)."""
        path = self.dir / "items.jsonl"
        if path.exists():
            for _, row in iter_jsonl_objects(path, policy="skip", loads=json_line):
                yield row

    def items_hash(self) -> str:
        """What the next stage depends on: this stage's items."""
        return self.file_hash("items.jsonl")

    def file_hash(self, name: str) -> str:
        """A hash of one of this stage's files, read in chunks ("none" when it does not exist)."""
        path = self.dir / name
        if not path.exists():
            return "none"
        digest = hashlib.sha256()
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
        return digest.hexdigest()[:16]

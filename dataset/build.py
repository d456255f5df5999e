"""Writing a release: Parquet shards, the card, build from records, the synthetic sample, push."""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from dataset.jsonl import iter_jsonl_objects
from dataset.load import validate
from dataset.official import license_terms
from dataset.schema import (
    CARD,
    CITATION,
    CONFIGS,
    DESCRIPTION,
    LICENSE,
    ROW_GROUP_SIZE,
    SPLIT,
    DatasetError,
    columns,
    encode_row,
    release_schema,
)

# ---------------------------------------------------------------------------------- write / build


class ShardWriter:
    """Writes rows of one config into `data/<config>/test-XXXXX-of-YYYYY.parquet` incrementally, so a
    paper-size release never sits in memory. `total` rows must be known up front (shard names)."""

    def __init__(self, out_dir: Path, config: str, total: int, rows_per_shard: int = 500,
                 optional: bool = False) -> None:
        self.config, self.optional = config, optional
        self.schema = release_schema(config, optional=optional)
        self.dir = Path(out_dir) / "data" / config
        self.dir.mkdir(parents=True, exist_ok=True)
        for stale in self.dir.glob("*.parquet"):
            stale.unlink()
        self.total, self.per_shard = total, rows_per_shard
        self.n_shards = max(1, math.ceil(total / rows_per_shard))
        self.written = 0
        self.buffer: list[dict[str, Any]] = []
        self.writer: pq.ParquetWriter | None = None
        self.num_bytes = 0

    def add(self, row: dict[str, Any]) -> None:
        self.buffer.append(encode_row(self.config, row, optional=self.optional))
        if len(self.buffer) == ROW_GROUP_SIZE or (self.written + len(self.buffer)) % self.per_shard == 0:
            self._flush()

    def _flush(self) -> None:
        if not self.buffer:
            return
        if self.writer is None:
            shard = self.written // self.per_shard
            path = self.dir / f"{SPLIT}-{shard:05d}-of-{self.n_shards:05d}.parquet"
            self.writer = pq.ParquetWriter(path, self.schema)
        table = pa.Table.from_pylist(self.buffer, schema=self.schema)
        self.num_bytes += table.nbytes
        self.writer.write_table(table, row_group_size=ROW_GROUP_SIZE)
        self.written += len(self.buffer)
        self.buffer = []
        if self.written % self.per_shard == 0:
            self.writer.close()
            self.writer = None

    def close(self) -> None:
        self._flush()
        if self.writer is not None:
            self.writer.close()
        if self.written != self.total:
            raise ValueError(f"{self.dir.name}: wrote {self.written} rows, expected {self.total}")


def card_info(license_id: str = LICENSE) -> dict[str, str]:
    """The DatasetInfo fields each config's `dataset_info` carries, so `ds.info` has them."""
    return {"description": DESCRIPTION, "citation": CITATION, "license": license_id}


def _yaml_feature(kind: Any) -> dict[str, str]:
    """A column's type as a card's `dataset_info: features:` states it (`dtype: string`, `list: image`)."""
    return {"list": kind[0]} if isinstance(kind, list) else {"dtype": kind}  # schema.IMAGE is "image" too


def card_text(counts: dict[str, int], num_bytes: dict[str, int], note: str = "",
              optional: Iterable[str] = (), license_id: str = LICENSE) -> str:
    """The release README.md: YAML header generated from the real counts, body from dataset_card.md. Each
    config's `dataset_info` is what `datasets.DatasetInfo(...)._to_yaml_dict()` writes (features, config_name,
    splits, dataset_size), plus `card_info()`."""
    import yaml

    infos = [{"features": [{"name": name, **_yaml_feature(kind)}
                           for name, kind in columns(config, optional=config in set(optional)).items()],
              "config_name": config,
              "splits": [{"name": SPLIT, "num_bytes": num_bytes.get(config, 0), "num_examples": counts.get(config, 0)}],
              "dataset_size": num_bytes.get(config, 0), **card_info(license_id)}
             for config in CONFIGS]
    header = {
        "pretty_name": "DiningBench",
        "license": license_id,
        "language": ["zh", "en"],
        "task_categories": ["visual-question-answering", "image-classification", "image-text-to-text"],
        "tags": ["food", "nutrition", "multi-view", "benchmark", "vision-language"],
        "size_categories": ["n<1K" if (n := sum(counts.values())) < 1000 else "1K<n<10K" if n < 10000 else "10K<n<100K"],
        # `default: true` (the Hub's multi-config convention): load_dataset(NAME) without a config loads
        # classification; the card lists the others.
        "configs": [{"config_name": c, "data_files": [{"split": SPLIT, "path": f"data/{c}/{SPLIT}-*.parquet"}],
                     **({"default": True} if c == CONFIGS[0] else {})} for c in CONFIGS],
        "dataset_info": infos,
    }
    body = CARD.read_text(encoding="utf-8") if CARD.exists() else "# DiningBench\n"
    if body.startswith("---\n"):  # drop the card's own header: the release's is generated above
        body = body[4:].split("\n---\n", 1)[-1].lstrip("\n")
    if note:
        body = body.replace("\n", f"\n\n> {note}\n", 1) if body.startswith("# ") else f"> {note}\n\n{body}"
    return "---\n" + yaml.safe_dump(header, sort_keys=False, allow_unicode=True, width=120) + "---\n\n" + body


def write_release(out_dir: str | os.PathLike, rows: Mapping[str, tuple[int, Iterable[dict[str, Any]]]],
                  note: str = "", optional: Iterable[str] = (), license_id: str = LICENSE) -> Path:
    """Write a release folder from `{config: (row count, row iterator)}`; returns the folder.
    Configs named in `optional` carry their OPTIONAL_COLUMNS; the card states `license_id`."""
    optional = set(optional)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    counts, sizes = {}, {}
    for config in CONFIGS:
        total, it = rows[config]
        writer = ShardWriter(out, config, total, optional=config in optional)
        for row in it:
            writer.add(row)
        writer.close()
        counts[config], sizes[config] = writer.written, writer.num_bytes
    (out / "README.md").write_text(card_text(counts, sizes, note, optional, license_id), encoding="utf-8")
    return out


def _read_records(records_dir: Path, config: str) -> tuple[int, Iterator[dict[str, Any]]]:
    path = records_dir / f"{config}.jsonl"
    if not path.exists():
        raise DatasetError(f"records folder {records_dir} has no {config}.jsonl")
    with path.open(encoding="utf-8") as fh:
        total = sum(1 for line in fh if line.strip())

    declared = columns(config)

    def rows() -> Iterator[dict[str, Any]]:
        for lineno, record in iter_jsonl_objects(path):
            item = record.get("id", f"line {lineno}")
            if missing := sorted(set(declared) - set(record)):
                raise DatasetError(f"{config} item {item}: missing field(s) {', '.join(missing)}")
            images = []
            for rel in record["images"] if isinstance(record["images"], list) else []:
                image_path = (records_dir / str(rel)).resolve()
                if not image_path.is_file():
                    raise DatasetError(f"{config} item {item}: image file {rel} not found")
                images.append({"bytes": image_path.read_bytes(), "path": Path(rel).name})
            # A wrongly typed field is refused by the writer's encode_row, naming the item.
            yield {**record, "images": images}

    return total, rows()


def build(records_dir: str | os.PathLike, out_dir: str | os.PathLike) -> Path:
    """Records (`<config>.jsonl` + image files referenced by relative path) -> release folder."""
    src = Path(records_dir)
    if not src.is_dir():
        raise DatasetError(f"records folder {src} does not exist")
    return write_release(out_dir, {c: _read_records(src, c) for c in CONFIGS})


def generate(out_dir: str | os.PathLike, *, scale: str = "sample", seed: int = 0, workers: int | None = None) -> Path:
    """Regenerate the synthetic release (deterministic: same seed -> byte-identical Parquet)."""
    import tempfile

    from synthetic.sample import release_rows

    note = (f"Synthetic data (scale `{scale}`, seed {seed}) rendered by `python diningbench.py sample`: "
            "not real restaurant photos; nutrition is computed exactly from gram weights.")
    with tempfile.TemporaryDirectory(prefix="diningbench-render-") as cache:
        rows = release_rows(scale=scale, seed=seed, workers=workers, cache_dir=Path(cache))
        return write_release(out_dir, rows, note)


def card_license(folder: str | os.PathLike) -> str | None:
    """The `license:` a release folder's card states (None when it states none or cannot be read)."""
    import yaml

    try:
        text = (Path(folder) / "README.md").read_text(encoding="utf-8")
        header = yaml.safe_load(text.split("---", 2)[1]) if text.startswith("---") else None
    except (OSError, UnicodeDecodeError, IndexError, yaml.YAMLError):
        return None
    found = header.get("license") if isinstance(header, dict) else None
    return found if isinstance(found, str) else None


def push(release_dir: str | os.PathLike, repo_id: str, *, private: bool = False, public: bool = False,
         endpoint: str | None = None, message: str = "Upload DiningBench release") -> str:
    """Upload a release folder as a Hub dataset repo (token from HF_TOKEN only); returns the commit URL. A
    release under the authors' license (converted from their publication) goes to a private repository unless
    `public` says otherwise: its terms allow no derivatives and no commercial use."""
    from huggingface_hub import CommitOperationAdd, HfApi

    folder = Path(release_dir)
    if private and public:
        raise DatasetError("choose --private or --public, not both")
    if license_terms(card_license(folder)) is not None and not public:
        private = True
    if problems := [p for p in validate(folder) if p.level == "error"]:
        raise DatasetError(f"refusing to push {folder}: {len(problems)} validation error(s), first: {problems[0]}")
    if not (token := os.environ.get("HF_TOKEN")):
        raise DatasetError("set HF_TOKEN to a Hugging Face write token to push")
    api = HfApi(endpoint=endpoint or os.environ.get("HF_ENDPOINT"), token=token)
    operations = [CommitOperationAdd(path_in_repo=str(p.relative_to(folder)), path_or_fileobj=str(p))
                  for p in sorted(folder.rglob("*")) if p.is_file() and (p.name == "README.md" or p.suffix == ".parquet")]
    try:
        api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        info = api.create_commit(repo_id, operations, commit_message=message, repo_type="dataset")
    except Exception as exc:  # HTTP and Hub errors: one line; they never echo the token
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0].replace(token, "***")
        raise DatasetError(f"push to {repo_id} failed: {first}") from None
    return str(info.commit_url)

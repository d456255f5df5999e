"""Scale: the stages ask several replicas in turn, and a build run as two shards then merged releases
the same items as one unsharded build."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from construct.__main__ import main
from construct.models import RoundRobin
from construct.raw import load_raw
from construct.shard import parse_shard, restrict, shard_of
from synthetic.raw_export import write_raw_export
from tests.fakes.construct_server import construct_server
from tests.fakes.openai_server import FakeOpenAIServer

FILTERS = ("openai:judge-a", "openai:judge-b")


def release_rows(folder) -> dict[str, list[dict]]:
    out = {}
    for path in sorted((folder / "data").rglob("*.parquet")):
        rows = pq.read_table(path).to_pylist()
        out[path.parent.name] = sorted(rows, key=lambda r: r["id"])
    return out


def build(*argv: str) -> None:
    assert main(list(argv)) == 0


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    root = tmp_path_factory.mktemp("scale")
    return root, write_raw_export(root / "raw")


def test_shards_split_by_merchant_and_cover_the_export_once(export):
    root, _ = export
    raw = load_raw(root / "raw")
    parts = [restrict(raw, k, 2) for k in (1, 2)]
    assert sorted(d for p in parts for d in p.dishes) == sorted(raw.dishes)
    assert all(p.merchants for p in parts), "the synthetic export's merchants fall in both shards"
    for part in parts:
        assert {d.merchant_id for d in part.dishes.values()} <= set(part.merchants)
        assert {raw.photos[p].dish_id for p in part.photos} <= set(part.dishes)
    assert shard_of("merchant-01", 2) == shard_of("merchant-01", 2)
    with pytest.raises(ValueError, match="K/N"):
        parse_shard("3/2")


def test_two_shards_on_two_replicas_merge_into_the_unsharded_release(export, monkeypatch):
    root, truth = export
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    common = ["--model", "openai:gen", "--filter-models", ",".join(FILTERS), "--cuisine-caps", "chinese=2"]
    # Two replicas of one model: one oracle behind both (the stand-in remembers the drafts it wrote).
    one, oracle = construct_server(truth, FILTERS)
    two = FakeOpenAIServer(oracle)
    with one, two:
        whole = ("run", str(root / "raw"), "--out", str(root / "whole"), "--base-url", one.base_url, *common)
        build(*whole)  # stops at the base-dish review
        build("review", str(root / "whole"), "--stage", "dishes", "--approve-all")
        build(*whole)
        whole_calls = len(one.requests)
        one.requests.clear()
        for k in (1, 2):  # each shard on both replicas, given as one list and as a repeated flag
            urls = [f"{one.base_url},{two.base_url}"] if k == 1 else [one.base_url, two.base_url]
            build("run", str(root / "raw"), "--out", str(root / f"shard{k}"), "--shard", f"{k}/2", *common,
                  *[x for url in urls for x in ("--base-url", url)])
        shard_calls = len(one.requests) + len(two.requests)
        assert abs(len(one.requests) - len(two.requests)) <= 2 * 5  # in turn: one apart per batch of asks
        one.requests.clear()
        two.requests.clear()
        merge = ("merge", str(root / "shard1"), str(root / "shard2"), "--out", str(root / "merged"))
        build(*merge)  # shards pass their dishes on; the merged folder stops at the base-dish review
        build("review", str(root / "merged"), "--stage", "dishes", "--approve-all")
        build(*merge)
        merge_calls = len(one.requests) + len(two.requests)
        for work in ("whole", "merged"):
            build("review", str(root / work), "--approve-all")
            build("release", str(root / work), "--out", str(root / f"release-{work}"))
    hosts = json.loads((root / "shard1" / "hosts.json").read_text(encoding="utf-8"))
    assert hosts["openai:gen"] == [f"127.0.0.1:{one.port}", f"127.0.0.1:{two.port}"]
    assert "key" not in (root / "shard1" / "hosts.json").read_text(encoding="utf-8")
    assert shard_calls >= whole_calls  # the shards ask a superset (no caps, twins at other merchants unseen)
    # Asked anew at the merge: only prompts that depend on the whole export (the VQA categories taken in
    # turn over all kept dishes, a merchant's glossary, a same-dish pair of two merchants in two shards);
    # every photo, classification, nutrition call is reused.
    def lines(work, stage):
        path = root / work / stage / "calls.jsonl"
        return len(path.read_text(encoding="utf-8").splitlines()) if path.exists() else 0

    anew = {st: lines("merged", st) - lines("shard1", st) - lines("shard2", st)
            for st in ("photos", "dishes", "classification", "nutrition", "vqa", "translate")}
    assert sum(anew.values()) == merge_calls
    assert anew["photos"] == anew["classification"] == anew["nutrition"] == 0, anew
    assert anew["dishes"] <= lines("whole", "dishes")  # at most the whole build's same-dish pairs
    assert merge_calls - anew["dishes"] <= 0.15 * whole_calls, (anew, whole_calls)
    whole, merged = release_rows(root / "release-whole"), release_rows(root / "release-merged")
    assert set(whole) == {"classification", "nutrition", "vqa"}
    assert {k: [r["id"] for r in v] for k, v in merged.items()} == {k: [r["id"] for r in v] for k, v in whole.items()}
    assert merged == whole
    decisions = {w: (root / w / "dishes" / "decisions.jsonl").read_text(encoding="utf-8") for w in ("whole", "merged")}
    assert decisions["whole"] == decisions["merged"]
    assert "cuisine_cap" in decisions["merged"] and "near_duplicate_dish" in decisions["merged"]


def test_merge_refuses_an_incomplete_set_of_shards(export, tmp_path, capsys):
    root, _ = export
    if not (root / "shard1" / "config.json").exists():
        pytest.skip("needs the shards of the test above")
    assert main(["merge", str(root / "shard1"), "--out", str(tmp_path / "m")]) == 2
    assert "shard(s) 2/2 missing" in capsys.readouterr().err


def test_round_robin_sends_each_request_to_the_next_replica():
    import asyncio

    class Echo:
        def __init__(self, name):
            self.spec, self.name = "openai:x", name

        async def generate(self, request):
            return self.name

        def describe(self):
            return {"model": "x"}

    rr = RoundRobin([Echo("a"), Echo("b"), Echo("c")], ["a:1", "b:1", "c:1"])
    got = [asyncio.run(rr.generate(None)) for _ in range(7)]
    assert got == ["a", "b", "c", "a", "b", "c", "a"] and rr.sent == [3, 2, 2]
    assert rr.describe()["replicas"] == ["a:1", "b:1", "c:1"]


def test_models_read_photos_chunk_by_chunk_not_all_at_once(tmp_path, monkeypatch):
    import construct.models as models
    from construct.work import BuildSettings
    from eval.types import Response

    loaded: list[str] = []
    seen_at_send: list[int] = []

    class Fake:
        spec = "openai:x"

        async def generate(self, request):
            seen_at_send.append(len(loaded))
            return Response(text='{"quality": "good"}', usage={"prompt_tokens": 1, "completion_tokens": 1})

        def describe(self):
            return {}

    monkeypatch.setattr(models, "CHUNK", 3)
    pool = models.Models(BuildSettings(model="openai:x", concurrency=2), tmp_path, factory=lambda spec, **kw: Fake())
    asks = [models.Ask(f"i{k}", "p", photos=lambda k=k: (loaded.append(f"i{k}") or ())) for k in range(7)]
    answers = pool.ask("photos", "openai:x", "v1", asks)
    assert sorted(answers) == sorted(a.item for a in asks) and len(loaded) == 7
    assert max(seen_at_send[:3]) == 3 and max(seen_at_send) == 7  # chunk 1 sent before chunk 2 was read
    assert all(n <= 3 * (1 + i // 3) for i, n in enumerate(seen_at_send))

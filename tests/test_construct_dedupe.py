"""Dedupe by blocking then a model's verdict (construct/dedupe.py, the dishes and VQA stages): MinHash LSH
finds alike records without comparing every pair, a popular bucket stays linear, embeddings add pairs by
meaning, and the model (not a word-overlap rule) decides each candidate pair."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import numpy as np
import pytest

from construct import dedupe, dishes
from construct.dedupe import band_pairs, candidates, char_ngrams, first_of_each, minhash
from construct.models import Answer
from construct.raw import Dish
from construct.work import BuildSettings

BEEF = ["beef 120 g", "wheat noodles 200 g", "chili oil 10 g", "scallion 5 g", "beef broth 300 ml"]


def dish(did: str, merchant: str, name: str, ingredients: list[str]) -> Dish:
    return Dish(did, merchant, name, "noodles", "", tuple(ingredients), "1 bowl, about 600 g")


def test_minhash_agreement_estimates_jaccard():
    a = {f"t{i}" for i in range(100)}
    b = {f"t{i}" for i in range(50, 150)}  # Jaccard 50 / 150 = 1/3
    sig = minhash([a, b, set(a)])
    assert (sig[0] == sig[2]).all()  # the same set, the same signature
    assert abs((sig[0] == sig[1]).mean() - 1 / 3) < 0.15
    assert (minhash([set()]) == dedupe.PRIME).all()


def test_renamed_dish_with_the_same_ingredients_is_a_candidate_and_an_unrelated_one_is_not():
    records = [dish("a", "m1", "Spicy Beef Noodle Soup", BEEF), dish("b", "m2", "Hot Beef Noodles", BEEF),
               dish("c", "m2", "Egg Fried Rice", ["rice 250 g", "egg 50 g", "scallion 5 g", "soy sauce 5 ml"])]
    found = candidates(dishes.dish_views(records))
    assert found.pairs() == [(0, 1)]
    assert "ingredients" in found.via[(0, 1)]


def test_a_bucket_of_many_identical_records_is_checked_as_a_chain_not_every_pair():
    sig = minhash([{"rice", "egg", "scallion"}] * 100)
    pairs = band_pairs(sig)
    # each record against its next WINDOW = 8: sum over k of min(8, 99 - k) = 8 * 92 + (7 + ... + 0) = 764
    assert len(pairs) == 764
    assert all(j - i <= dedupe.WINDOW for i, j in pairs)
    assert len(band_pairs(minhash([{"rice", "egg", "scallion"}] * 20))) == 20 * 19 // 2  # small bucket: all pairs


def test_distinct_records_give_few_pairs():
    rng = np.random.default_rng(1)
    sets = [{f"w{x}" for x in rng.choice(5000, 6, replace=False)} for _ in range(2000)]
    assert len(band_pairs(minhash(sets))) < 20  # all-pairs would be 1,999,000


def test_allowed_keeps_only_cross_merchant_pairs():
    records = [dish("a", "m1", "Beef Noodles", BEEF), dish("b", "m1", "Beef Noodles", BEEF),
               dish("c", "m2", "Beef Noodles", BEEF)]
    found = candidates(dishes.dish_views(records), allowed=lambda i, j: records[i].merchant_id != records[j].merchant_id)
    assert found.pairs() == [(0, 2), (1, 2)]


def test_first_of_each_never_chains_and_respects_allowed():
    # "a is b" and "b is c" do not make "a is c": c was never judged against a, so it stays.
    assert first_of_each(["a", "b", "c"], [("a", "b"), ("b", "c")]) == {"b": "a"}
    # c confirmed against a kept dish as well as a dropped one: dropped as the kept one's twin.
    assert first_of_each(["a", "b", "c"], [("a", "b"), ("b", "c"), ("a", "c")]) == {"b": "a", "c": "a"}
    merchant = {"a": "m1", "b": "m1", "c": "m2"}
    assert first_of_each(["a", "b", "c"], [("a", "b"), ("a", "c")],
                         allowed=lambda x, y: merchant[x] != merchant[y]) == {"c": "a"}


def test_char_ngrams_of_cjk_and_latin():
    assert char_ngrams("蛋炒饭", (2,)) == {"蛋炒", "炒饭"}
    assert char_ngrams("Hot-Beef", (3,)) == {"hot", "otb", "tbe", "bee", "eef"}


class FakeModels:
    """Answers each same-dish ask from a set of pairs the test calls the same; records every ask."""

    def __init__(self, same: set[frozenset[str]]) -> None:
        self.same = same
        self.asked: list[tuple[str, str, str]] = []

    key = "same_dish"

    def ask_each(self, stage, spec, version, asks, on_answer, base_url=None):
        """As `construct.models.Models.ask_each`: each answer to `on_answer` (here in ask order)."""
        for a in asks:
            self.asked.append((stage, a.item, a.prompt))
            verdict = frozenset(a.item.split("|")) in self.same
            on_answer(Answer(a.item, json.dumps({self.key: verdict, "reason": "r"}), None, None))


def test_the_model_decides_each_candidate_pair_and_its_verdict_is_kept(tmp_path):
    records = [dish("m1-d1", "m1", "Spicy Beef Noodle Soup", BEEF), dish("m2-d1", "m2", "Hot Beef Noodles", BEEF),
               dish("m3-d1", "m3", "Beef Noodles", BEEF[:4] + ["bok choy 30 g"])]
    models = FakeModels({frozenset({"m1-d1", "m2-d1"})})
    ctx = SimpleNamespace(settings=BuildSettings(model="openai:gen"), models=models, work=tmp_path)
    twins, same, rows, complete = dishes.find_twins(ctx, records)
    checked = list(rows)
    assert complete and twins == {"m2-d1": "m1-d1"} and list(same) == [("m1-d1", "m2-d1")]  # m3's near-copy was a candidate, but the model said no
    assert {tuple(c["pair"]) for c in checked} == {("m1-d1", "m2-d1"), ("m1-d1", "m3-d1"), ("m2-d1", "m3-d1")}
    verdict = {tuple(c["pair"]): c["same_dish"] for c in checked}
    assert verdict[("m1-d1", "m2-d1")] is True and verdict[("m1-d1", "m3-d1")] is False
    assert all(stage == "dishes" and prompt.startswith("Task: same dish check.") for stage, _, prompt in models.asked)
    assert "Dish A (m1-d1):" in models.asked[0][2] and "Hot Beef Noodles" in models.asked[0][2]


class _Embeddings(BaseHTTPRequestHandler):
    """/v1/embeddings as OpenAI answers it: {"object": "list", "data": [{"index", "embedding"}], ...}."""

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        assert self.path == "/v1/embeddings" and body["model"] == "emb"
        vectors = [[1.0, 0.2, 0.0] if ("牛肉" in t or "beef" in t.lower()) else [0.0, 0.1, 1.0] for t in body["input"]]
        data = json.dumps({"object": "list", "model": "emb", "usage": {"prompt_tokens": 1, "total_tokens": 1},
                           "data": [{"object": "embedding", "index": i, "embedding": v}
                                    for i, v in enumerate(vectors)]}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def embeddings_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Embeddings)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_embeddings_pair_dishes_that_share_no_word(tmp_path, embeddings_server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    records = [dish("m1-d1", "m1", "红烧牛肉面", ["牛肉 120克", "面条 200克", "辣椒油 10克"]),
               dish("m2-d1", "m2", "Hot Beef Noodles", ["beef 120 g", "noodles 200 g", "chili oil 10 g"]),
               dish("m2-d2", "m2", "Garden Salad", ["lettuce 80 g", "tomato 50 g", "cucumber 40 g"])]
    assert candidates(dishes.dish_views(records)).pairs() == []  # no shared token: lexical blocking misses it
    models = FakeModels({frozenset({"m1-d1", "m2-d1"})})
    # the chat model's --base-url is elsewhere: the vectors come from --embed-base-url
    settings = BuildSettings(model="openai:gen", embed_model="openai:emb", base_url="http://127.0.0.1:9/v1",
                             embed_base_url=embeddings_server)
    twins, _, rows, _ = dishes.find_twins(SimpleNamespace(settings=settings, models=models, work=tmp_path), records)
    checked = list(rows)
    assert twins == {"m2-d1": "m1-d1"}
    assert checked[0]["via"] == ["embedding"] and checked[0]["pair"] == ["m1-d1", "m2-d1"]


class FakeQuestionModels(FakeModels):
    key = "same_question"


def test_questions_within_a_category_pair_by_wording_or_meaning_and_the_model_decides(
        tmp_path, embeddings_server, monkeypatch):
    from construct import vqa

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    drafts = {"d1:t": {"category": "cuisine_technique", "question": "这道菜的主要烹饪方式是什么？"},
              "d2:t": {"category": "cuisine_technique", "question": "这道菜的主要烹饪方式是什么呢？"},
              "d3:t": {"category": "cuisine_technique", "question": "Was the beef seared or braised?"},
              "d4:t": {"category": "cuisine_technique", "question": "这块牛肉是煎的还是炖的？"},
              "d5:d": {"category": "dietary_suggestion", "question": "这道菜的主要烹饪方式是什么？"}}
    models = FakeQuestionModels({frozenset({"d1:t", "d2:t"}), frozenset({"d3:t", "d4:t"})})
    settings = BuildSettings(model="openai:gen", embed_model="openai:emb", base_url=embeddings_server)
    twins, complete = vqa.question_twins(SimpleNamespace(settings=settings, models=models, work=tmp_path), drafts,
                                         list(drafts))
    assert complete
    assert {k: v["of"] for k, v in twins.items()} == {"d2:t": "d1:t", "d4:t": "d3:t"}  # d5: another category
    assert twins["d4:t"]["via"] == ["embedding"] and "question" in twins["d2:t"]["via"]
    asked = {frozenset(item.split("|")) for _, item, _ in models.asked}
    assert frozenset({"d1:t", "d5:d"}) not in asked  # never across categories
    assert all(stage == "vqa" and prompt.startswith("Task: same question check.") for stage, _, prompt in models.asked)


def test_config_json_keeps_no_key_put_in_the_embed_url(tmp_path):
    from construct.work import load_settings, save_settings

    save_settings(tmp_path, BuildSettings(model="openai:gen", embed_model="openai:emb",
                                          embed_base_url="http://u:sk-secret@127.0.0.1:8001/v1?key=sk-secret"))
    assert "sk-secret" not in (tmp_path / "config.json").read_text(encoding="utf-8")
    assert load_settings(tmp_path).embed_base_url == "http://127.0.0.1:8001/v1"


def test_a_bad_embed_model_is_one_clear_error():
    with pytest.raises(ValueError, match="--embed-model wants openai:MODEL"):
        dedupe.embed("gemini:x", ["a"], base_url=None, timeout=1)


def test_the_dedupe_bench_finds_every_planted_twin_and_reports_an_exponent():
    from bench import construct_dedupe, run_all

    rows = construct_dedupe.run((300, 600), all_pairs_up_to=300, repeats=1)
    assert [r["dishes"] for r in rows[:2]] == [300, 600]
    assert all(r["recall"] == 1.0 and 0 < r["pairs"] < r["dishes"] for r in rows[:2])
    assert rows[0]["reference"] is not None and rows[1]["reference"] is None  # all pairs timed up to 300 only
    assert rows[2]["name"].endswith("exponent of time in dishes") and "pairs grow with exponent" in rows[2]["note"]
    assert "dedupe" in run_all.BENCHES

"""The one append-only JSON-lines store: a torn last line is repaired on reopening and never costs
the next record; the judge metric's self-contained verdict cache keeps the same rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from construct.models import Ask, Models
from construct.work import BuildSettings
from eval.store import JsonlLog, json_line, json_text, read_jsonl, repair_torn_tail
from eval.types import Request, Response
from metrics.judge_accuracy.core import VerdictCache


def _torn(path: Path, tail: str) -> None:
    path.write_text('{"n": 1}\n{"n": 2}\n' + tail, encoding="utf-8")


def test_a_torn_last_line_then_an_append_keeps_every_complete_record(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    _torn(path, '{"n": 3, "te')  # killed mid-write
    with JsonlLog(path) as log:
        log.append({"n": 4})
    assert read_jsonl(path) == [{"n": 1}, {"n": 2}, {"n": 4}]
    assert path.read_text(encoding="utf-8") == '{"n": 1}\n{"n": 2}\n{"n":4}\n'  # appended compact, as orjson writes


def test_a_complete_last_record_that_lost_only_its_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    _torn(path, '{"n": 3}')
    with JsonlLog(path) as log:
        log.append({"n": 4})
    assert read_jsonl(path) == [{"n": 1}, {"n": 2}, {"n": 3}, {"n": 4}]


def test_repair_reads_past_a_long_torn_tail_and_a_file_that_is_one_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    _torn(path, '{"raw": "' + "x" * 200_000)  # longer than one tail chunk
    repair_torn_tail(path)
    assert path.read_text(encoding="utf-8") == '{"n": 1}\n{"n": 2}\n'
    path.write_text('{"n"', encoding="utf-8")
    repair_torn_tail(path)
    assert path.read_bytes() == b""
    repair_torn_tail(tmp_path / "absent.jsonl")  # nothing to repair
    assert not (tmp_path / "absent.jsonl").exists()


class _Counting:
    """A backend that answers every request with its item id and counts what it was asked."""

    spec = "fake:count"

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def generate(self, request: Request) -> Response:
        self.asked.append(request.id)
        return Response(text=f"answer {request.id}", finish_reason="stop")


def test_the_construction_call_cache_keeps_the_answer_after_a_torn_line(tmp_path: Path) -> None:
    backend = _Counting()
    models = Models(BuildSettings(model="fake:count"), tmp_path, factory=lambda spec, options: backend)
    assert models.ask("vqa", "fake:count", "v1", [Ask("a", "q a")])["a"].text == "answer a"
    calls = tmp_path / "vqa" / "calls.jsonl"
    with calls.open("a", encoding="utf-8") as fh:
        fh.write('{"key": "torn')  # a kill mid-write
    models.ask("vqa", "fake:count", "v1", [Ask("b", "q b")])
    again = models.ask("vqa", "fake:count", "v1", [Ask("a", "q a"), Ask("b", "q b")])
    assert backend.asked == ["a", "b"]  # b's answer was kept, not glued to the torn line and asked again
    assert again["b"].cached and again["b"].text == "answer b"
    assert [row["item"] for row in read_jsonl(calls)] == ["a", "b"]


def test_the_judge_verdict_cache_copy_keeps_the_same_rule(tmp_path: Path) -> None:
    path = tmp_path / "verdicts.jsonl"
    first = {"judge_model": "m", "prompt_sha256": VerdictCache.prompt_hash("p1"), "verdict": "C", "raw": "C"}
    path.write_text(json.dumps(first) + '\n{"judge_model": "m", "prompt_sha', encoding="utf-8")
    VerdictCache(tmp_path, "m").put("p2", "I", "I")
    again = VerdictCache(tmp_path, "m")
    assert again.get("p1")["verdict"] == "C" and again.get("p2")["verdict"] == "I"
    assert [r["verdict"] for r in read_jsonl(path) if "verdict" in r] == ["C", "I"]


def test_json_lines_read_and_write_what_json_does_where_orjson_refuses() -> None:
    # orjson refuses these; the standard library's reading and writing of them is kept
    assert json_line('{"n": NaN}')["n"] != json_line('{"n": NaN}')["n"]  # NaN, as json.loads reads it
    assert json_line('{"n": 123456789012345678901234567890}') == {"n": 1.2345678901234568e29}  # orjson's float
    assert json_line(b'{"a": "\\ud83d\\ude00"}') == {"a": "\U0001F600"}
    assert json_text({"n": 10**30}) == '{"n": 1000000000000000000000000000000}'
    assert json_text({1: "key that is not text"}) == '{"1": "key that is not text"}'
    with pytest.raises(json.JSONDecodeError):
        json_line('{"n": 1')
    assert json_line(json_text({"t": "中文 \u2028", "x": 0.1, "k": None})) == {"t": "中文 \u2028", "x": 0.1, "k": None}

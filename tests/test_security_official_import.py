"""`eval import --from official` reads a prediction file someone else wrote: every line under a bound,
`idx` an integer naming a row of the release once, each field of its type, no NaN or Infinity, no answer
past the parsers' bound; anything else is one line naming the line, and the run never holds more items
than the release."""

from __future__ import annotations

import pytest

from eval.official_io import OfficialFileError, read_official_file


@pytest.mark.parametrize(("line", "why"), [
    ('{"idx": "0", "model_pred": "A"}', "idx must be an integer"),
    ('{"idx": true, "model_pred": "A"}', "idx must be an integer"),
    ('{"idx": 99, "model_pred": "A"}', "not a row of the release"),
    ('{"idx": -1, "model_pred": "A"}', "not a row of the release"),
    ('{"idx": 0, "model_pred": 5}', "model_pred must be text"),
    ('{"idx": 0, "model_pred": NaN}', "NaN is not a JSON number"),
    ('{"idx": 0, "model_pred": "A", "eval_match": "yes"}', "eval_match must be true or false"),
    ('{"idx": 0, "model_pred": "' + "x" * 500_001 + '"}', "answers are read up to"),
])
def test_a_hostile_prediction_file_is_refused_naming_the_line(tmp_path, line, why):
    path = tmp_path / "pred.jsonl"
    path.write_text('{"idx": 1, "model_pred": "B"}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(OfficialFileError, match=f"line 2: .*{why}"):
        read_official_file(path, "classification", 12)


def test_a_duplicated_idx_names_both_lines(tmp_path):
    path = tmp_path / "pred.jsonl"
    path.write_text('{"idx": 3, "model_pred": "B"}\n{"idx": 3, "model_pred": "C"}\n', encoding="utf-8")
    with pytest.raises(OfficialFileError, match="line 2: idx 3 again \\(first at line 1\\)"):
        read_official_file(path, "classification", 12)


def test_an_endless_line_is_one_line_of_error_not_a_read_of_the_whole_file(tmp_path):
    path = tmp_path / "pred.jsonl"
    with path.open("wb") as fh:
        fh.write(b'{"idx": 0, "model_pred": "A"}\n')
        fh.truncate(300 << 20)  # a sparse 300 MB without a newline
    with pytest.raises(OfficialFileError, match="line 2"):
        read_official_file(path, "classification", 12)

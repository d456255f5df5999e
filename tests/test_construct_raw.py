"""Bad raw exports: each mistake is a one-line error naming the file and the line, raised before a stage
writes anything, so a work folder's decisions and cached answers survive a rerun on a broken export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from construct.__main__ import main
from construct.raw import load_raw

MERCHANT = {"merchant_id": "m1", "name": "A", "cuisine": "chinese"}
DISH = {"dish_id": "d1", "merchant_id": "m1", "name": "炒饭", "menu_category": "主食",
        "ingredients": ["米饭 200克", "鸡蛋 50克", "葱 5克"], "portion": "1份，约255克"}
PHOTO = {"photo_id": "p1", "dish_id": "d1", "role": "reference", "path": "images/p1.jpg"}


def export(root: Path, merchants=(MERCHANT,), dishes=(DISH,), photos=(PHOTO,)) -> Path:
    (root / "images").mkdir(parents=True, exist_ok=True)
    (root / "images" / "p1.jpg").write_bytes(b"not really a jpeg; the stage decides that")
    for name, rows in (("merchants", merchants), ("dishes", dishes), ("photos", photos)):
        text = "".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in rows)
        (root / f"{name}.jsonl").write_text(text, encoding="utf-8")
    return root


def test_a_sound_export_loads(tmp_path):
    raw = load_raw(export(tmp_path))
    assert list(raw.dishes) == ["d1"] and list(raw.photos) == ["p1"]


@pytest.mark.parametrize(("change", "message"), [
    ({"photos": ({**PHOTO, "path": "images/missing.jpg"},)},
     r"photos.jsonl line 1: photo file 'images/missing.jpg' does not exist"),
    ({"photos": ({**PHOTO, "path": "9" * 400},)},
     r"photos.jsonl line 1: path '9{80}' cannot be looked up \(File name too long\)"),
    ({"dishes": ({k: v for k, v in DISH.items() if k != "merchant_id"},)},
     r"dishes.jsonl line 1: dish 'd1' has no merchant_id"),
    ({"dishes": ({**DISH, "merchant_id": "m9"},)}, r"dishes.jsonl line 1: merchant_id 'm9' is not in merchants.jsonl"),
    ({"dishes": ({**DISH, "nutrition": {"unit": "per_cup", "calories": 1, "protein": 1, "carbohydrates": 1,
                                        "fat": 1}},)},
     r"dishes.jsonl line 1: nutrition unit 'per_cup' is unknown \(one of per_serving, per_100g\)"),
    ({"dishes": ({**DISH, "nutrition": {"calories": 1}},)}, r"dishes.jsonl line 1: nutrition needs a unit"),
    ({"dishes": ({**DISH, "nutrition": {"unit": "per_serving", "calories": "500 kcal", "protein": 1,
                                        "carbohydrates": 1, "fat": 1}},)},
     r"dishes.jsonl line 1: nutrition lacks numeric calories"),
    ({"merchants": (MERCHANT, '{"merchant_id": "m2", "name": ')},
     r"merchants.jsonl line 2: invalid JSON \(Expecting value, column \d+\)"),
    ({"photos": (PHOTO, "", "[1, 2]")}, r"photos.jsonl line 3: not a JSON object"),
    ({"dishes": (DISH, DISH)}, r"dishes.jsonl line 2: dish_id 'd1' appears twice"),
])
def test_bad_input_names_the_file_and_the_line(tmp_path, change, message):
    with pytest.raises(ValueError, match=message):
        load_raw(export(tmp_path, **change))


def test_a_line_that_is_not_utf8_names_its_line(tmp_path):
    root = export(tmp_path)
    with (root / "dishes.jsonl").open("ab") as fh:
        fh.write(b'{"dish_id": "d2", "name": "\xff"}\n')
    with pytest.raises(ValueError, match=r"dishes.jsonl line 2: not UTF-8"):
        load_raw(root)


def test_the_cli_prints_one_line_and_leaves_the_work_folder_as_it_was(tmp_path, capsys):
    root = export(tmp_path / "raw", photos=({**PHOTO, "path": "images/gone.jpg"},))
    work = tmp_path / "work"
    (work / "photos").mkdir(parents=True)
    decided = '{"key": "k", "text": "{\\"quality\\": \\"good\\"}"}\n'
    (work / "photos" / "calls.jsonl").write_text(decided, encoding="utf-8")
    (work / "config.json").write_text('{"model": "openai:earlier"}', encoding="utf-8")
    rc = main(["run", str(root), "--out", str(work), "--model", "openai:m"])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err.count("\n") == 0 and "photos.jsonl line 1" in err and "gone.jpg" in err
    assert (work / "photos" / "calls.jsonl").read_text(encoding="utf-8") == decided
    assert (work / "config.json").read_text(encoding="utf-8") == '{"model": "openai:earlier"}'


def test_a_key_in_a_base_url_never_reaches_config_json(tmp_path):
    from construct.work import BuildSettings, load_settings, save_settings

    secret = "sk-construct-0123456789abcdef"
    settings = BuildSettings(model="openai:m", base_url=f"http://u:{secret}@127.0.0.1:8000/v1?key={secret},"
                                                        "http://127.0.0.1:8001/v1")
    save_settings(tmp_path, settings)
    assert secret not in (tmp_path / "config.json").read_text(encoding="utf-8")
    assert load_settings(tmp_path).base_url == "http://127.0.0.1:8000/v1,http://127.0.0.1:8001/v1"


def test_the_photo_index_is_on_disk_reused_while_the_export_holds_and_never_left_half_built(tmp_path):
    raw_dir = export(tmp_path / "raw", photos=(PHOTO, {**PHOTO, "photo_id": "p2", "role": "user"}))
    index = tmp_path / "work" / "export.sqlite"
    index.parent.mkdir()
    first = load_raw(raw_dir, index=index)
    assert index.exists() and len(first.photos) == 2 and first.photos["p2"].role == "user"
    assert [p.photo_id for p in first.photos.values()] == ["p1", "p2"]  # the reference first
    stamp = index.stat().st_mtime_ns
    again = load_raw(raw_dir, index=index)
    assert again.fingerprint == first.fingerprint and index.stat().st_mtime_ns == stamp  # reused, not rebuilt
    # A changed export: indexed again, its fingerprint (part of the photo stage's inputs) changes.
    with (raw_dir / "photos.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({**PHOTO, "photo_id": "p3", "role": "user"}) + "\n")
    third = load_raw(raw_dir, index=index)
    assert len(third.photos) == 3 and third.fingerprint != first.fingerprint
    # A bad line: a one-line error, the previous index kept, no partial file left beside it.
    with (raw_dir / "photos.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({**PHOTO, "photo_id": "p3", "role": "user"}) + "\n")
    with pytest.raises(ValueError, match=r"photos.jsonl line 4: photo_id 'p3' appears twice"):
        load_raw(raw_dir, index=index)
    assert sorted(p.name for p in index.parent.iterdir()) == ["export.sqlite"]
    # A file that is not an index is built again, not a traceback.
    index.write_bytes(b"not a database")
    (raw_dir / "photos.jsonl").write_text(json.dumps(PHOTO) + "\n", encoding="utf-8")
    assert len(load_raw(raw_dir, index=index).photos) == 1


def test_a_raw_export_of_odd_values_loads_or_is_refused_in_one_line(tmp_path):
    """Each place of the first line of each raw file (three levels down) given each odd value in turn: the
    export loads or is refused in one BuildError line naming the file and line (other menus, other exports)."""
    import json
    import re
    import shutil

    from construct.errors import BuildError
    from synthetic.raw_export import write_raw_export
    from tests.test_security_import_values import ODD
    from tests.test_security_run_folder_values import _paths, _replaced

    genuine = tmp_path / "genuine"
    write_raw_export(genuine, merchants=2)
    failures = {}
    for name in ("merchants.jsonl", "dishes.jsonl", "photos.jsonl"):
        lines = [json.loads(line) for line in (genuine / name).read_text(encoding="utf-8").splitlines() if line]
        for k, (path, odd) in enumerate((path, odd) for path in _paths(lines[0], 3) for odd in ODD):
            raw = tmp_path / f"{name}-{k}"
            shutil.copytree(genuine, raw)
            (raw / name).write_text("".join(json.dumps(_replaced(line, path, odd) if i == 0 else line) + "\n"
                                            for i, line in enumerate(lines)), encoding="utf-8")
            try:
                load_raw(raw, tmp_path / f"{name}-{k}.sqlite")
            except BuildError as exc:
                assert "\n" not in str(exc) and re.match(r"(merchants|dishes|photos)\.jsonl line \d+: ", str(exc)), str(exc)
            except Exception as exc:  # noqa: BLE001  (any other exception is what this test looks for)
                failures[f"{name} {'.'.join(map(str, path))} = {type(odd).__name__}"] = f"{type(exc).__name__}: {exc}"
            shutil.rmtree(raw)
    assert not failures, "\n".join(f"{where}: {error}"[:300] for where, error in failures.items())

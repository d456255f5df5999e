"""The inspect_ai and lmms-eval tasks end to end, offline, and the same numbers everywhere.

One fake OpenAI-compatible server answers from one script, keyed by the prompt and the pixels of the
views (lmms-eval re-encodes the views as PNG; the harness and inspect send the stored bytes), and
grades VQA answers as a judge. The harness, the inspect tasks and the lmms-eval tasks ask it every
item; their per-item scores and headline figures, and those of the imported run folders, must agree.
Skipped, with the reason shown, where the frameworks are not installed (adapters/requirements.txt).
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import types
import unicodedata
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "tests") not in list(getattr(sys.modules.get("tests"), "__path__", [])):
    # latex2sympy2, which lmms-eval installs, ships a top-level `tests` package that would shadow ours
    _ours = types.ModuleType("tests")
    _ours.__path__ = [str(ROOT / "tests")]
    sys.modules["tests"] = _ours

from PIL import Image  # noqa: E402

import diningbench  # noqa: E402
from eval import api, tasks  # noqa: E402
from eval.importer import import_run  # noqa: E402
from eval.requests import build_request  # noqa: E402
from eval.settings import RunSettings  # noqa: E402
from tests.fakes.openai_server import FakeOpenAIServer  # noqa: E402
from tests.helpers_harness import CLASSIFICATION_ANSWERS, make_release  # noqa: E402

# the inspect tasks keep each view in a file named by its hash; the tests keep theirs out of the home folder
os.environ.setdefault("DININGBENCH_VIEWS_CACHE", str(Path(tempfile.gettempdir()) / "diningbench-test-views"))
HAVE_INSPECT = importlib.util.find_spec("inspect_ai") is not None
HAVE_LMMS = importlib.util.find_spec("lmms_eval") is not None
if os.environ.get("DININGBENCH_REQUIRE_ADAPTERS") and not (HAVE_INSPECT and HAVE_LMMS):
    # `make test` runs this file in .venv-adapters too: there a missing framework is a failure, not a skip
    raise RuntimeError("DININGBENCH_REQUIRE_ADAPTERS is set but inspect_ai or lmms-eval is not installed "
                       f"in {sys.prefix}")
needs_inspect = pytest.mark.skipif(not HAVE_INSPECT, reason="inspect_ai is not installed "
                                   "(pip install -r adapters/requirements.txt)")
needs_both = pytest.mark.skipif(not (HAVE_INSPECT and HAVE_LMMS), reason="inspect_ai and lmms-eval are not "
                                "installed (pip install -r adapters/requirements.txt)")
BIN = Path(sys.executable).parent
TASK_FILE = ROOT / "adapters" / "inspect_ai" / "diningbench_tasks.py"
VQA_WRONG = "看不出来，无法判断。"


def pixels_key(prompt: str, images: list[bytes]) -> str:
    """The item as the server sees it, whatever the encoding: prompt text and decoded pixels."""
    digest = hashlib.sha256(prompt.encode())
    for data in images:
        with Image.open(io.BytesIO(data)) as img:
            rgb = img.convert("RGB")
            digest.update(f"{rgb.size}".encode() + rgb.tobytes())
    return digest.hexdigest()


def scripted_answer(task: str, i: int, row: dict[str, Any]) -> str:
    """Classification: right for i % 3 == 0, the wrong letter A/B next, no answer after that.
    Nutrition: every component 10% over. VQA: the reference for even i, a non-answer for odd i."""
    if task == "classification":
        return [row["answer"], "A" if row["answer"] != "A" else "B", "I cannot tell from these photos."][i % 3]
    if task == "nutrition":
        return json.dumps({k: round(row[k] * 1.1, 6) for k in ("calories", "protein", "carbohydrates", "fat")})
    return row["answer"] if i % 2 == 0 else VQA_WRONG


EXPECTED = {"classification": 14 / 40, "nutrition": 0.1, "vqa": 8 / 16}  # by hand from the script above
HEADLINE = {"classification": "accuracy", "nutrition": "avg_mape", "vqa": "accuracy"}


def build_script() -> dict[str, str]:
    script = {}
    for task in ("classification", "nutrition", "vqa"):
        settings = RunSettings(task=task, model="x")
        for i, row in enumerate(diningbench.load(task, decode_images=False)):
            message = build_request(tasks.get(task), row, settings).messages[0]
            script[pixels_key(message.text, [v.data for v in message.images])] = scripted_answer(task, i, row)
    return script


class ScriptedServer(FakeOpenAIServer):
    def __init__(self, otherwise: Any = None) -> None:
        self.script = build_script()
        self.misses: list[str] = []
        self.otherwise = otherwise  # answers what the script does not (another release's rows)
        super().__init__(self.answer)

    def answer(self, request: Any) -> str:
        if "<<<CANDIDATE" in request.prompt:  # a judge call: DiningBench's judge prompt
            reference = re.search(r"Reference answer:\n(.*?)\n\n", request.prompt, re.S).group(1).strip()
            candidate = re.search(r"<<<CANDIDATE\n(.*?)\nCANDIDATE>>>", request.prompt, re.S).group(1).strip()
            same = unicodedata.normalize("NFKC", candidate) == unicodedata.normalize("NFKC", reference)
            return "They agree.\nGRADE: C" if same else "They differ.\nGRADE: I"  # the prompt carries NFKC text
        found = self.script.get(pixels_key(request.prompt, request.images))
        if found is None and self.otherwise is not None:
            return self.otherwise(request)
        if found is None:
            self.misses.append(request.prompt[:60])
        return found or ""


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def per_item(records: list[dict[str, Any]]) -> dict[tuple[str, str], Any]:
    def rounded(ape: dict[str, Any] | None) -> Any:
        return None if ape is None else {k: None if v is None else round(v, 12) for k, v in ape.items()}
    return {(r["task"], r["id"]): (r["correct"], rounded(r["ape"]), r["verdict"]) for r in records}


@needs_inspect
def test_inspect_cli_runs_offline_with_the_mock_model_and_imports(tmp_path: Path) -> None:
    done = subprocess.run([str(BIN / "inspect"), "eval", f"{TASK_FILE}@diningbench_classification",
                           "--model", "mockllm/model", "--log-dir", str(tmp_path / "logs"), "--display", "none"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    out = import_run(tmp_path / "logs", "inspect", tmp_path / "run")
    metrics = json.loads((out / "metrics.json").read_text())["classification"]
    # mockllm answers "Default output from mockllm/model": no letter, so 40 unparsed and wrong
    assert (metrics["n"], metrics["accuracy"], metrics["parse_failures"]) == (40, 0.0, 40)
    info = json.loads((out / "run.json").read_text())
    assert info["model"] == "mockllm/model" and info["imported"]["framework"] == "inspect_ai"
    assert info["backend"]["classification"]["generate_config"] == {"temperature": 0.0, "max_tokens": 16384}
    first = read_jsonl(out / "predictions.jsonl")[0]
    assert first["raw"] == "Default output from mockllm/model" and first["n_images"] == 4


@needs_inspect
def test_inspect_samples_carry_the_views_and_prompts_the_harness_sends() -> None:
    spec = importlib.util.spec_from_file_location("diningbench_inspect_tasks", TASK_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    task = module.diningbench_nutrition(language="en", views=2, cot=True)
    sample = task.dataset[0]
    row = next(iter(diningbench.load("nutrition", decode_images=False)))
    message = build_request(tasks.get("nutrition"), row, RunSettings(task="nutrition", model="x", lang="en", images=2,
                                                          cot=True)).messages[0]
    parts = sample.input[0].content
    assert [p.type for p in parts] == ["image", "image", "text"] and parts[-1].text == message.text
    assert [Path(p.image).read_bytes() for p in parts[:2]] == [v.data for v in message.images]  # the same bytes
    assert task.config.temperature == 0.0 and task.config.max_tokens == 16384
    with pytest.raises(ValueError, match="language 'fr'"):
        module.diningbench_vqa(language="fr")


@needs_inspect
def test_a_result_on_another_release_imports_against_it_and_is_refused_against_the_sample(tmp_path: Path) -> None:
    from inspect_ai import eval as inspect_eval

    release = make_release(tmp_path / "release")
    spec = importlib.util.spec_from_file_location("diningbench_inspect_tasks", TASK_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    [log] = inspect_eval(module.diningbench_classification(dataset=str(release)), model="mockllm/model",
                         log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "success" and len(log.samples) == len(CLASSIFICATION_ANSWERS)
    out = import_run(tmp_path / "logs", "inspect", tmp_path / "run")  # the release the log names
    info = json.loads((out / "run.json").read_text())
    assert info["dataset"]["fingerprints"]["classification"] == diningbench.fingerprint("classification", release)
    assert json.loads((out / "metrics.json").read_text())["classification"]["n"] == 6
    sample = ROOT / "diningbench"
    with pytest.raises(ValueError, match="made on another release of classification"):
        import_run(tmp_path / "logs", "inspect", tmp_path / "run2", dataset=str(sample))


def test_lmms_docs_come_from_the_release_that_diningbench_source_names(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from adapters.lmms_eval import utils as lmms_utils

    release = make_release(tmp_path / "release")
    loaded = diningbench.load("classification")  # what the YAML's dataset_path gives lmms-eval
    monkeypatch.delenv("DININGBENCH_SOURCE", raising=False)
    assert len(lmms_utils.classification_process_docs(loaded)) == 40
    monkeypatch.setenv("DININGBENCH_SOURCE", str(release))
    docs = lmms_utils.classification_process_docs(loaded)
    assert [lmms_utils.classification_doc_to_target(d) for d in docs] == CLASSIFICATION_ANSWERS
    assert docs.column_names == ["id", "position"]  # a doc names its row; its images are read when it is asked


@needs_inspect
def test_without_a_grader_role_the_model_never_grades_itself(tmp_path: Path) -> None:
    """VQA with no grader bound: the rule decides what it can, the rest stays unscored (as a native run
    without --judge), and the model under evaluation is never asked to grade."""
    from inspect_ai import eval as inspect_eval

    spec = importlib.util.spec_from_file_location("diningbench_inspect_tasks", TASK_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with ScriptedServer() as server:
        from inspect_ai.model import get_model

        [log] = inspect_eval(module.diningbench_vqa(), model=get_model("openai/fake-vlm", base_url=server.base_url,
                                                                         api_key="unused"),
                             log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "success"
    assert not any("<<<CANDIDATE" in r.prompt for r in server.requests)  # nobody was asked to grade
    assert len(server.requests) == 16
    records = [s.scores[next(iter(s.scores))].metadata["record"] for s in
               __import__("inspect_ai.log", fromlist=["x"]).read_eval_log(log.location).samples]
    assert {r["decided_by"] for r in records} <= {"rule", None}
    assert any(r["verdict"] is None for r in records)


@needs_inspect
def test_the_inspect_cli_grades_vqa_on_a_machine_with_few_cores(tmp_path: Path) -> None:
    """`inspect eval ...@diningbench_vqa --model-role grader=...` as a user types it, where the loop's
    default thread pool is small (one core: 5 threads) and inspect scores more samples than that at
    once: every grader call is made and the figure is the harness's (8 of 16 right by the script)."""
    script = ("import os, sys; os.cpu_count = lambda: 1; from inspect_ai._cli.main import main; "
              "sys.argv = ['inspect', *sys.argv[1:]]; main()")
    with ScriptedServer() as server:
        env = {**os.environ, "OPENAI_API_KEY": "unused", "OPENAI_BASE_URL": server.base_url}
        try:
            done = subprocess.run([sys.executable, "-c", script, "eval", f"{TASK_FILE}@diningbench_vqa",
                                   "--model", "openai/fake-vlm", "--model-role", "grader=openai/judge",
                                   "--log-dir", str(tmp_path / "logs"), "--display", "none"],
                                  cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            pytest.fail("inspect eval never finished grading: the VQA scorer's threads waited on the grader forever")
    assert done.returncode == 0, done.stderr[-2000:]
    assert sum("<<<CANDIDATE" in r.prompt for r in server.requests) > 0  # the grader was asked
    from inspect_ai.log import read_eval_log

    [path] = (tmp_path / "logs").glob("*.eval")
    log = read_eval_log(str(path))
    assert log.status == "success"
    assert log.results.scores[0].metrics["judge_accuracy"].value == EXPECTED["vqa"]


@pytest.mark.slow
@needs_both
def test_same_answers_give_the_same_numbers_in_the_harness_inspect_and_lmms_eval(tmp_path: Path) -> None:
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import get_model

    spec = importlib.util.spec_from_file_location("diningbench_inspect_tasks", TASK_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with ScriptedServer() as server:
        url = server.base_url
        native = api.run(RunSettings(task="all", model="openai:fake-vlm", base_url=url, judge="openai:judge",
                                     judge_base_url=url, out=tmp_path / "native", concurrency=4), progress=False)
        logs = inspect_eval([module.diningbench_classification(), module.diningbench_nutrition(),
                             module.diningbench_vqa()],
                            model=get_model("openai/fake-vlm", base_url=url, api_key="unused"),
                            model_roles={"grader": get_model("openai/judge", base_url=url, api_key="unused")},
                            log_dir=str(tmp_path / "inspect"), display="none")
        env = {**os.environ, "OPENAI_API_KEY": "unused", "DININGBENCH_JUDGE": "openai:judge",
               "DININGBENCH_JUDGE_BASE_URL": url}
        done = subprocess.run([str(BIN / "lmms-eval"), "--model", "openai", "--model_args",
                               f"model_version=fake-vlm,base_url={url}", "--tasks",
                               "diningbench_classification,diningbench_nutrition,diningbench_vqa",
                               "--include_path", "adapters/lmms_eval", "--log_samples",
                               "--output_path", str(tmp_path / "lmms")],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        from_inspect = import_run(tmp_path / "inspect", "inspect", tmp_path / "imported-inspect",
                                  judge="openai:judge", judge_base_url=url)
        from_lmms = import_run(tmp_path / "lmms", "lmms-eval", tmp_path / "imported-lmms",
                               judge="openai:judge", judge_base_url=url)
    assert server.misses == []

    # per item: the harness, both imported folders, and what each framework's scorer recorded
    native_items = per_item(read_jsonl(native / "scores.jsonl"))
    assert len(native_items) == 40 + 24 + 16
    assert per_item(read_jsonl(from_inspect / "scores.jsonl")) == native_items
    assert per_item(read_jsonl(from_lmms / "scores.jsonl")) == native_items
    inspect_records = [s.scores[next(iter(s.scores))].metadata["record"]
                       for log in logs for s in __import__("inspect_ai.log", fromlist=["x"]).read_eval_log(
                           log.location).samples]
    assert per_item(inspect_records) == native_items
    lmms_records = [line[m] for path in sorted((tmp_path / "lmms").rglob("*_samples_*.jsonl"))
                    for line in read_jsonl(path) for m in ("dining_accuracy", "avg_mape", "judge_accuracy")
                    if m in line]
    assert per_item(lmms_records) == native_items

    # headline figures: metrics.json of all three folders, inspect's task metrics, lmms-eval's results
    inspect_values = {log.eval.task.split("_", 1)[1]: log.results.scores[0].metrics for log in logs}
    lmms_results = {}
    for path in (tmp_path / "lmms").rglob("*_results.json"):
        lmms_results.update(json.loads(path.read_text())["results"])
    for task, expected in EXPECTED.items():
        figures = [json.loads((folder / "metrics.json").read_text())[task][HEADLINE[task]]
                   for folder in (native, from_inspect, from_lmms)]
        metric = {"classification": "dining_accuracy", "nutrition": "avg_mape", "vqa": "judge_accuracy"}[task]
        figures.append(inspect_values[task][metric].value)
        figures.append(lmms_results[f"diningbench_{task}"][f"{metric},none"])
        assert figures == [pytest.approx(expected, abs=1e-9)] * 5, task
        assert len(set(figures)) == 1, (task, figures)  # identical, not merely close

    # and the reports read the imported folders beside the native one
    from eval.cli import main as cli_main

    assert cli_main(["report", str(native), str(from_inspect), str(from_lmms), "--no-reported",
                     "--out", str(tmp_path / "report.md")]) == 0
    text = (tmp_path / "report.md").read_text()
    assert text.count("35.00") >= 3 and "mockllm" not in text


def readme_adapters_block() -> str:
    """The bash block of README.md's "Already using inspect_ai or lmms-eval?" section, as written."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("### Already using inspect_ai or lmms-eval?"):]
    return section[section.index("```bash\n") + len("```bash\n"):section.index("\n```", section.index("```bash"))]


@pytest.mark.slow
@needs_both
def test_the_readme_adapters_block_runs_as_written(tmp_path: Path) -> None:
    """The README's block, line for line, in a folder that mirrors the checkout, with a fake server as both
    OpenAI (for gpt-4o and the grader) and the local server at localhost:8000. Only the lines that set
    up this very environment are left out (the test runs inside it), the local server's address is the
    fake's, and the authors' Hub release is a folder in their layout (tests/helpers_official.py), whose
    rows the fake answers with the corpus answers. Every command must succeed, and each imported run must
    hold what its framework was given; on the authors' release, their scripts' figure."""
    from tests.helpers_official import AUTHORS_PRINTED, write_folder

    block = readme_adapters_block()
    setup = ("python3 -m venv", ".venv-adapters/bin/pip", ". .venv-adapters/bin/activate")
    kept = "\n".join(line for line in block.splitlines() if not line.startswith(setup))
    assert "python -m eval report results/native-run" in kept and "--log-dir logs/inspect-gpt-4o" in kept
    for entry in ROOT.iterdir():  # the checkout as the block sees it, its outputs kept in tmp_path
        if not entry.name.startswith(".") and entry.name not in ("results", "logs"):
            (tmp_path / entry.name).symlink_to(entry)
    authors = write_folder(tmp_path / "authors-release")
    with ScriptedServer(_official_answer(authors)) as server:
        code = kept.replace("http://localhost:8000/v1", server.base_url).replace("meituan/DiningBench", str(authors))
        env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
        env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", OPENAI_API_KEY="sk-test-readme-0000",
                   OPENAI_BASE_URL=server.base_url)
        done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", code], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert server.misses == []
    # every run the block names was made, and the report reads the three
    for folder, tasks_done in (("gpt-4o-inspect", {"vqa"}), ("MODEL-lmms", {"classification", "nutrition"}),
                               ("native-run", {"classification", "nutrition", "vqa"})):
        metrics = json.loads((tmp_path / "results" / folder / "metrics.json").read_text())
        assert set(metrics) == tasks_done, folder
    for folder in ("MODEL-inspect-official", "MODEL-lmms-official", "native-official"):
        metrics = json.loads((tmp_path / "results" / folder / "metrics.json").read_text())
        assert set(metrics) == {"classification"}, folder
        _close(metrics["classification"]["official"], AUTHORS_PRINTED["classification"])
        info = json.loads((tmp_path / "results" / folder / "run.json").read_text())
        assert (info["settings"]["protocol"], info["settings"]["image_indices"]) == ("official", "0,1,2"), folder
    assert "results/native-run" in done.stdout or "native-run" in done.stdout


@needs_inspect
@pytest.mark.parametrize("option", ["language=fr", "views=two", "cot=maybe", "protocol=nope", "image_indices=x"])
def test_a_bad_task_option_is_one_line_from_inspect(tmp_path: Path, option: str) -> None:
    done = subprocess.run([str(BIN / "inspect"), "eval", f"{TASK_FILE}@diningbench_classification", "--model",
                           "mockllm/model", "-T", option, "--log-dir", str(tmp_path / "logs"), "--display", "none"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    said = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert "Traceback" not in done.stdout + done.stderr, said[-20:]
    assert done.returncode == 2 and len(said) == 1, said[-20:]
    assert said[0].startswith("error: diningbench_classification: ") and option.split("=")[1] in said[0]


# ---------------------------------------------------------------- the authors' release, under their protocol
def _official_server(folder: Path) -> FakeOpenAIServer:
    return FakeOpenAIServer(_official_answer(folder))


def _official_answer(folder: Path) -> Any:
    """The model and the judge on a release in the authors' layout: the model replays the hand-built
    answers of tests/corpus/official (found by the row's prompt and its first image's pixels, whatever the
    encoding), the judge answers their judge prompt from vqa_judge_replies.json."""
    from tests.helpers_official import answers, corpus_rows, image_bytes, image_paths, judge_replies

    by_prompt: dict[str, list[tuple[str, bytes, str]]] = {}
    for task in ("classification", "nutrition", "vqa"):
        for row, said in zip(corpus_rows(f"{task}.jsonl"), answers(task), strict=True):
            first = image_bytes(folder, image_paths(row)[0])
            by_prompt.setdefault(row["prompt"], []).append((task, pixels_key("", [first]), said))

    def answer(request: Any) -> str:
        if "【预测答案】：\n" in request.prompt:  # their judge prompt
            said = request.prompt.split("【预测答案】：\n", 1)[1].split("\n\n### 输出", 1)[0]
            return judge_replies().get(said, "无法判断")
        found = by_prompt.get(request.prompt, [])
        for task, key, said in found:
            if task == "vqa" or pixels_key("", request.images[:1]) == key:
                return said
        raise AssertionError(f"no row asks {request.prompt[:60]!r}")
    return answer


def _close(found: dict[str, Any], expected: dict[str, Any]) -> None:
    """Every figure the authors' script printed, to its fourth decimal (counts exactly)."""
    for key, value in expected.items():
        if isinstance(value, dict):
            _close(found[key], value)
        elif isinstance(value, int):
            assert found[key] == value, key
        else:
            assert round(found[key], 4) == pytest.approx(value, abs=1e-9), key


def _sent(request: Any) -> tuple[str, list[bytes], float, int]:
    """What a model request carries: its text, its images (bytes as sent), temperature and token budget."""
    return request.prompt, list(request.images), request.temperature, request.max_tokens


def _pixels(request: Any) -> tuple[str, str, float, int]:
    return request.prompt, pixels_key("", request.images), request.temperature, request.max_tokens


# The authors' figures for the corpus answers (tests/helpers_official.py AUTHORS_PRINTED), as the
# framework summaries show them: accuracy as a fraction; Average MAPE (mean of the four nutrients' MAPE,
# 65.2679, 62.9932, 67.9514 and 77.0408 percent) as a fraction; their judge's accuracy, 4 of 7.
AUTHORS_HEADLINE = {"classification": 0.5, "nutrition": 0.683133, "vqa": 4 / 7}
OFFICIAL_FIGURES = {"classification": "classification", "nutrition": "nutrition", "vqa": "vqa_judge"}


@pytest.mark.slow
@needs_both
def test_on_the_authors_release_the_frameworks_ask_and_score_as_eval_run_protocol_official(tmp_path: Path) -> None:
    """inspect_ai and lmms-eval with their defaults on a release in the authors' layout: the authors'
    protocol, chosen as `eval run` chooses it. Each request equals the harness's (the row's prompt verbatim,
    the merchant's photo, temperature 0, 14,336 tokens; the stored bytes from inspect, the same pixels
    re-encoded as PNG from lmms-eval), each framework's summary is the authors' figure, and each imported
    folder's `official` figures are what their scripts print for the same answers."""
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import get_model

    from tests.helpers_official import AUTHORS_PRINTED, write_folder

    folder = write_folder(tmp_path / "release")
    module = _task_module()
    names = ("classification", "nutrition", "vqa")
    with _official_server(folder) as server:
        url = server.base_url
        native = api.run(RunSettings(task="all", model="openai:plain-model", base_url=url, dataset=str(folder),
                                     judge="openai:judge", judge_base_url=url, out=tmp_path / "native"),
                         progress=False)
        by_native = len(server.requests)
        logs = inspect_eval([getattr(module, f"diningbench_{t}")(dataset=str(folder)) for t in names],
                            model=get_model("openai/plain-model", base_url=url, api_key="unused"),
                            model_roles={"grader": get_model("openai/judge", base_url=url, api_key="unused")},
                            log_dir=str(tmp_path / "inspect"), display="none")
        by_inspect = len(server.requests)
        env = {**os.environ, "OPENAI_API_KEY": "unused", "DININGBENCH_SOURCE": str(folder),
               "DININGBENCH_JUDGE": "openai:judge", "DININGBENCH_JUDGE_BASE_URL": url}
        done = subprocess.run([str(BIN / "lmms-eval"), "--model", "openai", "--model_args",
                               f"model_version=plain-model,base_url={url}", "--tasks",
                               ",".join(f"diningbench_{t}" for t in names), "--include_path", "adapters/lmms_eval",
                               "--log_samples", "--output_path", str(tmp_path / "lmms")],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        from_inspect = import_run(tmp_path / "inspect", "inspect", tmp_path / "imported-inspect",
                                  judge="openai:judge", judge_base_url=url)
        from_lmms = import_run(tmp_path / "lmms", "lmms-eval", tmp_path / "imported-lmms",
                               judge="openai:judge", judge_base_url=url)
        requests = list(server.requests)

    def split(found: list[Any]) -> tuple[list[Any], list[str]]:
        model = [r for r in found if "【预测答案】" not in r.prompt]
        return model, sorted(r.prompt for r in found if "【预测答案】" in r.prompt)

    (native_asked, native_judged), (inspect_asked, inspect_judged), (lmms_asked, lmms_judged) = (
        split(requests[:by_native]), split(requests[by_native:by_inspect]), split(requests[by_inspect:]))
    # lmms-eval's run and the two imports (which judge again) come last: lmms-eval's judge prompts are
    # the ones before the imports began, in equal number
    assert len(native_asked) == 12 + 9 + 8 and native_judged
    assert sorted(map(_sent, inspect_asked)) == sorted(map(_sent, native_asked))  # byte for byte
    assert all(r.body["messages"][0]["content"][0]["image_url"]["url"].startswith("data:image/jpeg;base64,")
               for r in inspect_asked)
    assert sorted(map(_pixels, lmms_asked)) == sorted(map(_pixels, native_asked))  # the same pixels, as PNG
    assert {r.temperature for r in requests if "【预测答案】" not in r.prompt} == {0.0}
    assert {r.max_tokens for r in requests if "【预测答案】" not in r.prompt} == {14336}
    assert inspect_judged == native_judged and lmms_judged == sorted(native_judged * 3)  # lmms-eval, two imports
    assert "seed" not in inspect_asked[0].body

    # the frameworks' own summaries: the authors' figure
    inspect_values = {log.eval.task.split("_", 1)[1]: log.results.scores[0].metrics for log in logs}
    lmms_results: dict[str, Any] = {}
    for path in (tmp_path / "lmms").rglob("*_results.json"):
        lmms_results.update(json.loads(path.read_text())["results"])
    for task in names:
        metric = common_metric(task)
        assert inspect_values[task][metric].value == pytest.approx(AUTHORS_HEADLINE[task], abs=5e-7), task
        assert lmms_results[f"diningbench_{task}"][f"{metric},none"] == pytest.approx(AUTHORS_HEADLINE[task],
                                                                                      abs=5e-7), task
    # the run folders: eval run's, and each framework's log imported
    for run in (native, from_inspect, from_lmms):
        metrics = json.loads((run / "metrics.json").read_text())
        for task in names:
            _close(metrics[task]["official"], AUTHORS_PRINTED[OFFICIAL_FIGURES[task]])
        info = json.loads((run / "run.json").read_text())
        assert info["settings"]["protocol"] == "official"


@pytest.mark.slow
@needs_both
def test_the_image_indices_reach_each_request_as_eval_run_sends_them(tmp_path: Path) -> None:
    """`-T image_indices=0,1,2` (inspect) and DININGBENCH_IMAGE_INDICES=0,1,2 (lmms-eval) send what
    `eval run --image-indices 0,1,2` sends: the merchant's photo and two customers' photos where the row
    has them, in their order (inspect: the stored bytes; lmms-eval: the same pixels as PNG)."""
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import get_model

    from tests.helpers_official import AUTHORS_PRINTED, corpus_rows, image_paths, write_folder

    folder = write_folder(tmp_path / "release")
    with _official_server(folder) as server:
        url = server.base_url
        native = api.run(RunSettings(task="classification", model="openai:plain-model", base_url=url,
                                     dataset=str(folder), image_indices="0,1,2", out=tmp_path / "native"),
                         progress=False)
        by_native = len(server.requests)
        [log] = inspect_eval(_task_module().diningbench_classification(dataset=str(folder), image_indices="0,1,2"),
                             model=get_model("openai/plain-model", base_url=url, api_key="unused"),
                             log_dir=str(tmp_path / "inspect"), display="none")
        by_inspect = len(server.requests)
        env = {**os.environ, "OPENAI_API_KEY": "unused", "DININGBENCH_SOURCE": str(folder),
               "DININGBENCH_IMAGE_INDICES": "0,1,2"}
        done = subprocess.run([str(BIN / "lmms-eval"), "--model", "openai", "--model_args",
                               f"model_version=plain-model,base_url={url}", "--tasks", "diningbench_classification",
                               "--include_path", "adapters/lmms_eval", "--log_samples", "--output_path",
                               str(tmp_path / "lmms")], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        requests = list(server.requests)
    native_sent, inspect_sent, lmms_sent = requests[:by_native], requests[by_native:by_inspect], requests[by_inspect:]
    most = max(len(image_paths(row)) for row in corpus_rows("classification.jsonl"))  # 2: merchant + 1 customer
    assert len(native_sent) == 12 and max(len(r.images) for r in native_sent) == min(most, 3) > 1
    assert sorted(map(_sent, inspect_sent)) == sorted(map(_sent, native_sent))
    assert sorted(map(_pixels, lmms_sent)) == sorted(map(_pixels, native_sent))
    assert log.results.scores[0].metrics["dining_accuracy"].value == AUTHORS_PRINTED["classification"]["acc"]
    for run in (native, import_run(tmp_path / "inspect", "inspect", tmp_path / "from-inspect"),
                import_run(tmp_path / "lmms", "lmms-eval", tmp_path / "from-lmms")):
        info = json.loads((run / "run.json").read_text())
        assert (info["settings"]["protocol"], info["settings"]["image_indices"]) == ("official", "0,1,2")
        metrics = json.loads((run / "metrics.json").read_text())["classification"]
        _close(metrics["official"], AUTHORS_PRINTED["classification"])


def common_metric(task: str) -> str:
    return tasks.get(task).adapter_metric


def _task_module() -> Any:
    spec = importlib.util.spec_from_file_location("diningbench_inspect_tasks", TASK_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

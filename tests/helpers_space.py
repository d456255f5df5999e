"""Fixtures for the Space tests: a tiny in-memory dataset, a launched Space, a fake model server.

The fake server is a real HTTP server on 127.0.0.1 speaking the OpenAI chat API; it echoes the
Authorization header back, so a test can prove the Space never shows a visitor's key.
"""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SPACE_DIR = ROOT / "space"


def strip_views(strip: str) -> list[tuple[str, str]]:
    """(file, caption) of each view in a strip of pictures (`shown_views.strip_html`), as the page gets them."""
    import html
    import re
    from urllib.parse import unquote

    return [(unquote(html.unescape(src)).removeprefix("gradio_api/file="), html.unescape(alt))
            for src, alt in re.findall(r"<img src='([^']*)' alt='([^']*)'", strip)]


def png_bytes(color: tuple[int, int, int], size: tuple[int, int] = (64, 48)) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, format="PNG")
    return buffer.getvalue()


def tiny_rows(config: str) -> list[dict[str, Any]]:
    """Three items per config in the release schema, with solid-colour views."""
    common = [
        {"id": f"{config[:3]}-1", "dish_id": "d1", "merchant_id": "m1", "category": "noodles", "cuisine": "chinese"},
        {"id": f"{config[:3]}-2", "dish_id": "d2", "merchant_id": "m1", "category": "noodles", "cuisine": "japanese"},
        {"id": f"{config[:3]}-3", "dish_id": "d3", "merchant_id": "m2", "category": "salads", "cuisine": "western"},
    ]
    rows = []
    for i, base in enumerate(common):
        row = dict(base)
        row["images"] = [{"bytes": png_bytes((200, 60 + 40 * i, 40)), "path": None},
                         {"bytes": png_bytes((90, 160, 60 + 40 * i)), "path": None}]
        row["image_roles"] = ["reference", "user"]
        if config == "classification":
            row["options"] = [f"菜{j}" for j in range(8)]
            row["options_en"] = [f"Dish {j} <b>" for j in range(8)]
            row["answer"] = "ABC"[i]
        elif config == "nutrition":
            row.update(dish_name=f"面{i}", dish_name_en=f"Noodles {i}", ingredients=["noodles", "egg"],
                       portion="1 bowl", calories=500.0 + i, protein=20.0, carbohydrates=60.0, fat=15.5,
                       nutrition_source="computed")
        else:
            row.update(question=f"问题{i}", question_en=f"Question {i}?", answer=f"答案{i}", answer_en=f"Answer {i}",
                       rationale="因为", rationale_en="Because", vqa_category=["cuisine_technique",
                       "dietary_suggestion", "cuisine_technique"][i])
        rows.append(row)
    return rows


def tiny_dataset(config: str) -> Any:
    """A datasets.Dataset of tiny_rows(config), images kept as stored bytes (decode=False)."""
    import datasets

    rows = tiny_rows(config)
    features = datasets.Dataset.from_list([{k: v for k, v in rows[0].items() if k != "images"}]).features
    features["images"] = datasets.List(datasets.Image(decode=False))
    return datasets.Dataset.from_list(rows, features=features)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def launched_space(env: dict[str, str] | None = None, timeout: float = 90.0) -> Iterator[tuple[str, list[str]]]:
    """`python space/app.py` on a free port of 127.0.0.1; yields (url, captured log lines)."""
    port = free_port()
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("DININGBENCH_SPACE_")}
    full_env.update({"GRADIO_SERVER_PORT": str(port), "GRADIO_SERVER_NAME": "127.0.0.1",
                     "GRADIO_ANALYTICS_ENABLED": "False", "PYTHONUNBUFFERED": "1", **(env or {})})
    proc = subprocess.Popen([sys.executable, str(SPACE_DIR / "app.py")], cwd=ROOT, env=full_env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    log: list[str] = []
    reader = threading.Thread(target=lambda: log.extend(proc.stdout), daemon=True)
    reader.start()
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + timeout
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError("the Space exited at start:\n" + "".join(log))
            try:
                with urllib.request.urlopen(url + "config", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the Space did not start in time:\n" + "".join(log)) from None
                time.sleep(0.3)
        yield url, log
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


class _EchoKeyHandler(BaseHTTPRequestHandler):
    """OpenAI chat completions that echo the Authorization header, then answer.

    The answer is "A" (a classification letter); a judge prompt (it asks for a `GRADE:` line) gets
    `GRADE: C`. Mode "reject" answers 401 with the key in the error, as real providers do.
    """

    def log_message(self, *args: Any) -> None:  # keep test output quiet
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        length = int(self.headers.get("Content-Length") or 0)
        prompt = json.dumps(json.loads(self.rfile.read(length) or b"{}").get("messages", []), ensure_ascii=False)
        auth = self.headers.get("Authorization", "")
        self.server.seen_keys.append(auth)  # type: ignore[attr-defined]
        if self.server.mode == "reject":  # type: ignore[attr-defined]
            body = {"error": {"message": f"Incorrect API key provided: {auth}", "type": "invalid_request_error"}}
            self._send(401, body)
            return
        verdict = "\nGRADE: C" if "GRADE" in prompt else ""
        text = f"I was called with {auth}. Answer: A{verdict}"
        self._send(200, {"id": "x", "object": "chat.completion", "created": 0, "model": "fake",
                         "choices": [{"index": 0, "finish_reason": "stop",
                                      "message": {"role": "assistant", "content": text}}],
                         "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@contextmanager
def fake_openai_server(mode: str = "echo") -> Iterator[ThreadingHTTPServer]:
    """A real OpenAI-compatible server on 127.0.0.1 (`server.server_port`, `server.seen_keys`)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EchoKeyHandler)
    server.mode = mode  # type: ignore[attr-defined]
    server.seen_keys = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def tiny_release(folder: Path) -> Path:
    """tiny_rows of every config written as a release folder (Parquet + card) by diningbench.py."""
    import diningbench

    rows = {config: (3, iter(tiny_rows(config))) for config in ("classification", "nutrition", "vqa")}
    return diningbench.write_release(folder, rows, note="Tiny test release.")


CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@contextmanager
def chromium_browser() -> Iterator[Any]:
    """Debian's headless Chromium driven by Playwright (never a downloaded browser).

    Skips the test when it is missing, unless DININGBENCH_REQUIRE_BROWSER=1 (CI), where that fails.
    """
    import pytest

    if not CHROMIUM.exists():
        if os.environ.get("DININGBENCH_REQUIRE_BROWSER") == "1":
            pytest.fail(f"{CHROMIUM} is missing and DININGBENCH_REQUIRE_BROWSER=1: apt-get install chromium")
        pytest.skip(f"{CHROMIUM} is not installed")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def page_width(page: Any) -> int:
    """How wide the document is: more than the viewport means the page scrolls sideways."""
    return int(page.evaluate("document.scrollingElement.scrollWidth"))


def write_baseline_run(results: Path, name: str, task: str, model: str, *extra: str) -> Path:
    """A real scored run folder made by `python -m eval run` with a baseline (no model, seconds)."""
    out = results / name
    done = subprocess.run([sys.executable, "-m", "eval", "run", "--task", task, "--model", model, "--out", str(out),
                           *extra], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return out


def open_tab(page: Any, name: str) -> None:
    """Click a tab. Every tab is in the bar at any width (the Space's tab bar wraps, never hiding a tab
    under Gradio's "More tabs" menu), so a tab is one click away once the bar is drawn."""
    page.get_by_role("tablist").first.wait_for(timeout=30_000)
    page.get_by_role("tab", name=name, exact=True).click(timeout=30_000)

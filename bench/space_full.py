"""The Space at the benchmark's size, in Chromium: `python -m bench.space_full [--release DIR]`.

What it sets up (once, kept in --work) and measures: bench/README.md; each figure beside its target.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from bench.common import REPO, BenchError, ensure_release

WORK = Path("/tmp/diningbench-space-full")
CHROMIUM = Path("/usr/bin/chromium")
LOADS = 50
# Chromium's CPU throttling for every measured page (1: none). 4 is DevTools' "mid-tier mobile": a phone's CPU,
# which parses and runs the page's script several times slower than this machine's.
SLOWDOWN = {"rate": 1.0}
TTI_ONLY = {"on": False}  # --tti-only: each tab's time to interactive and opening the big run, nothing else


def _new_page(context: Any) -> Any:
    page = context.new_page()
    if SLOWDOWN["rate"] > 1:
        context.new_cdp_session(page).send("Emulation.setCPUThrottlingRate", {"rate": SLOWDOWN["rate"]})
    return page


def _run(command: list[str]) -> None:
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    if done.returncode != 0:
        raise BenchError(f"{' '.join(command[:6])} … failed: {(done.stderr or done.stdout).strip()[-300:]}")


def make_results(results: Path, release: Path, rows: int = 300) -> dict[str, Any]:
    """The full-size run plus copies of a small run under `rows - 1` other names, with other figures (the board
    reads metrics.json and run.json, not the answers); returns counts."""
    full = results / "full-baseline"
    if not (full / "scores.jsonl").is_file():
        _run([sys.executable, "-m", "eval", "run", "--task", "all", "--model", "baseline:category-mean",
              "--dataset", str(release), "--out", str(full)])
    small = results.parent / "small-run"
    if not (small / "scores.jsonl").is_file():
        _run([sys.executable, "-m", "eval", "run", "--task", "all", "--model", "baseline:random", "--out", str(small)])
    board = results / "board"
    info = json.loads((small / "run.json").read_text(encoding="utf-8"))
    metrics = json.loads((small / "metrics.json").read_text(encoding="utf-8"))
    for i in range(rows - 1):
        folder = board / f"model-{i:03d}"
        if (folder / "metrics.json").is_file():
            continue
        folder.mkdir(parents=True, exist_ok=True)
        for name in ("scores.jsonl", "predictions.jsonl"):
            shutil.copy(small / name, folder / name)
        model = f"openai:org-{i % 17}/vlm-{i:03d}-{(i % 9 + 1) * 4}b"
        spread = (i * 37 % 100) / 100
        run_info = {**info, "model": model, "settings": {**info["settings"], "model": model},
                    "dataset": {**info.get("dataset", {}), "source": str(release)},
                    "updated_at": f"2026-11-{1 + i % 28:02d}T12:00:00Z"}
        figures = {task: {**values, "accuracy": 0.3 + 0.5 * spread, "avg_mape": 0.2 + 0.4 * spread,
                          "accuracy_ci95": [0.28 + 0.5 * spread, 0.32 + 0.5 * spread],
                          "avg_mape_ci95": [0.18 + 0.4 * spread, 0.22 + 0.4 * spread], "merchants": 120}
                   for task, values in metrics.items() if isinstance(values, dict)}
        (folder / "run.json").write_text(json.dumps(run_info), encoding="utf-8")
        (folder / "metrics.json").write_text(json.dumps(figures), encoding="utf-8")
    return {"run folders": len(list(results.glob("**/scores.jsonl")))}


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _open_tab(page: Any, name: str) -> None:
    """Click a tab: every tab is in the bar at any width (the Space's tab bar wraps, it hides none under
    Gradio's "More tabs" menu)."""
    page.get_by_role("tablist").first.wait_for(timeout=30_000)
    page.get_by_role("tab", name=name, exact=True).click(timeout=30_000)


def _proc(pid: int) -> tuple[float, float]:
    """(CPU seconds, RSS MiB) of a process and its children threads, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return ((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"),
            int(fields[21]) * os.sysconf("SC_PAGE_SIZE") / 2**20)


def _size_mib(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20 if folder.exists() else 0.0


@contextmanager
def gradio_app(argv: list[str], env: dict[str, str], what: str,
               seconds: float) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """A Gradio app on a free port of 127.0.0.1 (its URL and process), up once it answers /config."""
    port = _free_port()
    env = {**env, "GRADIO_SERVER_PORT": str(port), "GRADIO_SERVER_NAME": "127.0.0.1",
           "GRADIO_ANALYTICS_ENABLED": "False"}
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
    url = f"http://127.0.0.1:{port}/"
    try:
        import urllib.request

        deadline = time.monotonic() + seconds
        while True:
            try:
                with urllib.request.urlopen(url + "config", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise BenchError(f"{what} did not start") from None
                time.sleep(0.5)
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()


def space(results: Path, release: Path, cache: Path) -> AbstractContextManager[tuple[str, subprocess.Popen[str]]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DININGBENCH_SPACE_")}
    env.update({"DININGBENCH_SPACE_RESULTS": str(results), "DININGBENCH_SOURCE": str(release),
                "GRADIO_TEMP_DIR": str(cache), "HF_DATASETS_CACHE": str(cache.parent / "hf-datasets")})
    return gradio_app([sys.executable, "space/app.py"], env, "the Space", 180)


IDLE_JS = ("() => [...document.querySelectorAll('[data-testid=status-tracker]')]"
           ".every(e => e.classList.contains('hide') || e.offsetParent === null)")
# What says a tab is ready: its own content drawn.
READY = {
    "browse": "() => document.querySelector('#db-card') && document.querySelector('#db-card').innerText.length > 20",
    "evaluate": "() => (document.querySelector('#db-eval-model input')?.value || '') !== '' "
                "&& document.querySelector('#db-eval-model').offsetParent !== null",
    "leaderboard": "() => document.querySelector('#db-board table.db-board') !== null",
    "submit": "() => document.querySelector('#db-submit-button')?.offsetParent != null",
    "human": "() => document.querySelector('#db-human-setup')?.offsetParent != null",
    "runs": "() => (document.querySelector('#db-runs-where')?.innerText || '').startsWith('Item 1 of')",
}


class Timed(NamedTuple):
    """One wait, as the page saw it and as this script did."""

    page: float  # from the visitor's press (or the navigation's start) to `ready`, by the page's own clock
    wall: float  # from this script's call to `ready`: adds Playwright's checks before a click (0.05-0.3 s)

    @property
    def note(self) -> str:
        return f"{self.wall:.2f} s from the script's call"


# Before an action: note the page's clock at the visitor's next press (a pointer or a key).
PRESS_JS = """() => { window.__dbPress = null; window.__dbReady = null;
  const mark = () => { if (window.__dbPress === null) window.__dbPress = performance.now(); };
  for (const type of ['pointerdown', 'keydown']) document.addEventListener(type, mark, {capture: true, once: true}); }"""


def _noting(ready: str) -> str:
    """`ready`, noting the page's clock the first time it holds (polled at every frame)."""
    return (f"() => {{ const ok = ({ready})(); if (ok && window.__dbReady == null) window.__dbReady = performance.now();"
            " return ok; }")


def _timed(action: Callable[[], Any], page: Any, ready: str, timeout: float = 60_000) -> Timed:
    """How long the visitor waits from the action until what they wait for is on screen (`ready`); then,
    untimed, until every event of the page is done, so the next action starts from a quiet page."""
    page.evaluate(PRESS_JS)  # (it also clears the last wait's mark)
    start = time.perf_counter()
    action()
    page.wait_for_function(_noting(ready), timeout=timeout, polling="raf")
    wall = time.perf_counter() - start
    pressed, shown = page.evaluate("() => [window.__dbPress, window.__dbReady]")
    page.wait_for_function(IDLE_JS, timeout=timeout)
    return Timed((shown - pressed) / 1000 if pressed is not None else wall, wall)


def _visit(context: Any, url: str, ready: str, boot: list[float] | None = None) -> tuple[Any, Timed]:
    """A fresh page on `url` (a new visitor's page load, the browser's cache of Gradio's assets warm): the
    page and the wait until `ready`, by the page's clock from the navigation's start. `boot` gets the
    seconds until the page's first event went to the server: Gradio's front end having built the page,
    before any of the tab's own work (for a tab that sends none, until it is drawn)."""
    page = _new_page(context)
    start = time.perf_counter()
    page.goto(url)
    page.wait_for_function(_noting(ready), timeout=60_000, polling="raf")
    wall = time.perf_counter() - start
    shown, first_event = page.evaluate(
        "() => [window.__dbReady, (performance.getEntriesByType('resource')"
        ".find(e => e.name.includes('/queue/join')) || {}).startTime]")
    page.wait_for_function(IDLE_JS, timeout=60_000)
    if boot is not None:  # a tab with nothing to load sends no event: the page is then built when drawn
        boot.append((first_event if first_event is not None else shown) / 1000)
    return page, Timed(shown / 1000, wall)


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def _fresh_visits(context: Any, url: str, ready: str, boots: list[float] | None = None) -> tuple[float, float]:
    """Median of 3 fresh pages on `url` (the assets cached): (by the page's clock, from the script's call)."""
    took = []
    for _ in range(3):
        page, timed = _visit(context, url, ready, boots)
        took.append(timed)
        page.close()
    return _median([t.page for t in took]), _median([t.wall for t in took])


def _changed(page: Any, selector: str) -> str:
    """What says `selector`'s text is no longer what it shows now."""
    before = page.locator(selector).inner_text()
    return f"() => (document.querySelector({json.dumps(selector)})?.innerText || '') !== {json.dumps(before)}"


def _at_width(browser: Any, url: str, width: int, row: Callable[..., None]) -> None:
    """Every figure measured in a browser at one viewport width."""
    context = browser.new_context(viewport={"width": width, "height": 900})
    page, _ = _visit(context, url, READY["browse"])  # not measured: the first fetch of the assets
    page.close()
    for tab in READY:  # what a visitor following a link to the tab waits for: median of 3 fresh pages
        boots: list[float] = []
        shown, wall = _fresh_visits(context, f"{url}?tab={tab}", READY[tab], boots)
        row(f"{width}px: time to interactive, ?tab={tab}", shown, "≤ 1", "s",
            f"front end built the page in {_median(boots):.2f} s, the tab's own work "
            f"{shown - _median(boots):.2f} s; {wall:.2f} s from the script's call")
    page, took = _visit(context, f"{url}?tab=runs&run=full-baseline",
                        "() => (document.querySelector('#db-runs-where')?.innerText || '').startsWith('Item 1 of 5,338')")
    row(f"{width}px: Runs, open the 5,338-item run", took.page, "≤ 1", note=took.note)
    if TTI_ONLY["on"]:
        page.close()
        context.close()
        return
    took = _timed(page.locator("#db-runs-later").click, page, _changed(page, "#db-runs-pager"))
    row(f"{width}px: Runs, next page of rows", took.page, "≤ 0.3", note=took.note)
    took = _timed(page.locator("#db-runs-next").click, page, _changed(page, "#db-runs-where"))
    row(f"{width}px: Runs, next item", took.page, "≤ 0.3", note=took.note)
    page.get_by_label("Status").click()
    option = page.get_by_role("option", name="wrong", exact=True)
    option.wait_for()
    took = _timed(option.click, page, _changed(page, "#db-runs-pager"))
    row(f"{width}px: Runs, filter by status", took.page, "≤ 0.3", note=took.note)
    rows_in_page = page.locator("#db-runs-items tr[data-key]").count()
    row(f"{width}px: Runs, table rows drawn in the page", rows_in_page, "≤ 50", "rows")
    box = page.locator("#db-runs-search textarea, #db-runs-search input").first
    box.fill("炒饭")
    took = _timed(lambda: box.press("Enter"), page, _changed(page, "#db-runs-pager"))
    row(f"{width}px: Runs, search answers and prompts (first)", took.page, "–", note=took.note)
    page.close()

    # Leaderboard: a search on a fresh page, then on a page where the Runs tab was shown first.
    def search(page: Any) -> Timed:  # the last key of "vlm-01" typed: the board for the whole text
        box = page.locator("#db-board-search textarea, #db-board-search input").first
        box.fill("vlm-0")  # (fill sends no key: no event)
        return _timed(lambda: box.press("1"), page, _changed(page, "#db-board"))

    page, _ = _visit(context, f"{url}?tab=leaderboard", READY["leaderboard"])
    first = search(page)
    row(f"{width}px: Leaderboard search", first.page, "≤ 0.5", note=first.note)
    box = page.locator("#db-board-search textarea, #db-board-search input").first
    box.fill("")
    box.press("End")
    page.locator("#db-board-refresh").click()
    page.wait_for_function("() => document.querySelector('#db-board-pager')?.innerText.includes('of 3')")
    page.wait_for_function(IDLE_JS)
    row(f"{width}px: Leaderboard rows drawn", page.locator("#db-board tbody tr:not(.db-group)").count(), "≤ 50",
        "rows")
    row(f"{width}px: Leaderboard height", page.evaluate("document.querySelector('#db-board').getBoundingClientRect()"
                                                         ".height"), "one page", "px")
    row(f"{width}px: Leaderboard sideways scroll", page.evaluate(
        "(() => { const b = document.querySelector('#db-board-scroll'); return b ? b.scrollWidth - b.clientWidth : 0; })()"),
        "0 on a phone", "px")
    page.close()
    page, _ = _visit(context, f"{url}?tab=runs&run=full-baseline", READY["runs"])
    _open_tab(page, "Leaderboard")
    page.wait_for_function(READY["leaderboard"], timeout=60_000)
    page.wait_for_function(IDLE_JS)
    after = search(page)
    row(f"{width}px: Leaderboard search after the Runs tab", after.page, f"≈ {first.page:.2f}", note=after.note)
    page.close()
    context.close()


def measure(url: str, proc: subprocess.Popen[str], cache: Path, widths: tuple[int, ...]) -> list[dict[str, Any]]:
    from playwright.sync_api import sync_playwright

    out: list[dict[str, Any]] = []

    def row(name: str, measured: float, target: str, unit: str = "s", note: str = "") -> None:
        out.append({"name": name, "measured": round(measured, 3), "target": target, "unit": unit, "note": note})
        print(f"{name:<58} {measured:>9.3f} {unit:<4} target {target:<10} {note}", flush=True)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        # Not measured: the first visit after start, which indexes the release (once per Space).
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        for tab in READY:
            page.goto(f"{url}?tab={tab}")
            page.wait_for_function(READY[tab], timeout=600_000)
        context.close()
        for width in widths:
            _at_width(browser, url, width, row)
        if TTI_ONLY["on"]:
            browser.close()
            return out

        # Server CPU and memory over plain page loads (the default tab), the cache it writes.
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page, _ = _visit(context, url, READY["browse"])
        page.close()
        time.sleep(1)
        cpu0, rss0 = _proc(proc.pid)
        cache0 = _size_mib(cache)
        for _ in range(LOADS):
            page, _ = _visit(context, url, READY["browse"])
            page.close()
        time.sleep(2)  # the server's tail work after the last load
        cpu1, rss1 = _proc(proc.pid)
        row("server CPU per plain page load", (cpu1 - cpu0) / LOADS, "≤ 0.2")
        row("Space memory after 50 page loads / after the first", rss1 / rss0, "≤ 1.2", "x",
            f"{rss0:.0f} → {rss1:.0f} MiB")
        row("cache written by 50 page loads", _size_mib(cache) - cache0, "bounded", "MiB",
            f"{_size_mib(cache):.0f} MiB in all")

        # Every item and run reachable from its picker: the list scrolled to its end, and the last one typed.
        for name, address, ready, picker_id, last in (
                ("Runs picker", f"{url}?tab=runs", READY["runs"], "#db-runs-run", "model-298"),
                ("Browse item picker", url, READY["browse"], "#db-browse-item", "classification-02884")):
            page, _ = _visit(context, address, ready)
            picker = page.locator(f"{picker_id} input")
            start = time.perf_counter()
            picker.click()
            page.get_by_role("option").first.wait_for()
            row(f"{name}: open the list", time.perf_counter() - start, "≤ 0.3")
            listbox = page.locator("ul[role=listbox]").first
            for _ in range(80):  # Gradio adds the next choices as the list is scrolled
                listbox.evaluate("e => e.scrollTop = e.scrollHeight")
                page.wait_for_timeout(50)
            options = page.get_by_role("option")
            row(f"{name}: choices reached by scrolling to the end", options.count(), "every one", "",
                f"the last: {options.last.inner_text().strip()[:40]}")
            picker.fill("")
            picker.press_sequentially(last.split("-")[-1])
            found = page.get_by_role("option").filter(has_text=last)
            found.first.wait_for()
            row(f"{name}: {last} found by typing", found.count(), "1", "")
            page.close()
        context.close()
        browser.close()
    return out


FLOOR_APP = """
import gradio as gr
with gr.Blocks() as demo:
    with gr.Tabs():
        for i in range(6):
            with gr.Tab(f"Tab {i}", id=f"t{i}"):
                gr.Markdown(f"floor tab {i}", elem_id=f"floor-{i}")
demo.launch(prevent_thread_lock=False)
"""


def floor(widths: tuple[int, ...]) -> list[dict[str, Any]]:
    """The same page-load timing on a bare Gradio app with six tabs of one line each: what this machine's
    browser and Gradio's own front end take before any of the Space's work (the floor of a tab's time)."""
    from playwright.sync_api import sync_playwright

    out = []
    with gradio_app([sys.executable, "-c", FLOOR_APP], dict(os.environ), "the floor app", 60) as (url, _), \
            sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        ready = "() => document.querySelector('#floor-0')?.offsetParent != null"
        for width in widths:
            context = browser.new_context(viewport={"width": width, "height": 900})
            _visit(context, url, ready)[0].close()  # not measured: the first fetch
            # As each tab of the Space is measured: a fresh page, the assets cached.
            shown, wall = _fresh_visits(context, url, ready)
            context.close()
            out.append({"name": f"{width}px: floor, bare Gradio page with six tabs", "measured": round(shown, 3),
                        "target": "–", "unit": "s", "note": f"median of 3; {wall:.2f} s from the script's call"})
            print(f"{out[-1]['name']:<58} {out[-1]['measured']:>9.3f} s", flush=True)
        browser.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.space_full", description=__doc__.splitlines()[0])
    parser.add_argument("--release", type=Path, default=None, help="a paper-size release (default: built in --work)")
    parser.add_argument("--work", type=Path, default=WORK, help=f"where the runs and the cache go ({WORK})")
    parser.add_argument("--rows", type=int, default=300, help="Leaderboard rows to make (300)")
    parser.add_argument("--widths", default="1280,390", help="viewport widths (1280,390)")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--cpu-slowdown", type=float, default=1.0,
                        help="Chromium's CPU throttling for every measured page, the floor's too (4: a phone's CPU)")
    parser.add_argument("--tti-only", action="store_true",
                        help="only each tab's time to interactive and opening the big run (with the floor)")
    args = parser.parse_args(argv)
    SLOWDOWN["rate"] = max(1.0, args.cpu_slowdown)
    TTI_ONLY["on"] = args.tti_only
    if not CHROMIUM.exists():
        parser.exit(2, f"error: {CHROMIUM} is missing: apt-get install chromium\n")
    try:
        release = args.release or args.work / "release"
        ensure_release(release)
        print(json.dumps(make_results(args.work / "results", release, args.rows)), flush=True)
        cache = args.work / "gradio-cache"
        shutil.rmtree(cache, ignore_errors=True)
        cache.mkdir(parents=True)
        widths = tuple(int(w) for w in args.widths.split(","))
        rows = floor(widths)
        with space(args.work / "results", release, cache) as (url, proc):
            rows += measure(url, proc, cache, widths)
    except BenchError as exc:
        parser.exit(2, f"error: {exc}\n")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

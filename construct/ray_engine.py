"""`--engine ray`: the build's per-photo and per-call work on Ray Data (requirements-ray.txt)."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import select
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict
from itertools import chain, islice
from pathlib import Path
from typing import Any

from construct.errors import BuildError
from construct.models import Answer, Ask, Phase, answer_asks, base_urls, make_pool
from construct.work import BuildSettings, read_json, write_json

INSTALL = "--engine ray needs Ray: pip install -r requirements-ray.txt (ray[data]==2.60.0)"
WORKERS = "ray_workers.json"  # {"prefilter": MiB, "calls": MiB}: the largest peak of a worker of each kind
ASKS_PER_FILE = 2000
PHOTOS_PER_FILE = 512


def require_ray() -> Any:
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError:
        raise BuildError(INSTALL) from None
    return ray


def write_chunks(folder: Path, rows: Iterable[dict[str, Any]], per_file: int) -> int:
    """Rows as JSON-lines files of `per_file` rows in `folder` (emptied first); returns how many rows."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    n, pending = 0, iter(rows)
    for first in pending:
        with (folder / f"part-{n // per_file:06d}.jsonl").open("w", encoding="utf-8") as fh:
            for row in chain((first,), islice(pending, per_file - 1)):
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
                n += 1
    return n


def peak_kb() -> int:
    """This process's peak resident memory so far, in KiB (Linux VmHWM; 0 elsewhere)."""
    try:
        return next((int(line.split()[1]) for line in Path("/proc/self/status").read_text().splitlines()
                     if line.startswith("VmHWM:")), 0)
    except OSError:
        return 0


def _prefilter_batch(batch: dict[str, Any], min_side: int) -> dict[str, list[Any]]:
    from construct.prefilter import prefilter_chunk

    done = prefilter_chunk([(int(s), str(p)) for s, p in zip(batch["seq"], batch["path"], strict=True)], min_side)
    return {"seq": [s for s, _, _ in done], "why": [w or "" for _, w, _ in done],
            "dhash": [f"{h:016x}" if h is not None else "" for _, _, h in done], "peak_kb": [peak_kb()] * len(done)}


class CallActor:
    """One Ray actor of a call phase: a client per replica, its own call log, the shared call loop."""

    def __init__(self, phase: dict[str, Any], urls: list[str | None], settings: dict[str, Any], work: str,
                 concurrency: dict[str, Any]) -> None:
        from construct.callstore import ACTOR_LOGS, CallStore
        from eval.backends import make_backend
        from eval.limiter import Limits
        from eval.store import JsonlLog

        self.phase = Phase(**{**phase, **concurrency})
        self.limits = Limits.of(self.phase)  # learnt once, kept across batches
        self.loop = asyncio.new_event_loop()
        settings_ = BuildSettings(**settings)
        start = int(uuid.uuid4().int % max(1, len(urls)))
        self.backend = make_pool(make_backend, self.phase.spec, urls, settings_, start=start)
        stage_dir = Path(work) / self.phase.stage
        self.store = CallStore(stage_dir, readonly=True)
        self.log = JsonlLog(stage_dir / ACTOR_LOGS / f"{uuid.uuid4().hex}.jsonl")

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[Any]]:
        asks = [Ask.from_row({"item": i, "prompt": p, "photos": json.loads(ph)})
                for i, p, ph in zip(batch["item"], batch["prompt"], batch["photos"], strict=True)]
        answers: list[Answer] = []
        self.loop.run_until_complete(answer_asks(self.backend, asks, self.phase, self.store, self.log, answers.append,
                                                 self.limits))
        return {"item": [a.item for a in answers], "text": [a.text for a in answers],
                "error": [a.error for a in answers], "cached": [a.cached for a in answers],
                "usage": [json.dumps(a.usage) if a.usage is not None else "" for a in answers],
                "peak_kb": [peak_kb()] * len(answers)}

    def __del__(self) -> None:
        try:
            self.log.close()
            self.store.close()
        except Exception:
            pass


class RayEngine:
    """The stages' per-photo and per-call work on Ray Data. The prefilter: the photo rows as JSON-lines chunk
    files in the work folder, read as a dataset, `map_batches` tasks of one CPU each. A call phase: its asks
    (never photo bytes) as chunk files, answered by an actor pool (`CallActor`, a quarter CPU each: the calls
    wait on the network, and a whole CPU each would starve the read tasks on a small machine), each actor
    reading cached answers from the stage's call index (read-only) and appending one flushed line per answer
    to its own log; the driver streams the answers back (`iter_batches`) and decides, as locally."""

    name = "ray"

    def __init__(self, address: str | None, settings: BuildSettings, work: Path) -> None:
        self.ray = ray = require_ray()
        self.settings = settings
        self.work = Path(work)
        self.actors = max(1, settings.ray_actors)
        self.watchdog: subprocess.Popen[bytes] | None = None
        self.worker_peak_kb: dict[str, int] = {}  # prefilter tasks', call actors' peak memory this run
        logging.getLogger("ray").setLevel(logging.WARNING)  # the build prints its own progress
        logging.getLogger("ray.data").setLevel(logging.WARNING)
        if not ray.is_initialized():
            os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a local cluster listens on 127.0.0.1 only
            os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", "fatal")
            # Ray 2.60 calls uvloop.install(), which uvloop 0.23 no longer has: with that uvloop in the
            # environment its processes die at start and ray.init() waits forever. asyncio's loop instead.
            os.environ.setdefault("RAY_USE_UVLOOP", "0")
            if address:
                ray.init(address=address, log_to_driver=False)
            else:
                ray.init(num_cpus=os.cpu_count() or 1, include_dashboard=False, log_to_driver=False,
                         _node_ip_address="127.0.0.1")
                self.watchdog = _start_watchdog(ray)
        from ray.data import DataContext

        context = DataContext.get_current()
        context.enable_progress_bars = False
        context.print_on_execution_start = False

    def prefilter(self, rows: Iterable[tuple[int, str]], min_side: int, *, total: int | None = None
                  ) -> Iterator[tuple[int, str | None, int | None]]:
        folder = self.work / ".engine" / "prefilter"
        if not write_chunks(folder, ({"seq": s, "path": p} for s, p in rows), PHOTOS_PER_FILE):
            return
        ds = self.ray.data.read_json(str(folder), file_extensions=["jsonl"])
        out = ds.map_batches(_prefilter_batch, fn_kwargs={"min_side": min_side}, batch_size=64, num_cpus=1,
                             batch_format="numpy")
        for batch in out.iter_batches(batch_size=None, batch_format="pyarrow"):
            for row in batch.to_pylist():
                self._peak("prefilter", row["peak_kb"])
                yield int(row["seq"]), row["why"] or None, int(row["dhash"], 16) if row["dhash"] else None
        shutil.rmtree(folder, ignore_errors=True)

    def answer(self, phase: Phase, url: str | None, asks: Iterable[Ask], work: Path,
               on_answer: Callable[[Answer], None]) -> list[Ask] | None:
        """Answer a call phase on an actor pool (None); a phase of fewer than `--ray-min-asks` asks is
        handed back, asked of nobody, for the caller's own event loop (as the local engine runs it)."""
        pending = iter(asks)
        head = list(islice(pending, self.settings.ray_min_asks))
        if len(head) < self.settings.ray_min_asks:
            return head
        folder = work / ".engine" / f"asks-{phase.stage}"
        rows = ({"item": a.item, "prompt": a.prompt, "photos": json.dumps(a.to_row()["photos"])}
                for a in chain(head, pending))
        n = write_chunks(folder, rows, ASKS_PER_FILE)
        # Each actor's share: of a fixed N, or of the cap under auto (each actor learns its own limits).
        adaptive = not isinstance(phase.concurrency, int)
        per_actor = max(1, math.ceil((phase.max_concurrency if adaptive else int(phase.concurrency)) / self.actors))
        share = {"concurrency": phase.concurrency, "max_concurrency": per_actor} if adaptive else \
            {"concurrency": per_actor}
        actors = max(1, min(self.actors, math.ceil(n / per_actor)))
        ds = self.ray.data.read_json(str(folder), file_extensions=["jsonl"])
        out = ds.map_batches(
            CallActor, batch_format="numpy", batch_size=4 * per_actor, num_cpus=0.25,
            compute=self.ray.data.ActorPoolStrategy(size=actors),
            fn_constructor_kwargs={"phase": asdict(phase), "urls": base_urls(url), "settings": asdict(self.settings),
                                   "work": str(work), "concurrency": share})
        # Ray Data restarts a dead actor and retries its batch (max_restarts / max_task_retries -1 by default).
        for batch in out.iter_batches(batch_size=None, batch_format="pyarrow"):
            for row in batch.to_pylist():
                self._peak("calls", row["peak_kb"])
                on_answer(Answer(row["item"], row["text"], row["error"], json.loads(row["usage"]) if row["usage"] else None,
                                 cached=bool(row["cached"])))
        shutil.rmtree(folder, ignore_errors=True)
        return None

    def _peak(self, kind: str, kb: int) -> None:
        if kb > self.worker_peak_kb.get(kind, 0):
            self.worker_peak_kb[kind] = kb

    def close(self) -> None:
        if self.worker_peak_kb:  # WORK/ray_workers.json: the workers' peak memory over the build's runs
            path = self.work / WORKERS
            recorded = read_json(path)
            for kind, kb in self.worker_peak_kb.items():
                recorded[kind] = max(float(recorded.get(kind, 0)), round(kb / 1024, 1))
            write_json(path, recorded)
        if self.ray.is_initialized():
            self.ray.shutdown()
        if self.watchdog is not None:
            self.watchdog.stdin.close()  # type: ignore[union-attr]  # the watchdog sweeps up and exits
            self.watchdog.wait(timeout=30)
            self.watchdog = None


def _start_watchdog(ray: Any) -> subprocess.Popen[bytes]:
    """A process, in a session of its own, that waits for this driver to end (the end of a pipe only the
    driver holds), then kills every process of the local Ray it started that is still alive."""
    node = ray.get_runtime_context().get_node_id()
    session = ray._private.worker.global_worker.node.get_session_dir_path()
    return subprocess.Popen([sys.executable, "-m", "construct.ray_engine", "--watch", node, session],
                            stdin=subprocess.PIPE, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _processes() -> dict[int, tuple[int, int]]:
    """{pid: (parent pid, start time)} of every process (Linux /proc; elsewhere none)."""
    out = {}
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                out[int(entry.name)] = (int(fields[1]), int(fields[19]))
            except (OSError, IndexError, ValueError):
                continue
    return out


def _descendants(root: int, table: dict[int, tuple[int, int]]) -> dict[int, int]:
    """{pid: start time} of every process below `root`."""
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found, todo = {}, [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found[child] = table[child][1]
                todo.append(child)
    return found


def _identity(pid: int) -> tuple[bytes, bytes] | None:
    """(command line, environment) of a process; None once it is gone."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes(), Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None


def _names_this_ray(cmdline: bytes, environ: bytes, node: str, session: str) -> bool:
    return session.encode() in cmdline or f"RAY_NODE_ID={node}".encode() in environ.split(b"\0")


def _is_ray(pid: int, node: str, session: str) -> bool:
    """Whether a process belongs to a Ray: started from Ray's package (`ray::` workers and agents, the
    raylet, the GCS, its monitors), or naming this Ray's session or node."""
    found = _identity(pid)
    return found is not None and (found[0].startswith(b"ray::") or b"/site-packages/ray/" in found[0]
                                  or _names_this_ray(*found, node, session))


def ray_processes(node: str, session: str) -> list[int]:
    """The processes that name this Ray's node or session (Linux /proc; elsewhere none are found)."""
    return [pid for pid in _processes()
            if pid != os.getpid() and (found := _identity(pid)) and _names_this_ray(*found, node, session)]


def watch(node: str, session: str) -> None:
    """Until the driver's pipe closes, note once a second every Ray process below the driver (once the
    driver is gone they have no parent to be found by; the driver's other children are never noted);
    then give them, and any process naming this Ray's node or session, 10 s to stop and kill those still
    there. A process is matched by pid and start time, so a reused pid is never killed."""
    driver, me = os.getppid(), os.getpid()
    known: dict[int, int] = {}
    pipe = sys.stdin.fileno()
    while not (select.select([pipe], [], [], 1.0)[0] and not os.read(pipe, 4096)):  # until EOF
        for pid, start in _descendants(driver, _processes()).items():
            if pid not in known and pid != me and _is_ray(pid, node, session):
                known[pid] = start

    def alive() -> set[int]:
        table = _processes()
        return ({pid for pid, start in known.items() if pid in table and table[pid][1] == start}
                | set(ray_processes(node, session)))

    deadline = time.monotonic() + 10  # a clean ray.shutdown() may still be stopping its processes
    while alive() and time.monotonic() < deadline:
        time.sleep(0.5)
    for pid in alive():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


if __name__ == "__main__" and sys.argv[1:2] == ["--watch"]:
    watch(sys.argv[2], sys.argv[3])

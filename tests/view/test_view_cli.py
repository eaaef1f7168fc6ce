"""``litstream view`` and ``litstream simulate serve`` on the command line: bad input fails before anything
listens; the real commands serve the app (uvicorn on asyncio, Hypercorn on trio) on loopback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest
import yaml
from view_data import N, write

import litstream
from litstream._cli._main import main
from servers import free_port

if TYPE_CHECKING:
    from collections.abc import Iterator

SRC = str(Path(litstream.__file__).resolve().parents[1])


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> str:
    return write(str(tmp_path_factory.mktemp("cli") / "ds"))


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["view", "{missing}"], "holds no index.json"),
        (["view", "{dataset}", "--port", "70000"], "--port 70000 is not usable"),
        (["view", "{dataset}", "--storage-options", "[1]"], "pass a JSON object"),
        (["simulate", "serve", "-c", "{missing}/sim.yaml"], "does not exist"),
    ],
)
def test_bad_input_fails_before_serving(
    dataset: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], said: str
) -> None:
    filled = [a.format(missing=tmp_path / "nothing", dataset=dataset) for a in args]
    assert main(filled) == 1
    assert said in capsys.readouterr().err


def test_a_port_in_use_is_named(dataset: str, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        assert main(["view", dataset, "--port", str(port)]) == 1
    assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err


def test_serve_refuses_a_bad_config_by_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "sim.yaml"
    config.write_text("dataset: x\ncluster: {nodes: 0}\n")
    assert main(["simulate", "serve", "-c", str(config)]) == 1
    assert "cluster.nodes=0" in capsys.readouterr().err


@pytest.fixture
def started(tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _wait_for(url: str, proc: subprocess.Popen[bytes], log: Path) -> httpx.Response:
    """Poll ``url`` until the server answers (120 s at most: the command imports torch first)."""
    deadline = time.monotonic() + 120
    while True:
        try:
            return httpx.get(url, timeout=5)
        except httpx.TransportError:
            pass
        if proc.poll() is not None:
            raise AssertionError(f"the command exited with {proc.returncode}: {log.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"the command did not answer within 120 s: {log.read_text()[-3000:]}")
        time.sleep(0.1)


@pytest.mark.parametrize(("command", "backend"), [("view", "trio"), ("serve", "asyncio")])
def test_the_command_serves_on_loopback(
    dataset: str, tmp_path: Path, started: list[subprocess.Popen[bytes]], command: str, backend: str
) -> None:
    port = free_port()
    if command == "view":
        args = ["view", dataset]
    else:
        config = tmp_path / "sim.yaml"
        config.write_text(yaml.safe_dump({"dataset": dataset, "chunks": "read", "cluster": {"num_workers": 1}}))
        args = ["simulate", "serve", "-c", str(config)]
    log = tmp_path / "server.log"
    env = {**os.environ, "PYTHONPATH": SRC}
    with open(log, "wb") as out:
        cmd = [sys.executable, "-m", "litstream._cli._main", *args, "--port", str(port), "--backend", backend]
        started.append(subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env))
    base = f"http://127.0.0.1:{port}"
    summary = _wait_for(f"{base}/api/data/summary", started[0], log)
    assert summary.status_code == 200
    assert summary.json()["samples"] == N
    home = httpx.get(f"{base}/", timeout=30, follow_redirects=True)
    assert home.status_code == 200
    if command == "serve":
        assert 'id="knobs"' in home.text
        run = httpx.post(f"{base}/api/simulate", json={"batch_size": 4}, timeout=120)
        assert run.status_code == 200
        assert run.json()["summary"]["samples"] == N
    else:
        assert 'id="samples"' in home.text
    rebound = httpx.get(f"{base}/api/data/summary", headers={"Host": "attacker.example"}, timeout=30)
    assert rebound.status_code == 400  # served on loopback: only loopback names are answered
    assert f"on http://127.0.0.1:{port}/ ({backend})" in log.read_text()

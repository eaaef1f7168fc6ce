"""The web app of ``litstream simulate serve`` and ``litstream view``, through its ASGI interface (httpx), on
asyncio and trio: the playground re-runs the real simulation and refuses hostile input by name; the dataset
pages render every kind of leaf escaped and bounded, read local, S3 and ``hf://`` datasets, and reach nothing
outside the dataset.
"""

from __future__ import annotations

import base64
import html
import io
import json
import re
import threading
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import httpx
import pytest
from view_data import CHUNK, HOSTILE, N, image_of, write

from litstream._core import _errors as litstream_errors
from litstream._core._bridge import run_sync
from litstream._sim._dataset import prepare_dataset
from litstream._view._app import create_app
from litstream._view._dataset import MAX_PAGE, DatasetView
from litstream._view._knobs import KNOBS
from litstream._view._playground import MAX_BODY, Playground
from litstream.simulate import NetworkModel, SimulationConfig, SimulationReport
from servers import hub_http_server

if TYPE_CHECKING:
    from pathlib import Path

    from starlette.applications import Starlette

    from servers import S3Server

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> str:
    return write(str(tmp_path_factory.mktemp("view") / "ds"))


def _playground(dataset: str, **kwargs: Any) -> Playground:
    config = SimulationConfig(dataset, chunks="read", network=kwargs.pop("network", NetworkModel()))
    return Playground(config, run_sync(prepare_dataset, config), **kwargs)


@pytest.fixture(scope="module")
def app(dataset: str) -> Starlette:
    view = run_sync(DatasetView.open, dataset, None)
    return create_app(playground=_playground(dataset), view=view)


def _client(app: Starlette, host: str = "127.0.0.1") -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=f"http://{host}")


# -- the playground ------------------------------------------------------------------------------------------
async def test_the_page_has_a_bounded_slider_per_knob_and_a_strict_policy(app: Starlette) -> None:
    async with _client(app) as client:
        page = await client.get("/")
        script = await client.get("/static/playground.js")
    assert page.status_code == 200
    for knob in KNOBS:
        slider = re.search(f'<input type="range" id="{knob.name}"[^>]*>', page.text)
        assert slider is not None, knob.name
        assert f'min="{knob.low:g}"' in slider.group()
        assert f'max="{knob.high:g}"' in slider.group()
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert '<script src="/static/playground.js"' in page.text
    assert "<script>" not in page.text  # the policy runs no inline script: there is none
    assert script.status_code == 200
    assert "/api/simulate" in script.text


async def test_a_knob_change_reruns_the_real_simulation(dataset: str) -> None:
    async with _client(create_app(playground=_playground(dataset))) as client:
        near = await client.post("/api/simulate", json={"rtt": 10, "jitter": 0, "ranks_per_node": 2, "batch_size": 4})
        far = await client.post("/api/simulate", json={"rtt": 800, "jitter": 0, "ranks_per_node": 2, "batch_size": 4})
        again = await client.post("/api/simulate", json={"rtt": 800, "jitter": 0, "ranks_per_node": 2, "batch_size": 4})
    assert near.status_code == far.status_code == again.status_code == 200
    a, b = near.json(), far.json()
    assert a["summary"]["samples"] == b["summary"]["samples"] == N  # every sample, as the engine served them
    assert a["summary"]["ranks"] == 2
    # Two round trips (index.json, then a chunk) before the first batch: 0.8 s each instead of 0.01 s.
    assert a["summary"]["time_to_first_batch"] < 0.1 < 1.6 <= b["summary"]["time_to_first_batch"]
    assert a["html"].count("<svg") == b["html"].count("<svg") == 4
    assert a["html"] != b["html"]
    assert (a["cached"], b["cached"], again.json()["cached"]) == (False, False, True)
    assert again.json()["html"] == b["html"]


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"num_workers": 99}, "num_workers=99"),
        ({"num_workers": -1}, "num_workers=-1"),
        ({"num_workers": 2.5}, "num_workers=2.5"),
        ({"batch_size": True}, "batch_size=True"),
        ({"rtt": "fast"}, "rtt='fast'"),
        ({"rtt": 1e308}, "rtt=1e+308"),
        ({"rtt": None}, "rtt=None"),
        ({"shuffle": "sideways"}, "shuffle='sideways'"),
        ({"warp": 9}, "'warp' is not a knob"),
        ({"<script>": 1}, "'<script>' is not a knob"),
        ([1, 2], "JSON object"),
    ],
)
async def test_hostile_knob_values_are_refused_by_name(app: Starlette, body: Any, named: str) -> None:
    async with _client(app) as client:
        answer = await client.post("/api/simulate", json=body)
    assert answer.status_code == 400
    assert named in answer.json()["error"]
    assert answer.headers["content-type"] == "application/json"  # never rendered as a page


@pytest.mark.parametrize(
    ("content", "status", "said"),
    [
        (b'{"rtt": NaN}', 400, "rtt=nan"),
        (b'{"rtt": Infinity}', 400, "rtt=inf"),
        (b"{not json", 400, "not JSON"),
        (b"\xff\xfe", 400, "not JSON"),
        (b'{"rtt": 1, "pad": "' + b"x" * MAX_BODY + b'"}', 413, "over 4096 bytes"),
    ],
)
async def test_malformed_bodies_are_refused(app: Starlette, content: bytes, status: int, said: str) -> None:
    async with _client(app) as client:
        answer = await client.post("/api/simulate", content=content)
    assert answer.status_code == status
    assert said in answer.json()["error"]


async def test_runs_over_the_caps_are_refused_before_they_start(dataset: str) -> None:
    app = create_app(playground=_playground(dataset, max_sessions=4, max_samples=2 * N))
    async with _client(app) as client:
        wide = await client.post("/api/simulate", json={"nodes": 2, "ranks_per_node": 2, "num_workers": 2})
        long = await client.post("/api/simulate", json={"epochs": 3})
        fits = await client.post("/api/simulate", json={"nodes": 2, "ranks_per_node": 2, "num_workers": 1})
    assert wide.status_code == long.status_code == 400
    assert "8 read sessions" in wide.json()["error"]
    assert "--max-sessions" in wide.json()["error"]
    assert f"{3 * N} samples" in long.json()["error"]
    assert "--max-samples" in long.json()["error"]
    assert fits.status_code == 200


class _HeldPlayground(Playground):
    """A playground whose simulations wait for the test to let them go (the seam: the one method that runs)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.entered = threading.Event()
        self.release = threading.Event()

    def _simulate(self, config: SimulationConfig) -> SimulationReport:
        self.entered.set()
        assert self.release.wait(60)
        return super()._simulate(config)


async def test_one_simulation_at_a_time(dataset: str) -> None:
    config = SimulationConfig(dataset, chunks="read")
    held = _HeldPlayground(config, await prepare_dataset(config))
    answers: dict[str, httpx.Response] = {}
    async with _client(create_app(playground=held)) as client:

        async def first() -> None:
            answers["first"] = await client.post("/api/simulate", json={"num_workers": 1})

        async with anyio.create_task_group() as tg:
            tg.start_soon(first)
            await anyio.to_thread.run_sync(held.entered.wait)
            answers["second"] = await client.post("/api/simulate", json={"num_workers": 3})
            held.release.set()
        later = await client.post("/api/simulate", json={"num_workers": 3})
    assert answers["second"].status_code == 429
    assert answers["second"].headers["retry-after"] == "1"
    assert "running" in answers["second"].json()["error"]
    assert answers["first"].status_code == later.status_code == 200


async def test_a_failing_simulation_is_answered_with_its_reason(dataset: str) -> None:
    down = NetworkModel(outages=((0.0, 1e6),), retry_timeout=2.0)
    app = create_app(playground=_playground(dataset, network=down))
    async with _client(app) as client:
        answer = await client.post("/api/simulate", json={})
    assert answer.status_code == 422
    assert "the simulation failed" in answer.json()["error"]
    assert "attempts" in answer.json()["error"]


# -- the dataset pages ---------------------------------------------------------------------------------------
def _images(text: str) -> list[Any]:
    from PIL import Image

    found = re.findall(r'<img class="sample" alt="image" src="data:image/png;base64,([A-Za-z0-9+/=]+)">', text)
    return [Image.open(io.BytesIO(base64.b64decode(data))) for data in found]


async def test_the_summary_names_what_the_index_holds(app: Starlette) -> None:
    async with _client(app) as client:
        summary = (await client.get("/api/data/summary")).json()
    assert summary["samples"] == N
    assert summary["chunks"] == N // CHUNK
    assert summary["layout"] == ["str", "str", "pil", "audio:wav", "no_header_numpy:9", "bytes"]
    assert summary["item_loader"] == "PyTreeLoader"
    assert summary["compression"] is None
    assert summary["keys_shards"] == 1


async def test_a_page_of_samples_renders_every_kind_escaped(app: Starlette) -> None:
    async with _client(app) as client:
        page = await client.get("/data", params={"offset": 6, "count": 3})
    assert page.status_code == 200
    text = page.text
    assert re.findall(r'<a href="/data/sample/(\d+)">', text) == ["6", "7", "8"]
    assert [im.size for im in _images(text)] == [image_of(i).size for i in (6, 7, 8)]
    assert text.count('<audio controls src="data:audio/wav;base64,') == 3
    assert "shape (5,), dtype float32, min 0.0, max 28.0" in text  # sample 7's array
    assert "caption 7 " + HOSTILE.replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;") in text
    assert HOSTILE not in text
    assert "<script>" not in text
    assert 'onerror="' not in text
    assert "40 bytes: 07 07 07" in text  # bytes summarised
    assert text.count("<tr><td>") == N // CHUNK  # the chunk table: one row per chunk
    assert "script-src 'self'" in page.headers["content-security-policy"]


async def test_one_sample_and_a_key_lookup(app: Starlette) -> None:
    async with _client(app) as client:
        one = await client.get("/data/sample/17")
        keyed = await client.get("/data/key", params={"key": "k17"})
        missing = await client.get("/data/key", params={"key": "<b>nope</b>"})
        long = await client.get("/data/key", params={"key": "k" * 300})
        empty = await client.get("/data/key")
    assert one.status_code == keyed.status_code == 200
    for answer in (one, keyed):
        assert "caption 17 " in answer.text
        assert [im.size for im in _images(answer.text)] == [image_of(17).size]
    assert missing.status_code == 404
    assert "&lt;b&gt;nope&lt;/b&gt;" in missing.text
    assert "<b>nope" not in missing.text
    assert long.status_code == empty.status_code == 400


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("offset=-1", "offset='-1'"),
        (f"offset={N}", f"offset='{N}'"),
        ("offset=" + "9" * 40, "offset="),
        ("count=0", "count='0'"),
        (f"count={MAX_PAGE + 1}", f"count='{MAX_PAGE + 1}'"),
        ("chunks=7", "chunks='7'"),
        ("offset=%3Cscript%3E", "offset='<script>'"),
    ],
)
async def test_out_of_range_queries_are_refused_by_name(app: Starlette, query: str, named: str) -> None:
    async with _client(app) as client:
        answer = await client.get(f"/data?{query}")
    assert answer.status_code == 400
    assert html.escape(named) in answer.text
    assert "<script>" not in answer.text


@pytest.mark.parametrize(
    "path",
    [
        "/data/sample/24",
        "/data/sample/-1",
        "/data/sample/..%2F..%2Findex.json",
        "/data/sample/1/../../../../etc/passwd",
        "/static/..%2F..%2F..%2Fetc%2Fpasswd",
        "/data/index.json",
        "/chunk-0-0.bin",
        "/keys/shard-00000.parquet",
    ],
)
async def test_no_route_reaches_a_file(app: Starlette, path: str) -> None:
    async with _client(app) as client:
        answer = await client.get(path)
    assert answer.status_code == 404
    assert "root:" not in answer.text
    assert '"chunks"' not in answer.text


async def test_only_loopback_names_are_answered_when_serving_on_loopback(dataset: str) -> None:
    view = await DatasetView.open(dataset)
    app = create_app(view=view, allowed_hosts=["127.0.0.1", "localhost"])
    async with _client(app) as client:
        ok = await client.get("/api/data/summary")
    async with _client(app, host="rebound.example") as client:
        refused = await client.get("/api/data/summary")
    assert ok.status_code == 200
    assert refused.status_code == 400


async def _remote_pages(url: str, options: dict[str, Any]) -> tuple[dict[str, Any], str, str]:
    app = create_app(view=await DatasetView.open(url, options))
    async with _client(app) as client:
        summary = (await client.get("/api/data/summary")).json()
        page = (await client.get("/data", params={"offset": 10, "count": 2})).text
        keyed = (await client.get("/data/key", params={"key": "k3"})).text
    return summary, page, keyed


def _check_remote(summary: dict[str, Any], page: str, keyed: str, url: str) -> None:
    assert summary["dataset"] == url
    assert summary["samples"] == N
    assert re.findall(r'<a href="/data/sample/(\d+)">', page) == ["10", "11"]
    assert [im.size for im in _images(page)] == [image_of(10).size, image_of(11).size]
    assert "caption 3 " in keyed


async def test_an_s3_dataset(s3_server: S3Server, obstore_in_process: None, tmp_path: Path) -> None:
    url = f"s3://{s3_server.bucket}/view-{tmp_path.name}"
    await anyio.to_thread.run_sync(lambda: write(url, storage_options=s3_server.options()))
    summary, page, keyed = await _remote_pages(url, s3_server.options())
    _check_remote(summary, page, keyed, url)
    assert s3_server.options()["aws_secret_access_key"] not in json.dumps(summary) + page
    # The playground over the same S3 dataset: its index and first chunk read through the real store, the rest
    # synthesised; a run serves every sample.
    config = SimulationConfig(url, storage_options=s3_server.options())
    playground = Playground(config, await prepare_dataset(config))
    async with _client(create_app(playground=playground)) as client:
        run = await client.post("/api/simulate", json={"batch_size": 4, "num_workers": 1})
    assert run.status_code == 200
    assert run.json()["summary"]["samples"] == N
    assert s3_server.options()["aws_secret_access_key"] not in run.text


async def test_an_hf_dataset(tmp_path: Path) -> None:
    with hub_http_server(tmp_path / "hub") as hub:
        await anyio.to_thread.run_sync(write, str(hub.dataset_dir("org/view")))
        url = "hf://datasets/org/view"
        summary, page, keyed = await _remote_pages(url, {"endpoint": hub.url, "token": False})
    _check_remote(summary, page, keyed, url)


def _tokens(i: int) -> Any:
    import numpy as np

    return np.arange(i * 100, i * 100 + 37, dtype=np.int64)


async def test_a_token_dataset_is_viewed_as_windows(tmp_path: Path) -> None:
    import litstream

    data = str(tmp_path / "tokens")
    await anyio.to_thread.run_sync(
        lambda: litstream.optimize(
            _tokens,
            list(range(8)),
            data,
            chunk_size=4,
            item_loader=litstream.TokensLoader(),
            num_workers=1,
            verbose=False,
        )
    )
    app = create_app(view=await DatasetView.open(data, None, 16))
    async with _client(app) as client:
        summary = (await client.get("/api/data/summary")).json()
        page = (await client.get("/data", params={"offset": 2, "count": 1})).text
        beyond = await client.get("/data", params={"offset": summary["samples"]})
    ds = litstream.StreamingDataset(data, item_loader=litstream.TokensLoader(16))
    window = await anyio.to_thread.run_sync(ds.__getitem__, 2)
    assert summary["samples"] == len(ds)  # windows of 16 tokens, as StreamingDataset serves them
    assert summary["items_written"] == 8
    assert summary["block_size"] == 16
    assert f"shape ({len(window)},), dtype int64, min {int(window.min())}, max {int(window.max())}" in page
    assert beyond.status_code == 400


async def test_a_bad_block_size_is_refused(dataset: str) -> None:
    with pytest.raises(litstream_errors.ConfigurationError, match="--block-size 0"):
        await DatasetView.open(dataset, None, 0)


async def test_the_configs_own_values_are_the_sliders_start(dataset: str) -> None:
    """A config value off a slider's step or outside its range is kept as it is, not snapped or refused."""
    from litstream.simulate import ReadSettings

    config = SimulationConfig(
        dataset,
        chunks="read",
        read=ReadSettings(max_cache_size=1_234_567_000_000, batch_size=4096),
        network=NetworkModel(rate_limit=3333.0),
    )
    app = create_app(playground=Playground(config, await prepare_dataset(config)))
    async with _client(app) as client:
        page = (await client.get("/")).text
        kept = await client.post("/api/simulate", json={"max_cache_size": 1_234_567, "batch_size": 4096})
        over = await client.post("/api/simulate", json={"batch_size": 4097})
    assert 'id="max_cache_size" name="max_cache_size" min="0" max="1234567" step="any" value="1234567"' in page
    assert 'id="rate_limit" name="rate_limit" min="0" max="20000" step="any" value="3333"' in page
    assert 'id="batch_size" name="batch_size" min="1" max="4096" step="1" value="4096"' in page
    assert kept.status_code == 200
    assert over.status_code == 400
    assert "from 1 to 4096" in over.json()["error"]

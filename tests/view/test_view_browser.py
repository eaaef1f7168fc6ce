"""The playground and the dataset page in a real headless browser: the system's Chromium, driven by Playwright.

The app is served by uvicorn on 127.0.0.1 (a thread of this process, its socket listening before the test
connects). Every wait is on the page's state (a selector on ``data-run``, ``data-state``), never on time; the
waits are selectors, not script, because the page's policy forbids evaluating strings. Chromium comes
from the system's packages (``scripts/setup.sh`` installs it); without it, or without Playwright, the tests are
skipped on a developer's machine and fail in CI.
"""

from __future__ import annotations

import re
import shutil
from typing import TYPE_CHECKING, Any

import pytest
from view_data import HOSTILE, image_of, uvicorn_thread, write

from litstream._core._bridge import run_sync
from litstream._sim._dataset import prepare_dataset
from litstream._view._app import create_app
from litstream._view._dataset import DatasetView
from litstream._view._playground import Playground
from litstream.simulate import NetworkModel, SimulationConfig
from peer import in_ci, require_dev

if TYPE_CHECKING:
    from collections.abc import Iterator

sync_api = require_dev("playwright.sync_api")
_TIMEOUT_MS = 20_000


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        problem = "Chromium is not installed (apt-get install chromium; scripts/setup.sh does it as root)"
        if in_ci():
            pytest.fail(f"{problem}; CI requires it", pytrace=False)
        pytest.skip(problem)
    return found


@pytest.fixture(scope="module")
def browser(base_url: str) -> Iterator[Any]:
    """One Chromium for the module, started after the server (Playwright's sync API holds an event loop in this
    thread while it runs: the dataset is written and the app prepared before)."""
    executable = _chromium()
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, headless=True, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    dataset = write(str(tmp_path_factory.mktemp("browser") / "ds"))
    config = SimulationConfig(dataset, chunks="read", network=NetworkModel(rtt=0.02, jitter=0.0))
    nav = [("/", "playground"), ("/data", "dataset")]
    playground = Playground(config, run_sync(prepare_dataset, config), nav=nav)
    view = run_sync(DatasetView.open, dataset, None)
    view.nav = nav
    with uvicorn_thread(create_app(playground=playground, view=view, allowed_hosts=["127.0.0.1"])) as url:
        yield url


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context()
    opened = context.new_page()
    opened.set_default_timeout(_TIMEOUT_MS)
    problems: list[str] = []
    opened.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    opened.on("console", lambda msg: problems.append(f"console: {msg.text}") if msg.type == "error" else None)
    opened.problems = problems
    try:
        yield opened
    finally:
        context.close()


def _first_batch(page: Any) -> float:
    row = page.locator("#results tr", has_text="time to first batch").inner_text()
    return float(re.findall(r"([\d.]+) s", row)[-1])  # the max over ranks


def test_moving_a_slider_reruns_the_simulation_and_redraws_the_figures(page: Any, base_url: str) -> None:
    page.goto(base_url + "/")
    page.locator('#results[data-run="1"]').wait_for()
    figures = page.locator("#results svg")
    assert figures.count() == 4
    before = [figures.nth(i).inner_html() for i in range(4)]
    first_batch = _first_batch(page)
    slider = page.locator("#rtt")
    slider.focus()
    slider.press("End")  # the keyboard moves the slider to its maximum, as a user would
    page.locator('#results[data-run="2"]').wait_for()
    assert page.locator("#rtt-value").inner_text() == "1000"
    after = [figures.nth(i).inner_html() for i in range(4)]
    assert after[0] != before[0]  # samples per rank over time: the same count, much later
    assert _first_batch(page) > first_batch + 1.9  # two round trips of 1 s instead of 0.02 s
    assert page.locator("#status").get_attribute("data-state") == "done"
    assert page.problems == []  # no script error, nothing the page's policy blocked


def test_a_bad_setting_is_shown_not_run(page: Any, base_url: str) -> None:
    page.goto(base_url + "/")
    page.locator('#results[data-run="1"]').wait_for()
    page.select_option("#shuffle", "window")
    page.locator('#results[data-run="2"]').wait_for()
    for name, value in (("nodes", "16"), ("ranks_per_node", "8"), ("num_workers", "8")):
        page.locator(f"#{name}").evaluate("(el, v) => { el.value = v; }", value)
    page.locator("#num_workers").dispatch_event("change")
    page.locator('#status[data-state="error"]').wait_for()
    assert "1024 read sessions" in page.locator("#status").inner_text()
    assert page.locator("#results").get_attribute("data-run") == "2"  # the last good figures stay


def test_the_dataset_page_shows_images_audio_and_text(page: Any, base_url: str) -> None:
    page.goto(base_url + "/data?offset=3&count=4")
    images = page.locator("img.sample")
    assert images.count() == 4
    sizes = images.evaluate_all("els => els.map(e => [e.complete, e.naturalWidth, e.naturalHeight])")
    assert sizes == [[True, *image_of(i).size] for i in range(3, 7)]  # decoded by the browser itself
    assert page.locator("audio").count() == 4
    texts = page.locator("pre.text").all_inner_texts()
    assert texts == [t for i in range(3, 7) for t in (f"k{i}", f"caption {i} {HOSTILE}")]  # shown as text ...
    assert page.evaluate("window.__pwned") is None  # ... never run
    page.fill("input[name=key]", "k5")
    page.press("input[name=key]", "Enter")
    page.wait_for_url("**/data/key?key=k5")
    assert page.locator("pre.text").all_inner_texts() == ["k5", f"caption 5 {HOSTILE}"]
    assert page.problems == []

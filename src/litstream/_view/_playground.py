"""``litstream simulate serve``: a page whose sliders re-run the real simulation and redraw its figures.

The dataset is prepared once when the app starts (its index and, with ``chunks: synthesise``, one chunk read
through the real store); each ``POST /api/simulate`` then runs the real engine on the virtual clock
(:func:`litstream._sim._run.run_cluster`) in a worker thread. Cost is capped: one simulation at a time (a
second request meanwhile is answered 429 with ``Retry-After``), at most ``max_sessions`` read sessions
(machines x GPUs x workers) and ``max_samples`` samples served (samples x epochs) per run, every knob inside
its range, a request body of at most 4 kB; the last few results are kept, so moving a slider back is free.
"""

from __future__ import annotations

import contextlib
import html
import json
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from starlette.responses import JSONResponse, Response

from .._core._errors import ConfigurationError, LitstreamError
from .._sim._config import config_from_mapping
from ._knobs import KNOBS, KnobError, apply_knobs, knob_ranges, knob_values
from ._page import HEADERS, error_json, page

if TYPE_CHECKING:
    from starlette.requests import Request

    from .._sim._dataset import SimDataset
    from ..simulate import SimulationConfig, SimulationReport

__all__ = ["MAX_BODY", "Playground"]

MAX_BODY = 4096
"""Bytes of a request body read at most."""
_KEPT = 16
"""Results kept for repeated knob settings."""


class Playground:
    """The simulation behind the page: the loaded config, the prepared dataset, the caps and the last results.

    Args:
        config: The configuration the page starts from (a YAML file's).
        dataset: ``await prepare_dataset(config)``.
        max_samples: Samples (x epochs) one run may serve at most (>= 1).
        max_sessions: Read sessions (machines x GPUs x max(1, workers)) one run may have at most (>= 1).
        nav: The navigation bar's links.
    """

    def __init__(
        self,
        config: SimulationConfig,
        dataset: SimDataset,
        *,
        max_samples: int = 2_000_000,
        max_sessions: int = 256,
        nav: list[tuple[str, str]] | None = None,
    ) -> None:
        if max_samples < 1 or max_sessions < 1:
            raise ConfigurationError(
                f"simulate serve: max_samples={max_samples} and max_sessions={max_sessions} must be >= 1"
            )
        self.config = config
        self.dataset = dataset
        self.max_samples = max_samples
        self.max_sessions = max_sessions
        self.nav = nav or [("/", "playground")]
        self.ranges = knob_ranges(config)
        self.runs = 0
        self._busy = False
        self._kept: OrderedDict[str, dict[str, Any]] = OrderedDict()

    # -- one run ----------------------------------------------------------------------------------
    def check_cost(self, config: SimulationConfig) -> None:
        """Refuse a run over the caps.

        Raises:
            KnobError: naming the cap, the run's count and how to raise the cap.
        """
        cluster = config.cluster
        sessions = cluster.nodes * cluster.ranks_per_node * max(1, cluster.num_workers)
        if sessions > self.max_sessions:
            raise KnobError(
                f"{cluster.nodes} machines x {cluster.ranks_per_node} GPUs x {max(1, cluster.num_workers)} workers "
                f"is {sessions} read sessions, more than this server runs ({self.max_sessions}); lower one of "
                "them, or restart with a larger --max-sessions"
            )
        samples = self.dataset.index.num_items * config.read.epochs
        if samples > self.max_samples:
            raise KnobError(
                f"{config.read.epochs} epoch(s) of {self.dataset.index.num_items} samples is {samples} samples, more "
                f"than this server simulates per run ({self.max_samples}); lower epochs, or restart with a larger "
                "--max-samples"
            )

    def _simulate(self, config: SimulationConfig) -> SimulationReport:
        from .._sim._report import build_report
        from .._sim._run import run_cluster

        return build_report(config, run_cluster(config, self.dataset))

    @staticmethod
    def result(report: SimulationReport) -> dict[str, Any]:
        """What the page receives: the summary table and figures as HTML, and the headline numbers."""
        from .._sim._html import figures, summary_table

        return {
            "html": summary_table(report) + "\n" + "\n".join(figures(report)),
            "summary": {
                "epoch_seconds": report.epoch_seconds,
                "time_to_first_batch": report.time_to_first_batch["max"],
                "stall_fraction": report.stall_fraction,
                "samples": report.samples,
                "requests": report.requests,
                "throttled": report.throttled,
                "ranks": len(report.ranks),
                "real_seconds": report.real_seconds,
            },
        }

    # -- routes -----------------------------------------------------------------------------------
    async def run(self, request: Request) -> Response:
        """``POST /api/simulate`` with the knob values as JSON: the result, or a 400/413/422/429 naming why."""
        too_big = error_json(413, f"the request body is over {MAX_BODY} bytes; send only the knob values")
        declared = request.headers.get("content-length", "0")
        if not declared.isdigit() or int(declared) > MAX_BODY:  # refused unread
            return too_big
        body = b""
        async with contextlib.aclosing(request.stream()) as parts:
            async for part in parts:
                body += part
                if len(body) > MAX_BODY:  # a chunked body, or one longer than declared
                    return too_big
        try:
            sent = json.loads(body or b"{}")
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            return error_json(400, f"the request body is not JSON: {exc}")
        try:
            config = apply_knobs(self.config, sent, self.ranges)
            config = config_from_mapping(config.to_mapping())  # the simulation's own checks, too
            self.check_cost(config)
        except (KnobError, ConfigurationError) as exc:
            return error_json(400, str(exc))
        key = json.dumps(config.to_mapping(), sort_keys=True, default=str)
        kept = self._kept.get(key)
        if kept is not None:
            self._kept.move_to_end(key)
            return JSONResponse({**kept, "cached": True}, headers=HEADERS)
        if self._busy:
            return error_json(429, "a simulation is running; try again when it is done")
        self._busy = True
        try:
            report = await anyio.to_thread.run_sync(self._simulate, config)
        except LitstreamError as exc:
            return error_json(422, f"the simulation failed: {exc}")
        finally:
            self._busy = False
        self.runs += 1
        out = self.result(report)
        self._kept[key] = out
        while len(self._kept) > _KEPT:
            self._kept.popitem(last=False)
        return JSONResponse({**out, "cached": False}, headers=HEADERS)

    async def home(self, request: Request) -> Response:
        """``GET /``: the sliders and an empty results area the script fills."""
        values = knob_values(self.config)
        rows = []
        for knob in KNOBS:
            low, high = self.ranges[knob.name]
            value = values[knob.name]
            steps = (value - low) / knob.step
            step = f"{knob.step:g}" if abs(steps - round(steps)) < 1e-6 else "any"  # never snap the config's value
            rows.append(
                f'<label for="{knob.name}">{html.escape(knob.label)}</label>'
                f'<input type="range" id="{knob.name}" name="{knob.name}" min="{low:.10g}" max="{high:.10g}" '
                f'step="{step}" value="{value:.10g}">'
                f'<output id="{knob.name}-value" for="{knob.name}">{value:.10g}</output>'
            )
        options = "".join(
            f'<option value="{name}"{" selected" if values["shuffle"] == name else ""}>{name}</option>'
            for name in ("false", "true", "window")
        )
        rows.append(
            f'<label for="shuffle">shuffle</label><select id="shuffle" name="shuffle">{options}</select><span></span>'
        )
        dataset = html.escape(self.config.dataset)
        body = (
            f"<p>Dataset <code>{dataset}</code> ({self.dataset.index.num_items} samples, "
            f"{len(self.dataset.index.chunks)} chunks). Every change re-runs litstream's real read engine on a "
            "virtual clock (see docs/simulate.md); one run at a time, at most "
            f"{self.max_sessions} read sessions and {self.max_samples} samples per run.</p>"
            f'<form id="knobs" class="knobs">{"".join(rows)}</form>'
            '<p id="status" role="status">loading...</p><div id="results" data-run="0"></div>'
        )
        return page("litstream simulate playground", body, nav=self.nav, script="/static/playground.js")

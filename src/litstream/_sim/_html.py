"""A self-contained HTML page for a :class:`~litstream._sim._report.SimulationReport`: tables and inline SVG.

No script, no style sheet and no font is fetched: the page opens offline. The plots are drawn here as SVG
polylines and rectangles (a few axes and lines; no charting library is needed for that).
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._report import SimulationReport

__all__ = ["figures", "line_chart", "report_html", "stall_chart", "summary_table"]

_W, _H, _PAD = 720, 220, 48
_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
_MAX_LINES = 16
_MAX_BARS = 64


def _fmt(value: float) -> str:
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.3g}{unit}"
    return f"{value:.3g}"


def _axes(title: str, x_max: float, y_max: float, y_label: str) -> list[str]:
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" viewBox="0 0 {_W} {_H}" role="img">',
        f"<title>{html.escape(title)}</title>",
        f'<text x="{_W / 2}" y="14" text-anchor="middle" font-size="13">{html.escape(title)}</text>',
        f'<line x1="{_PAD}" y1="{_H - _PAD}" x2="{_W - 10}" y2="{_H - _PAD}" stroke="#333"/>',
        f'<line x1="{_PAD}" y1="20" x2="{_PAD}" y2="{_H - _PAD}" stroke="#333"/>',
    ]
    for i in range(5):
        x = _PAD + (_W - 10 - _PAD) * i / 4
        y = _H - _PAD - (_H - _PAD - 20) * i / 4
        out.append(
            f'<text x="{x:.1f}" y="{_H - _PAD + 14}" font-size="10" text-anchor="middle">{_fmt(x_max * i / 4)}</text>'
        )
        out.append(
            f'<text x="{_PAD - 4}" y="{y + 3:.1f}" font-size="10" text-anchor="end">{_fmt(y_max * i / 4)}</text>'
        )
    out.append(f'<text x="{_W / 2}" y="{_H - 12}" font-size="11" text-anchor="middle">virtual seconds</text>')
    out.append(
        f'<text x="12" y="{_H / 2}" font-size="11" transform="rotate(-90 12 {_H / 2})" text-anchor="middle">'
        f"{html.escape(y_label)}</text>"
    )
    return out


def _xy(x: float, y: float, x_max: float, y_max: float) -> str:
    px = _PAD + (_W - 10 - _PAD) * (x / x_max if x_max else 0)
    py = _H - _PAD - (_H - _PAD - 20) * (y / y_max if y_max else 0)
    return f"{px:.1f},{py:.1f}"


def line_chart(title: str, series: Sequence[tuple[str, Sequence[Sequence[float]]]], y_label: str) -> str:
    """An SVG chart of ``(name, [[x, y], ...])`` lines (at most 16 drawn)."""
    shown = list(series)[:_MAX_LINES]
    x_max = max((p[0] for _, pts in shown for p in pts), default=1.0) or 1.0
    y_max = max((p[1] for _, pts in shown for p in pts), default=1.0) or 1.0
    out = _axes(title, x_max, y_max, y_label)
    for i, (name, pts) in enumerate(shown):
        colour = _COLOURS[i % len(_COLOURS)]
        path = " ".join(_xy(p[0], p[1], x_max, y_max) for p in pts)
        out.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{path}">'
            f"<title>{html.escape(name)}</title></polyline>"
        )
    out.append("</svg>")
    return "\n".join(out)


def stall_chart(report: SimulationReport) -> str:
    """One row per rank (at most 64): grey while it trains, red while its device waits for data."""
    ranks = report.ranks[:_MAX_BARS]
    row = 10
    height = 30 + row * len(ranks) + 30
    x_max = report.epoch_seconds or 1.0
    span = _W - 10 - _PAD
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{height}" viewBox="0 0 {_W} {height}">',
        "<title>Per-rank timeline</title>",
        f'<text x="{_W / 2}" y="14" text-anchor="middle" font-size="13">Per-rank timeline (red: device waits)</text>',
    ]
    for i, rank in enumerate(ranks):
        y = 24 + i * row
        first = rank.time_to_first_batch or 0.0
        x0 = _PAD + span * first / x_max
        width = span * (rank.end - first) / x_max
        out.append(f'<rect x="{_PAD}" y="{y}" width="{x0 - _PAD:.1f}" height="{row - 2}" fill="#f4b6b6"/>')
        out.append(f'<rect x="{x0:.1f}" y="{y}" width="{max(width, 0):.1f}" height="{row - 2}" fill="#ccc"/>')
        for start, end in rank.stalls:
            sx = _PAD + span * start / x_max
            out.append(
                f'<rect x="{sx:.1f}" y="{y}" width="{max(span * (end - start) / x_max, 0.5):.1f}" '
                f'height="{row - 2}" fill="#d62728"/>'
            )
        if i % 8 == 0:
            out.append(
                f'<text x="{_PAD - 4}" y="{y + row - 3}" font-size="9" text-anchor="end">rank {rank.rank}</text>'
            )
    out.append(
        f'<text x="{_W / 2}" y="{height - 8}" font-size="11" text-anchor="middle">virtual seconds '
        f"(0 to {_fmt(x_max)})</text></svg>"
    )
    return "\n".join(out)


def _table(rows: Sequence[tuple[str, str]]) -> str:
    cells = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
    return f"<table>{cells}</table>"


def summary_table(report: SimulationReport) -> str:
    """The report's headline numbers as an HTML table (every value escaped)."""
    cfg = report.config
    cluster = cfg["cluster"]
    return _table(
        [
            ("dataset", str(cfg["dataset"])),
            (
                "cluster",
                f"{cluster['nodes']} nodes x {cluster['ranks_per_node']} ranks x {cluster['num_workers']} workers",
            ),
            ("epoch time (all epochs)", f"{report.epoch_seconds:.3f} s"),
            (
                "time to first batch (min / mean / max)",
                " / ".join(f"{report.time_to_first_batch[k]:.3f} s" for k in ("min", "mean", "max")),
            ),
            ("samples", str(report.samples)),
            (
                "samples/s (overall / steady state)",
                f"{_fmt(report.samples_per_second)} / {_fmt(report.steady_samples_per_second)}",
            ),
            ("device stall fraction (mean over ranks)", f"{report.stall_fraction:.1%}"),
            ("requests (per second)", f"{report.requests} ({_fmt(report.requests_per_second)}/s)"),
            ("bytes (per second)", f"{_fmt(report.bytes)}B ({_fmt(report.bytes_per_second)}B/s)"),
            (
                "throttled (429/503) / faults / retries / failed",
                f"{report.throttled} / {report.faults} / {report.retries} / {report.exhausted}",
            ),
            ("simulation wall time", f"{report.real_seconds:.2f} s"),
        ]
    )


def figures(report: SimulationReport) -> list[str]:
    """The report's four SVG figures: samples per rank, the per-rank timeline, requests/s, bytes/s."""
    s = report.series
    network = line_chart(
        "Store requests per second",
        [
            ("requests/s", list(zip(s["time"], s["requests"], strict=True))),
            ("throttled/s", list(zip(s["time"], s["throttled"], strict=True))),
        ],
        "requests/s",
    )
    throughput = line_chart("Bytes per second", [("bytes/s", list(zip(s["time"], s["bytes"], strict=True)))], "B/s")
    progress = line_chart(
        "Samples delivered per rank", [(f"rank {r.rank}", r.timeline) for r in report.ranks], "samples"
    )
    return [progress, stall_chart(report), network, throughput]


def report_html(report: SimulationReport) -> str:
    """The report as one HTML page (inline SVG; nothing is loaded from elsewhere)."""
    drawn = "\n".join(figures(report))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>litstream simulation</title>
<style>body{{font-family:sans-serif;max-width:760px;margin:1em auto}}th{{text-align:left;padding-right:1em}}
svg{{display:block;margin:1em 0}}</style></head><body>
<h1>litstream simulation</h1>
<p>Predicted by the real litstream read engine on a virtual clock (see docs/simulate.md for what is modelled).</p>
{summary_table(report)}
{drawn}
</body></html>
"""

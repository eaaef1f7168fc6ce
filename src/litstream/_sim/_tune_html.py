"""A self-contained HTML page for a :class:`~litstream._sim._tune.TuneReport`: a table and one SVG per knob.

Nothing is fetched from elsewhere: the page opens offline. Each knob's figure shows the predicted epoch time of
every value tried (bars, the chosen one highlighted) with the time to first batch marked on each bar.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

from ._html import _fmt

if TYPE_CHECKING:
    from ._tune import Trial, TuneReport

__all__ = ["bar_chart", "tune_html"]

_W, _H, _PAD, _TOP = 720, 230, 56, 24


def bar_chart(title: str, bars: list[tuple[str, float, float, bool]], y_label: str) -> str:
    """An SVG bar chart of ``(label, height, marker, highlighted)`` bars; ``marker`` is drawn as a tick."""
    y_max = max((max(h, m) for _, h, m, _ in bars), default=1.0) or 1.0
    plot_h = _H - _PAD - _TOP
    slot = (_W - 10 - _PAD) / max(1, len(bars))
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" viewBox="0 0 {_W} {_H}" role="img">',
        f"<title>{html.escape(title)}</title>",
        f'<text x="{_W / 2}" y="14" text-anchor="middle" font-size="13">{html.escape(title)}</text>',
        f'<line x1="{_PAD}" y1="{_H - _PAD}" x2="{_W - 10}" y2="{_H - _PAD}" stroke="#333"/>',
        f'<line x1="{_PAD}" y1="{_TOP}" x2="{_PAD}" y2="{_H - _PAD}" stroke="#333"/>',
        f'<text x="12" y="{_H / 2}" font-size="11" transform="rotate(-90 12 {_H / 2})" text-anchor="middle">'
        f"{html.escape(y_label)}</text>",
    ]
    for i in range(5):
        y = _H - _PAD - plot_h * i / 4
        out.append(
            f'<text x="{_PAD - 4}" y="{y + 3:.1f}" font-size="10" text-anchor="end">{_fmt(y_max * i / 4)}</text>'
        )
    for i, (label, height, marker, chosen) in enumerate(bars):
        x = _PAD + slot * i + slot * 0.15
        h = plot_h * height / y_max
        colour = "#2ca02c" if chosen else "#1f77b4"
        out.append(
            f'<rect x="{x:.1f}" y="{_H - _PAD - h:.1f}" width="{slot * 0.7:.1f}" height="{h:.1f}" fill="{colour}">'
            f"<title>{html.escape(label)}: {height:.4g} s</title></rect>"
        )
        my = _H - _PAD - plot_h * marker / y_max
        out.append(
            f'<line x1="{x:.1f}" y1="{my:.1f}" x2="{x + slot * 0.7:.1f}" y2="{my:.1f}" stroke="#d62728" '
            'stroke-width="2"/>'
        )
        out.append(
            f'<text x="{x + slot * 0.35:.1f}" y="{_H - _PAD + 14}" font-size="10" text-anchor="middle">'
            f"{html.escape(label)}</text>"
        )
        out.append(
            f'<text x="{x + slot * 0.35:.1f}" y="{max(_TOP + 10, _H - _PAD - h - 3):.1f}" font-size="9" '
            f'text-anchor="middle">{height:.3g}</text>'
        )
    out.append(
        f'<text x="{_W / 2}" y="{_H - 14}" font-size="11" text-anchor="middle">bars: predicted epoch (s); '
        "red tick: time to first batch; green: recommended</text></svg>"
    )
    return "\n".join(out)


def _label(value: Any) -> str:
    if value is None:
        return "none"
    return _fmt(float(value)) if isinstance(value, (int, float)) and value >= 1000 else str(value)


def _knob_chart(knob: str, trials: list[Trial], chosen: Any) -> str:
    runs = sorted(trials, key=lambda t: float("inf") if t.settings[knob] is None else float(t.settings[knob]))
    bars = [
        (_label(t.settings[knob]), t.epoch_seconds, t.time_to_first_batch, t.settings[knob] == chosen) for t in runs
    ]
    return bar_chart(f"{knob}: predicted epoch time", bars, "virtual seconds")


def _row(cells: list[str], head: bool = False) -> str:
    tag = "th" if head else "td"
    return "<tr>" + "".join(f"<{tag}>{html.escape(c)}</{tag}>" for c in cells) + "</tr>"


def tune_html(report: TuneReport) -> str:
    """The tuning report as one HTML page (inline SVG; nothing is loaded from elsewhere)."""
    base, best = report.baseline, report.best
    if report.recommended:
        advice = ", ".join(f"{k} = {_label(v)} (now {_label(base.settings[k])})" for k, v in report.recommended.items())
    else:
        advice = "keep the current settings (no change gains more than the tolerance)"
    summary = "".join(
        [
            "<table>",
            _row(["", "current", "recommended"], head=True),
            _row(["epoch (virtual s)", f"{base.epoch_seconds:.3f}", f"{best.epoch_seconds:.3f}"]),
            _row(["time to first batch (s)", f"{base.time_to_first_batch:.3f}", f"{best.time_to_first_batch:.3f}"]),
            _row(["device stall", f"{base.stall_fraction:.1%}", f"{best.stall_fraction:.1%}"]),
            _row(
                [
                    "steady samples/s",
                    _fmt(base.steady_samples_per_second),
                    _fmt(best.steady_samples_per_second),
                ]
            ),
            *(_row([k, _label(base.settings[k]), _label(best.settings[k])]) for k in base.settings),
            "</table>",
        ]
    )
    charts = [_knob_chart(knob, runs, best.settings[knob]) for knob, runs in report.sweeps.items()]
    trials = "".join(
        [
            "<table>",
            _row(["knob", "value", "epoch (s)", "first batch (s)", "stall", "429s", "sim wall (s)"], head=True),
            *(
                _row(
                    [
                        t.knob,
                        _label(t.value),
                        f"{t.epoch_seconds:.3f}",
                        f"{t.time_to_first_batch:.3f}",
                        f"{t.stall_fraction:.1%}",
                        str(t.throttled),
                        f"{t.real_seconds:.2f}",
                    ]
                )
                for t in report.trials
            ),
            "</table>",
        ]
    )
    notes = "".join(f"<li>{html.escape(k)} not swept: {html.escape(v)}</li>" for k, v in report.not_swept.items())
    if report.skipped:
        notes += f"<li>not run (budget spent) or failed: {html.escape(', '.join(report.skipped))}</li>"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>litstream simulate tune</title>
<style>body{{font-family:sans-serif;max-width:760px;margin:1em auto}}th,td{{text-align:left;padding-right:1em}}
svg{{display:block;margin:1em 0}}</style></head><body>
<h1>litstream simulate tune</h1>
<p>Dataset {html.escape(str(report.config["dataset"]))}. Predicted speed-up: <b>{report.speedup:.2f}x</b>
({base.epoch_seconds:.3f} s to {best.epoch_seconds:.3f} s per epoch). Recommendation: {html.escape(advice)}.</p>
{summary}
<ul>{notes}</ul>
{"".join(charts)}
<h2>Every trial ({len(report.trials)} simulations, {report.real_seconds:.1f} s)</h2>
{trials}
</body></html>
"""

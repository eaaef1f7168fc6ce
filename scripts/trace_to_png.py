"""Render a Chrome trace JSON (``litstream.debugger.enable_tracer``'s output) as a timeline PNG with matplotlib.

A stand-in for a Perfetto screenshot where no browser is at hand: one row per (process, thread or
lane) track, one bar per complete event (``"ph": "X"``), coloured by event name; instant events are
drawn as ticks. Time runs from the first event, in milliseconds.

Usage::

    python scripts/trace_to_png.py TRACE.json OUT.png [--title TEXT] [--from-event NAME]

``--from-event download`` starts the time axis at the first ``download`` event (earlier parts of
longer bars are cut off), to look at the steady state past a long start-up.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

_PALETTE = {
    "download": "#1f77b4",
    "cache write": "#aec7e8",
    "read": "#2ca02c",
    "decompress": "#bcbd22",
    "decode": "#98df8a",
    "delete": "#d62728",
    "lock": "#7f7f7f",
    "batch": "#9467bd",
    "dataloader": "#c5b0d5",
    "write chunk": "#ff7f0e",
    "upload": "#ffbb78",
}


def _tracks(events: list[dict[str, Any]]) -> tuple[list[tuple[Any, Any]], dict[tuple[Any, Any], str]]:
    processes = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e.get("ph") == "M" and e["name"] == "thread_name"}  # fmt: skip

    def order(track: tuple[Any, Any]) -> tuple[bool, str, Any]:  # the main process first
        name = processes.get(track[0], "")
        return not name.startswith("main"), name, track[1]

    used = sorted({(e["pid"], e["tid"]) for e in events if e.get("ph") in ("X", "i")}, key=order)
    labels = {k: f"{processes.get(k[0], k[0])} / {threads.get(k, k[1])}" for k in used}
    return used, labels


def render(trace: Path, out: Path, title: str | None = None, from_event: str | None = None) -> Path:
    """Draw ``trace`` into ``out`` (PNG) and return ``out``; ``from_event``: see the module docstring."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    events: list[dict[str, Any]] = json.loads(trace.read_text(encoding="utf-8"))["traceEvents"]
    timed = [e for e in events if e.get("ph") in ("X", "i")]
    if not timed:
        raise SystemExit(f"{trace} holds no complete or instant events")
    start = min(e["ts"] for e in timed)
    if from_event is not None:
        start = min(e["ts"] for e in timed if e["name"] == from_event)
        timed = [e for e in timed if e["ts"] + e.get("dur", 0) >= start]
        for e in timed:
            if e["ts"] < start:
                e["dur"], e["ts"] = e.get("dur", 0) - (start - e["ts"]), start
    tracks, labels = _tracks(events)
    row = {k: i for i, k in enumerate(tracks)}
    bars: dict[str, list[tuple[float, float, int]]] = defaultdict(list)
    for e in timed:
        y = row[(e["pid"], e["tid"])]
        if e["ph"] == "X":
            bars[e["name"]].append(((e["ts"] - start) / 1000, max(e["dur"] / 1000, 0.02), y))
    fig, ax = plt.subplots(figsize=(14, 0.36 * len(tracks) + 1.6), dpi=110)
    drawn = sorted(((width, x, y, name) for name, spans in bars.items() for x, width, y in spans), reverse=True)
    for width, x, y, name in drawn:  # longest first: a short span on the same track stays visible on top
        colour = _PALETTE.get(name, "#17becf")
        ax.broken_barh([(x, width)], (y - 0.38, 0.76), facecolors=colour, edgecolors="black", linewidth=0.2)
    for e in timed:
        if e["ph"] == "i":
            y = row[(e["pid"], e["tid"])]
            ax.plot([(e["ts"] - start) / 1000] * 2, [y - 0.45, y + 0.45], color="black", linewidth=1)
    ax.set_yticks(range(len(tracks)), [labels[k] for k in tracks], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(f"time since the first {from_event or ''} event (ms)".replace("  ", " "))
    ax.grid(axis="x", linestyle=":", linewidth=0.5)
    handles = [Patch(facecolor=_PALETTE.get(n, "#17becf"), edgecolor="black", label=n) for n in sorted(bars)]
    ax.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=min(len(handles), 11),
              fontsize=8, frameon=False)  # fmt: skip
    fig.suptitle(title or f"{trace.name}: rendering of the trace JSON (not a Perfetto screenshot)", fontsize=10)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--title")
    parser.add_argument("--from-event")
    args = parser.parse_args()
    print(render(args.trace, args.out, args.title, args.from_event))


if __name__ == "__main__":
    main()

"""The summary of ``run_all.py``: rows per configuration, the markdown tables and the chart.

A row compares litstream with LitData (the ratio and the issue's target), shows the other peers'
throughput (MosaicML streaming, WebDataset: each on its own format of the same samples), and
litstream's throughput as a fraction of the configuration's ceiling measured in the same run
(``bench/_ceiling.py`` locally, obstore's GETs alone remotely).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

PEERS = ("mosaic", "webdataset")
LABELS = {"litstream": "litstream", "litdata": "LitData", "mosaic": "MosaicML streaming (MDS)",
          "webdataset": "WebDataset"}  # fmt: skip
CONFIGS = (
    "optimize", "local_dataset", "local_loader_w0", "local_loader_w2", "remote_cold", "remote_stream",
    "remote_cold_latency20ms",
    "async_asyncio", "async_trio", "tokens_block2048", "arrow_litdata_default", "arrow_litstream_default",
    "arrow_litstream_pytree", "arrow_litstream_arrow",
)  # fmt: skip
TARGETS = {
    "optimize": 2.0,
    "local_dataset": 3.0,
    "local_loader_w0": 2.0,
    "local_loader_w2": 2.0,
    "remote_cold": 2.0,
    "remote_cold_latency20ms": 3.0,
    "tokens_block2048": 2.0,
    "arrow_litdata_default": 1.0,
    "arrow_litstream_default": 3.0,  # issue 30: the scalar rows in litstream's own (default) layout
}
CEILING_OF = {
    "optimize": "ceiling_write",
    "local_dataset": "ceiling_samples",
    "local_loader_w0": "ceiling_columns",
    "local_loader_w2": "ceiling_columns",
    "async_asyncio": "ceiling_samples",
    "async_trio": "ceiling_samples",
    "tokens_block2048": "ceiling_tokens",
    "remote_cold": "remote_raw_get",
    "remote_stream": "remote_raw_get",
    "remote_cold_latency20ms": "remote_raw_get_latency20ms",
}
CEILING_TARGETS = {  # issue 30: litstream's throughput as a fraction of its configuration's ceiling
    "local_dataset": 0.75,
    "local_loader_w0": 0.6,
    "local_loader_w2": 0.5,
    "tokens_block2048": 0.6,
    "remote_cold": 0.9,
    "remote_stream": 0.9,
    "remote_cold_latency20ms": 0.9,
}
WORKER_CONFIGS = ("optimize", "local_loader_w2")


def total_rss(record: dict[str, Any]) -> float:
    """Peak RSS in MiB: the process, plus its largest worker where the configuration has workers.

    Elsewhere a child can only be a short-lived helper (importing trio starts one), whose
    ``ru_maxrss`` counts the parent's pages it shared for an instant; it is left out there."""
    own = float(record["peak_rss_mb"])
    return own + float(record["peak_rss_children_mb"]) if record.get("config") in WORKER_CONFIGS else own


def summarize(
    results: dict[str, dict[str, dict[str, Any]]], ceilings: dict[str, dict[str, Any]], expected: str | None
) -> list[dict[str, Any]]:
    rows = []
    for config in CONFIGS:
        a = results.get("litstream", {}).get(config)
        b = results.get("litdata", {}).get(config)
        if a is None or b is None:
            continue
        row: dict[str, Any] = {"config": config, "litstream": a, "litdata": b}
        row["peers"] = {p: results[p][config] for p in PEERS if config in results.get(p, {})}
        if "seconds" in a and "seconds" in b:
            row["speedup"] = b["seconds"] / a["seconds"]  # = throughput ratio litstream / LitData
            if a.get("ttfb_s") is not None and b.get("ttfb_s"):
                row["ttfb_ratio"] = a["ttfb_s"] / b["ttfb_s"]
            rss_a, rss_b = total_rss(a), total_rss(b)
            row["rss_ratio"] = rss_a / rss_b if rss_b else None
            row["checksums_equal"] = a.get("checksum") == b.get("checksum")
            if expected is not None and not config.startswith(("tokens", "arrow")):
                row["checksum_expected"] = a.get("checksum") == expected == b.get("checksum")
                peers_ok = [r["checksum"] == expected for r in row["peers"].values() if r.get("checksum")]
                row["peer_checksums_expected"] = all(peers_ok)
        ceiling = ceilings.get(CEILING_OF.get(config, ""), {})
        if "throughput" in ceiling and "throughput" in a:
            row["ceiling"] = CEILING_OF[config]
            row["ceiling_throughput"] = ceiling["throughput"]
            row["of_ceiling"] = a["throughput"] / ceiling["throughput"]
        row["target"] = TARGETS.get(config)
        rows.append(row)
    return rows


def cpu_per_1k(record: dict[str, Any] | None) -> str:
    """CPU seconds (user + system, every process the library started) per 1,000 items, or a dash."""
    value = (record or {}).get("cpu_per_1k_s")
    return "—" if value is None else f"{value * 1e3:.1f}"


def _rate(record: dict[str, Any] | None) -> str:
    if record is None:
        return "—"
    if "throughput" in record:
        return f"{record['throughput']:,.0f}"
    return "not run" if record.get("skipped") else "failed"


def markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    peers = [p for p in PEERS if any(p in r.get("peers", {}) for r in rows)]
    head = " | ".join(f"{LABELS[p]} items/s" for p in peers)
    lines = [
        "| configuration | litstream items/s | LitData items/s | ratio litstream/LitData (target) | "
        + (f"{head} | " if peers else "")
        + "CPU ms per 1k samples, all processes (litstream / LitData) | "
        "litstream / ceiling (ceiling items/s) | first item/batch, ms (litstream / LitData) | "
        "peak RSS MiB, main+workers (litstream / LitData) | checksums equal |",
        "|---|---:|---:|---:|" + "---:|" * len(peers) + "---:|---:|---:|---:|:---:|",
    ]
    for row in rows:
        a, b = row["litstream"], row["litdata"]
        peer_cells = "".join(f" {_rate(row['peers'].get(p))} |" for p in peers)
        if "speedup" not in row:
            why = a.get("skipped") or a.get("error", "")[-120:] or b.get("skipped") or b.get("error", "")[-120:]
            lines.append(f"| {row['config']} | — | — | not run: {why.splitlines()[-1] if why else ''} |"
                         f"{peer_cells} | | | | |")  # fmt: skip
            continue
        target = f" (≥ {row['target']:g}x)" if row.get("target") else ""
        met = "" if not row.get("target") else (" ✓" if row["speedup"] >= row["target"] else " ✗")
        ceiling = "—"
        if "of_ceiling" in row:
            goal = CEILING_TARGETS.get(row["config"])
            mark = "" if goal is None else (" ✓" if row["of_ceiling"] >= goal else " ✗") + f" (≥ {goal:.0%})"
            ceiling = f"{row['of_ceiling']:.0%}{mark} ({row['ceiling_throughput']:,.0f})"
        ttfb = (
            f"{a['ttfb_s'] * 1e3:.1f} / {b['ttfb_s'] * 1e3:.1f}"
            if a.get("ttfb_s") is not None and b.get("ttfb_s") is not None
            else "—"
        )
        rss = f"{total_rss(a):.0f} / {total_rss(b):.0f}"
        same = "yes" if row["checksums_equal"] and row.get("peer_checksums_expected", True) else "NO"
        lines.append(
            f"| {row['config']} | {a['throughput']:,.0f} | {b['throughput']:,.0f} | "
            f"**{row['speedup']:.2f}x**{target}{met} |{peer_cells} {cpu_per_1k(a)} / {cpu_per_1k(b)} | {ceiling} | "
            f"{ttfb} | {rss} | {same} |"
        )
    lines.append("")
    versions = ", ".join(f"{LABELS[k]} {v}" for k, v in meta["versions"].items())
    lines.append(
        f"{versions}; {meta['samples']:,} samples; best of {meta['repeats']}; load average "
        f"{meta['load_start']} at start, {meta['load_end']} at end; {meta['started']} UTC."
    )
    if any(r["config"] == "remote_stream" for r in rows):
        lines.append("remote_stream: litstream with cache_chunks=False (nothing written to its cache); LitData has "
                     "no such mode, its figures are its remote_cold read's.")  # fmt: skip
    for peer, why in meta.get("peers_missing", {}).items():
        lines.append(f"{LABELS[peer]} not run: {why}")
    return "\n".join(lines)


def _server_reads(record: dict[str, Any]) -> str:
    """MB the S3 server read from disk during a remote run (page-cache misses), or a dash."""
    return "—" if "disk_read_bytes_server" not in record else f"{record['disk_read_bytes_server'] / 1e6:,.0f}"


def scale_table(scaled: list[dict[str, Any]]) -> str:
    """1x against Nx: items/s, CPU per sample, peak RSS, and what the S3 server read from its disk, per
    library and configuration."""
    lines = [
        "| configuration | library | items/s 1x | items/s Nx | Nx / 1x | CPU ms per 1k 1x | CPU ms per 1k Nx | "
        "peak RSS MiB 1x | peak RSS MiB Nx | Nx / 1x | server disk reads MB 1x / Nx |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for entry in scaled:
        one, big = entry["1x"], entry["Nx"]
        if "throughput" not in one or "throughput" not in big:
            lines.append(
                f"| {entry['config']} | {LABELS[entry['library']]} | {_rate(one)} | {_rate(big)} | | | | | | | |"
            )
            continue
        rss1, rssn = total_rss(one), total_rss(big)
        lines.append(
            f"| {entry['config']} | {LABELS[entry['library']]} | {one['throughput']:,.0f} | "
            f"{big['throughput']:,.0f} | {big['throughput'] / one['throughput']:.2f} | {cpu_per_1k(one)} | "
            f"{cpu_per_1k(big)} | {rss1:.0f} | {rssn:.0f} | "
            f"{rssn / rss1:.2f} | {_server_reads(one)} / {_server_reads(big)} |"
        )
    return "\n".join(lines).replace("Nx", f"{scaled[0]['scale']}x") if scaled else ""


def cpu_table(results: dict[str, dict[str, dict[str, Any]]], ceilings: dict[str, dict[str, Any]]) -> str:
    """CPU seconds of each remote run's timed region: the reading process (every thread), the S3 server
    and the latency proxy (measured over the whole case process), and the cores they kept busy. On a
    2-core machine a run whose processes need ~2 cores is CPU-bound: it cannot go faster than its CPU."""
    lines = [
        "| configuration | reader | wall s | reader CPU s | server CPU s | proxy CPU s | cores busy |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    rows = []
    for config in ("remote_cold", "remote_stream", "remote_cold_latency20ms"):
        raw = CEILING_OF[config]
        libs = ("litstream",) if config == "remote_stream" else ("litstream", "litdata")  # LitData: remote_cold's
        rows += [(config, LABELS[lib], results.get(lib, {}).get(config, {})) for lib in libs]
        if config != "remote_stream":
            rows.append((config, "obstore GETs alone (ceiling)", ceilings.get(raw, {})))
    for config, reader, record in rows:
        if "cpu_s" not in record or "seconds" not in record:
            continue
        server, proxy = record.get("cpu_s_server", 0.0), record.get("cpu_s_proxy")
        total = record["cpu_s"] + server + (proxy or 0.0)
        lines.append(
            f"| {config} | {reader} | {record['seconds']:.3f} | {record['cpu_s']:.2f} | {server:.2f} | "
            f"{'—' if proxy is None else f'{proxy:.2f}'} | {total / record['seconds']:.2f} |"
        )
    return "\n".join(lines) if len(lines) > 2 else ""


def chart(rows: list[dict[str, Any]], path: Path, meta: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    done = [r for r in rows if "speedup" in r]
    libs = ["litstream", "litdata", *[p for p in PEERS if any(p in r["peers"] for r in done)]]
    series = {
        lib: [
            float((r[lib] if lib in ("litstream", "litdata") else r["peers"].get(lib, {})).get("throughput", 0.0))
            for r in done
        ]
        for lib in libs
    }
    ceilings = [float(r.get("ceiling_throughput", 0.0)) for r in done]
    height = 0.8 / len(libs)
    fig, ax = plt.subplots(figsize=(12, 1.0 + 0.75 * len(done)))
    ys = list(range(len(done)))
    for k, lib in enumerate(libs):
        offset = -0.4 + height * (k + 0.5)
        label = f"{LABELS[lib]} {meta['versions'].get(lib, '')}"
        ax.barh([y + offset for y in ys], series[lib], height=height, label=label)
    ax.scatter(ceilings, ys, marker="|", s=400, color="black", label="ceiling (same run)", zorder=3)
    top = max([*ceilings, *(v for s in series.values() for v in s)]) or 1.0
    for y, r in enumerate(done):
        right = max([ceilings[y], *(s[y] for s in series.values())])
        ax.text(right + top * 0.01, y, f"{r['speedup']:.2f}x LitData", va="center", fontsize=8)
    ax.set_yticks(ys, [r["config"] for r in done])
    ax.invert_yaxis()
    ax.set_xlim(0, top * 1.18)
    ax.set_xlabel("items per second (linear scale)")
    ax.set_title(f"Throughput, {meta['started']} UTC, {meta['machine']['cpus']} shared cores, load average "
                 f"{meta['load_start'].split()[0]} at start")  # fmt: skip
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.06), ncol=3, frameon=False, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)

"""The playground page's script, served as ``/static/playground.js`` (the page's policy runs no inline script).

On load, and after any slider or select change (debounced), it posts the knob values to ``/api/simulate`` and
replaces ``#results`` with the HTML the server drew (the summary table and the SVG figures, escaped there).
One request at a time: a change made meanwhile is sent when the answer arrives. ``#results``'s
``data-run`` counts the results shown and ``#status``'s ``data-state`` is ``running``, ``done`` or ``error``,
so a test (or a user's script) can wait on the page instead of on time.
"""

from __future__ import annotations

__all__ = ["PLAYGROUND_JS"]

PLAYGROUND_JS = r"""
"use strict";
(function () {
  const form = document.getElementById("knobs");
  const results = document.getElementById("results");
  const status = document.getElementById("status");
  let inflight = false;
  let pending = false;
  let timer = null;

  function values() {
    const out = {};
    for (const el of form.querySelectorAll("input[type=range]")) {
      out[el.name] = Number(el.value);
      document.getElementById(el.name + "-value").textContent = el.value;
    }
    out.shuffle = form.querySelector("select[name=shuffle]").value;
    return out;
  }

  function show(state, text) {
    status.dataset.state = state;
    status.className = state === "error" ? "error" : "";
    status.textContent = text;
  }

  function schedule(delay) {
    clearTimeout(timer);
    timer = setTimeout(run, delay);
  }

  async function run() {
    if (inflight) { pending = true; return; }
    inflight = true;
    pending = false;
    show("running", "simulating...");
    let retry = 0;
    try {
      const response = await fetch("/api/simulate", {
        method: "POST",
        headers: {"Content-Type": "application/json"},
        body: JSON.stringify(values()),
      });
      const data = await response.json();
      if (response.ok) {
        results.innerHTML = data.html;
        results.dataset.run = String(Number(results.dataset.run || "0") + 1);
        const s = data.summary;
        show("done", "epoch " + s.epoch_seconds.toFixed(2) + " s (virtual), first batch after " +
          s.time_to_first_batch.toFixed(3) + " s, device stalled " + (100 * s.stall_fraction).toFixed(1) +
          " %" + (data.cached ? " (kept result)" : ", simulated in " + s.real_seconds.toFixed(2) + " s"));
      } else if (response.status === 429) {
        pending = true;
        retry = 1000;
        show("running", "another simulation is running; waiting...");
      } else {
        show("error", data.error || ("HTTP " + response.status));
      }
    } catch (err) {
      show("error", "the request failed: " + err);
    } finally {
      inflight = false;
      if (pending) { schedule(retry || 100); }
    }
  }

  form.addEventListener("submit", (event) => event.preventDefault());
  form.addEventListener("input", () => { values(); schedule(150); });
  form.addEventListener("change", () => schedule(150));
  run();
})();
"""

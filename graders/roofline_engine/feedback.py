"""The roofline track's feedback: the worker's roofline with every prediction and measurement on it, and a table
of them, after the last graded operation (`RooflineFeedback`, among ``GenerateFeedback.preprocessors`` in
``nbgrader_config.py``).

Read from what the trusted grader stored in each graded cell (``metadata.workshop.results``: `grade.predict`'s
``roofline`` and ``worker``), as the timed tracks' tables are (`gradebook.feedback`). Each operation is a
measured point (its FLOPs over its measured time, at the key's intensity) and a predicted one (its FLOPs over the
predicted time, at the intensity the student gave), joined by a line; the roofs are the worker's memory bandwidth
and its peaks (FP32, and bf16 where the grader knows it). matplotlib's Agg backend: no display needed.
"""
from __future__ import annotations

import base64
import html
import io

from nbconvert.preprocessors import Preprocessor
from nbformat import NotebookNode
from nbformat.v4 import new_output
from traitlets import Bool

from graders.autograde import graded_cells, stored_results
from graders.roofline_engine.operations import PEAKS

ROOFS = ("fp32", "bf16")   # the peaks drawn as roofs


def graded_operations(nb: NotebookNode) -> list[tuple[NotebookNode, dict]]:
    """Each graded cell whose result holds a graded prediction, with that result."""
    return [(cell, r) for cell in graded_cells(nb) for r in stored_results(cell) if r.get("roofline")]


def roofline_png(results: list[dict]) -> bytes:
    """The worker's roofline (log-log: FLOP/s against FLOP per byte) with each operation's predicted and measured
    point, as a PNG. A prediction is drawn as it stands on this worker: its time over the measurement's translation
    to the reference GPU (``scale``), so that the distance between the two points is the ratio that was graded."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    worker = results[0]["worker"]
    rows = [r["roofline"] for r in results]
    measured = [(g["intensity"], g["flops"] / g["measured_s"]) for g in rows]
    predicted = [(g["answer"]["intensity"], g["flops"] * g.get("scale", 1.0) / (g["answer"]["time_us"] * 1e-6))
                 for g in rows]
    xs = [x for x, _ in measured + predicted]
    grid = np.logspace(np.log10(min(xs) / 3), np.log10(max(xs) * 3), 200)
    fig, ax = plt.subplots(figsize=(9, 6))
    for name in ROOFS:
        peak = worker["peaks"].get(name)
        if peak:
            ax.plot(grid, np.minimum(grid * worker["bandwidth"], peak), linewidth=1.5,
                    label=f"roof: {worker['bandwidth'] / 1e12:.2f} TB/s, {PEAKS[name]} {_tera(peak)} TFLOP/s")
    for g, (mx, my), (px, py) in zip(rows, measured, predicted):
        right = g["time_share"] == 1
        ax.plot([px, mx], [py, my], color="gray", linewidth=0.6)
        ax.scatter([mx], [my], color="tab:blue", zorder=3)
        ax.scatter([px], [py], facecolors="none", edgecolors="tab:green" if right else "tab:red", zorder=3)
        ax.annotate(g["op"], (mx, my), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.scatter([], [], color="tab:blue", label="measured")
    ax.scatter([], [], facecolors="none", edgecolors="tab:green", label="your prediction (full time points)")
    ax.scatter([], [], facecolors="none", edgecolors="tab:red", label="your prediction (time further off)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel("FLOP / s")
    ax.grid(True, which="major", linewidth=0.3)
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title(f"Your predictions and the measurements on {worker['gpu']} (a launch alone "
                 f"{worker['launch_s'] * 1e6:.1f} µs)", fontsize=10)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    return buffer.getvalue()


def table(results: list[dict]) -> str:
    """Every graded operation as a row: the regimes, the intensities, the predicted and measured times, the
    measurement translated to the reference GPU (what the prediction is graded against), the ratio, the points, as
    HTML."""
    head = ["operation", "your regime", "the key's", "the measurement shows", "your intensity", "the key's",
            "your time", "measured", "on the reference GPU", "ratio", "points"]
    rows = []
    for r in results:
        g = r["roofline"]
        rows.append([g["op"], g["answer"]["regime"], g["regime"], g["shown"], f"{g['answer']['intensity']:.4g}",
                     f"{g['intensity']:.4g}", f"{g['answer']['time_us']:,.4g} µs", f"{g['measured_s'] * 1e6:,.4g} µs",
                     f"{g['translated_s'] * 1e6:,.4g} µs", f"{g['ratio']:.2f}x",
                     f"{g['points']:g} / {g['max_points']:g}"])
    cells = "".join("<tr>" + "".join(f"<td style='text-align:left'>{html.escape(v)}</td>" for v in row) + "</tr>"
                    for row in rows)
    header = "<tr>" + "".join(f"<th style='text-align:left'>{html.escape(h)}</th>" for h in head) + "</tr>"
    caption = f"Your predictions against the measurements on {worker_figures(results[0]['worker'])}"
    return f"<table class='workshop-roofline'><caption>{html.escape(caption)}</caption>{header}{cells}</table>"


def worker_figures(worker: dict) -> str:
    """The worker as the grader saw it: its GPU, bandwidth, peaks, L2, SMs and launch overhead."""
    peaks = ", ".join(f"{PEAKS[name]} {_tera(rate)} TFLOP/s" for name, rate in worker["peaks"].items())
    return (f"{worker['gpu']} (memory {worker['bandwidth'] / 1e12:.3g} TB/s, {peaks}, L2 {worker['l2_bytes'] >> 20} "
            f"MiB, {worker['sms']} SMs, a launch alone {worker['launch_s'] * 1e6:.1f} µs, "
            f"{worker['stream_s'] * 1e6:.1f} µs more for each in a stream)")


def _tera(rate: float) -> str:
    return f"{rate / 1e12:,.0f}" if rate >= 1e14 else f"{rate / 1e12:.3g}"


class RooflineFeedback(Preprocessor):
    """Adds the roofline figure and the table after the last graded operation of a roofline notebook; leaves any
    other notebook as it is."""

    enabled = Bool(True, help="Whether nbgrader runs this preprocessor").tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: dict):
        graded = graded_operations(nb)
        if graded:
            results = [r for _, r in graded]
            last = graded[-1][0]
            last.outputs = last.get("outputs", []) + [
                new_output("display_data", data={"image/png": base64.b64encode(roofline_png(results)).decode(),
                                                 "text/plain": "your predictions on the worker's roofline"}),
                new_output("display_data", data={"text/html": table(results),
                                                 "text/plain": "your predictions against the measurements"})]
        return nb, resources

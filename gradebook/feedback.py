"""Feedback with the numbers: what ``nbgrader generate_feedback`` adds for kernels whose speed was graded.

`PerformanceFeedback` (configured in ``nbgrader_config.py`` among ``GenerateFeedback.preprocessors``) reads
what the trusted grader stored in each graded cell (``metadata.workshop.results``, `graders.autograde`) and
adds, under every cell whose test timed a kernel, a table: the kernel's time and throughput, the baseline's,
the ratio and the ratios for no and for full speed points, the GPU it ran on, its hardware ceiling and how
many timed launches were checked. Where a notebook timed two kernels or more (a ladder: the transpose steps,
the GEMM worklog), a chart follows the last of them: each kernel's ratio to the baseline beside the ratio
that earns full marks (set from the reference's own measured ratio). Both are ordinary notebook outputs, so
nbgrader's HTML export embeds them (the chart as a PNG).
"""
from __future__ import annotations

import base64
import html
import io

from nbformat import NotebookNode
from nbformat.v4 import new_output
from nbgrader.preprocessors import NbGraderPreprocessor

from graders.autograde import graded_cells, stored_results


def timed_results(cell: NotebookNode) -> list[dict]:
    """The results stored in a graded cell that carry a timing."""
    return [r for r in stored_results(cell) if r.get("timing")]


def _rate(per_second: float, unit: str) -> str:
    return f"{per_second / 1e9:,.0f} G{unit}/s"


def table(result: dict) -> str:
    """One timed kernel as an HTML table."""
    timing, curve = result["timing"], result.get("curve", {})
    unit, kernel, base = timing["work_unit"], timing["kernel"], timing["baseline"]
    rows = [
        ("status", result["status"]),
        ("your kernel", f"{kernel['median_s'] * 1e3:.4f} ms, {_rate(kernel['throughput'], unit)} "
                        f"(median of {kernel['samples']} launches)"),
        (base["name"], f"{base['median_s'] * 1e3:.4f} ms, {_rate(base['throughput'], unit)}"),
        ("ratio", f"{timing['ratio']:.3f} (no speed points at {curve.get('floor', '?')}, full at "
                  f"{curve.get('target', '?')})"),
        ("shape", " x ".join(map(str, timing["shape"]))),
        ("GPU", result.get("environment", {}).get("gpu", "?")),
    ]
    if timing.get("ceiling"):
        rows.append(("hardware ceiling", _rate(timing["ceiling"]["throughput"], unit)))
    if "verified_launches" in timing:
        rows.append(("timed launches checked", str(timing["verified_launches"])))
    body = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th><td style='text-align:left'>"
                   f"{html.escape(str(v))}</td></tr>" for k, v in rows)
    return f"<table class='workshop-timing'><caption>{html.escape(result['test'])}</caption>{body}</table>"


def chart_png(results: list[dict]) -> bytes:
    """Each kernel's ratio to its baseline as bars, each step's full-marks ratio as a marker, as a PNG."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r["test"] for r in results]
    ratios = [r["timing"]["ratio"] for r in results]
    targets = [r.get("curve", {}).get("target") for r in results]
    fig, ax = plt.subplots(figsize=(max(5.0, 0.9 * len(names) + 2), 3.6))
    bars = ax.bar(range(len(names)), ratios, color=["tab:blue" if r["status"] == "ok" else "tab:gray"
                                                     for r in results], label="your kernel")
    ax.scatter([i for i, t in enumerate(targets) if t], [t for t in targets if t], marker="_", s=600,
               color="black", label="full marks (from the reference)")
    for bar, ratio in zip(bars, ratios):
        ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height(), f"{ratio:.2f}", ha="center", va="bottom",
                fontsize=8)
    ax.axhline(1.0, color="tab:red", linestyle="--", linewidth=1, label=results[0]["timing"]["baseline"]["name"])
    ax.set_xticks(range(len(names)), names, rotation=20, ha="right")
    ax.set_ylabel("speed / baseline")
    ax.set_ylim(0, max([*ratios, *[t for t in targets if t], 1.0]) * 1.2)
    ax.legend(fontsize=8, loc="upper left")
    gpu = results[0].get("environment", {}).get("gpu", "")
    ax.set_title(f"Your kernels against the baseline{' on ' + gpu if gpu else ''}", fontsize=10)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    return buffer.getvalue()


class PerformanceFeedback(NbGraderPreprocessor):
    """Adds each timed kernel's table under its graded cell, and the ladder's chart after the last one."""

    def preprocess(self, nb: NotebookNode, resources: dict):
        timed = [(cell, timed_results(cell)) for cell in graded_cells(nb)]
        timed = [(cell, results) for cell, results in timed if results]
        for cell, results in timed:
            cell.outputs = cell.get("outputs", []) + [
                new_output("display_data", data={"text/html": table(r), "text/plain": r["test"]})
                for r in results]
        ladder = [r for _, results in timed for r in results]
        if len(ladder) >= 2:
            png = base64.b64encode(chart_png(ladder)).decode()
            timed[-1][0].outputs.append(new_output("display_data", data={
                "image/png": png, "text/plain": "the speed of your kernels against the baseline"}))
        return nb, resources

"""Feedback with the numbers: what ``nbgrader generate_feedback`` adds for kernels whose speed was graded.

`PerformanceFeedback` (configured in ``nbgrader_config.py`` among ``GenerateFeedback.preprocessors``) reads
what the trusted grader stored in each graded cell (``metadata.workshop.results``, `graders.autograde`) and
adds, under every cell whose test timed a kernel, a table: the kernel's time and throughput, the baseline's,
the ratio and the ratios for no and for full speed points, the GPU it ran on, its hardware ceiling, the
instruction's own rate where the grader measured one (mma.sync; reported, not scored) and how many timed
launches were checked. Where a notebook timed two kernels or more (a ladder: the transpose steps, the GEMM
worklog), a chart follows the last of them: each kernel's ratio to the baseline beside the ratio that earns
full marks (set from the reference's own measured ratio). Where kernels of a kind that names its number format
were timed (the tensor-core track's precision menu: bf16, fp16, TF32, fp8), a precision table follows the
chart: per kernel its format, time, throughput, the baseline's throughput in that format, the ratio, its share
of the instruction ceiling, and the largest errors its correct checks measured. Where a timed kernel is a rung of
the abstraction ladder (`graders.ladder`: the fp16 GEMM in CUDA C++, Triton, CUTLASS and TileLang), the ladder's
table and chart follow: the kernel's lines of code, TFLOP/s and share of cuBLAS beside the other rungs' references
from the newest ladder record. All are ordinary notebook outputs, so nbgrader's HTML export embeds them (the charts
as PNGs).

`FeedbackExporter` (``GenerateFeedback.exporter_class``) writes nbgrader's feedback page with each graded cell
named in its summary (`cell_names`: "Puzzle 1: Map — correct on fresh inputs and more sizes", where nbgrader writes
"Test cell").
"""
from __future__ import annotations

import base64
import html
import io
import re
from pathlib import Path

import nbgrader
from jinja2 import FileSystemLoader, PrefixLoader
from nbconvert.exporters import HTMLExporter
from nbconvert.preprocessors import Preprocessor
from nbformat import NotebookNode
from nbformat.v4 import new_output
from traitlets import Bool, default

from graders.autograde import graded_cells, stored_results
from graders.ladder import chart_png as ladder_chart
from graders.ladder import latest_record, rows, rung_of
from graders.ladder import table_html as ladder_table
from graders.notebook import graded_what

TEMPLATES = Path(__file__).parent / "templates"
NBGRADER_TEMPLATES = Path(nbgrader.__file__).parent / "server_extensions" / "formgrader" / "templates"


def timed_results(cell: NotebookNode) -> list[dict]:
    """The results stored in a graded cell that carry a timing."""
    return [r for r in stored_results(cell) if r.get("timing")]


def _rate(per_second: float, unit: str) -> str:
    return f"{per_second / 1e9:,.0f} G{unit}/s"


def _share(kernel: dict, probe: dict) -> str:
    return f"{100 * kernel['throughput'] / probe['throughput']:.1f}%"


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
    probe = timing.get("instruction_ceiling")
    if probe:
        rows.append(("instruction ceiling", f"{probe['name']}, measured beside your kernel: "
                     f"{_rate(probe['throughput'], unit)}; yours at {_share(kernel, probe)} of it (not scored)"))
    if "verified_launches" in timing:
        rows.append(("timed launches checked", str(timing["verified_launches"])))
    body = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th><td style='text-align:left'>"
                   f"{html.escape(str(v))}</td></tr>" for k, v in rows)
    return f"<table class='workshop-timing'><caption>{html.escape(result['test'])}</caption>{body}</table>"


def _largest(result: dict, name: str) -> str:
    found = [c["accuracy"][name] for c in result.get("checks", []) if name in c.get("accuracy", {})]
    return f"{max(found):.2g}" if found else "?"


def precision_table(results: list[dict]) -> str:
    """The timed kernels that name their number format, one row each: format, time, throughput, the baseline's
    throughput and the ratio, the share of the instruction's own rate measured beside it (mma.sync in that
    format; not scored), and the largest errors over the kernel's correct checks (``max_rel_error``: the
    largest |error| over the largest |C|; the relative Frobenius error), as an HTML table."""
    head = ["kernel", "format", "status", "time", "throughput", "baseline", "ratio", "share of the instruction "
            "ceiling", "max relative error", "relative Frobenius error"]
    rows = []
    for r in results:
        timing = r["timing"]
        unit, kernel, base = timing["work_unit"], timing["kernel"], timing["baseline"]
        rows.append([r["test"], r["precision"], r["status"], f"{kernel['median_s'] * 1e3:.4f} ms",
                     f"{kernel['throughput'] / 1e12:,.1f} T{unit}/s",
                     f"{base['name']}: {base['throughput'] / 1e12:,.1f} T{unit}/s", f"{timing['ratio']:.3f}",
                     _share(kernel, probe) if (probe := timing.get("instruction_ceiling")) else "?",
                     _largest(r, "max_rel_error"), _largest(r, "frobenius_rel_error")])
    cells = "".join("<tr>" + "".join(f"<td style='text-align:left'>{html.escape(v)}</td>" for v in row) + "</tr>"
                    for row in rows)
    header = "<tr>" + "".join(f"<th style='text-align:left'>{html.escape(h)}</th>" for h in head) + "</tr>"
    caption = ("Your kernels by number format: each timed against the baseline in its own format; errors "
               "against the float64 product of the same inputs, the largest over the correctness checks")
    return f"<table class='workshop-precision'><caption>{caption}</caption>{header}{cells}</table>"


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


class PerformanceFeedback(Preprocessor):
    """Adds each timed kernel's table under its graded cell, and the ladder's chart, the precision table and the
    abstraction ladder's table and chart after the last one.

    An nbconvert preprocessor, on by default as nbgrader's are. Not an `NbGraderPreprocessor`: that class
    redeclares nbconvert's ``display_data_priority`` without ``config=True``, so the HTML exporter's setting
    of it (``NbConvertBase.display_data_priority``) is "not recognized" and warned about on every feedback."""

    enabled = Bool(True, help="Whether nbgrader runs this preprocessor").tag(config=True)

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
        formats = [r for r in ladder if r.get("precision")]
        if formats:
            timed[-1][0].outputs.append(new_output("display_data", data={
                "text/html": precision_table(formats), "text/plain": "your kernels by number format"}))
        assignment = (resources or {}).get("nbgrader", {}).get("assignment")
        for result in ladder:
            rung = rung_of(assignment, result["test"])
            if rung:
                record = latest_record()
                found = rows(rung, result, record)
                timed[-1][0].outputs += [
                    new_output("display_data", data={"text/html": ladder_table(found, record),
                                                     "text/plain": "the abstraction ladder, rung by rung"}),
                    new_output("display_data", data={"image/png": base64.b64encode(ladder_chart(found)).decode(),
                                                     "text/plain": "the abstraction ladder's chart"})]
        return nb, resources


def cell_names(nb: NotebookNode) -> dict[str, str]:
    """Each graded cell's name, by grade_id: the heading it is under (its first sentence: the puzzle, the step) and
    what it grades (`graders.notebook.graded_what`), e.g. "Puzzle 1: Map — correct on fresh inputs and more
    sizes"."""
    graded = {id(cell) for cell in graded_cells(nb)}
    names, heading = {}, ""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            heading = _last_heading(cell.source) or heading
        elif id(cell) in graded and (parts := [p for p in (heading, graded_what(cell.source)) if p]):
            names[cell.metadata.nbgrader.grade_id] = " — ".join(parts)
    return names


def _last_heading(markdown: str) -> str:
    """The last heading of a markdown cell, up to the end of its first sentence (after a step's number)."""
    headings = [line.lstrip("#").strip() for line in markdown.splitlines() if line.startswith("#")]
    if not headings:
        return ""
    number, text = re.fullmatch(r"(\d+\.\s+)?(.*)", headings[-1]).groups()
    sentence = re.match(r"(.*?)\.(?:\s|$)", text)
    return (number or "") + (sentence[1] if sentence else text)


class FeedbackExporter(HTMLExporter):
    """nbgrader's feedback page (its template, ``HTMLExporter.template_name = "feedback"``, as nbgrader sets it),
    whose summary names each graded cell (`cell_names`) through ``templates/feedback.html.j2``, which extends
    nbgrader's. Configured as ``GenerateFeedback.exporter_class``, so both ``nbgrader generate_feedback`` and
    formgrader's feedback button write it."""

    @default("extra_loaders")
    def _loaders(self) -> list:
        return [FileSystemLoader(str(TEMPLATES)), PrefixLoader({"nbgrader": FileSystemLoader(str(NBGRADER_TEMPLATES))})]

    @default("template_file")
    def _template_file(self) -> str:
        return "feedback.html.j2"

    def from_notebook_node(self, nb: NotebookNode, resources: dict | None = None, **kw):
        resources = {} if resources is None else resources
        resources["workshop_cell_names"] = cell_names(nb)
        return super().from_notebook_node(nb, resources, **kw)

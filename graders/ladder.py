"""The abstraction ladder's worklog (W3: Triton, CUTLASS, TileLang): the fp16 GEMM on each rung, its lines of code,
TFLOP/s and share of cuBLAS, as a table and a chart.

A rung (`RUNGS`) is one track's kernel: the tensor-core worklog's hand-written CUDA C++ step (where the ladder starts),
Triton's matmul, the CUTLASS GEMM and TileLang's. Each engine's grader counts a kernel's lines of code as it grades it
(`lines_of_code`, stored in its result as ``lines_of_code``). The CUTLASS track's GPU test grades every rung's reference
at 4096^3 and writes the ladder's record (``benchmarks/results/cutlass/ladder-gemm-<date>.json``, one `row` a rung).
The feedback of a notebook that has a rung (`gradebook.feedback.PerformanceFeedback`) shows the student's kernel
beside the newest record's other rungs (`rows`): a table (`table_html`) and a chart (`chart_png`).
"""
from __future__ import annotations

import ast
import html
import io
import json
from dataclasses import dataclass
from pathlib import Path

from graders import settings

RECORD_PREFIX = "ladder-gemm"
RECORD_FOLDER = "cutlass"   # the records go with the rung the ladder was missing
YOURS = "your kernel"


@dataclass(frozen=True)
class Rung:
    name: str
    track: str
    kernel: str         # the kernel id in the track's spec


RUNGS = (Rung("CUDA C++", "tensorcores", "fp16"), Rung("Triton", "triton", "matmul_fp16"),
         Rung("CUTLASS", "cutlass", "ws"), Rung("TileLang", "tilelang", "matmul_fp16"))


def lines_of_code(source: str, comment: str = "//") -> int:
    """Lines of a kernel's source that are code: neither blank nor comments (``//`` lines and ``/* */`` blocks in
    C++; ``#`` lines and docstrings in Python)."""
    skipped: set[int] = set()
    if comment == "#":
        try:
            tree = ast.parse(source)
        except SyntaxError:
            tree = None
        for node in ast.walk(tree) if tree else ():
            if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                    and isinstance(node.value.value, str)):
                skipped |= set(range(node.lineno, node.end_lineno + 1))
    count, in_block = 0, False
    for number, line in enumerate(source.split("\n"), start=1):
        text = line.strip()
        if comment == "//" and (in_block or text.startswith("/*")):
            in_block = "*/" not in text
            continue
        if text and not text.startswith(comment) and number not in skipped:
            count += 1
    return count


def rung_of(track: str | None, kernel: str) -> Rung | None:
    """The rung a track's kernel is, if any."""
    return next((r for r in RUNGS if (r.track, r.kernel) == (track, kernel)), None)


def row(result: dict) -> dict:
    """A rung's row from a graded result (`graders.result.GradeResult.as_dict`): lines of code, status and, where it
    was timed, TFLOP/s, cuBLAS's TFLOP/s beside it and the ratio."""
    found = {"lines_of_code": result.get("lines_of_code"), "status": result.get("status", "?")}
    timing = result.get("timing")
    if timing:
        found |= {"tflops": timing["kernel"]["throughput"] / 1e12,
                  "cublas_tflops": timing["baseline"]["throughput"] / 1e12,
                  "share_of_cublas": timing["ratio"], "shape": list(timing["shape"])}
    return found


def latest_record(folder: Path | None = None) -> dict | None:
    """The newest ladder record (by its file name's date), or None before any GPU run wrote one."""
    found = sorted((folder or settings.RESULTS / RECORD_FOLDER).glob(f"{RECORD_PREFIX}-*.json"))
    return json.loads(found[-1].read_text()) if found else None


def rows(rung: Rung, result: dict, record: dict | None) -> dict[str, dict]:
    """The table's rows in ladder order: every rung's reference as the record measured it (an empty row where there
    is no record), the student's kernel in its rung's place."""
    measured = (record or {}).get("rungs", {})
    return {(f"{r.name}: {YOURS}" if r == rung else f"{r.name}: reference"): (row(result) if r == rung
                                                                              else measured.get(r.name, {}))
            for r in RUNGS}


def _number(value, fmt: str) -> str:
    return format(value, fmt) if isinstance(value, (int, float)) else "?"


def table_html(found: dict[str, dict], record: dict | None) -> str:
    """`rows` as an HTML table: lines of code, TFLOP/s, cuBLAS's TFLOP/s, share of cuBLAS."""
    head = ["rung", "lines of code", "TFLOP/s", "cuBLAS TFLOP/s", "share of cuBLAS"]
    body = "".join(
        "<tr>" + "".join(f"<td style='text-align:left'>{html.escape(v)}</td>" for v in (
            name, _number(r.get("lines_of_code"), "d"), _number(r.get("tflops"), ".1f"),
            _number(r.get("cublas_tflops"), ".1f"),
            _number(100 * r["share_of_cublas"], ".1f") + "%" if "share_of_cublas" in r else "?")) + "</tr>"
        for name, r in found.items())
    where = (f"the references measured on {record.get('gpu', '?')} ({record.get('date', '')[:10]})" if record
             else "the references not measured on a GPU yet")
    caption = f"The abstraction ladder's fp16 GEMM at 4096^3, rung by rung: your kernel beside {where}"
    header = "<tr>" + "".join(f"<th style='text-align:left'>{html.escape(h)}</th>" for h in head) + "</tr>"
    return f"<table class='workshop-ladder'><caption>{html.escape(caption)}</caption>{header}{body}</table>"


def chart_png(found: dict[str, dict]) -> bytes:
    """`rows` as a PNG: lines of code beside share of cuBLAS (TFLOP/s on each bar), the student's bars in orange."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(found)
    colors = ["tab:orange" if YOURS in n else "tab:blue" for n in names]
    labels = [n.replace(": ", "\n") for n in names]
    fig, (lines, shares) = plt.subplots(1, 2, figsize=(11, 4))
    lines.bar(labels, [found[n].get("lines_of_code") or 0 for n in names], color=colors)
    lines.set_ylabel("lines of kernel code")
    bars = shares.bar(labels, [100 * found[n].get("share_of_cublas", 0) for n in names], color=colors)
    for bar, n in zip(bars, names):
        text = f"{found[n]['tflops']:.0f} TFLOP/s" if "tflops" in found[n] else "not timed"
        shares.text(bar.get_x() + bar.get_width() / 2, bar.get_height(), text, ha="center", va="bottom", fontsize=8)
    shares.axhline(100, color="black", linestyle="--", linewidth=1)
    shares.set_ylabel("% of cuBLAS")
    for ax in (lines, shares):
        ax.tick_params(axis="x", labelsize=8)
    fig.suptitle("The abstraction ladder's fp16 GEMM at 4096^3")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    return buffer.getvalue()

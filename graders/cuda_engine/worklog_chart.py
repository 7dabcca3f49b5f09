"""The GEMM worklog chart: each kernel's GFLOP/s against cuBLAS, from a benchmark JSON, as a PNG.

    python -m graders.cuda_engine.worklog_chart benchmarks/results/gemm-YYYYMMDD-HHMMSS.json [-o chart.png]

The JSON is what `benchmarks/gemm_bench.py` and ``tests/gpu/test_gemm_gpu.py`` write: ``sizes`` maps a
shape label ("4096x4096x4096") to ``cublas_gflops`` and ``kernels`` (kernel id -> ``gflops``, ``ratio``,
``status``; the tensor-core worklog's also ``mma_ceiling_gflops``, the rate of mma.sync in the kernel's format
that its grading measured). One panel per size: a bar per kernel, labelled with its percentage of cuBLAS,
cuBLAS as a dashed line, and each kernel's mma.sync ceiling as a marker above its bar where the record has
one. matplotlib's Agg backend: no display needed.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def plot(record: dict, path: str | Path, *, title: str = "The GEMM worklog", panel: str = "SGEMM fp32",
         baseline: str = "cuBLAS (TF32 off)") -> Path:
    """Draw ``record`` to ``path``; ``title``, ``panel`` and ``baseline`` name the worklog, its problem and
    what the percentages are of (the tensor-core worklog passes its own)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = record["sizes"]
    fig, axes = plt.subplots(len(sizes), 1, figsize=(11, 4.2 * len(sizes)), squeeze=False)
    for ax, (label, size) in zip(axes[:, 0], sizes.items()):
        kernels = size["kernels"]
        names = list(kernels)
        gflops = [kernels[k].get("gflops") or 0.0 for k in names]
        colors = ["tab:blue" if kernels[k].get("status") == "ok" else "tab:red" for k in names]
        bars = ax.bar(range(len(names)), gflops, color=colors)
        cublas = size.get("cublas_gflops")
        if cublas:
            ax.axhline(cublas, color="black", linestyle="--", linewidth=1)
            ax.text(len(names) - 0.5, cublas, f" cuBLAS {cublas / 1e3:.1f} TFLOP/s", va="bottom", ha="right")
        marks = ceiling_marks(kernels)
        if marks:
            ax.scatter([names.index(k) for k in marks], list(marks.values()), marker="_", s=500, color="tab:green",
                       label="mma.sync ceiling (its format)")
            ax.legend(fontsize=8, loc="upper left")
        for bar, k in zip(bars, names):
            ratio = kernels[k].get("ratio")
            text = f"{100 * ratio:.1f}%" if ratio else kernels[k].get("status", "?")
            ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height(), text, ha="center", va="bottom",
                    fontsize=8)
        ax.set_xticks(range(len(names)), [f"{i + 1}. {k}" for i, k in enumerate(names)], rotation=20,
                      ha="right", fontsize=9)
        ax.set_ylabel("GFLOP/s")
        ax.set_ylim(0, max([*gflops, cublas or 0, *marks.values()]) * 1.15 or 1)
        ax.set_title(f"{panel}, M x N x K = {label.replace('x', ' x ')}")
    gpu = record.get("gpu", "?")
    fig.suptitle(f"{title} on {gpu} ({record.get('date', '')[:10]}); % of {baseline}")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def ceiling_marks(kernels: dict) -> dict[str, float]:
    """Each kernel's mma.sync ceiling in GFLOP/s (``mma_ceiling_gflops``), for those whose record has one."""
    return {k: row["mma_ceiling_gflops"] for k, row in kernels.items() if row.get("mma_ceiling_gflops")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", type=Path)
    parser.add_argument("-o", "--out", type=Path, help="PNG path (default: the JSON's, with .png)")
    args = parser.parse_args()
    out = plot(json.loads(args.json.read_text()), args.out or args.json.with_suffix(".png"))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

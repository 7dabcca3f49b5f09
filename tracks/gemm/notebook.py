"""Build the GEMM worklog's nbgrader source notebook from the reference kernels and the spec.

    python solutions/gemm/build_notebook.py          # writes assignments/gemm/gemm.ipynb
    python solutions/gemm/build_notebook.py --check  # exit 1 if the committed notebook is stale

Per kernel (in spec order): a markdown cell (the step: the reference's leading comment, the launch, the
sizes it must handle, the speed curve), the solution cell (``<id>_src = r\"\"\"...\"\"\"``: the reference with
its kernel body between nbgrader's solution markers), a read-only ``<id>_check`` cell (compiles, no GPU
needed), the hidden ``<id>_score`` cell, and hidden structural cells (``<id>_sass``, ``autotuned_search``)
where structure.toml has them. Edit the .cu files, spec.toml or this script, never the notebook.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

from graders.cuda_engine.spec import load_spec  # noqa: E402
from graders.cuda_engine.structure import load_structure  # noqa: E402

NOTEBOOK = ROOT / "assignments/gemm/gemm.ipynb"
MULTIPLE_NOTE = ("**Sizes:** M is a multiple of {m}, N of {n} and K of 32 (no bounds checks needed; "
                 "every float4 is 16-byte aligned).")
ANY_NOTE = "**Sizes:** any M, N, K, including ones that are not multiples of the tile, and 1 x 1 x 1."

INTRO = """# The GEMM worklog

Ten fp32 matrix-multiply (SGEMM) kernels, each a step up in speed, graded as a fraction of cuBLAS.
Row-major fp32 matrices, `C = A @ B` with `A` M x K, `B` K x N, `C` M x N. Every kernel has the signature

    extern "C" __global__ void NAME(float* C, const float* A, const float* B, int M, int N, int K)

Write each kernel as CUDA C++ in the string of its cell. The grader compiles it with NVRTC and launches it
itself: a grid of ceil(N / TILE_X) x ceil(M / TILE_Y) blocks of BLOCK_X x BLOCK_Y threads. These four names
and each step's parameters (`BK`, the K depth of a shared-memory slab; `WM`, `WN` for warp tiles) are
`#define`d before your code; TM = TILE_Y / BLOCK_Y and TN = TILE_X / BLOCK_X are the rows and columns of
C one thread computes.

**Correct** means: on fresh random matrices of several shapes, every element of C within fp32 rounding of
a float64 reference (|error| <= 1e-3 (|A| @ |B|)) and a relative Frobenius error below 1e-4. C is filled
with NaN before every run and fenced by guard bands, so an element you never write, or a write outside C,
fails. Correctness is checked again after timing.

**Speed** is the ratio of cuBLAS SGEMM's time (`torch.matmul`, TF32 off) to your kernel's at 4096 x 4096 x
4096, both measured in the same process on the grading GPU: 0.5 means half of cuBLAS's GFLOP/s. Points: 1
for a correct kernel, the rest for speed, none below the floor ratio, full at the target, linear between.
A kernel that is wrong, writes outside C, crashes or hangs scores 0 for that kernel.

Some steps also have a **structural** check, graded from the compiled code (its SASS, read with
`cuobjdump`): 128-bit loads where the step is about vectorizing, no register spills where big register
tiles are the point. These need no GPU.

Your submission is kernel source only: it runs in a separate process that compiles the string, so it cannot
call cuBLAS, torch or any host code.

* Run the **check** cell under each kernel: it compiles your code (no GPU needed) and reports registers,
  shared memory and spills. Correctness and speed are checked on the GPU worker."""

TUNE_NOTE = """

The tuner's parameters are BM, BN (the block tile), BK, TM and TN (the thread tile); the grader launches
(BN / TN) x (BM / TM) threads on a BN x BM tile and `#define`s BK. List what you tried in
`autotuned_space` (each name mapped to its values; at least 4 valid combinations: BM and BN dividing 128,
BK dividing 32, TM, TN and BK multiples of 4, 32 to 1024 threads, at most 48 KiB of shared memory) and
put the fastest in `autotuned_choice`. On a machine with a GPU:

    from graders.cuda_engine.structure import autotune
    best, table = autotune('gemm', autotuned_src, autotuned_space)

The hidden tests check the space and the choice, compile every configuration (no spills allowed), and grade
your choice for correctness and speed."""

CONFLICT_NOTE = """

On a GPU with Nsight Compute, `python benchmarks/gemm_bench.py --ncu-only` counts the shared-memory bank
conflicts of the reference kernels 6, 7 and 8 (`l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum`
and `..._st.sum`); the worklog's chart and table record them."""

AUTOTUNE_SPACE = {"BM": [64, 128], "BN": [64, 128], "BK": [8, 16], "TM": [4, 8], "TN": [4, 8]}
AUTOTUNE_CHOICE = {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}


def markdown(text: str) -> dict:
    return {"cell_type": "markdown", "metadata": {}, "source": _lines(text)}


def code(text: str, grade_id: str, *, solution=False, grade=False, points=None, locked=True) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3, "solution": solution,
            "task": False}
    if points is not None:
        meta["points"] = float(points)
    return {"cell_type": "code", "execution_count": None, "metadata": {"nbgrader": meta}, "outputs": [],
            "source": _lines(text)}


def _lines(text: str) -> list[str]:
    lines = text.split("\n")
    return [line + "\n" for line in lines[:-1]] + [lines[-1]] if lines[-1] else [line + "\n" for line in lines[:-1]]


def split_reference(text: str) -> tuple[str, str]:
    """(the leading comment as prose, the code with the kernel body between solution markers)."""
    lines = text.rstrip("\n").split("\n")
    comment = []
    while lines and lines[0].startswith("//"):
        line = lines.pop(0)[2:].strip()
        comment.append(("\n" + line) if line.startswith("- ") else line)   # a bullet starts a new line
    open_at = next(i for i, line in enumerate(lines) if line.startswith("extern \"C\"")) + 1
    open_at = next(i for i in range(open_at - 1, len(lines)) if lines[i].rstrip() == "{")
    close_at = max(i for i, line in enumerate(lines) if line.rstrip() == "}")
    body = lines[:open_at + 1] + ["### BEGIN SOLUTION"] + lines[open_at + 1:close_at] + ["### END SOLUTION"] + \
        lines[close_at:]
    return " ".join(comment), "\n".join(body)


def prose(comment: str) -> str:
    """The reference's leading comment as markdown: one paragraph, its '- ' bullets on lines of their own."""
    return "\n".join(re.sub(r"[ \t]+", " ", part).strip() for part in comment.split("\n"))


def build() -> dict:
    spec = load_spec("gemm")
    structure = load_structure("gemm")
    tune = structure.autotune
    checks_by_kernel: dict[str, list] = {}
    for check in structure.checks.values():
        checks_by_kernel.setdefault(check.kernel, []).append(check)
    cells = [markdown(INTRO),
             code("from graders.cuda_engine.grade import check_compiles, score\n"
                  "from graders.cuda_engine.structure import check_sass, check_search, score_autotuned, tune_launch", "setup")]
    for n, (kid, kernel) in enumerate(spec.kernels.items(), start=1):
        comment, body = split_reference(kernel.reference.read_text())
        text = prose(comment)
        title, _, rest = text.partition(": ")
        title = re.sub(r"^\d+\.\s*", "", title)
        g = kernel.geometry
        multiples = all(m % g.tile[1] == 0 and n_ % g.tile[0] == 0 and k % 32 == 0 for m, n_, k in kernel.check_shapes)
        launch = (f"**Launch:** {g.block[0]} x {g.block[1]} threads per block, a {g.tile[1]} x {g.tile[0]} tile "
                  f"of C per block" + (", " + ", ".join(f"{k} = {v}" for k, v in g.params) if g.params else "")
                  + "." if not kernel.student_geometry else "**Launch:** yours (see below).")
        rest = rest[:1].upper() + rest[1:]
        lines = [f"## {n}. {title[0].upper() + title[1:]}", "", rest, "", "* " + launch,
                 "* " + (MULTIPLE_NOTE.format(m=g.tile[1], n=g.tile[0]) if multiples else ANY_NOTE),
                 f"* **Speed:** full marks at {kernel.target:g} of cuBLAS, none below {kernel.floor:g}" +
                 (" (provisional until measured on the grading GPU)." if spec.targets == "provisional" else ".")]
        for check in checks_by_kernel.get(kid, []):
            from graders.cuda_engine.sass import REQUIREMENTS
            lines.append(f"* **Structure** ({check.points:g} point): " +
                         "; ".join(REQUIREMENTS[r][1] for r in check.require) + ".")
        text = "\n".join(lines) + (TUNE_NOTE if tune and kid == tune.kernel else "") + \
            (CONFLICT_NOTE if kid == "swizzle" else "")
        cells.append(markdown(text))
        source = f'{kid}_src = r"""\n{body}\n"""'
        is_tuned = tune is not None and kid == tune.kernel
        if is_tuned:
            source += (f"\nautotuned_space = {json.dumps(AUTOTUNE_SPACE)}\n"
                       f"autotuned_choice = {json.dumps(AUTOTUNE_CHOICE)}")
        cells.append(code(source, kid, solution=True, locked=False))
        launch_args = ", **tune_launch(autotuned_choice)" if is_tuned else ""
        cells.append(code(f"check_compiles('gemm', '{kid}', {kid}_src{launch_args})", f"{kid}_check"))
        call = (f"score_autotuned('gemm', {kid}_src, autotuned_choice)" if is_tuned
                else f"score('gemm', '{kid}', {kid}_src)")
        cells.append(code(f"# Hidden test: correctness and speed ({kernel.points:g} points)\n"
                          f"### BEGIN HIDDEN TESTS\n{call}\n### END HIDDEN TESTS",
                          f"{kid}_score", grade=True, points=kernel.points))
        for check in checks_by_kernel.get(kid, []):
            cells.append(code(f"# Hidden test: structure ({check.points:g} point)\n### BEGIN HIDDEN TESTS\n"
                              f"check_sass('gemm', '{check.id}', {kid}_src)\n### END HIDDEN TESTS",
                              check.id, grade=True, points=check.points))
        if is_tuned:
            cells.append(code(f"# Hidden test: the search space and the choice ({tune.points:g} point)\n"
                              f"### BEGIN HIDDEN TESTS\ncheck_search('gemm', {kid}_src, autotuned_space, "
                              f"autotuned_choice)\n### END HIDDEN TESTS", tune.check_id, grade=True,
                              points=tune.points))
    return {"cells": cells, "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                                                        "name": "python3"},
                                         "language_info": {"name": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


def render() -> str:
    nb = build()
    for i, cell in enumerate(nb["cells"]):
        cell["id"] = f"cell-{i:02d}"
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed notebook is stale")
    args = parser.parse_args()
    text = render()
    if args.check:
        stale = not NOTEBOOK.exists() or NOTEBOOK.read_text() != text
        print(f"{NOTEBOOK.relative_to(ROOT)} is {'stale: run python tracks/gemm/notebook.py' if stale else 'up to date'}")
        return 1 if stale else 0
    NOTEBOOK.write_text(text)
    print(f"wrote {NOTEBOOK.relative_to(ROOT)} ({len(json.loads(text)['cells'])} cells)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

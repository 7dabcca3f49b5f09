"""The debugging track's nbgrader source notebook (L7), built from spec.toml, problem.py (the sabotaged kernels and
the questions), key.py (the reference's answers) and two Nsight Compute records under benchmarks/results/.

Per kernel: its statement with the sabotaged kernel numbered; the solution cell (``<id>_src``: the sabotaged
kernel, which the release keeps, then the reference fix between nbgrader's solution markers: the notebook's
language is `graders.notebook.EDIT_LANGUAGE`, whose stub is a comment; each string starts with the kernel's first
line, so that a compiler's or a tool's line numbers are the statement's); the read-only ``<id>_check`` cell
(`graders.cuda_engine.sanitizer.check`: compute-sanitizer on a GPU machine); the hidden ``<id>_score`` cell
(public: it compiles, without the CPU preview, which would give the bug away); then the three questions of its
diagnosis. Last, the deep-read: the two reports and their questions. Each question is a solution cell
(``<id> = None``) and a graded cell whose hidden test is `graders.quiz_engine.grade.grade_answer`.
"""
from __future__ import annotations

import nbformat

from graders import notebook as nb
from graders import settings, tracks
from graders.cuda_engine.spec import load_spec
from graders.quiz_engine.grade import right_answer
from graders.quiz_engine.notebook import answer_literal, form
from graders.quiz_engine.questions import REFERENCE_STUDENT, Choice, Question

NAME = "debugging"
INTRO = """# Profiling & debugging like a pro

A kernel launch returns at once: the CPU drops the work in the GPU's queue and moves on, so when a kernel goes
wrong, the thread that did it has long finished and your Python is lines further down (the course's chapter
*Debugging kernels: the vLLM workflow*). The chapter sorts the cases in two: a **dead body**, a kernel that crashes
(an illegal or misaligned address: the GPU stops and the next CUDA call reports it), and a **missing person**, a
kernel that hangs or quietly gives a wrong answer. Each has its detective. compute-sanitizer runs a kernel under
one tool at a time: `memcheck` (out-of-bounds and misaligned accesses), `racecheck` (shared-memory hazards: a read
and a write, or two writes, with no barrier between them), `initcheck` (reads of memory nothing wrote) and
`synccheck` (barriers used wrongly). A crash leaves a CUDA core dump where `CUDA_ENABLE_COREDUMP_ON_EXCEPTION=1`
is set, which `cuda-gdb` opens at the faulting instruction. A wrong value that no tool reports (a NaN from an
overflow) is found by checking the results; a hang, by a time limit.

Below are four kernels of the kinds you wrote in earlier tracks, each with **one planted bug**: each compiles, and
most look right at the shape their check cell runs at. For each:

1. **Fix it** in its cell: edit the kernel (the release gives you the sabotaged one). The grader checks it on
   fresh inputs at more shapes, among them those that show the bug, under all four tools, and times it
   ({correct:g} points for a correct kernel clean under every tool, {perf:g} for its speed against the reference
   fix's).
2. **Diagnose it**: which tool catches it, the line that faults (or that must change), numbered as the statement
   numbers the kernel, and the class of bug: three literal answers.

Then read three Nsight Compute reports recorded on the course's H200 and say what limits each kernel.

* Run the **check** cell under each kernel: it compiles your kernel, and on a machine with an NVIDIA GPU and
  compute-sanitizer it runs it under the four tools at the shape it names, sandboxed as the grader runs them, and
  prints each tool's verdict. Without a GPU it says so: what the tools found on the grading GPU is in your
  feedback. The grader's feedback on a kernel that crashes shows the GPU's own error and, for `copy_rows`, what
  memcheck and the CUDA core dump (read with `cuda-gdb`) say of the faulting access and its line; on one that hangs,
  the time limit it ran past.
* A kernel that is wrong at any shape, crashes, hangs, or that any tool reports scores 0 for its fix.
* Each answer is a literal (`"b"`, `12`, `0.5`) in its cell, read from the file you hand in: replace `None`.
"""
READING = """## The Nsight Compute deep-read

Three reports, recorded with `ncu` (GPU clocks left free) on the grading H200 and kept, as it printed them, in the
repository's benchmark records: `benchmarks/results/{gemm}` (the warp-tiled FP32 GEMM of the GEMM worklog at
4096 x 4096 x 4096), `benchmarks/results/{decode}` (the attention track's decode kernel: one query token against a
32,768-token KV cache, batch 8, 32 heads, head_dim 128) and `benchmarks/results/{tc}` (the tensor-core worklog's
warp-tiled bf16 kernel at 4096 x 4096 x 4096). Read the *Speed Of Light* section first (which of memory and
compute is busiest, as a percent of its peak; both under about 60% is, in ncu's own words, a sign of latency
issues), then *Scheduler* and *Warp State Statistics* (how many warps are eligible, what the others wait for), then
*Launch Statistics* and *Occupancy* (how many warps an SM holds, what limits it, and what was achieved).
"""


def _report(record: str, kernel: str) -> str:
    """The sections of the first launch of ``kernel`` in the record, as ncu printed them."""
    lines = (settings.ROOT / "benchmarks" / "results" / record).read_text().split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith(f"  {kernel} ("))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("  ") and lines[i][2] != " "),
               len(lines))
    return "\n".join(line.rstrip() for line in lines[start:end]).strip("\n")


def _numbered(source: str) -> str:
    code = source.rstrip("\n").split("\n")
    return "```\n" + "\n".join(f"{i:>2}  {line}" for i, line in enumerate(code, 1)) + "\n```"


def _question(q: Question) -> list[nbformat.NotebookNode]:
    """A question's statement, its solution cell (``<id> = None``, the reference's answer as the solution) and its
    graded cell."""
    text = [f"**{q.id}** ({q.points:g} point{'' if q.points == 1 else 's'}). {q.text}"]
    if isinstance(q, Choice):
        text.append("\n".join(f"- **{k}**: {option}" for k, option in q.options.items()))
    text.append(f"*Answer: {form(q)}.*")
    answer = answer_literal(right_answer(NAME, q, REFERENCE_STUDENT))
    return [nb.markdown("\n\n".join(text)),
            nb.solution(f"{q.id} = None\n### BEGIN SOLUTION\n{q.id} = {answer}\n### END SOLUTION", q.id),
            nb.graded_test(f"check_answer({NAME!r}, {q.id!r}, {q.id})", f"grade_answer({NAME!r}, {q.id!r}, {q.id})",
                           f"{q.id}_score", q.points, "your answer, against the key")]


STATEMENTS = {
    "reduce": ("A block reduction", "Each block sums one row of `x` (`rows x cols`, fp32) into `out[row]`: each "
               "thread sums a strided slice of the row, then the block adds the {bx} partial sums in shared memory, "
               "halving the active threads at each level of a tree. It is right at the check cell's shape, most of "
               "the time."),
    "copy": ("A vectorised copy", "Each block copies one row of `in` (`rows x cols`, fp32) to `out` with 16-byte "
             "`float4` loads and stores, the row's last `cols % 4` elements one at a time. Both buffers start on a "
             "16-byte boundary."),
    "softmax": ("A row softmax", "Each block writes the softmax of one row of logits: `exp(x)` of each element over "
                "the row's sum of them. The grader's logits are what a model's are: some rows reach the hundreds, "
                "some are hundreds below zero."),
    "chunked": ("A chunked row sum", "Each block sums one row, {bx} columns at a time: each warp adds its chunk with "
                "shuffles, lane 0 keeps the warp's running sum in shared memory, and warp 0 adds the {warps} of them "
                "at the end."),
}


def build() -> nbformat.NotebookNode:
    spec = load_spec(NAME)
    problem = tracks.get(NAME).problem_module()
    questions = {q.id: q for q in problem.QUESTIONS}
    (correct,) = {k.points_correct for k in spec.kernels.values()}
    (perf,) = {k.points_perf for k in spec.kernels.values()}
    cells = [nb.markdown(INTRO.format(correct=correct, perf=perf)),
             nb.locked("from graders.cuda_engine.grade import assert_compiles, score\n"
                       "from graders.cuda_engine.sanitizer import check\n"
                       "from graders.quiz_engine.grade import check_answer, grade_answer", "setup")]
    for n, (kid, kernel) in enumerate(spec.kernels.items(), start=1):
        title, text = STATEMENTS[kid]
        bx = kernel.geometry.block[0]
        reference = kernel.reference.read_text().rstrip("\n").split("\n")
        while reference and reference[0].startswith("//"):
            reference.pop(0)
        fix = "\n".join(reference)
        cells += [
            nb.markdown(f"## {n}. {title}: `{kernel.function}`\n\n{text.format(bx=bx, warps=bx // 32)} It is "
                        f"launched on one block of {bx} threads per row (`BLOCK_X` = {bx}).\n\n"
                        f"{_numbered(problem.SABOTAGED[kid])}"),
            nb.solution(f'{kid}_src = r"""{problem.SABOTAGED[kid].rstrip()}\n"""\n### BEGIN SOLUTION\n'
                        f'{kid}_src = r"""{fix}\n"""\n### END SOLUTION', kid),
            nb.check_cell(f"check({NAME!r}, {kid!r}, {kid}_src)", f"{kid}_check", kid),
            nb.graded_test(f"assert_compiles({NAME!r}, {kid!r}, {kid}_src, preview=False)",
                           f"score({NAME!r}, {kid!r}, {kid}_src)", f"{kid}_score", kernel.points,
                           "correct at every shape, clean under compute-sanitizer, and its speed, on the GPU "
                           "worker"),
            nb.markdown(f"### The diagnosis of `{kernel.function}`"),
        ]
        for part in ("tool", "line", "class"):
            cells += _question(questions[f"{kid}_{part}"])
    records = {key: record for key, (record, _, _) in problem.NCU_RECORDS.items()}
    cells.append(nb.markdown(READING.format(**records)))
    for key, (record, kernel, what) in problem.NCU_RECORDS.items():
        cells.append(nb.markdown(f"### `{kernel}`: {what}\n\nFrom `benchmarks/results/{record}`:\n\n"
                                 f"```\n{_report(record, kernel)}\n```"))
        for q in (q for qid, q in questions.items() if qid.startswith(f"{key}_")):
            cells += _question(q)
    return nb.notebook(cells, nb.EDIT_LANGUAGE)

"""A roofline track's nbgrader source notebook, built from its ``problem.py`` (``TITLE``, ``INTRO``,
``OPERATIONS``), its spec (the reference GPU's figures, the points and tolerances) and, for the solution cells, its
``key.py`` (the reference answers).

Cells: the introduction, the worker's figures, how to count and to answer, the set-up cell, then per operation a
markdown cell (its code, its tensors, how to count its FLOPs where that is open), the solution cell ``<id>`` (a dict
of three Nones, then the answer between nbgrader's solution markers) and the graded ``<id>_score`` cell (public:
the answer's form; hidden: `grade.predict`). The release's stub is the quiz's (`QUIZ_LANGUAGE`): a comment under
the dict of Nones.
"""
from __future__ import annotations

import nbformat

from graders import tracks
from graders.notebook import graded_test, locked, markdown, notebook, solution
from graders.quiz_engine.notebook import QUIZ_LANGUAGE, answer_literal
from graders.roofline_engine.grade import reference_answer, spec
from graders.roofline_engine.operations import FIELDS, Operation
from graders.roofline_engine.scoring import Rules

SETUP = "from graders.roofline_engine.grade import check_prediction, predict"


def worker_table(gpu: dict) -> str:
    """The reference GPU's figures as the notebook gives them, with where each comes from."""
    rows = [
        ("memory bandwidth (HBM)", f"{gpu['hbm_tb_s']:g} TB/s", "datasheet"),
        ("FP32 peak (CUDA cores)", f"{gpu['fp32_tflops']:g} TFLOP/s", "datasheet"),
        ("TF32 peak (tensor cores, dense)", f"{gpu['tf32_tflops']:g} TFLOP/s", "datasheet, without sparsity"),
        ("bf16 peak (tensor cores, dense)", f"{gpu['bf16_tflops']:g} TFLOP/s", "datasheet, without sparsity"),
        ("fp8 peak (tensor cores, dense)", f"{gpu['fp8_tflops']:g} TFLOP/s", "datasheet, without sparsity"),
        ("L2 cache", f"{gpu['l2_mib']:g} MiB", f"the course's H200 records ({gpu['record']})"),
        ("SMs", f"{gpu['sms']}", f"the course's H200 records ({gpu['record']})"),
        ("LAUNCH_ALONE: one PyTorch operation alone, on an idle GPU", f"about {gpu['launch_alone_us']:g} µs",
         f"measured on an H100 worker ({gpu['launch_record']}), to be re-measured on the H200; the grader "
         "measures the worker's"),
        ("LAUNCH_IN_STREAM: each further operation in a stream of launches", f"about "
         f"{gpu['launch_in_stream_us']:g} µs", f"measured on an H100 worker ({gpu['launch_record']}), to be "
         "re-measured on the H200"),
    ]
    body = "\n".join(f"| {what} | {value} | {source} |" for what, value, source in rows)
    return f"| {gpu['name']} | | from |\n| --- | --- | --- |\n{body}"


TRANSLATED = """\
Predict with these figures. A grading worker whose figures differ (another GPU, or a host whose launches cost more)
measures there and translates each measurement to this GPU before grading it: times the roofline's time here over
its time with the worker's own bandwidth, peaks and launch figures (bytes over bandwidth, FLOPs over the peak,
launches: the reasoning you use). The feedback shows both times."""


def how(rules: Rules) -> str:
    p = rules.points
    return f"""
## How to count, and how to answer

- **FLOPs**: one add, multiply, compare, exp or divide each count 1; a matmul of an M x K by a K x N matrix does
  2MNK. Where an operation leaves the count open, its cell says how to count.
- **Bytes**: each input tensor read once and the output written once, at its number format's size (fp32 4 bytes,
  bf16 2); a Python number in the code (`0.5`) is not counted. Where the code is several PyTorch operations, count
  each one's own inputs and output and add them up: eager PyTorch writes every intermediate result to memory.
- **Arithmetic intensity**: FLOPs divided by those bytes, in FLOP per byte (not per element, not per bit).
- **Time**: what the grader measures on the worker, in microseconds: from the moment the line starts (the GPU
  idle, its L2 flushed, fresh inputs) until its last kernel has finished, the median of many runs. The host's work
  to launch each kernel counts: the GPU waits for it. Launching costs most for the first operation, which starts
  on an idle GPU (LAUNCH_ALONE); while the GPU runs one, the host already launches the next, so each further
  operation adds only LAUNCH_IN_STREAM: n operations too small to keep the GPU busy take about
  LAUNCH_ALONE + (n - 1) x LAUNCH_IN_STREAM.
- **Regime**: `"memory"` when moving the bytes takes longest, `"compute"` when the arithmetic does, `"overhead"`
  when launching the work does (the GPU mostly waits for the host).
- A warp's loads are served in 32-byte sectors: 32 threads reading 32 fp32 numbers that lie far apart in memory
  get 32 sectors, 4 useful bytes each.

Each operation has a cell `<name> = {{"regime": None, "intensity": None, "time_us": None}}`: write your three answers
there as literals (`{{"regime": "memory", "intensity": 0.25, "time_us": 120.0}}`), never expressions or calls: the
grader reads them from the file you hand in and runs nothing. The graded cell under it checks only their form; the
grading happens on the GPU worker, against its own measurement of the operation (one measurement for the whole
class), once you hand the notebook in.

Points per operation: regime {p['regime']:g}; intensity {p['intensity']:g}, right within \
{rules.intensity_rel_tol:.0%}; time {p['time']:g}, full within {rules.time_full_within:g}x of the measurement either \
way, none beyond {rules.time_none_beyond:g}x, and in between a share linear in log(ratio) (2 - log2(ratio) at 2x and \
4x). The feedback states each measurement, what it shows where your regime was wrong, and draws the worker's \
roofline with your predictions and the measurements on it.
"""


def _statement(number: int, op: Operation) -> str:
    tensors = "\n".join(f"- `{name}`: {t.describe()}" for name, t in op.inputs.items())
    parts = [f"## {number}. {op.title}", op.text, f"```python\n{op.code}\n```", tensors]
    if op.operations > 1:
        parts.append(f"{op.operations} PyTorch operations.")
    if op.flops:
        parts.append(f"*FLOPs:* {op.flops}")
    return "\n\n".join(parts)


def build(name: str) -> nbformat.NotebookNode:
    track = tracks.get(name)
    problem = track.problem_module()
    whole = spec(name)
    rules = Rules.from_spec(whole["assignment"])
    cells = [markdown(f"# {problem.TITLE}\n\n{problem.INTRO.strip()}"),
             markdown(f"## The worker\n\nThe course's reference GPU, on which your predictions are graded:\n\n"
                      f"{worker_table(whole['reference_gpu'])}\n\n{TRANSLATED}"),
             markdown(how(rules)), locked(SETUP, "setup")]
    empty = "{" + ", ".join(f'"{field}": None' for field in FIELDS) + "}"
    for number, op in enumerate(problem.OPERATIONS, start=1):
        cells.append(markdown(_statement(number, op)))
        answer = answer_literal(reference_answer(name, op.id))
        cells.append(solution(f"{op.id} = {empty}\n### BEGIN SOLUTION\n{op.id} = {answer}\n### END SOLUTION", op.id))
        cells.append(graded_test(f"check_prediction({name!r}, {op.id!r}, {op.id})",
                                 f"predict({name!r}, {op.id!r}, {op.id})", f"{op.id}_score", rules.max_points,
                                 "your prediction, against the worker's measurement"))
    return notebook(cells, QUIZ_LANGUAGE)

"""An operation to predict (`Operation`), the form a prediction must have (`form_problem`) and the function the
grading child times (`timed_function`).

Everything here is public: a track's ``problem.py`` builds its operations from it, the student kit holds it, and
the grading child imports it without torch in nbgrader's process.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

REGIMES = ("memory", "compute", "overhead")
FIELDS = ("regime", "intensity", "time_us")
DTYPES = {"fp32": 4, "bf16": 2}                       # the number formats an operation's tensors may have
PEAKS = {"fp32": "FP32", "tf32": "TF32 tensor cores", "bf16": "bf16 tensor cores", "fp8": "fp8 tensor cores"}
NOT_WRITTEN = "not written yet"


@dataclass(frozen=True)
class Tensor:
    """An input of an operation: its shape and number format (drawn afresh from a normal distribution before every
    timed run)."""

    shape: tuple[int, ...]
    dtype: str = "fp32"

    @property
    def elements(self) -> int:
        return math.prod(self.shape)

    @property
    def bytes(self) -> int:
        return self.elements * DTYPES[self.dtype]

    def describe(self) -> str:
        return f"{' x '.join(f'{n:,}' for n in self.shape)} {self.dtype}"


@dataclass(frozen=True)
class Operation:
    """One PyTorch operation (or a few lines of them) at fixed shapes, timed on the worker as written in ``code``:
    Python statements over the ``inputs`` by name (``torch`` and ``F``, ``torch.nn.functional``, are in scope).
    ``operations`` is how many PyTorch operations (kernel launches) the code makes; ``peak`` the rate its
    arithmetic runs at (a key of `PEAKS`); ``flops`` what the notebook says about counting its FLOPs where the
    usual rules (one add, multiply, compare, exp or divide each; a matmul's 2MNK) leave it open."""

    id: str
    title: str
    code: str
    inputs: dict[str, Tensor] = field(default_factory=dict)
    operations: int = 1
    peak: str = "fp32"
    text: str = ""          # markdown: what the operation is, what to think about
    flops: str = ""

    def source(self) -> str:
        """The function the grading child times: ``def run(<inputs>):`` and the code as its body."""
        body = "\n".join(f"    {line}" for line in self.code.strip("\n").split("\n"))
        return f"def run({', '.join(self.inputs)}):\n{body}\n"


def timed_function(op: Operation, namespace: dict):
    """``op``'s code as a function of its inputs, defined with ``namespace`` (torch, F) as its globals."""
    scope = dict(namespace)
    exec(compile(op.source(), f"<{op.id}>", "exec"), scope)
    return scope["run"]


def form_problem(op_id: str, answer) -> str:
    """'' or why ``answer`` is not a prediction: a dict of exactly ``regime`` (one of `REGIMES`), ``intensity``
    (FLOP per byte) and ``time_us`` (microseconds), each a positive number; `NOT_WRITTEN` where one is still None."""
    form = '{"regime": "memory", "compute" or "overhead", "intensity": FLOP per byte, "time_us": microseconds}'
    if not isinstance(answer, dict) or set(answer) != set(FIELDS):
        return f"{op_id}: must be a dict {form}, not {answer!r}"
    missing = [name for name in FIELDS if answer[name] is None]
    if missing:
        return f"{op_id}: {NOT_WRITTEN}: replace None with your {', '.join(missing)}"
    if answer["regime"] not in REGIMES:
        return f"{op_id}: regime must be one of {', '.join(map(repr, REGIMES))}, not {answer['regime']!r}"
    for name in ("intensity", "time_us"):
        value = answer[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            return f"{op_id}: {name} must be a positive number (an int or a float), not {value!r}"
    return ""

"""What a puzzle is: a statement, a numpy reference, the launches the grader makes, and access limits.

The grader, never the student, allocates the arrays and launches the kernel, always as
``kernel[blocks, threads](out, *inputs, *scalars)``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

Shape = tuple[int, ...]
NOT_WRITTEN = "not written yet (the stub raises NotImplementedError)"   # an untouched stub


@dataclass(frozen=True)
class Case:
    """One launch of the student's kernel: input shapes, output shape, geometry and scalar arguments."""

    inputs: tuple[Shape, ...]
    out: Shape
    blocks: Shape
    threads: Shape
    scalars: tuple[int, ...]

    def describe(self, names: Sequence[str] = ()) -> str:
        """The launch in CUDA's words, e.g. ``a[4], b[4]; size = 4; <<<1, 4>>>``; ``names`` are the kernel's
        parameters (out, the inputs, the scalars), without which inputs and scalars go unnamed."""
        if len(names) == 1 + len(self.inputs) + len(self.scalars):
            arrays = ", ".join(f"{n}[{', '.join(map(str, s))}]" for n, s in zip(names[1:], self.inputs))
            scalars = ", ".join(f"{n} = {v}" for n, v in zip(names[1 + len(self.inputs):], self.scalars))
        else:
            arrays = "inputs " + ", ".join(f"[{', '.join(map(str, s))}]" for s in self.inputs)
            scalars = "scalars " + ", ".join(map(str, self.scalars))
        return f"{arrays}; {scalars}; <<<{_dim3(self.blocks)}, {_dim3(self.threads)}>>>"


def _dim3(d: Shape) -> str:
    """A launch dimension as CUDA code writes it: ``4`` or ``(3, 3)``."""
    return str(d[0]) if len(d) == 1 else f"({', '.join(map(str, d))})"


@dataclass(frozen=True)
class Limits:
    """Global-memory access limits, counted per thread (and per block) while the kernel runs.

    ``reads`` may depend on the case (a tiled matmul reads two values per tile).
    """

    reads: int | Callable[[Case], int]
    writes: int = 1
    block_writes: int | None = None
    shared_memory: bool = False

    def max_reads(self, case: Case) -> int:
        return self.reads(case) if callable(self.reads) else self.reads

    def describe(self) -> str:
        reads = "reads as stated" if callable(self.reads) else f"at most {self.reads} global read(s)"
        parts = [f"{reads} and {self.writes} global write(s) per thread"]
        if self.block_writes is not None:
            parts.append(f"{self.block_writes} global write(s) per block")
        if self.shared_memory:
            parts.append("shared memory used")
        return "; ".join(parts)


@dataclass(frozen=True)
class Puzzle:
    """A puzzle: ``cases(size)`` maps a size to a launch; public and hidden lists give the sizes graded."""

    number: int
    id: str
    title: str
    statement: str
    kernel_name: str
    reference: Callable[..., np.ndarray]
    case: Callable[..., Case]
    public_sizes: tuple = ()
    hidden_sizes: tuple = ()
    limits: Limits = field(default_factory=lambda: Limits(reads=1))

    def cases(self, mode: str) -> list[Case]:
        sizes = self.public_sizes if mode == "public" else self.hidden_sizes
        return [self.case(*s) if isinstance(s, tuple) else self.case(s) for s in sizes]

    def make_inputs(self, case: Case, rng: np.random.Generator) -> list[np.ndarray]:
        """Small integers stored as float32: sums and products stay exact, so any error is a bug."""
        return [rng.integers(-9, 10, size=shape).astype(np.float32) for shape in case.inputs]

    def expected(self, case: Case, inputs: list[np.ndarray]) -> np.ndarray:
        out = np.asarray(self.reference(*inputs, *case.scalars), dtype=np.float64)
        assert out.shape == case.out, f"{self.id}: reference gave {out.shape}, case says {case.out}"
        return out


def blocks_for(n: int, per_block: int) -> int:
    return math.ceil(n / per_block)

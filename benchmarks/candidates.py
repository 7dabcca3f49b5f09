"""Grade candidate CUDA kernels beside their track's references, timing only, in one GPU call: how a reference is
tuned before it replaces the old one (the records of such sweeps: ``benchmarks/results/<track>/<track>-sweep-*.md``).

    WORKSHOP_SANDBOX=off python -m benchmarks.candidates [--budget-s 1] [--repeat 2] CASE...

(from the repository root; unsandboxed, since the spec copies live under /tmp). CASE is ``TRACK:KERNEL[:FILE][;KEY=
VALUE...]``: FILE a candidate's source (default: the kernel's reference), each KEY=VALUE a line of the kernel's spec
table set in a copy of the spec (``params={ BK = 64, STAGES = 3 }``, ``dynamic_smem=74752``, ``persistent=true``,
``perf_shape=[8192, 8192, 8192]``, ``tensor_maps=[...]``). Each case is graded by the grader's own `grade_kernel`
in its own child (correct at every check shape, then timed against the track's baseline at the spec's perf_shape;
no sanitizer, no counter rules), the list ``--repeat`` times in order, one line a case. Compare ratios within one
call only: the baseline moves between calls and cards. With ``--launch-once SHAPE`` each case is only launched once
at SHAPE, for a profiler (``bash benchmarks/gpu_trusted.sh profile-cases``).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.spec_copies import absolute_text, with_kernel_lines
from graders.cuda_engine.grade import grade_kernel
from graders.cuda_engine.spec import load_spec
from workshop import records


@dataclass(frozen=True)
class Case:
    track: str
    kernel: str
    source_file: Path | None = None
    lines: dict[str, str] = field(default_factory=dict)


def parse_case(text: str) -> Case:
    """``TRACK:KERNEL[:FILE][;KEY=VALUE...]`` as a Case (the first KEY=VALUE may follow KERNEL's colon)."""
    head, *overrides = text.split(";")
    track, _, rest = head.partition(":")
    kernel, _, source = rest.partition(":")
    if not track or not kernel:
        raise ValueError(f"{text!r}: a case is TRACK:KERNEL[:FILE][;KEY=VALUE...]")
    if "=" in source:
        source, overrides = "", [source, *overrides]
    lines = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{text!r}: {item!r} is not KEY=VALUE")
        lines[key.strip()] = value.strip()
    return Case(track, kernel, Path(source) if source else None, lines)


def spec_with(case: Case, folder: Path) -> Path:
    """A copy of the case's track spec in ``folder`` with its lines set in the kernel's table (a key the table lacks is
    added to it) and every reference made absolute."""
    text = with_kernel_lines(absolute_text(load_spec(case.track)), case.kernel, case.lines)
    path = folder / f"{case.track}-{case.kernel}-{len(list(folder.iterdir()))}.toml"
    path.write_text(text)
    load_spec(path)   # refuses a copy the spec's own checks refuse, before any GPU time
    return path


def grade_case(case: Case, folder: Path, budget_s: float) -> str:
    """The case graded, as one line: its status, and its rate and ratio to the baseline or the grader's message."""
    spec_file = spec_with(case, folder)
    source = (case.source_file or load_spec(spec_file).kernel(case.kernel).reference).read_text()
    result = grade_kernel(spec_file, case.kernel, source, budget_s=budget_s, sanitize=False, profile=False).as_dict()
    return one_line(records.kernel_row(result))


def launch_case(case: Case, folder: Path, shape: tuple[int, ...]) -> None:
    """The case's kernel compiled as its spec copy says and launched once at ``shape`` (what ncu profiles in
    ``gpu_trusted.sh profile-cases``); no check, no timing."""
    from graders.cuda_engine.launch_child import launch_once
    kernel = load_spec(spec_with(case, folder)).kernel(case.kernel)
    source = (case.source_file or kernel.reference).read_text()
    launch_once(kernel, kernel.geometry, source, shape, seed=1)


def one_line(row: dict) -> str:
    """A reference row's status (`workshop.records.kernel_row`), and its rate and ratio to the baseline where it was
    timed, else the grader's message."""
    if "ratio" in row:
        return f"{row['status']} {row['kernel_rate']:.0f} {row['unit']}, {row['ratio']:.3f} of {row['baseline']}"
    return f"{row['status']} {row['message'][:160]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget-s", type=float, default=1.0, help="timing budget of each grading")
    parser.add_argument("--repeat", type=int, default=1, help="grade the list this many times, in order")
    parser.add_argument("--launch-once", metavar="SHAPE", help="only launch each case once at SHAPE (e.g. "
                        "4096x32768), under a profiler: no check, no timing")
    parser.add_argument("cases", nargs="+", metavar="CASE")
    args = parser.parse_args(argv)
    cases = [parse_case(text) for text in args.cases]
    folder = Path(tempfile.mkdtemp(prefix="candidates-"))
    if args.launch_once:
        shape = tuple(int(n) for n in args.launch_once.split("x"))
        for case in cases:
            launch_case(case, folder, shape)
        return 0
    for _ in range(args.repeat):
        for text, case in zip(args.cases, cases):
            print(f"{text}: {grade_case(case, folder, args.budget_s)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

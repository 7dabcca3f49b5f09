"""Where a kernel's compute-sanitizer time goes: the preparations of a whole reference GEMM took 37 of its 73 s on an
H100 (benchmarks/results/gemm/grading-time-gemm-20261207-0816.md), about 4 s a kernel for three tool runs side by
side. This times, for each kernel named, the pieces of one `graders.cuda_engine.sanitizer.sanitize`, each the
median of ``--repeats`` runs, in the grader's own sandboxed children:

- ``launch``: the launch child alone, no tool (the sandbox, Python, torch, CUDA, NVRTC, one launch);
- ``memcheck``, ``racecheck``, ``initcheck``: each tool alone, as `sanitizer.tool_wrapper` runs it;
- ``initcheck watching the kernel only``: initcheck with the kernel filter the other tools have;
- ``memcheck without the device-heap check``: ``--check-device-heap no``;
- ``three tools side by side``: `sanitizer.sanitize` (what one kernel's preparation runs);
- ``N kernels side by side``: N of those at once (``--together``, the preparations' 4).

Run on a GPU worker: ``python -m benchmarks.sanitizer_cost --track gemm --kernels naive vectorized warptiling``.
Prints a table and writes ``sanitizer-cost-<date-time>.json`` under benchmarks/results/platform/.
"""
from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from graders.cuda_engine import sanitizer
from graders.cuda_engine.grade import _child_env, _request
from graders.cuda_engine.spec import load_spec, resolve_geometry
from graders.sandbox.run import run_child
from workshop.records import write_gpu_record


def launch_of(track: str, kernel_id: str) -> tuple[dict, object, object]:
    """(the sanitizer's launch request for ``kernel_id``'s reference at its sanitize shape, the kernel, geometry)."""
    spec = load_spec(track)
    kernel = spec.kernel(kernel_id)
    geometry = resolve_geometry(kernel, None, None, None)
    request = _request(spec, kernel_id, kernel.reference.read_text(), geometry, None, None, None, 0.25, 1)
    return request | {"shape": list(sanitizer.sanitize_shape(kernel, geometry))}, kernel, geometry


def child_run(launch: dict, wrapper: tuple[str, ...] = ()) -> Callable[[], None]:
    def run() -> None:
        got = run_child(sanitizer.CHILD, launch, timeout_s=sanitizer.TIMEOUT_S, gpu=True, wrapper=wrapper,
                        env=_child_env())
        if not got.ok or "error" in got.answer:
            raise RuntimeError(f"{got.status}: {got.message or got.answer.get('error')} {got.stdout[-300:]}")
    return run


def variants(track: str, kernel_id: str, together: int) -> dict[str, Callable[[], None]]:
    launch, kernel, geometry = launch_of(track, kernel_id)
    found = {"launch": child_run(launch)}
    for tool in sanitizer.TOOLS:
        found[tool] = child_run(launch, sanitizer.tool_wrapper(tool, kernel.function))
    filtered = sanitizer.tool_wrapper("memcheck", kernel.function)   # memcheck's options: the kernel filter among them
    found["initcheck watching the kernel only"] = child_run(
        launch, tuple("initcheck" if option == "memcheck" else option for option in filtered))
    found["memcheck without the device-heap check"] = child_run(
        launch, sanitizer.tool_wrapper("memcheck", kernel.function) + ("--check-device-heap", "no"))

    def three() -> None:
        sanitizer.sanitize(launch, kernel, geometry, _child_env())

    def several() -> None:
        with ThreadPoolExecutor(together) as pool:
            list(pool.map(lambda _: three(), range(together)))

    found["three tools side by side"] = three
    found[f"{together} kernels side by side"] = several
    return found


def timed(run: Callable[[], None], repeats: int) -> dict:
    seconds = []
    for _ in range(repeats):
        start = time.monotonic()
        run()
        seconds.append(round(time.monotonic() - start, 3))
    return {"median_s": statistics.median(seconds), "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--track", default="gemm")
    parser.add_argument("--kernels", nargs="+", default=["naive", "warptiling"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--together", type=int, default=4)
    args = parser.parse_args()
    measured: dict[str, dict] = {}
    for kernel_id in args.kernels:
        measured[kernel_id] = {}
        for name, run in variants(args.track, kernel_id, args.together).items():
            measured[kernel_id][name] = timed(run, args.repeats)
            print(f"{kernel_id:>12} {name:>40}: {measured[kernel_id][name]['median_s']:7.3f} s "
                  f"{measured[kernel_id][name]['seconds']}", flush=True)
    write_gpu_record("sanitizer-cost", f"compute-sanitizer's cost per kernel of {args.track}, by piece",
                     {"track": args.track, "repeats": args.repeats, "together": args.together,
                      "measured": measured})


if __name__ == "__main__":
    main()

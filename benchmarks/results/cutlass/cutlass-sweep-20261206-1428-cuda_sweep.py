"""Grades candidate CUDA kernels beside their track's references in one call: timing only (no sanitizer, no
counters), each kernel in its own grading child, at the spec's perf_shape. Run from the repository root:
    WORKSHOP_SANDBOX=off python3 .sweep/cuda_sweep.py [--budget-s 1] [--repeat 2] CASE...
CASE is TRACK:KERNEL[:FILE][;KEY=VALUE;...]: FILE a candidate source (default the reference), each KEY a spec
line of that kernel's table to set (params, dynamic_smem: e.g. 'params={ BK = 64, STAGES = 3 }'), separated by ';'."""
import argparse, re, sys, tempfile
from pathlib import Path
sys.path.insert(0, ".")
from graders.cuda_engine.grade import grade_kernel
from graders.cuda_engine.spec import load_spec
from benchmarks.gemm_bench import gemm_row


def spec_copy(track: str, kernel: str, lines: dict, folder: Path) -> Path:
    spec = load_spec(track)
    text = spec.path.read_text()
    text = re.sub(r'^reference = "(.*)"$', lambda m: f'reference = "{(spec.path.parent / m.group(1)).resolve()}"',
                  text, flags=re.M)
    head, sep, tail = text.partition(f'id = "{kernel}"')
    body, nxt, rest = tail.partition("[[kernel]]")
    for key, value in lines.items():
        body, n = re.subn(rf"^{key} = .*$", f"{key} = {value}", body, count=1, flags=re.M)
        if n != 1:
            body = body.rstrip("\n") + f"\n{key} = {value}\n\n"
    path = folder / f"{track}-{kernel}-{abs(hash(tuple(sorted(lines.items()))))}.toml"
    path.write_text(head + sep + body + nxt + rest)
    return path


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--budget-s", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("cases", nargs="+")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="sweep-"))
    for _ in range(args.repeat):
        for case in args.cases:
            track, kernel, *more = case.split(":", 2)
            parts = more[0].split(";") if more else []
            source_file = parts.pop(0) if parts and "=" not in parts[0] else None
            overrides = ";".join(parts)
            lines = dict(item.split("=", 1) for item in overrides.split(";") if item)
            lines = {k.strip(): v.strip() for k, v in lines.items()}
            spec_file = spec_copy(track, kernel, lines, folder)
            source = Path(source_file).read_text() if source_file else load_spec(spec_file).kernel(kernel).reference.read_text()
            r = gemm_row(grade_kernel(spec_file, kernel, source, budget_s=args.budget_s, sanitize=False,
                                      profile=False).as_dict())
            print(f"{case}: {r['status']}" + (f" {r['gflops'] / 1e3:.0f} TFLOP/s, {r['ratio']:.3f} of the baseline"
                                              if "ratio" in r else f" {r['message'][:160]}"), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Stage the build context of the worker and coordinator images: exactly the files a worker grades with.

    python3 docker/context.py DEST      (any Python 3.11+: it needs nothing but the standard library)
    python3 docker/context.py --list    the solutions it would stage, one a line

Copies, from what git tracks in this checkout: the code packages (``graders``, ``gradebook``, ``workshop``),
``pyproject.toml``, ``nbgrader_config.py``, ``jupyter-config/``, and of each track only its grader files
(`graders.tracks.GRADER_FILES`: ``spec.toml``, ``structure.toml``, ``problem.py``) plus the reference solutions
that a counter rule profiles beside the student's kernel (``counter.relative_to`` in a CUDA spec: the grader runs
that reference, so a GPU worker needs its source). No other solution, no source notebook, no gradebook, no
benchmark record.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from graders import tracks  # noqa: E402  (GRADER_FILES: what the sandbox shows a grading child of a track)

CODE = ("graders", "gradebook", "workshop")
TOP_FILES = ("pyproject.toml", "nbgrader_config.py", "jupyter-config")


def counter_references(spec_path: Path) -> list[Path]:
    """The reference sources a spec's counter rules profile (``[[kernel]] counter.relative_to``), read from the
    TOML alone (`graders.cuda_engine.spec` checks that each names a kernel with a reference)."""
    kernels = {k["id"]: k for k in tomllib.loads(spec_path.read_text()).get("kernel", [])}
    named = {k["counter"]["relative_to"] for k in kernels.values() if "counter" in k}
    return sorted((spec_path.parent / kernels[name]["reference"]).resolve() for name in named)


def tracked(*paths: str) -> set[str]:
    return set(subprocess.run(["git", "ls-files", *paths], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.split())


def files() -> list[Path]:
    """The repository-relative paths to copy (committed files only: a track still being written is left out)."""
    chosen = {Path(p) for p in tracked(*CODE, *TOP_FILES) if not p.endswith((".ipynb", ".db"))}
    grader_files = tracked(*(f"tracks/*/{name}" for name in tracks.GRADER_FILES))
    chosen |= {Path(p) for p in grader_files}
    for spec in sorted(p for p in grader_files if p.endswith("/spec.toml")):
        chosen |= {path.relative_to(ROOT) for path in counter_references(ROOT / spec)}
    return sorted(chosen)


def stage(dest: Path) -> list[Path]:
    if dest.exists():
        shutil.rmtree(dest)
    copied = files()
    for rel in copied:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dest / rel)
    return copied


def solutions(paths: list[Path]) -> list[str]:
    return [str(p) for p in paths if "solutions" in p.parts]


if __name__ == "__main__":
    if sys.argv[1:] == ["--list"]:
        print("\n".join(solutions(files())))
    else:
        staged = stage(Path(sys.argv[1]))
        print(f"{len(staged)} files; solutions (counter references): {', '.join(solutions(staged)) or 'none'}")

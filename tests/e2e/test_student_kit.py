"""What leaves the course directory (`workshop.staging`): a student kit holds the grader and each track's
grading files but no solution, source notebook or gradebook, and a notebook's check runs from it; a worker's copy
adds only the course config and the references its counter rules profile."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from graders import tracks
from graders.settings import PACKAGE_ROOT as ROOT
from workshop.staging import counter_references, solutions, stage, student_files, worker_files

CHECK = """
import graders, sys
from pathlib import Path
assert Path(graders.__file__).is_relative_to(sys.argv[1]), graders.__file__
sys.path.insert(0, sys.argv[2])
from kernels import map_kernel
from graders.numba_engine.grade import check
check("map", map_kernel)
"""


def test_a_student_kit_holds_the_grader_and_no_solution():
    paths = student_files()
    names = {str(p) for p in paths}
    assert not solutions(paths) and not [p for p in paths if p.suffix in (".ipynb", ".db")]
    assert "nbgrader_config.py" not in names and not [n for n in names if n.startswith(("assignments/", "bench"))]
    assert {"pyproject.toml", "jupyter-config/jupyter_config.py", "jupyter-config/nbgrader_config.py",
            "graders/sandbox/run.py", "workshop/jupyter_config.py"} <= names
    for track in tracks.all_tracks():
        assert {f"tracks/{track.name}/{f}" for f in tracks.GRADER_FILES if (track.folder / f).is_file()} <= names


def test_a_worker_adds_the_course_config_the_counter_references_and_the_quiz_keys_only():
    references = sorted({ref.relative_to(ROOT) for spec in ROOT.glob("tracks/*/spec.toml")
                         for ref in counter_references(spec)})
    assert references and solutions(worker_files()) == references
    keys = {Path("tracks", t.name, "key.py") for t in tracks.all_tracks() if (t.folder / "key.py").is_file()}
    assert keys and set(worker_files()) - set(student_files()) == {Path("nbgrader_config.py"), *references, *keys}


def test_a_check_runs_from_a_student_kit(tmp_path):
    kit = tmp_path / "kit"
    stage(kit, student_files())
    (tmp_path / "kernels.py").write_text("from numba import cuda\n\n\n@cuda.jit\ndef map_kernel(out, a, size):\n"
                                         "    i = cuda.threadIdx.x\n    out[i] = a[i] + 10\n")
    done = subprocess.run([sys.executable, "-c", CHECK, str(kit), str(tmp_path)], capture_output=True, text=True,
                          env={"PYTHONPATH": str(kit), "PATH": "/usr/bin:/bin", "NUMBA_ENABLE_CUDASIM": "1",
                               "HOME": str(tmp_path)}, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "✓ Map: correct on the 1 public case(s)" in done.stdout and "✓ access limits" in done.stdout

"""nbgrader's autograde, made safe for hostile submissions: configured in ``nbgrader_config.py``.

nbgrader turns each test cell's *output* into points, and it gets that output by running the student's
notebook in a Jupyter kernel. Three preprocessors change who decides that output:

- `StartTrustedGrading` (first) reads the submission from the file (`graders.submission`: each graded
  cell's one grading call, whose source nbgrader's ``OverwriteCells`` restored from the gradebook, with its
  arguments taken from the solution cells by parsing) and starts grading it in nbgrader's own process, in a
  background thread: each registered hidden test (`graders.hidden_tests`) grades in sandboxed children.
- `SandboxedExecute` runs the notebook meanwhile (the student's feedback: their prints, plots and errors),
  its kernel (`SandboxedKernelManager`) inside a bubblewrap sandbox (`graders.sandbox.run`): no network, no
  GPU, a read-only filesystem without the course directory, capped memory, CPU time and processes, and
  nothing that outlives it. A notebook whose kernel dies or hangs is still graded.
- `TrustedGrades`, before nbgrader's ``SaveAutoGrades``, waits for the verdicts and replaces every graded
  test cell's outputs with them, and its ``metadata.workshop`` with what its test graded, as data (status,
  points, timing, GPU: `graders.result.publish`). Nothing the notebook's kernel printed, returned, raised
  or put in a cell's metadata is kept there.

A GPU-only assignment autograded without a GPU, or any assignment on a machine without the sandbox, stops
the submission with a line in nbgrader's log; nothing is recorded for it.
"""
from __future__ import annotations

import io
import os
import shutil
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from jupyter_client.manager import AsyncKernelManager
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat import NotebookNode
from nbformat.v4 import new_output
from nbgrader import utils
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from traitlets import Integer

from graders import tracks
from graders.cuda_engine import grade as _cuda_grade  # noqa: F401 (registers the engine's hidden tests)
from graders.cuda_engine import structure as _cuda_structure  # noqa: F401 (same)
from graders.gpu import NeedsGPUWorker, require_gpu
from graders.hidden_tests import HIDDEN_TESTS, RUN_ALONE, enter_trusted_grader
from graders.numba_engine import grade as _numba_grade  # noqa: F401 (same)
from graders.result import collect
from graders.sandbox.run import Confinement, SandboxUnavailable, sandbox_argv
from graders.submission import HiddenCall, Submission, SubmissionError, hidden_call

GIB = 1 << 30


class SandboxedKernelManager(AsyncKernelManager):
    """A Jupyter kernel inside the sandbox, reached over unix sockets in a private directory."""

    memory_bytes = Integer(4 * GIB, config=True, help="memory cap of the notebook's kernel")
    cpu_seconds = Integer(1800, config=True, help="CPU-time cap of the notebook's kernel")

    async def _async_pre_start_kernel(self, **kw):
        self._socket_dir = Path(tempfile.mkdtemp(prefix="workshop-kernel-"))
        self.transport = "ipc"
        self.connection_file = str(self._socket_dir / "kernel.json")
        self.ip = str(self._socket_dir / "ipc")
        self.kernel_spec.interrupt_mode = "message"   # a signal would reach bubblewrap, not the kernel
        env = dict(kw.get("env") or os.environ)
        env["NUMBA_ENABLE_CUDASIM"] = "1"             # no GPU in here: hand-launched kernels use the simulator
        kw["env"] = env
        return await super()._async_pre_start_kernel(**kw)

    def format_kernel_cmd(self, extra_arguments=None) -> list[str]:
        course = Path(CourseDirectory(config=self.config).root)
        confinement = Confinement(gpu=False, memory_bytes=self.memory_bytes, cpu_seconds=self.cpu_seconds,
                                  writable=(self._socket_dir,), hide=(course,))
        return sandbox_argv(super().format_kernel_cmd(extra_arguments), confinement)

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        if not restart and getattr(self, "_socket_dir", None):
            shutil.rmtree(self._socket_dir, ignore_errors=True)


class SandboxedExecute(Execute):
    """nbgrader's Execute with the kernel in the sandbox. A kernel that dies, a cell that will not stop or
    output that never arrives ends the notebook's run there, not its grading."""

    def __init__(self, **kwargs):
        kwargs["kernel_manager_class"] = SandboxedKernelManager
        super().__init__(**kwargs)

    def preprocess(self, nb: NotebookNode, resources: dict):
        try:
            return super().preprocess(nb, resources)
        except SandboxUnavailable:
            raise
        except (DeadKernelError, CellTimeoutError, RuntimeError) as exc:
            self.log.warning("The notebook stopped running (%s: %s); the cells after it did not run. Graded "
                             "cells are graded from the submitted file all the same.", type(exc).__name__,
                             str(exc).splitlines()[0] if str(exc) else "")
            return nb, resources


class _ThreadStdout(io.TextIOBase):
    """``sys.stdout`` while grading: a grading thread's prints go to its own buffer, others to the real one."""

    def __init__(self, real):
        self.real, self.local = real, threading.local()

    def write(self, text: str) -> int:
        buffer = getattr(self.local, "buffer", None)
        return (buffer or self.real).write(text)

    def flush(self) -> None:
        if getattr(self.local, "buffer", None) is None:
            self.real.flush()


class _Grading:
    """The hidden tests of one submission, graded in a background thread while its notebook runs.

    Tests run ``workers`` at a time (each grades in sandboxed children; the tests of one kernel share a
    child, and one of them waits for the other), except those that time kernels
    (`graders.hidden_tests.RUN_ALONE`): they run one by one once the others and the notebook are done, so
    that nothing else runs on the worker while they measure."""

    def __init__(self, cells: list[NotebookNode], submission: Submission, workers: int, log):
        self.log, self.submission, self.workers = log, submission, workers
        self.calls = {c.metadata["nbgrader"]["grade_id"]: _hidden_call(c) for c in cells}
        self.outputs: dict[str, list[NotebookNode]] = {}
        self.results: dict[str, list[dict]] = {}   # what each test graded (`graders.result.publish`)
        self.failure: BaseException | None = None
        self.notebook_done = threading.Event()
        self.stdout = _ThreadStdout(sys.stdout)
        self._real_stdout, sys.stdout = sys.stdout, self.stdout
        self._thread = threading.Thread(target=self._run, name="trusted-grading", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        alone = [g for g, (name, _) in self.calls.items() if name in RUN_ALONE]
        together = [g for g in self.calls if g not in alone]
        try:
            with ThreadPoolExecutor(max(1, self.workers)) as pool:
                self.outputs.update(zip(together, pool.map(self._grade, together)))
            if alone:
                self.notebook_done.wait()
            for grade_id in alone:
                self.outputs[grade_id] = self._grade(grade_id)
        except BaseException as exc:   # a worker that cannot grade (no GPU, no sandbox): the caller re-raises
            self.failure = exc

    def finish(self) -> None:
        """Wait until every graded cell has its outputs (the notebook has run); re-raises what stopped the
        grading."""
        self.notebook_done.set()
        self._thread.join()
        sys.stdout = self._real_stdout
        if self.failure is not None:
            raise self.failure

    def _grade(self, grade_id: str) -> list[NotebookNode]:
        out = self.stdout.local.buffer = io.StringIO()
        try:
            _, call = self.calls[grade_id]
            if isinstance(call, Exception):
                raise call
            args = [self.submission.resolve(a) for a in call.args]
            kwargs = {name: self.submission.resolve(v) for name, v in call.keywords}
            with collect() as results:
                try:
                    points = HIDDEN_TESTS[call.function](*args, **kwargs)
                finally:
                    self.results[grade_id] = [r.as_dict() for r in results]
        except (NeedsGPUWorker, SandboxUnavailable) as exc:   # this worker cannot grade: record nothing
            self.log.error("%s: %s", grade_id, exc)
            raise
        except Exception as exc:  # the kernel failed its test, or the submission lacks what it needs
            self.log.info("%s: 0 points: %s: %s", grade_id, type(exc).__name__, exc)
            return _outputs(out.getvalue(), error=exc)
        finally:
            self.stdout.local.buffer = None
        self.log.info("%s: %s", grade_id, "full points" if points is None else f"{points} points")
        return _outputs(out.getvalue(), points=points)


def _hidden_call(cell: NotebookNode) -> tuple[str, HiddenCall | Exception]:
    """(the hidden test's name, or "" where the cell has none; the call, or why it cannot be read)."""
    try:
        call = hidden_call(cell.source, set(HIDDEN_TESTS))
    except (SubmissionError, SyntaxError) as exc:
        return "", exc
    return call.function, call


def _outputs(text: str, *, points: float | None = None, error: Exception | None = None) -> list[NotebookNode]:
    """A graded cell's outputs as nbgrader reads them: an error scores 0, a number is partial credit."""
    outputs = [new_output("stream", name="stdout", text=text)] if text else []
    if error is not None:
        name = type(error).__name__
        outputs.append(new_output("error", ename=name, evalue=str(error), traceback=[f"{name}: {error}"]))
    elif points is not None:
        outputs.append(new_output("execute_result", data={"text/plain": repr(float(points))},
                                  execution_count=None))
    return outputs


RESULTS_KEY = "workshop"   # graded cells' metadata: {"results": [GradeResult.as_dict(), ...]}


def graded_cells(nb: NotebookNode) -> list[NotebookNode]:
    """The graded test cells: the ones whose outputs and ``metadata.workshop`` the trusted grader writes."""
    return [c for c in nb.cells if c.cell_type == "code" and utils.is_grade(c) and not utils.is_solution(c)]


def stored_results(cell: NotebookNode) -> list[dict]:
    """What `TrustedGrades` stored in a graded cell of an autograded notebook (see `graded_cells`)."""
    return cell.metadata.get(RESULTS_KEY, {}).get("results", [])


GRADING = "workshop_trusted_grading"   # the key of the running `_Grading` in nbgrader's resources
# What nbgrader's submit (and collect) put beside a submission's notebooks: not handed in by the student.
EXCHANGE_FILES = ("timestamp.txt", "submission_secret.txt")


class StartTrustedGrading(NbGraderPreprocessor):
    """Before the notebook runs: read the submission from the file and start grading it in the background."""

    workers = Integer(2 * (os.cpu_count() or 1), config=True, help="hidden tests graded at once")

    def preprocess(self, nb: NotebookNode, resources: dict):
        assignment = resources["nbgrader"]["assignment"]
        track = tracks.find(assignment)
        if track is not None and track.requires_gpu:
            require_gpu(f"Autograding {assignment}")   # before anything runs: no zeros recorded
        enter_trusted_grader()
        self._report_extra_files(resources)
        resources[GRADING] = _Grading(graded_cells(nb), Submission(nb), self.workers, self.log)
        return nb, resources

    def _report_extra_files(self, resources: dict) -> None:
        """Files handed in beside the notebook are never imported or read; say which were ignored."""
        folder = Path(resources.get("metadata", {}).get("path", ""))
        if not folder.is_dir():
            return
        coursedir = CourseDirectory(config=self.config)
        source = Path(coursedir.format_path(coursedir.source_directory, ".", resources["nbgrader"]["assignment"]))
        shipped = {p.relative_to(source) for p in source.rglob("*") if p.is_file()} if source.is_dir() else set()
        shipped |= {Path(name) for name in EXCHANGE_FILES}
        extra = sorted(str(p.relative_to(folder)) for p in folder.rglob("*")
                       if p.is_file() and p.suffix != ".ipynb" and p.relative_to(folder) not in shipped)
        if extra:
            self.log.warning("Ignored files handed in beside the notebook (never imported): %s",
                             ", ".join(extra[:20]) + (" ..." if len(extra) > 20 else ""))


class TrustedGrades(NbGraderPreprocessor):
    """After the notebook ran: replace every graded test cell's outputs with the trusted verdict, and its
    ``metadata.workshop`` with ``{"results": [...]}``, what its hidden test graded (`GradeResult.as_dict`:
    status, points, timing, GPU), for exports and feedback."""

    def preprocess(self, nb: NotebookNode, resources: dict):
        grading = resources.pop(GRADING)
        grading.finish()
        for cell in graded_cells(nb):
            grade_id = cell.metadata["nbgrader"]["grade_id"]
            cell.outputs = grading.outputs[grade_id]
            cell.metadata[RESULTS_KEY] = {"results": grading.results.get(grade_id, [])}
        return nb, resources

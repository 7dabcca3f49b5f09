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

Before any of them, `BoundedNotebookExporter` (nbgrader's ``Autograde.exporter_class``) checks the submitted
file's caps before it is parsed. Everything from the submission into nbgrader's process is bounded, and each
bound says which it is in the feedback: the file and its cells (`graders.submission`), what grading children
send back (`graders.sandbox.capped_output`), the notebook's outputs and kernel messages while it runs and its
run time (`SandboxedExecute`), a hidden test's printed report and error text, and the wait for the hidden tests
(`StartTrustedGrading.time_limit`).

A GPU-only assignment autograded without a GPU, or any assignment on a machine without the sandbox, stops
``nbgrader autograde`` before it touches a submission, with one line in its log and exit status 1
(`BoundedNotebookExporter`): nothing is recorded, nothing is written to ``autograded/``.
"""
from __future__ import annotations

import io
import math
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import zmq
from jupyter_client.manager import AsyncKernelManager
from jupyter_core.utils import run_sync
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbconvert.exporters import NotebookExporter
from nbformat import NotebookNode
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output
from nbgrader import utils
from nbgrader.api import Gradebook
from nbgrader.converters import Autograde, NbGraderException
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import ClearHiddenTests, Execute, NbGraderPreprocessor
from traitlets import Integer

from graders import tracks
from graders.cuda_engine import grade as _cuda_grade  # noqa: F401 (registers the engine's hidden tests)
from graders.cuda_engine import structure as _cuda_structure  # noqa: F401 (same)
from graders.gpu import NeedsGPUWorker, require_gpu
from graders.hidden_tests import (HIDDEN_TESTS, PREPARE, PREPARE_TOGETHER, RUN_ALONE, enter_trusted_grader,
                                  grading_student, preparation, wrapped)
from graders.model_engine import grade as _model_grade  # noqa: F401 (same)
from graders.numba_engine import grade as _numba_grade  # noqa: F401 (same)
from graders.quiz_engine import grade as _quiz_grade  # noqa: F401 (same)
from graders.result import collect
from graders.roofline_engine import grade as _roofline_grade  # noqa: F401 (same)
from graders.sandbox.capped_output import CappedText, shorten
from graders.sandbox.run import Confinement, SandboxUnavailable, sandbox_argv
from graders.sandbox.session import ChildSession, SessionPool
from graders.sandbox.starvation import WorkerStarved
from graders.submission import (MAX_NOTEBOOK_BYTES, HiddenCall, Submission, SubmissionError, file_problem,
                                hidden_call, notebook_problem)
from graders.targets_gpu import ta_lines
from graders.tilelang_engine import grade as _tilelang_grade  # noqa: F401 (same)
from graders.triton_engine import grade as _triton_grade  # noqa: F401 (same)

GIB = 1 << 30
MIB = 1 << 20
MAX_MESSAGE_BYTES = 8 * MIB     # one message from the notebook's kernel, on any channel
QUEUED_MESSAGES = 8             # messages from it waiting to be read, per channel (beyond: they wait in the kernel)
# Every ZMQ socket to the notebook's kernel: a larger message is refused before it is read (libzmq closes the
# channel), and at most QUEUED_MESSAGES wait in nbgrader's process, however fast the kernel sends.
CHANNEL_OPTIONS = {zmq.MAXMSGSIZE: MAX_MESSAGE_BYTES, zmq.RCVHWM: QUEUED_MESSAGES}
MAX_ERROR_CHARS = 20_000        # the text of an error: a hidden test's, or the notebook's execute reply's
MAX_REPORT_CHARS = 200_000      # what one hidden test prints
REPORT = "what a hidden test prints"


class SandboxedKernelManager(AsyncKernelManager):
    """A Jupyter kernel inside the sandbox, reached over unix sockets in a private directory. Every channel to
    it refuses a message over `MAX_MESSAGE_BYTES` before reading it (ZMQ's MAXMSGSIZE): such a message never
    exists in nbgrader's process; libzmq closes the channel instead, for good (`SandboxedExecute` then stops
    the notebook). At most `QUEUED_MESSAGES` wait on each channel (ZMQ's RCVHWM)."""

    memory_bytes = Integer(4 * GIB, config=True, help="memory cap of the notebook's kernel")
    cpu_seconds = Integer(1800, config=True, help="CPU-time cap of the notebook's kernel")

    async def _async_pre_start_kernel(self, **kw):
        for option, value in CHANNEL_OPTIONS.items():   # the manager's own control channel
            self.context.setsockopt(option, value)
        self._socket_dir = Path(tempfile.mkdtemp(prefix="workshop-kernel-"))
        self.transport = "ipc"
        self.connection_file = str(self._socket_dir / "kernel.json")
        self.ip = str(self._socket_dir / "ipc")
        self.kernel_spec.interrupt_mode = "message"   # a signal would reach bubblewrap, not the kernel
        env = dict(kw.get("env") or os.environ)
        env["NUMBA_ENABLE_CUDASIM"] = "1"             # no GPU in here: hand-launched kernels use the simulator
        kw["env"] = env
        return await super()._async_pre_start_kernel(**kw)

    def client(self, **kwargs):
        client = super().client(**kwargs)
        for option, value in CHANNEL_OPTIONS.items():   # before its channels' sockets exist
            client.context.setsockopt(option, value)
        return client

    def format_kernel_cmd(self, extra_arguments=None) -> list[str]:
        course = Path(CourseDirectory(config=self.config).root)
        confinement = Confinement(gpu=False, memory_bytes=self.memory_bytes, cpu_seconds=self.cpu_seconds,
                                  writable=(self._socket_dir,), hide=(course,))
        return sandbox_argv(super().format_kernel_cmd(extra_arguments), confinement)

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        if not restart and getattr(self, "_socket_dir", None):
            shutil.rmtree(self._socket_dir, ignore_errors=True)


# Messages whose content becomes a cell's outputs (or widget state) in nbgrader's process.
OUTPUT_MESSAGES = frozenset({"stream", "display_data", "execute_result", "error", "update_display_data",
                             "comm_open", "comm_msg"})
REFUSED = "workshop_refused"   # in nbgrader's resources: why the submission was not read (`BoundedNotebookExporter`)


class SandboxedExecute(Execute):
    """nbgrader's Execute with the kernel in the sandbox, and the notebook's run bounded. A kernel that dies, a
    cell that will not stop or output that never arrives ends the notebook's run there, not its grading.

    Bounded while it runs, not only afterwards: the outputs kept (each message's text and data, in UTF-8
    bytes) up to ``max_cell_output`` per cell and ``max_notebook_output`` in all, beyond which a cell's outputs
    are dropped and one line says so; one kernel message up to `MAX_MESSAGE_BYTES` (a larger one closes its
    channel, and the notebook stops with a line saying why); an execute reply's error text up to
    `MAX_ERROR_CHARS`; the whole run up to ``time_limit`` seconds, each cell's timeout shortened to what is
    left and the cells after it not run. A submission refused before it was parsed (`BoundedNotebookExporter`)
    is not run."""

    max_cell_output = Integer(4 * MIB, config=True, help="bytes of outputs kept of one cell while it runs")
    max_notebook_output = Integer(16 * MIB, config=True, help="bytes of outputs kept of the whole notebook")
    time_limit = Integer(900, config=True, help="seconds the notebook may run; the cells after it are not run")

    def __init__(self, **kwargs):
        kwargs["kernel_manager_class"] = SandboxedKernelManager
        super().__init__(**kwargs)

    def preprocess(self, nb: NotebookNode, resources: dict):
        if resources.get(REFUSED):   # nbgrader's log already says why (`BoundedNotebookExporter`)
            return nb, resources
        self._deadline = time.monotonic() + self.time_limit
        self._kept, self._cell, self._monitors, self._closed = 0, None, {}, ""
        try:
            return super().preprocess(nb, resources)
        except SandboxUnavailable:
            raise
        except (DeadKernelError, CellTimeoutError, RuntimeError) as exc:
            if self._closed and self._cell is not None:
                self._cell.outputs.append(_note(self._closed))
                exc = DeadKernelError(self._closed)
            self.log.warning("The notebook stopped running (%s: %s); the cells after it did not run. Graded "
                             "cells are graded from the submitted file all the same.", type(exc).__name__,
                             str(exc).splitlines()[0] if str(exc) else "")
            return nb, resources

    def preprocess_cell(self, cell: NotebookNode, resources: dict, index: int):
        self._cell, self._cell_kept, self._cell_over = cell, 0, False
        if cell.cell_type == "code" and time.monotonic() >= self._deadline:
            cell.outputs = [_note(f"not run: the notebook ran for its {self.time_limit} s (the cap on a "
                                  "notebook's run during autograde)")]
            return cell, resources
        return super().preprocess_cell(cell, resources, index)

    def _get_timeout(self, cell: NotebookNode | None) -> int:
        timeout = super()._get_timeout(cell)
        left = max(1, math.ceil(self._deadline - time.monotonic()))
        return min(timeout, left) if timeout else left

    async def async_start_new_kernel_client(self):
        kc = await super().async_start_new_kernel_client()
        self._monitors = {name: getattr(kc, f"{name}_channel").socket.get_monitor_socket(zmq.EVENT_DISCONNECTED)
                          for name in ("shell", "iopub")}
        return kc

    start_new_kernel_client = run_sync(async_start_new_kernel_client)

    async def _async_check_alive(self) -> None:
        """As nbclient's (`DeadKernelError` once the kernel is gone), and the same once a channel to a live kernel
        has closed: nothing more would arrive on it."""
        await super()._async_check_alive()
        closed = [name for name, monitor in self._monitors.items() if monitor.get(zmq.EVENTS) & zmq.POLLIN]
        if closed:
            self._closed = (f"the notebook stopped here: its kernel's {closed[0]} channel closed, as it does when "
                            f"the kernel sends a message larger than {MAX_MESSAGE_BYTES} bytes (the cap on one "
                            "message from the notebook's kernel)")
            raise DeadKernelError(self._closed)

    def process_message(self, msg: dict, cell: NotebookNode, cell_index: int):
        kind = msg["msg_type"]
        if self._cell_over and (kind in OUTPUT_MESSAGES or kind == "clear_output"):
            return None
        if kind in OUTPUT_MESSAGES:
            size = _size(msg["content"]) + sum(len(b) for b in msg.get("buffers") or ())
            if self._cell_kept + size > self.max_cell_output:
                limit, scope = self.max_cell_output, "per cell"
            elif self._kept + size > self.max_notebook_output:
                limit, scope = self.max_notebook_output, "per notebook"
                self._kept = self.max_notebook_output + 1   # nothing more is kept of this notebook
            else:
                self._cell_kept += size
                self._kept += size
                return super().process_message(msg, cell, cell_index)
            self._cell_over = True
            cell.outputs.append(_note(f"output beyond {limit} bytes was dropped (cap: {limit} bytes of output "
                                      f"{scope} during autograde)"))
            return None
        return super().process_message(msg, cell, cell_index)

    def on_cell_executed(self, **kwargs):
        """nbgrader's, which adds the reply's error to the cell's outputs when they lack it, with the error's
        text and traceback capped at `MAX_ERROR_CHARS` each."""
        content = kwargs["execute_reply"]["content"]
        if content.get("status") == "error":
            content["evalue"] = shorten(str(content.get("evalue", "")), MAX_ERROR_CHARS, "an error's text")
            traceback = [str(line) for line in content.get("traceback") or []]
            if sum(map(len, traceback)) > MAX_ERROR_CHARS:
                content["traceback"] = [shorten("\n".join(traceback), MAX_ERROR_CHARS, "a traceback")]
        super().on_cell_executed(**kwargs)


def _note(text: str) -> NotebookNode:
    return new_output("stream", name="stdout", text=f"\n[{text}]\n")


def _size(content) -> int:
    """Bytes of a message's content: its strings in UTF-8, 8 for any other value."""
    size, pending = 0, [content]
    while pending:
        value = pending.pop()
        if isinstance(value, str):
            size += len(value) if value.isascii() else len(value.encode(errors="replace"))
        elif isinstance(value, dict):
            pending += value.keys()
            pending += value.values()
        elif isinstance(value, list):
            pending += value
        else:
            size += 8
    return size


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
    child, and one of them waits for the other; the requests of a handler that runs student Python, the
    puzzles' on the simulator, are each answered by a fork of a child the thread holds,
    `graders.sandbox.session.SessionPool`), except those that time kernels
    (`graders.hidden_tests.RUN_ALONE`): they run one by one once the others and the notebook are done, so
    that nothing else runs on the worker while they measure, in one `graders.sandbox.session.ChildSession`
    (the submission's kernels graded by one child, which a kernel that leaves it unfit replaces). Their
    preparations (`graders.hidden_tests.PREPARE`: work that times nothing, such as a CUDA kernel's
    compute-sanitizer runs) run side by side, `preparing_workers` at a time, from the grading's start, beside the
    notebook's run and the untimed tests (nothing is timed then); a test with a together-handler
    (`graders.hidden_tests.PREPARE_TOGETHER`, e.g. the CUDA kernels' `graders.cuda_engine.grade.prepare_together`:
    one compute-sanitizer child per tool for all of them) has all its calls prepared by it at once, as one of
    those jobs. The first timed test waits for all three. An untimed test may have a preparation too (the puzzles'
    GPU runs, `graders.numba_engine.grade.prepare_correctness_together`): those are prepared from the start as
    well, beside the timed tests' (`_prepare`), and each such test waits for them, queued after the untimed tests
    that have none."""

    def __init__(self, cells: list[NotebookNode], submission: Submission, workers: int, log, *,
                 time_limit: float, refused: str = "", student: str = ""):
        self.log, self.submission, self.workers, self.student = log, submission, workers, student
        self.calls = {c.metadata["nbgrader"]["grade_id"]: ("", SubmissionError(refused)) if refused else
                      _hidden_call(c) for c in cells}
        self.deadline, self.time_limit = time.monotonic() + time_limit, time_limit
        self.outputs: dict[str, list[NotebookNode]] = {}
        self.results: dict[str, list[dict]] = {}   # what each test graded (`graders.result.publish`)
        self.prepared: dict[str, object] = {}       # what each test's preparation returned
        self.failure: BaseException | None = None
        self.notebook_done = threading.Event()
        self.stdout = _ThreadStdout(sys.stdout)
        self._real_stdout, sys.stdout = sys.stdout, self.stdout
        self._thread = threading.Thread(target=self._run, name="trusted-grading", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        alone = [g for g, (name, _) in self.calls.items() if name in RUN_ALONE]
        together = [g for g in self.calls if g not in alone]
        waiting = [g for g in together if self.calls[g][0] in PREPARE]   # untimed tests read their preparation
        together = [g for g in together if g not in waiting] + waiting    # the others first, while it runs
        try:
            with ThreadPoolExecutor(2, thread_name_prefix="preparing") as early:
                ready = early.submit(self._prepare, waiting, "untimed")
                preparing = early.submit(self._prepare, alone, "timed")

                def grade(grade_id: str) -> list[NotebookNode]:
                    if grade_id in waiting:
                        ready.result()
                    return self._grade(grade_id, sessions)

                with SessionPool() as sessions, ThreadPoolExecutor(max(1, self.workers)) as pool:
                    self.outputs.update(zip(together, pool.map(grade, together)))
                if sessions.started:
                    self.log.info("The untimed hidden tests ran in %d grading child(ren), a fork of one for each "
                                  "request", sessions.started)
                preparing.result()
            if alone:
                self.notebook_done.wait()
                self.log.info("%d timed hidden tests begin %.1f s into the grading (the notebook has run)",
                              len(alone), time.monotonic() - (self.deadline - self.time_limit))
            with ChildSession() as session:    # one grading child for the submission's timed kernels
                for grade_id in alone:
                    self.outputs[grade_id] = self._grade(grade_id)
            if session.started:
                self.log.info("The timed hidden tests ran in %d grading child(ren)", session.started)
        except BaseException as exc:   # a worker that cannot grade (no GPU, no sandbox): the caller re-raises
            self.failure = exc
        else:
            self._say_other_gpu()

    def _say_other_gpu(self) -> None:
        """One line in the log for each track whose speed targets were measured on another GPU model than the one
        that graded (`graders.targets_gpu.ta_lines`: what the TA re-measures); it never stops the grading."""
        try:
            lines = ta_lines(r for results in list(self.results.values()) for r in results)
        except Exception:   # a note, not a grade
            return
        for line in lines:
            self.log.warning("%s", line)

    def _prepare(self, tests: list[str], kind: str) -> None:
        """The preparations of the ``kind`` ("timed" or "untimed") tests ``tests`` (those that have one), side by
        side; each one's value is kept for its test (`_grade`). A test's calls whose test has a together-handler
        (`graders.hidden_tests.PREPARE_TOGETHER`) are handed to it at once, one job beside the others; where it
        raises, each of them is prepared alone. A preparation that raises is logged, and its test does that work
        itself."""
        jobs = [g for g in tests if self.calls[g][0] in PREPARE and not isinstance(self.calls[g][1], Exception)]
        if not jobs:
            return
        started, workers = time.monotonic(), preparing_workers()
        if not workers:
            self.log.info("%d %s hidden tests not prepared (WORKSHOP_PREPARING_WORKERS=0): each does that work "
                          "itself", len(jobs), kind)
            return
        groups: dict[str, list[str]] = {}
        for grade_id in jobs:
            if self.calls[grade_id][0] in PREPARE_TOGETHER:
                groups.setdefault(self.calls[grade_id][0], []).append(grade_id)
        single = [g for g in jobs if self.calls[g][0] not in PREPARE_TOGETHER]
        with ThreadPoolExecutor(min(workers, len(single) + len(groups))) as pool:
            grouped = {name: pool.submit(self._prepare_together, name, ids, kind) for name, ids in groups.items()}
            values = dict(zip(single, pool.map(self._prepare_one, single)))
            for name, future in grouped.items():
                together = future.result()
                if together is None:   # its handler raised: each call is prepared alone
                    together = dict(zip(groups[name], pool.map(self._prepare_one, groups[name])))
                values |= together
        prepared = {g: value for g, value in values.items() if value is not None}
        self.prepared.update(prepared)
        self.log.info("%d of %d %s hidden tests prepared in %.1f s, %d at a time", len(prepared), len(jobs), kind,
                      time.monotonic() - started, workers)

    def _prepare_together(self, name: str, grade_ids: list[str], kind: str) -> dict[str, object] | None:
        """The values of the preparations of test ``name``'s calls ``grade_ids``, from its together-handler at once
        (a call whose arguments cannot be read, or whose value is an exception, is logged and not prepared); None
        where the handler raised (logged): each is then prepared alone."""
        if time.monotonic() >= self.deadline:
            return {}
        started, calls = time.monotonic(), {}
        for grade_id in grade_ids:
            try:
                calls[grade_id] = self._arguments(grade_id, self.calls[grade_id][1])
            except Exception as exc:   # the test itself grades, and says what is wrong
                self._not_prepared(grade_id, exc)
        try:
            with grading_student(self.student):
                values = dict(zip(calls, PREPARE_TOGETHER[name](list(calls.values())), strict=True))
        except Exception as exc:
            self.log.info("%s: %d calls not prepared together (%s: %s); each is prepared alone", name, len(calls),
                          type(exc).__name__, shorten(str(exc), MAX_ERROR_CHARS, "an error's text"))
            return None
        for grade_id, value in values.items():
            if isinstance(value, Exception):
                self._not_prepared(grade_id, value)
                values[grade_id] = None
        self.log.info("%s: %d of %d %s hidden tests prepared together in %.1f s", name,
                      sum(value is not None for value in values.values()), len(grade_ids), kind,
                      time.monotonic() - started)
        return values

    def _prepare_one(self, grade_id: str):
        """What test ``grade_id``'s preparation returns, or None where it raised (logged)."""
        if time.monotonic() >= self.deadline:
            return None
        name, call = self.calls[grade_id]
        try:
            args, kwargs = self._arguments(grade_id, call)
            with grading_student(self.student):
                return PREPARE[name](*args, **kwargs)
        except Exception as exc:   # the test itself grades, and says what is wrong
            self._not_prepared(grade_id, exc)
            return None

    def _not_prepared(self, grade_id: str, exc: Exception) -> None:
        self.log.info("%s: not prepared (%s: %s); its test does that work itself", grade_id, type(exc).__name__,
                      shorten(str(exc), MAX_ERROR_CHARS, "an error's text"))

    def finish(self) -> None:
        """Wait until every graded cell has its outputs (the notebook has run), at most until ``time_limit``
        seconds after the grading began: a cell whose test has not finished by then gets an error saying so.
        Re-raises what stopped the grading."""
        self.notebook_done.set()
        self._thread.join(max(0.0, self.deadline - time.monotonic()))
        if self._thread.is_alive():   # its children end at their own time limits; its prints stay in their buffers
            late = [g for g in self.calls if g not in self.outputs]
            self.log.error("The hidden tests did not finish within %g s (StartTrustedGrading.time_limit): %s",
                           self.time_limit, ", ".join(late))
            for grade_id in late:
                self.outputs[grade_id] = self._late()
        else:
            sys.stdout = self._real_stdout
        if self.failure is not None:
            raise self.failure

    def _grade(self, grade_id: str, sessions: SessionPool | None = None) -> list[NotebookNode]:
        """The outputs of test ``grade_id``; ``sessions``: its requests answered by forks go to one of them."""
        if sessions is not None:
            with sessions.lease():
                return self._grade(grade_id)
        if time.monotonic() >= self.deadline:   # `finish` has given up on it: nothing new starts
            return self._late()
        out = self.stdout.local.buffer = CappedText(MAX_REPORT_CHARS)
        try:
            _, call = self.calls[grade_id]
            if isinstance(call, Exception):
                raise call
            args, kwargs = self._arguments(grade_id, call)
            with collect() as results, grading_student(self.student), preparation(self.prepared.get(grade_id)):
                try:
                    points = HIDDEN_TESTS[call.function](*args, **kwargs)
                finally:
                    self.results[grade_id] = [r.as_dict() for r in results]
                    for line in phase_lines(grade_id, results):
                        self.log.info("%s", line)
        except (NeedsGPUWorker, SandboxUnavailable, WorkerStarved) as exc:   # this worker cannot grade: record nothing
            self.log.error("%s: %s", grade_id, exc)
            raise
        except Exception as exc:  # the kernel failed its test, or the submission lacks what it needs
            self.log.info("%s: 0 points: %s: %s", grade_id, type(exc).__name__,
                          shorten(str(exc), MAX_ERROR_CHARS, "an error's text"))
            return _outputs(out.kept(), dropped=out.dropped, error=exc)
        finally:
            self.stdout.local.buffer = None
        self.log.info("%s: %s", grade_id, "full points" if points is None else f"{points} points")
        return _outputs(out.kept(), dropped=out.dropped, points=points)

    def _arguments(self, grade_id: str, call: HiddenCall) -> tuple[list, dict]:
        """The call's arguments, read from the submission (`graders.submission.Submission.resolve`)."""
        return ([self.submission.resolve(a, at=grade_id) for a in call.args],
                {name: self.submission.resolve(v, at=grade_id) for name, v in call.keywords})

    def _late(self) -> list[NotebookNode]:
        return _outputs("", error=TimeoutError(f"not graded: the hidden tests of this submission ran past "
                                               f"{self.time_limit:g} s (the cap on one submission's grading)"))


PREPARING_AT_MOST = 4   # timed tests' preparations at once: a CUDA kernel's is three compute-sanitizer children


def preparing_workers() -> int:
    """How many timed tests' preparations run at once: ``WORKSHOP_PREPARING_WORKERS`` where it is set (a whole
    number; 0: none is prepared, each test does that work itself), else a quarter of the CPUs this process may use,
    at least one and at most `PREPARING_AT_MOST` (a container's CPU quota does not show in its affinity); `ValueError`
    for another value. Read here, not in `graders.settings`: the grading children import that module, and a
    change there is a change of the measuring code that every measured record names."""
    text = os.environ.get("WORKSHOP_PREPARING_WORKERS", "").strip()
    if not text:
        return max(1, min(PREPARING_AT_MOST, len(os.sched_getaffinity(0)) // 4))
    if not text.isdigit():
        raise ValueError(f"WORKSHOP_PREPARING_WORKERS={text!r} is not a whole number of at least 0")
    return int(text)


def phase_lines(grade_id: str, results) -> list[str]:
    """A line for the TA's log per graded kernel that records where its grading's time went (``phases``)."""
    return [f"{grade_id}: {r.test} took " + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in
                                                       r.details["phases"].items())
            for r in results if r.details.get("phases")]


def _hidden_call(cell: NotebookNode) -> tuple[str, HiddenCall | Exception]:
    """(the hidden test's name, or "" where the cell has none; the call, or why it cannot be read)."""
    try:
        call = hidden_call(cell.source, set(HIDDEN_TESTS))
    except (SubmissionError, SyntaxError) as exc:
        return "", exc
    return call.function, call


def _outputs(text: str, *, dropped: int = 0, points: float | None = None,
             error: Exception | None = None) -> list[NotebookNode]:
    """A graded cell's outputs as nbgrader reads them: an error scores 0, a number is partial credit. The error's
    text is capped at `MAX_ERROR_CHARS`. What formgrader and the feedback show, the printed report and the error's
    traceback, has its long lines wrapped as ``nbgrader validate`` shows them (`graders.hidden_tests.wrapped`);
    the error's value is the message as it is, for the autograde log and the exports. ``dropped``: the characters
    of the report that its capture (`CappedText`) did not keep."""
    report = _wrapped_report(text, dropped)
    outputs = [new_output("stream", name="stdout", text=report)] if report else []
    if error is not None:
        name, text = type(error).__name__, shorten(str(error), MAX_ERROR_CHARS, "an error's text")
        outputs.append(new_output("error", ename=name, evalue=text, traceback=wrapped(f"{name}: {text}")))
    elif points is not None:
        outputs.append(new_output("execute_result", data={"text/plain": repr(float(points))},
                                  execution_count=None))
    return outputs


def _wrapped_report(text: str, dropped: int) -> str:
    """What a hidden test printed as its cell shows it: long lines wrapped (`wrapped`), and still within
    `MAX_REPORT_CHARS` once wrapping has indented them: the lines past it are dropped and counted with the
    ``dropped`` characters the capture did not keep, in one note."""
    kept, size = [], 0
    for line in wrapped(text):
        if size + len(line) + 1 > MAX_REPORT_CHARS:
            dropped += len(line) + 1
            continue
        kept.append(line)
        size += len(line) + 1
    if dropped:
        kept.append(f"[{dropped} more characters dropped: {REPORT} is capped at {MAX_REPORT_CHARS}]")
    return "".join(f"{line}\n" for line in kept)


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
    """Before the notebook runs: read the submission from the file and start grading it in the background. A
    submission `BoundedNotebookExporter` refused scores 0 in every graded cell, with the cap it passed."""

    workers = Integer(2 * (os.cpu_count() or 1), config=True, help="hidden tests graded at once")
    time_limit = Integer(1800, config=True, help="seconds one submission's hidden tests may take, from their start")

    def preprocess(self, nb: NotebookNode, resources: dict):
        enter_trusted_grader()
        self._report_extra_files(resources)
        refused = resources.get(REFUSED, "")
        resources[GRADING] = _Grading(graded_cells(nb), Submission(nb), self.workers, self.log,
                                      time_limit=self.time_limit, refused=refused,
                                      student=resources.get("nbgrader", {}).get("student", ""))
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


def cannot_grade_here(assignments: list[str]) -> str:
    """Why this machine cannot grade ``assignments``, or "": one of them needs a GPU worker and there is no GPU
    here, or student code cannot be sandboxed here. The line names the error's class, which a fleet worker
    reads as its own fault (`workshop.fleet.isolated.INFRASTRUCTURE_MARKERS`)."""
    try:
        for assignment in assignments:
            track = tracks.find(assignment)
            if track is not None and track.requires_gpu:
                require_gpu(f"Autograding {assignment}")
        sandbox_argv(["true"])
    except (NeedsGPUWorker, SandboxUnavailable) as exc:
        return f"{type(exc).__name__}: {exc}"
    return ""


def _assignments(converter: Autograde) -> list[str]:
    """The assignments of the submissions ``nbgrader autograde`` found (``converter.assignments``, by folder)."""
    folder = converter._format_source("(?P<assignment_id>.*)", "(?P<student_id>.*)", escape=True)
    return sorted({m["assignment_id"] for path in converter.assignments if (m := re.match(folder, path))})


class BoundedNotebookExporter(NotebookExporter):
    """nbgrader's notebook exporter, with the submission's caps checked before its file is parsed
    (`graders.submission.file_problem`) and before anything reads its cells (`notebook_problem`). Configured as
    ``Autograde.exporter_class``.

    A notebook over a cap is not read further. The release stands in for it, rebuilt from the gradebook (every
    cell nbgrader keeps there, as released: solutions as their stubs, hidden tests cleared), so no course file is
    needed (a fleet worker has none); it is not run, and every graded cell scores 0 with the cap's message
    (`REFUSED` in the resources). nbgrader reads each notebook twice, the submitted file and then what that first
    pass wrote; the second pass learns the refusal from the first.

    nbgrader's autograde makes it once, before it touches any submission: where this machine cannot grade what the
    command would grade (`cannot_grade_here`), it stops the command there, with one line in the log and exit
    status 1. Past that point nbgrader would add each submission to the gradebook, ungraded (formgrader counts
    it), and log a traceback when the grading stops."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._first_pass: dict[tuple[str, str, str], str] = {}   # (student, assignment, notebook) -> why refused
        if isinstance(self.parent, Autograde):
            if why := cannot_grade_here(_assignments(self.parent)):
                self.log.error("%s", why)
                raise NbGraderException(why)

    def from_file(self, file_stream, resources=None, **kw):
        ids = resources["nbgrader"]
        key = (ids["student"], ids["assignment"], ids["notebook"])
        data = file_stream.buffer.read(MAX_NOTEBOOK_BYTES + 1)
        why = file_problem(data)
        nb = None if why else nbformat.reads(data.decode("utf-8"), as_version=4)
        why = why or notebook_problem(nb)
        if why:
            self.log.warning("%s's notebook %s is not graded (0 in every graded cell): %s", key[0], key[2], why)
            nb = self._release(ids)
        if key in self._first_pass:
            why = self._first_pass.pop(key) or why
        else:
            self._first_pass[key] = why
        if why:
            resources[REFUSED] = why
        return self.from_notebook_node(nb, resources, **kw)

    def _release(self, ids: dict) -> NotebookNode:
        with Gradebook(ids["db_url"], CourseDirectory(config=self.config).course_id) as gradebook:
            notebook = gradebook.find_notebook(ids["notebook"], ids["assignment"])
            points = {c.name: c.max_score for c in (*notebook.grade_cells, *notebook.task_cells)}
            graded = {c.name for c in notebook.grade_cells}
            solutions = {c.name for c in notebook.solution_cells}
            tasks = {c.name for c in notebook.task_cells}
            cells = []
            for cell in notebook.source_cells:
                metadata = {"grade_id": cell.name, "grade": cell.name in graded, "solution": cell.name in solutions,
                            "locked": cell.locked, "schema_version": 3}
                metadata |= {"points": points[cell.name]} if cell.name in points else {}
                metadata |= {"task": True} if cell.name in tasks else {}
                new = new_code_cell if cell.cell_type == "code" else new_markdown_cell
                cells.append(new(cell.source, metadata={"nbgrader": metadata}))
        nb, _ = ClearHiddenTests(parent=self).preprocess(new_notebook(cells=cells), {})
        return nb

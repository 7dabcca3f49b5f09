"""nbgrader configuration: the repository root is the course directory.

Source notebooks live in assignments/<name>/ (written by `workshop build` from tracks/<name>/; nothing else
lives there, since nbgrader releases the whole folder); `nbgrader generate_assignment <name>` writes release/,
submissions go under submitted/<student>/<name>/, and `nbgrader autograde <name>` writes autograded/.
`nbgrader release_assignment`, students' `fetch_assignment`/`submit` and `nbgrader collect` go through
exchange/ in the course directory (git-ignored); point ``Exchange.root`` at a shared folder on a multi-user hub.
"""
import sys
import warnings
from pathlib import Path

from sqlalchemy.exc import SAWarning

from gradebook import database
from graders import settings
from graders.notebook import CUDA_LANGUAGE, CUDA_STUB, EDIT_LANGUAGE, EDIT_STUB, MODEL_LANGUAGE, MODEL_STUB
from graders.quiz_engine.notebook import QUIZ_LANGUAGE, QUIZ_STUB

c = get_config()  # noqa: F821 (provided by nbgrader when it loads this file)

c.CourseDirectory.course_id = "kernel-workshop"
c.CourseDirectory.source_directory = "assignments"
c.CourseDirectory.db_url = settings.gradebook_url()

# nbgrader runs the `alembic` script by name when it creates the gradebook: `.venv/bin/nbgrader` finds it without
# an activated venv. A gradebook an earlier run left without its schema version is stamped (gradebook/database.py).
database.alembic_on_path()
if stamped := database.stamp_unversioned(c.CourseDirectory.db_url, Path(__file__).resolve().parent):
    print(f"nbgrader_config.py: the gradebook had no schema version (an earlier nbgrader run could not find "
          f"alembic): stamped {stamped}", file=sys.stderr)

# The course's own exchange, beside this file: release and collect work without a system-wide one.
EXCHANGE = Path(__file__).resolve().parent / "exchange"
if not EXCHANGE.is_dir():
    EXCHANGE.mkdir()
    EXCHANGE.chmod(0o777)   # the mode nbgrader requires of an exchange: students' `submit` writes into it
c.Exchange.root = str(EXCHANGE)

# nbgrader 0.9's Gradebook.add_submission links a new submission to its assignment and student before it adds
# it to the session; SQLAlchemy 2 no longer cascades that link into the session, so the autoflush in between
# warns once per new submission. The `db.add` right after adds and commits all of it: nothing is lost.
warnings.filterwarnings("ignore", r"Object of type <Submitted\w+> not in session", SAWarning, r"nbgrader\.api")

# nbgrader's sanitizing preprocessors, in its order, with OverwriteCells replaced: nbgrader warns that every
# test cell with hidden tests "has changed" although it is exactly as released (gradebook/released_cells.py).
c.Autograde.sanitize_preprocessors = [
    "nbgrader.preprocessors.ClearOutput",
    "nbgrader.preprocessors.DeduplicateIds",
    "nbgrader.preprocessors.OverwriteKernelspec",
    "gradebook.released_cells.OverwriteReleasedCells",
    "nbgrader.preprocessors.CheckCellMetadata",
]

# A release's solution stub, by the source notebook's kernelspec language (graders/notebook.py): nbgrader's own
# for the puzzles' Python kernels, a C++ comment for the CUDA tracks' kernel bodies, so a released kernel compiles,
# for a quiz a comment under its answer's ``<name> = None``, and for a notebook whose cells start from a value the
# student edits (the debugging track's sabotaged kernels) a comment under that value, and for a model track's cell
# (its kernels at the top level, ModelNew's method bodies) a comment and ``...``.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()", CUDA_LANGUAGE: CUDA_STUB,
                              QUIZ_LANGUAGE: QUIZ_STUB, EDIT_LANGUAGE: EDIT_STUB, MODEL_LANGUAGE: MODEL_STUB}

# The notebook's own cells (a student's prints, plots, hand-launched kernels) get this long each; a cell that
# hangs is interrupted and the rest of the notebook runs. Grading does not happen in those cells.
c.Execute.timeout = settings.cell_timeout_s()
c.Execute.interrupt_on_timeout = True
# The sandbox's environment drops JPY_PARENT_PID, by which jupyter_client tells a kernel that it is managed, so
# ipykernel would print its `ipython kernel` banner into every autograde log. Its parent in the sandbox's PID
# namespace is PID 1, which ipykernel does not poll (the sandbox ends with nbgrader): say so instead. The
# in-memory history is nbgrader's default for Python kernels.
c.Execute.extra_arguments = ["--IPKernelApp.parent_handle=1", "--HistoryManager.hist_file=:memory:"]

# The submitted notebook's caps (graders/submission.py) are checked before nbgrader parses it: a notebook over one is
# graded as its release, 0 in every graded cell with the cap's message (graders/autograde.py).
c.Autograde.exporter_class = "graders.autograde.BoundedNotebookExporter"

# Trusted grading (graders/autograde.py): the nbgrader process grades the submitted file in the background
# while the notebook runs in a sandboxed kernel, then replaces every graded test cell's output with its
# verdict before nbgrader's SaveAutoGrades reads points from it. The others are nbgrader's default
# preprocessors, in its order.
c.Autograde.autograde_preprocessors = [
    "graders.autograde.StartTrustedGrading",
    "graders.autograde.SandboxedExecute",
    "nbgrader.preprocessors.IgnorePattern",
    "nbconvert.preprocessors.ClearMetadataPreprocessor",
    "nbgrader.preprocessors.LimitOutput",
    "graders.autograde.TrustedGrades",
    "gradebook.graded_on.RecordGradedOn",   # the GPU it was graded on, for `workshop export`
    "nbgrader.preprocessors.SaveAutoGrades",
    "nbgrader.preprocessors.AssignLatePenalties",
    "nbgrader.preprocessors.CheckCellMetadata",
]

# Feedback with the numbers: each timed kernel's table and the ladder's chart (gradebook/feedback.py), from what
# the trusted grader stored in the autograded notebook; GetGrades and the CSS header are nbgrader's defaults.
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    "gradebook.feedback.PerformanceFeedback",
    "graders.roofline_engine.feedback.RooflineFeedback",   # the roofline track's figure and table
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]
# nbgrader's feedback page, its summary naming each graded cell ("Puzzle 1: Map — correct on ...", not "Test cell").
c.GenerateFeedback.exporter_class = "gradebook.feedback.FeedbackExporter"

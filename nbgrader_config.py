"""nbgrader configuration: the repository root is the course directory.

Source notebooks live in assignments/<name>/ (written by `workshop build` from tracks/<name>/; nothing else
lives there, since nbgrader releases the whole folder); `nbgrader generate_assignment <name>` writes release/,
submissions go under submitted/<student>/<name>/, and `nbgrader autograde <name>` writes autograded/.
"""
from graders import settings

c = get_config()  # noqa: F821 (provided by nbgrader when it loads this file)

c.CourseDirectory.course_id = "kernel-workshop"
c.CourseDirectory.source_directory = "assignments"
c.CourseDirectory.db_url = settings.gradebook_url()

# Assignments known to the gradebook; `generate_assignment` adds one that is missing.
c.CourseDirectory.db_assignments = [{"name": "puzzles"}]

# The notebook's own cells (a student's prints, plots, hand-launched kernels) get this long each; a cell that
# hangs is interrupted and the rest of the notebook runs. Grading does not happen in those cells.
c.Execute.timeout = settings.cell_timeout_s()
c.Execute.interrupt_on_timeout = True

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
    "nbgrader.preprocessors.SaveAutoGrades",
    "nbgrader.preprocessors.AssignLatePenalties",
    "nbgrader.preprocessors.CheckCellMetadata",
]

"""nbgrader configuration: the repository root is the course directory.

Source notebooks live in assignments/<name>/; `nbgrader generate_assignment <name>` writes release/,
submissions go under submitted/<student>/<name>/, and `nbgrader autograde <name>` writes autograded/.
"""
import os

c = get_config()  # noqa: F821 (provided by nbgrader when it loads this file)

c.CourseDirectory.course_id = "kernel-workshop"
c.CourseDirectory.source_directory = "assignments"
c.CourseDirectory.db_url = os.environ.get("WORKSHOP_GRADEBOOK_URL", "sqlite:///gradebook.db")

# Assignments known to the gradebook; `generate_assignment` adds one that is missing.
c.CourseDirectory.db_assignments = [{"name": "puzzles"}]

# Each graded kernel runs in a child process with its own time limit (WORKSHOP_KERNEL_TIMEOUT, 30 s by
# default, two children per cell at most), so a cell needs more than that; a cell that still hangs is
# interrupted and the rest of the notebook is graded.
c.Execute.timeout = int(os.environ.get("WORKSHOP_CELL_TIMEOUT", "120"))
c.Execute.interrupt_on_timeout = True

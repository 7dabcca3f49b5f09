"""The `workshop` command: course-level jobs (build notebooks, make submissions, the demo) over nbgrader."""

"""nbgrader's configuration for everyone who uses this environment, inside a course directory or not:
``workshop jupyter-config`` links it into ``{sys.prefix}/etc/jupyter/``, and a course directory's own
``nbgrader_config.py`` is read after it. It names the course that a student's ``nbgrader fetch_assignment``,
``submit`` and ``fetch_feedback`` (and JupyterLab's Assignments tab) use without options, and that course's
exchange on this machine: ``exchange/`` in the checkout this environment was installed from.
"""
from graders import settings

c = get_config()  # noqa: F821 (provided by nbgrader when it loads this file)

c.CourseDirectory.course_id = "kernel-workshop"
c.Exchange.root = str(settings.ROOT / "exchange")

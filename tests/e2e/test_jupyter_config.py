"""``workshop jupyter-config``: the environment's Jupyter and nbgrader configuration linked into etc/jupyter, never
over a file of someone else's; what it sets, as Jupyter and nbgrader load it."""
from __future__ import annotations

import pytest
from traitlets.config import PyFileConfigLoader

from graders import settings
from workshop.jupyter_config import FILES, SOURCE, ConfigInTheWay, install


def test_links_are_made_once_and_a_foreign_file_is_left_alone(tmp_path):
    links = install(tmp_path)
    assert [link.name for link in links] == list(FILES) and all(link.resolve() == SOURCE / link.name for link in links)
    assert install(tmp_path) == links
    links[1].unlink()
    links[1].write_text("c = get_config()\n")
    with pytest.raises(ConfigInTheWay, match="nbgrader_config.py"):
        install(tmp_path)
    assert links[1].read_text() == "c = get_config()\n"


def test_kernels_are_encrypted_and_students_know_the_course():
    jupyter = PyFileConfigLoader("jupyter_config.py", path=str(SOURCE)).load_config()
    assert jupyter.KernelManager.transport_encryption == "auto"
    nbgrader = PyFileConfigLoader("nbgrader_config.py", path=str(SOURCE)).load_config()
    assert nbgrader.CourseDirectory.course_id == "kernel-workshop"
    assert nbgrader.Exchange.root == str(settings.ROOT / "exchange")

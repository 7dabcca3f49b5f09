"""``workshop jupyter-config``: this environment's Jupyter and nbgrader configuration, the files of
``jupyter-config/`` in the checkout, linked into ``{sys.prefix}/etc/jupyter/``, where every Jupyter program of the
environment reads them (JupyterLab's server, nbgrader, nbconvert). They are not installed by pip: setuptools'
editable install leaves data files out.
"""
from __future__ import annotations

import sys
from pathlib import Path

from graders.settings import PACKAGE_ROOT

SOURCE = PACKAGE_ROOT / "jupyter-config"
FILES = ("jupyter_config.py", "nbgrader_config.py")


class ConfigInTheWay(RuntimeError):
    """A configuration file of someone else's is where ours goes."""


def install(prefix: Path = Path(sys.prefix)) -> list[Path]:
    """Link each of `FILES` into ``prefix/etc/jupyter/`` (a link of ours is replaced); returns the links.
    `ConfigInTheWay` when a file that is not ours is there: merge it by hand."""
    folder = prefix / "etc" / "jupyter"
    folder.mkdir(parents=True, exist_ok=True)
    links = [folder / name for name in FILES]
    theirs = [link for link in links if link.exists() and not link.is_symlink()]
    if theirs:
        raise ConfigInTheWay(f"{', '.join(map(str, theirs))} exist: add what {SOURCE}/ sets to them by hand")
    for link in links:
        link.unlink(missing_ok=True)
        link.symlink_to(SOURCE / link.name)
    return links

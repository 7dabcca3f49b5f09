"""Stage the build context of the worker and coordinator images: exactly the files a worker grades with
(`workshop.staging.worker_files`: the code, the install files, the course config, each track's grader files and
the reference solutions that counter rules profile).

    python3 docker/context.py DEST      (any Python 3.11+: it needs nothing but the standard library)
    python3 docker/context.py --list    the solutions it would stage, one a line
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workshop.staging import solutions, stage, worker_files  # noqa: E402  (the checkout's, not an installed one)

if __name__ == "__main__":
    if sys.argv[1:] == ["--list"]:
        print("\n".join(map(str, solutions(worker_files()))))
    else:
        staged = stage(Path(sys.argv[1]), worker_files())
        print(f"{len(staged)} files; solutions (counter references): "
              f"{', '.join(map(str, solutions(staged))) or 'none'}")

"""``workshop``: the course's own jobs beside nbgrader's CLI.

  workshop demo              release, submit three notebooks, autograde, export, summarise (scratch dir)
  workshop build-notebook    rebuild assignments/puzzles/puzzles.ipynb from puzzles/ and solutions/
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="workshop", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="the whole course flow on the puzzles track, in a scratch directory")
    demo.add_argument("--dir", type=Path, default=None, help="course directory to create (default: a temp dir)")
    sub.add_parser("build-notebook", help="rebuild the puzzles source notebook")
    args = parser.parse_args(argv)

    if args.command == "build-notebook":
        from puzzles.notebook import write
        print(f"wrote {write()}")
        return 0
    from workshop.demo import run_demo
    return run_demo(args.dir)


if __name__ == "__main__":
    sys.exit(main())

"""``workshop``: the course's own jobs beside nbgrader's CLI.

  workshop demo              release, submit three notebooks, autograde, export, summarise (scratch dir)
  workshop build [TRACK...]  write assignments/<track>/<track>.ipynb from tracks/<track>/ (--check: only say
                             which are stale, exit 1 if any)
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
    build = sub.add_parser("build", help="write the source notebooks of the tracks (default: all)")
    build.add_argument("tracks", nargs="*", help="track names (folders under tracks/)")
    build.add_argument("--check", action="store_true", help="write nothing; exit 1 if a notebook is stale")
    args = parser.parse_args(argv)

    if args.command == "build":
        return _build(args.tracks, args.check)
    from workshop.demo import run_demo
    return run_demo(args.dir)


def _build(names: list[str], check: bool) -> int:
    from graders import tracks
    from workshop import notebooks
    stale = 0
    for track in [tracks.get(n) for n in names] if names else tracks.all_tracks():
        if check:
            stale += notebooks.is_stale(track)
            print(f"{track.notebook_path}: {'stale (run `workshop build`)' if notebooks.is_stale(track) else 'up to date'}")
        else:
            print(f"{track.notebook_path}: {'written' if notebooks.write(track) else 'up to date'}")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())

"""``workshop``: the course's own jobs beside nbgrader's CLI.

  workshop jupyter-config    link jupyter-config/'s files into this environment's etc/jupyter (kernels with
                             encrypted messages; the course and its exchange for students' nbgrader commands)
  workshop student-kit DIR    a copy for students' own machines: the grader, the install files and each
                             track's grader files; no solution, source notebook or gradebook
  workshop demo              release, submit three notebooks, autograde, export, summarise (scratch dir)
  workshop export            nbgrader's grades CSV plus the points of every graded cell and each kernel's
                             time, throughput, ratio and GPU (--course DIR, default here; --to FILE)
  workshop build [TRACK...]  write assignments/<track>/<track>.ipynb from tracks/<track>/ (--check: only say
                             which are stale, exit 1 if any)
  workshop targets TRACK RECORD.json...
                             print each kernel's target = fraction x its measured ratio in benchmark
                             records (--fraction, default 0.95); --write sets them in the track's spec
  workshop worker            a Celery grading worker on one GPU (--gpu N) or the simulator (--sim)
  workshop grade ASSIGNMENT  grade every submission (--student ...) on the fleet (WORKSHOP_BROKER_URL) or,
                             without a broker, here; writes the gradebook
  workshop queue [ASSIGNMENT]
                             the fleet's queue: pending, running on which worker, done, failed with why
  workshop grade-folder ASSIGNMENT FOLDER
                             grade FOLDER/<problem>/<author>.py (kernels not handed in through nbgrader: an
                             AI model's, a vendor library's) with the model engine; one record each for the
                             leaderboard (--kind ai|vendor, --device cuda|cpu, --course DIR, --to DIR)
  workshop leaderboard ASSIGNMENT
                             a model-engine assignment's class leaderboard from the gradebook and the
                             grade-folder records: static pages, public and each student's own, and a CSV
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="workshop", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("jupyter-config", help="link jupyter-config/'s files into this environment's etc/jupyter")
    kit = sub.add_parser("student-kit", help="a copy for students' own machines, without solutions")
    kit.add_argument("dest", type=Path, help="the folder to make (it must not exist)")
    demo = sub.add_parser("demo", help="the whole course flow on the puzzles track, in a scratch directory")
    demo.add_argument("--dir", type=Path, default=None, help="course directory to create (default: a temp dir)")
    export = sub.add_parser("export", help="grades with points per graded cell and each kernel's speed and GPU")
    export.add_argument("--course", type=Path, default=Path("."), help="the course directory (default: here)")
    export.add_argument("--to", type=Path, default=Path("grades-detail.csv"),
                        help="the CSV to write, relative to the course directory (default: grades-detail.csv)")
    build = sub.add_parser("build", help="write the source notebooks of the tracks (default: all)")
    build.add_argument("tracks", nargs="*", help="track names (folders under tracks/)")
    build.add_argument("--check", action="store_true", help="write nothing; exit 1 if a notebook is stale")
    targets = sub.add_parser("targets", help="a track's speed targets (its kernels', or a model track's "
                             "problems') from benchmark records")
    targets.add_argument("track", help="track name (a folder under tracks/)")
    targets.add_argument("records", nargs="+", type=Path,
                         help="benchmark JSON (benchmarks/results/TRACK/); with several, each kernel's lowest "
                              "ratio counts")
    targets.add_argument("--fraction", type=float, default=0.95, help="target = FRACTION x measured ratio")
    targets.add_argument("--write", action="store_true", help="write the targets into tracks/TRACK/spec.toml")
    worker = sub.add_parser("worker", help="a Celery grading worker (concurrency 1) on one GPU or the simulator")
    where = worker.add_mutually_exclusive_group()
    where.add_argument("--gpu", type=int, default=None, help="the GPU index to bind (CUDA_VISIBLE_DEVICES)")
    where.add_argument("--sim", action="store_true", help="a simulator worker (the sim queue), even with a GPU")
    worker.add_argument("--name", default=None, help="the worker's Celery hostname (default: SLOT@host)")
    worker.add_argument("--loglevel", default="INFO")
    grade = sub.add_parser("grade", help="grade every submission of an assignment and write the gradebook")
    grade.add_argument("assignment")
    grade.add_argument("--student", action="append", default=None, help="only this student (repeatable)")
    grade.add_argument("--course", type=Path, default=Path("."), help="the course directory (default: here)")
    grade.add_argument("--queue", default=None, help="the fleet queue (default: sim, or the GPU queue served)")
    grade.add_argument("--force", action="store_true", help="grade again submissions already written")
    queue = sub.add_parser("queue", help="the fleet's queue for the TA")
    queue.add_argument("assignment", nargs="?", default=None)
    queue.add_argument("--course", type=Path, default=Path("."), help="the course directory (default: here)")
    folder = sub.add_parser("grade-folder", help="grade kernels that did not come through nbgrader (AI-written, "
                                                 "a vendor library's) for the leaderboard")
    folder.add_argument("assignment", help="a model-engine track (a folder under tracks/)")
    folder.add_argument("folder", type=Path, help="holds <problem_id>/<author>.py, each a ModelNew cell")
    folder.add_argument("--kind", choices=["ai", "vendor"], default="ai", help="who wrote them (default: ai)")
    folder.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                        help="cpu: tests only, its times say nothing of a GPU (default: cuda)")
    folder.add_argument("--course", type=Path, default=Path("."), help="the course directory (default: here)")
    folder.add_argument("--to", type=Path, default=None,
                        help="where the records go (default: COURSE/machine-kernels/ASSIGNMENT)")
    board = sub.add_parser("leaderboard", help="a model-engine assignment's class leaderboard pages and CSV")
    board.add_argument("assignment")
    board.add_argument("--course", type=Path, default=Path("."), help="the course directory (default: here)")
    board.add_argument("--machine", type=Path, default=None,
                       help="grade-folder's records (default: COURSE/machine-kernels/ASSIGNMENT)")
    board.add_argument("--to", type=Path, default=None,
                       help="the pages' folder (default: COURSE/leaderboard/ASSIGNMENT)")
    board.add_argument("--csv", type=Path, default=None, help="the CSV (default: COURSE/leaderboard-ASSIGNMENT.csv)")
    board.add_argument("--names", action="store_true",
                       help="students by their login on the pages, not by pseudonym (a class that agreed to it)")
    args = parser.parse_args(argv)
    from gradebook.database import alembic_on_path
    alembic_on_path()   # export, grade and queue may create the gradebook: nbgrader runs `alembic` for that

    if args.command == "worker":
        from workshop.fleet.worker import run
        return run(args.gpu, args.sim, args.name, args.loglevel)
    if args.command == "grade":
        from workshop.fleet.coordinator import grade
        return grade(args.course, args.assignment, args.student, args.queue, args.force)
    if args.command == "queue":
        from workshop.fleet.queue_view import show
        return show(args.course, args.assignment)

    if args.command == "jupyter-config":
        from workshop.jupyter_config import ConfigInTheWay, install
        try:
            print("\n".join(f"{link} -> {link.readlink()}" for link in install()))
        except ConfigInTheWay as exc:
            print(f"workshop jupyter-config: {exc}", file=sys.stderr)
            return 1
        return 0
    if args.command == "student-kit":
        from graders.cuda_engine.libraries import INSTALL
        from workshop.staging import stage, student_files
        try:
            staged = stage(args.dest, student_files())
        except FileExistsError:
            print(f"workshop student-kit: {args.dest} exists: name a new folder", file=sys.stderr)
            return 2
        print(f"{args.dest.resolve()}: {len(staged)} files, no solution, source notebook or gradebook; a student "
              f"installs it: python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/{INSTALL} && "
              ".venv/bin/workshop jupyter-config")
        return 0
    if args.command == "grade-folder":
        return _grade_folder(args)
    if args.command == "leaderboard":
        return _leaderboard(args)
    if args.command == "targets":
        return _targets(args.track, args.records, args.fraction, args.write)
    if args.command == "build":
        return _build(args.tracks, args.check)
    if args.command == "export":
        from workshop.export import never_released, write
        print(write(args.course, args.to))
        for name in never_released(args.course):
            print(f"workshop export: {name} is in the gradebook but was never released and has no submission: "
                  f"its rows are 0 here, in nbgrader's export and in formgrader (`nbgrader db assignment remove "
                  f"{name}` removes it)", file=sys.stderr)
        return 0
    from workshop.demo import run_demo
    return run_demo(args.dir)


def _build(names: list[str], check: bool) -> int:
    from graders import tracks
    from workshop import notebooks
    stale = 0
    for track in [tracks.get(n) for n in names] if names else tracks.all_tracks():
        if check:
            is_stale = notebooks.is_stale(track)
            stale += is_stale
            print(f"{track.notebook_path}: {'stale (run `workshop build`)' if is_stale else 'up to date'}")
        else:
            print(f"{track.notebook_path}: {'written' if notebooks.write(track) else 'up to date'}")
    return 1 if stale else 0


def _model_track(name: str) -> None:
    """`ValueError` unless ``name`` is a model-engine track (a `graders.tracks.TrackError` when it is no track)."""
    from graders import tracks
    engine = tracks.get(name).engine
    if engine != "model":
        raise ValueError(f"{name} is a {engine} track: grade-folder and the leaderboard take a model track's "
                         "ModelNew problems (the capstone, kernelbench)")


def _grade_folder(args) -> int:
    from graders.gpu import NeedsGPUWorker
    from workshop.grade_folder import grade_folder
    to = args.to or args.course / "machine-kernels" / args.assignment
    try:
        _model_track(args.assignment)
        written = grade_folder(args.assignment, args.folder, to, kind=args.kind, device=args.device)
    except (ValueError, NeedsGPUWorker, OSError) as exc:   # a folder past its cap, no such model track, no GPU
        print(f"workshop grade-folder: {exc}", file=sys.stderr)
        return 2
    print(f"{len(written)} records in {to.resolve()}")
    return 0


def _leaderboard(args) -> int:
    from gradebook import leaderboard
    from workshop.export import gradebook_url
    course = args.course
    try:
        _model_track(args.assignment)
        entries = leaderboard.student_entries(course, args.assignment, gradebook_url(course))
        entries += leaderboard.machine_entries(args.machine or course / "machine-kernels" / args.assignment,
                                               args.assignment)
        pages = args.to or course / "leaderboard" / args.assignment
        written = leaderboard.write(course, args.assignment, entries, pages,
                                    args.csv or course / f"leaderboard-{args.assignment}.csv", not args.names)
    except (OSError, ValueError) as exc:   # no such model track, an unreadable record
        print(f"workshop leaderboard: {exc}", file=sys.stderr)
        return 2
    print(f"{written[0].resolve()}: the public page; {len(written) - 2} students' own pages beside it in you/; "
          f"{written[-1].resolve()}: every row with student ids, reasons and pages")
    return 0


def _targets(name: str, records: list[Path], fraction: float, write: bool) -> int:
    from graders import tracks
    from workshop import targets
    try:
        return targets.run(tracks.get(name).spec_path, records, fraction, write)
    except (OSError, ValueError) as exc:   # no such track or record, a bad spec or record, a target under its floor
        print(f"workshop targets: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

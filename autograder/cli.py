"""`python -m autograder grade SUBMISSIONS --out DIR ...`: the instructor's one command.
(`gradescope` and `prairielearn` grade one submission the same way: platforms.py.)

Exit codes: 0 when the batch finished (whatever the students scored), 2 when grading was
refused (no sandbox, a solution that fails its own tests, bad arguments, another grader on the
same --out), 1 when results could not be written (a full disk), 130 after Ctrl-C.
"""
import argparse
import os
import sys

from . import batch, intake, lms, lock

COURSE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def config_path(course_root, given=None):
    return given or os.path.join(course_root, "autograder", "nbgrader_config.py")


def load_config(path):
    """The course's nbgrader-style config as {section: {key: value}}; {} when there is none.
    A file that does not load is refused: a due date must not be dropped silently."""
    if not os.path.exists(path):
        return {}
    from traitlets.config.loader import PyFileConfigLoader
    try:
        cfg = PyFileConfigLoader(os.path.basename(path), os.path.dirname(os.path.abspath(path))).load_config()
    except Exception as exc:  # noqa: BLE001 - any error in the instructor's file
        raise ValueError(f"{path} could not be read ({type(exc).__name__}: {exc})") from None
    return {name: dict(section) for name, section in cfg.items() if hasattr(section, "items")}


def _lms_pattern_from_config(course_root, path=None):
    """c.FileNameCollectorPlugin.named_regexp from the course's nbgrader_config.py, if set."""
    try:
        cfg = load_config(config_path(course_root, path))
    except ValueError:
        return None
    return cfg.get("FileNameCollectorPlugin", {}).get("named_regexp") or None


def export_settings(course_root, path=None):
    """lms.Settings from the LMSExport and LatePolicy sections of the course's config."""
    source = os.path.join(course_root, "solutions")
    return lms.Settings.load(load_config(config_path(course_root, path)), course_root,
                             assignments=set(batch.course_assignments(source)))


def parser():
    p = argparse.ArgumentParser(prog="python -m autograder")
    sub = p.add_subparsers(dest="command", required=True)
    g = sub.add_parser("grade", help="grade a class: a folder <student>/<assignment>/<nb>.ipynb or an LMS zip")
    g.add_argument("submissions")
    g.add_argument("--out", required=True, help="output folder (CSVs, feedback/)")
    g.add_argument("--assignment", action="append", default=[], help="grade only this assignment (repeatable)")
    g.add_argument("--jobs", type=int, default=0, help="students graded in parallel (default: cores)")
    g.add_argument("--timeout", type=int, default=60, help="per-cell timeout in seconds (default 60)")
    g.add_argument("--wall", type=int, default=600, help="per-notebook wall limit in seconds (default 600)")
    g.add_argument("--memory", type=float, default=4.0, help="memory limit per kernel, GiB (default 4)")
    g.add_argument("--nproc", type=int, default=64, help="process/thread limit per kernel (default 64)")
    g.add_argument("--max-file-mb", type=float, default=20, help="largest accepted file, MB (default 20)")
    g.add_argument("--course-root", default=COURSE_ROOT, help="course folder holding solutions/ (default: this repo)")
    g.add_argument("--gradebook", default="", help="course gradebook (default: COURSE_ROOT/gradebook.db)")
    g.add_argument("--lms-pattern", default=None, help="regexp for LMS zip file names (see README)")
    g.add_argument("--config", default=None, help="the course's grading config (default: "
                   "COURSE_ROOT/autograder/nbgrader_config.py): LMS roster, due dates, late rule")
    g.add_argument("--regrade", action="store_true", help="regrade students already graded in OUT")
    g.add_argument("--verdict-cache", default="", metavar="DIR",
                   help="keep the solution checks' full-marks verdicts in DIR, shared by several "
                        "batches (default: $AUTOGRADER_VERDICT_CACHE, else OUT/.work/verdicts)")
    g.add_argument("--unsafe-no-sandbox", action="store_true", help="run student code unconfined (trusted input only)")
    g.add_argument("--quiet", action="store_true", help="no progress bar")
    from . import platforms
    platforms.add_arguments(sub, COURSE_ROOT)  # gradescope, prairielearn: one submission each
    return p


def main(argv=None):
    args = parser().parse_args(argv)
    if args.command in ("gradescope", "prairielearn"):
        from . import platforms
        return platforms.main(args)
    if args.config and not os.path.isfile(args.config):
        print(f"autograder: grading refused: --config {args.config} does not exist", file=sys.stderr)
        return 2
    try:
        settings = export_settings(args.course_root, args.config)
    except ValueError as exc:
        print(f"autograder: grading refused: the course's config is wrong: {exc}", file=sys.stderr)
        return 2
    pattern = (args.lms_pattern or _lms_pattern_from_config(args.course_root, args.config)
               or intake.DEFAULT_LMS_PATTERN)
    opts = batch.Options(
        submissions=os.path.abspath(args.submissions), out=args.out, course_root=args.course_root,
        gradebook=os.path.abspath(args.gradebook) if args.gradebook else "",
        assignments=args.assignment, jobs=args.jobs, timeout=args.timeout, wall=args.wall,
        memory_bytes=int(args.memory * 2**30), nproc=args.nproc, regrade=args.regrade,
        unsafe_no_sandbox=args.unsafe_no_sandbox, lms_pattern=pattern,
        max_file_bytes=int(args.max_file_mb * 2**20), progress=not args.quiet,
        verdict_cache=args.verdict_cache)
    try:
        held = lock.hold(args.out)  # noqa: F841 - held open until the process exits
        job = batch.Batch(opts)
        job.export_settings = settings  # read by export.write_all
        results = job.run()
    except (batch.GradingRefused, lock.Busy, ValueError) as exc:
        print(f"autograder: grading refused: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("autograder: interrupted; every grading process was stopped. Nothing was exported "
              "this run; run the same command again to resume (students already graded are "
              "kept).", file=sys.stderr)
        return 130
    if job.export_failures:
        print("autograder: the batch was graded but these files could not be written (is the "
              "disk full?): " + "; ".join(job.export_failures[:5]) + ". Free some space and run "
              "the same command again: graded students are kept.", file=sys.stderr)
        return 1
    graded = sum(1 for r in results.values() if r["status"] == "graded")
    earlier = f" ({job.resumed} already graded earlier, kept)" if job.resumed else ""
    out = os.path.abspath(args.out)
    print(f"autograder: graded {graded} of {len(results)} submission(s){earlier}; see "
          f"{os.path.join(out, 'grades.csv')} and problems.csv; canvas.csv and moodle.csv "
          + (f"name students by {os.path.basename(settings.roster_path)}" if settings.roster
             else "name students by their course id (no roster configured)"), file=sys.stderr)
    if os.path.exists(os.path.join(out, "regrade.csv")):
        changed = _count_rows(os.path.join(out, "regrade.csv"))
        kept = getattr(job, "history_kept", None)
        print(f"autograder: {changed} test cell(s) changed score since the last run (regrade.csv)"
              + (f"; the previous results are kept in {kept}" if kept else ""), file=sys.stderr)
    return 0


def _count_rows(path):
    import csv
    with open(path, newline="", encoding="utf-8") as fh:
        return max(0, sum(1 for _ in csv.reader(fh)) - 1)

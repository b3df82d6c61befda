"""Build dist/gradescope-autograder.zip: the course's Gradescope autograder (a Programming
Assignment's "Configure Autograder" upload).

    python scripts/build_gradescope_zip.py [--out dist/gradescope-autograder.zip]
        [--assignment 05_self_attention] [--visibility after_due_date] [--require-sandbox]
        [--timeout SECONDS] [--memory GIB]

Built from a commit (HEAD by default), never from the working tree: `git archive` gives the
committed files, so a half-edited solution, a local gradebook.db or a student's workspace/ can
never ship; uncommitted changes to what ships are named. At the zip's root: `setup.sh` and
`run_autograder` (executable; from scripts/gradescope/), `gradescope.conf` (the options below),
and the course as the grader needs it: pyproject.toml and README.md (pip install -e .),
autograder/, course_utils/ WITH reference/ (the hidden tests' ground truth and mistake
catalogues: the grader runs them outside the student's kernel), solutions/ and notebooks/
(with --assignment, only that assignment's folder of each), constraints.txt (the tested
environment's versions, which setup.sh installs). The zip holds the answers: upload it to
Gradescope, never give it to students.
"""
import argparse
import os
import pathlib
import stat
import sys
import tempfile
import zipfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from scripts.bundle import export_commit, git  # noqa: E402

SHIPPED = ("pyproject.toml", "README.md", "constraints.txt", "autograder/", "course_utils/", "solutions/", "notebooks/")
AT_ROOT = {"scripts/gradescope/setup.sh": "setup.sh",
           "scripts/gradescope/run_autograder": "run_autograder"}
NEVER = ("gradebook.db", "workspace", "dist", ".venv", "__pycache__", ".ipynb_checkpoints", ".work")
VISIBILITIES = ("after_due_date", "visible", "hidden", "after_published")
# A fixed time for every entry: the same commit and options give the same bytes.
STAMP = (2020, 1, 1, 0, 0, 0)


def shipped(rel, assignment=None):
    """Whether a committed file ships; with `assignment`, of solutions/ and notebooks/ only that
    assignment's folder (a Gradescope assignment grades one course assignment: the other
    answers have no business there)."""
    parts = rel.split("/")
    if any(p in NEVER or p.endswith((".pyc", ".db")) for p in parts):
        return False
    if assignment and parts[0] in ("solutions", "notebooks") and (len(parts) < 3 or parts[1] != assignment):
        return False
    return any(rel == s or (s.endswith("/") and rel.startswith(s)) for s in SHIPPED)


def _positive(kind):
    def parse(text):
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, not {text}")
        return value
    parse.__name__ = kind.__name__
    return parse


def uncommitted(root):
    """What differs from HEAD among the files that ship."""
    paths = [s.rstrip("/") for s in SHIPPED] + list(AT_ROOT)
    status = git(root, "status", "--porcelain", "--", *paths).decode()
    return [line[3:] for line in status.splitlines() if line.strip()]


def conf_text(assignment=None, visibility="after_due_date", require_sandbox=False, timeout=None,
              memory=None):
    """gradescope.conf: run_autograder's settings (and setup.sh's, which warms the cache with the
    same limits). timeout/memory left out mean the grader's defaults (60 s per cell, 4 GiB)."""
    lines = [f"visibility={visibility}", "sandbox=" + ("required" if require_sandbox else "fallback")]
    if assignment:
        lines.insert(0, f"assignment={assignment}")
    if timeout is not None:
        lines.append(f"timeout={int(timeout)}")
    if memory is not None:
        lines.append(f"memory={float(memory):g}")
    return "\n".join(lines) + "\n"


def _add(zf, name, data, executable=False):
    info = zipfile.ZipInfo(name, STAMP)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = ((0o755 if executable else 0o644) | stat.S_IFREG) << 16
    zf.writestr(info, data)


def build(out, root=ROOT, commit="HEAD", assignment=None, visibility="after_due_date",
          require_sandbox=False, timeout=None, memory=None):
    """Write the zip; returns (its path, number of files, short revision)."""
    root = pathlib.Path(root)
    with tempfile.TemporaryDirectory(prefix="gradescope-zip-") as tmp:
        tree = pathlib.Path(tmp) / "tree"
        export_commit(root, commit, tree)
        missing = [p for p in AT_ROOT if not (tree / p).is_file()]
        if missing:
            raise SystemExit(f"{', '.join(missing)} not in commit {commit}: commit them first")
        if assignment and not (tree / "solutions" / assignment).is_dir():
            raise SystemExit(f"no assignment {assignment} in solutions/ of commit {commit}")
        files = sorted(str(p.relative_to(tree)).replace(os.sep, "/") for p in tree.rglob("*")
                       if p.is_file() and not p.is_symlink())
        chosen = [f for f in files if shipped(f, assignment)]
        out = pathlib.Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_name(out.name + ".part")
        with zipfile.ZipFile(partial, "w") as zf:
            for src, name in AT_ROOT.items():
                _add(zf, name, (tree / src).read_bytes(), executable=True)
            _add(zf, "gradescope.conf", conf_text(assignment, visibility, require_sandbox, timeout, memory))
            for rel in chosen:
                mode = (tree / rel).stat().st_mode
                _add(zf, rel, (tree / rel).read_bytes(), executable=bool(mode & 0o111))
        os.replace(partial, out)
    revision = git(root, "rev-parse", "--short", commit).decode().strip()
    return out, len(chosen) + len(AT_ROOT) + 1, revision


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=str(ROOT / "dist" / "gradescope-autograder.zip"))
    p.add_argument("--commit", default="HEAD")
    p.add_argument("--assignment", default=None,
                   help="grade only this assignment (one Gradescope assignment per course assignment); "
                        "default: the assignment whose notebook name the upload has")
    p.add_argument("--visibility", choices=VISIBILITIES, default="after_due_date",
                   help="when students see the tests (default after_due_date)")
    p.add_argument("--require-sandbox", action="store_true",
                   help="refuse to grade when bubblewrap cannot create its sandbox in Gradescope's "
                        "container (default: grade inside the container's isolation then)")
    p.add_argument("--timeout", type=_positive(int), default=None,
                   help="per-cell timeout in seconds (default: the grader's, 60)")
    p.add_argument("--memory", type=_positive(float), default=None,
                   help="memory limit of the student's kernel in GiB (default: the grader's, 4)")
    args = p.parse_args(argv)
    out, n, revision = build(args.out, commit=args.commit, assignment=args.assignment,
                             visibility=args.visibility, require_sandbox=args.require_sandbox,
                             timeout=args.timeout, memory=args.memory)
    print(f"{out}: {n} files from commit {revision} ({out.stat().st_size / 2**20:.1f} MiB). "
          "It holds the solutions and hidden tests: upload it to Gradescope (Programming "
          "Assignment > Configure Autograder > Zip file upload), never give it to students.")
    if not args.require_sandbox:
        print("Without the bubblewrap sandbox (Gradescope's containers usually cannot create it), "
              "grading relies on the container's isolation: see autograder/README.md.")
    left_out = uncommitted(ROOT) if args.commit == "HEAD" else []
    if left_out:
        print("Not in the zip (uncommitted): " + ", ".join(left_out[:20])
              + (" ..." if len(left_out) > 20 else ""))


if __name__ == "__main__":
    main()

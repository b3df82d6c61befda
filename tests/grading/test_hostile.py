"""The hostile corpus: one class full of attacks and accidents, graded in one batch with 2 jobs.

Every case has its expected outcome asserted, and honest students graded before and after the
hostile ones (and in parallel with them) keep full marks. Timeouts are generous for honest code
(nothing honest comes close to them) and the hostile loops are stopped by them, so no assertion
depends on how fast the machine is.
"""
import json
import socket
import subprocess
import threading

import nbformat
import pytest

import grading_helpers as H

pytestmark = pytest.mark.slow

A, NB = "00_fixture", "fixture.ipynb"
FULL = 5.0
# Generous enough that an honest cell (or forking 60 children) never hits it on a loaded machine:
# only the deliberate endless loops may.
CELL_TIMEOUT = 45

DEF_DOUBLE = "def double(x):\n    return 2 * np.asarray(x, dtype=float)\n"
DEF_ROWS = "def row_sums(m):\n    return np.asarray(m, dtype=float).sum(axis=1)\n"


def _answer(nb, grade_id, code):
    H.cell(nb, grade_id).source = code


class Class:
    """Builds the hostile class around paths it attacks."""

    def __init__(self, root):
        self.root = root
        self.course = H.make_course(root / "course")
        self.subs = root / "subs"
        self.out = root / "out"
        self.master = self.course / "gradebook.db"

    def honest(self):
        return H.honest(self.course, A, NB)

    def with_code(self, grade_id, extra, base=None):
        nb = base or self.honest()
        c = H.cell(nb, grade_id)
        c.source = c.source + "\n" + extra
        return nb


def _listener():
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.5)
    seen = []
    stop = threading.Event()

    def loop():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            seen.append(1)
            conn.close()

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    return server.getsockname()[1], seen, lambda: (stop.set(), t.join(), server.close())


def _sandbox_processes():
    out = subprocess.run(["ps", "-eo", "uid=,pid=,args="], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if line.split() and 60000 <= int(line.split()[0]) < 61000]


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    reason = H.sandbox_unavailable()
    if reason:
        pytest.fail(f"the grading sandbox cannot run here: {reason} (make test-tools sets it up)")
    k = Class(tmp_path_factory.mktemp("hostile"))
    port, seen, stop_listener = _listener()

    # A course gradebook that already holds an earlier grade (it must survive the batch).
    from autograder.batch import _generate
    from nbgrader.api import Gradebook
    _generate(str(k.course / "solutions"), str(k.root / "rel"), str(k.master), A, str(k.root))
    with Gradebook("sqlite:///" + str(k.master)) as gb:
        gb.update_or_create_student("earlier-student", first_name="Earlier")

    students = {}
    students["aaa_honest"] = k.honest()
    students["zzz_honest"] = k.honest()
    other_sub = k.subs / "zzz_honest" / A / NB
    targets = ["../../../gradebook.db", "../../../../gradebook.db", str(k.master),
               str(k.out / "grades.csv"), str(other_sub),
               str(k.out / ".work" / "shards" / A / "aaa_honest" / "gradebook.db"),
               str(k.course / "solutions" / A / NB), "/etc/hostname"]
    students["overwrite"] = k.with_code("fixture_double", (
        "import json, os\n_r = {}\n"
        f"for _p in {targets!r}:\n"
        "    try:\n"
        "        with open(_p, 'w') as _f:\n"
        "            _f.write('PWNED')\n"
        "        _r[_p] = 'WROTE'\n"
        "    except Exception as _e:\n"
        "        _r[_p] = type(_e).__name__\n"
        "try:\n"
        f"    os.symlink({str(k.master)!r}, 'link'); os.replace('link', {NB!r})\n"
        "except Exception as _e:\n"
        "    _r['symlink'] = type(_e).__name__\n"
        "print('OVERWRITE', json.dumps(_r))\n"))
    reads = [str(k.course / "solutions" / A / NB), str(other_sub), str(k.master),
             str(k.out / ".work" / "templates" / (A + ".db")), str(k.subs), str(k.out)]
    students["read_others"] = k.with_code("fixture_double", (
        "import json, os\n_r = {}\n"
        f"for _p in {reads!r}:\n"
        "    try:\n"
        "        _r[_p] = 'LISTED' if os.path.isdir(_p) and os.listdir(_p) else open(_p, 'rb').read(10) and 'READ'\n"
        "    except Exception as _e:\n"
        "        _r[_p] = type(_e).__name__\n"
        "print('READS', json.dumps(_r))\n"))
    students["read_others"] = k.with_code("fixture_double", (
        "import socket\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=3)\n"
        "    print('NET', 'CONNECTED')\n"
        "except Exception as _e:\n"
        "    print('NET', type(_e).__name__)\n"), base=students["read_others"])
    # The two busy loops first lower their own priority (any process may): each still spins until
    # the grader stops it, but on a machine with other work (make test runs beside this batch) the
    # spinning takes the cores only when nothing else wants them, instead of 45 CPU-s each.
    students["infinite_loop"] = k.with_code("fixture_rows", "import os\nos.nice(19)\nwhile True:\n    pass\n")
    students["sigint_ignored"] = k.with_code("fixture_rows", (
        "import os, signal\nos.nice(19)\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass\n"))
    students["sleep_forever"] = k.with_code("fixture_rows", "import time\ntime.sleep(10**6)\n")
    students["memory_bomb"] = k.with_code(
        "fixture_rows", "_hog = []\nwhile True:\n    _hog.append(bytearray(2**28))\n")
    students["children"] = k.with_code("fixture_rows", (
        "import subprocess, sys\n"
        "_kids = [subprocess.Popen(['sleep', '1000']) for _ in range(20)]\n"
        "subprocess.Popen([sys.executable, '-c', 'import os, time\\nos.setsid()\\nwhile True: time.sleep(1)'],"
        " start_new_session=True)\n"))
    students["children"] = k.with_code("fixture_rows", (
        "import subprocess\n_kids = []\n"
        "try:\n"
        "    for _ in range(1000):\n"
        "        _kids.append(subprocess.Popen(['sleep', '1000']))\n"
        "except OSError as _e:\n"
        "    print('FORK', type(_e).__name__, len(_kids))\n"), base=students["children"])
    students["os_exit"] = k.with_code("fixture_rows", "import os\nos._exit(3)\n")
    students["kill_parent"] = k.with_code("fixture_rows", "import os\nos.kill(os.getppid(), 9)\n")
    students["kill_group"] = k.with_code(
        "fixture_rows", "import os\nos.killpg(os.getpgid(os.getppid()), 9)\n")
    students["kill_everything"] = k.with_code("fixture_rows", "import os\nos.kill(-1, 9)\n")
    wrong = k.honest()
    _answer(wrong, "fixture_double", "def double(x):\n    return np.asarray(x, dtype=float)\n")
    students["patch_numpy"] = k.with_code(
        "fixture_double", "np.allclose = lambda *a, **k: True\nnp.testing.assert_allclose = lambda *a, **k: None\n",
        base=wrong)
    wrong = k.honest()
    _answer(wrong, "fixture_double", "def double(x):\n    return np.asarray(x, dtype=float)\n")
    students["patch_course"] = k.with_code(
        "fixture_double", "grading.assert_close = lambda *a, **k: None\n", base=wrong)
    tampered = k.honest()
    _answer(tampered, "fixture_double", "def double(x):\n    return np.asarray(x, dtype=float)\n")
    H.cell(tampered, "fixture_double_tests").source = "pass"
    students["tampered_test"] = tampered
    deleted = k.honest()
    deleted.cells = [c for c in deleted.cells
                     if c.metadata.get("nbgrader", {}).get("grade_id") != "fixture_rows_tests"]
    students["deleted_test"] = deleted
    duplicated = k.honest()
    dup = nbformat.from_dict(json.loads(json.dumps(H.cell(duplicated, "fixture_double_tests"))))
    dup["id"] = "duplicate-of-double-tests"
    duplicated.cells.append(dup)
    students["duplicated_test"] = duplicated
    students["big_output"] = k.with_code(
        "fixture_double", "for _ in range(50):\n    print('x' * 10**6)\n"
        "from IPython.display import HTML, display\n"
        "display(HTML('<script>document.title = 42</script><b>bold</b>'))\n")
    diagnosed = k.honest()
    _answer(diagnosed, "fixture_double", (
        "def double(x):\n    x = np.asarray(x, dtype=float)\n"
        "    return 2 * x if len(x) == 3 else x + x.mean()\n"))
    students["diagnosed"] = diagnosed

    for name, nb in students.items():
        H.write_student(k.subs, name, A, NB, nb)
    H.write_student(k.subs, "invalid_json", A, NB, '{"cells": [ this is not json')
    H.write_student(k.subs, "wrong_name", A, "Fixture (1).ipynb", k.honest())
    (k.subs / "bad name!" / A).mkdir(parents=True)
    H.write_student(k.subs, "unknown_assignment", "99_nope", NB, k.honest())

    before = _sandbox_processes()
    H.write_student(k.subs, "worker_dies", A, NB, k.honest())
    proc = H.grade(k.subs, k.out, k.course, "--jobs", "2", "--timeout", str(CELL_TIMEOUT),
                   "--wall", "120", env_extra={"AUTOGRADER_TEST_CRASH_ON": "worker_dies"})
    stop_listener()
    k.proc, k.connections, k.before = proc, len(seen), before
    k.after = _sandbox_processes()
    k.grades = H.grades(k.out)
    yield k


def score(k, student):
    row = k.grades[(student, A)]
    return float(row["score"]) if row["score"] else None


def out_text(k, student):
    """Everything the student's notebook printed (outputs only, not its source)."""
    return H.outputs_text(H.graded_notebook(k.out, A, student, NB))


def test_batch_finishes_with_exit_zero(batch):
    assert batch.proc.returncode == 0, batch.proc.stderr[-3000:]


@pytest.mark.parametrize("student", ["aaa_honest", "zzz_honest"])
def test_honest_students_keep_full_marks(batch, student):
    assert score(batch, student) == FULL
    assert batch.grades[(student, A)]["status"] == "graded"
    assert H.problems(batch.out, student) == []


def test_course_gradebook_survives_and_holds_the_grades(batch):
    from nbgrader.api import Gradebook
    with Gradebook("sqlite:///" + str(batch.master)) as gb:
        ids = {s.id for s in gb.students}
        assert "earlier-student" in ids
        assert gb.find_submission(A, "aaa_honest").score == FULL
        assert gb.find_submission(A, "zzz_honest").score == FULL


def test_overwrite_attack_changes_nothing(batch):
    assert score(batch, "overwrite") == FULL
    text = out_text(batch, "overwrite")
    assert "OVERWRITE" in text and "WROTE" not in text
    assert b"PWNED" not in (batch.subs / "zzz_honest" / A / NB).read_bytes()
    assert b"PWNED" not in (batch.course / "solutions" / A / NB).read_bytes()
    assert "PWNED" not in (batch.out / "grades.csv").read_text()


def test_reading_other_students_and_solutions_is_impossible(batch):
    text = out_text(batch, "read_others")
    assert "READS" in text
    assert "'READ'" not in text and '\\"READ\\"' not in text and "LISTED" not in text


def test_no_network(batch):
    text = out_text(batch, "read_others")
    assert "NET" in text and "CONNECTED" not in text
    assert batch.connections == 0
    assert score(batch, "read_others") == FULL


@pytest.mark.parametrize("student", ["infinite_loop", "sleep_forever"])
def test_interruptible_loops_are_interrupted(batch, student):
    assert score(batch, student) == FULL  # the function was defined before the loop
    assert any("ran longer than" in p for p in H.problems(batch.out, student))


def test_loop_ignoring_sigint_is_stopped_and_still_graded(batch):
    assert batch.grades[("sigint_ignored", A)]["status"] == "graded"
    assert score(batch, "sigint_ignored") == 2.0  # first test ran, the rest could not
    assert any(f"cell fixture_rows ran longer than {CELL_TIMEOUT} s and did not stop when interrupted" in p
               for p in H.problems(batch.out, "sigint_ignored"))


def test_memory_bomb_hits_the_limit(batch):
    assert "MemoryError" in out_text(batch, "memory_bomb")
    assert score(batch, "memory_bomb") == FULL


def test_left_behind_processes_are_gone(batch):
    assert score(batch, "children") == FULL
    assert batch.after == [], batch.after


def test_fork_bomb_hits_the_process_limit(batch):
    assert "FORK BlockingIOError" in out_text(batch, "children")


@pytest.mark.parametrize("student", ["os_exit"])
def test_dying_kernel_is_graded_not_dropped(batch, student):
    assert batch.grades[(student, A)]["status"] == "graded"
    assert score(batch, student) == 2.0
    assert any("the kernel died in cell fixture_rows" in p for p in H.problems(batch.out, student))


@pytest.mark.parametrize("student", ["kill_parent", "kill_group", "kill_everything"])
def test_killing_the_parent_or_its_group_cannot_stop_the_batch(batch, student):
    # Inside the sandbox the kernel's parent is the sandbox's own init, which ignores it, and
    # kill(-1) reaches only the kernel's own children: the kernel carries on.
    assert batch.grades[(student, A)]["status"] == "graded"
    assert score(batch, student) == FULL


@pytest.mark.parametrize("student,names", [("patch_numpy", "numpy.allclose"),
                                           ("patch_course", "course_utils.grading.assert_close")])
def test_monkeypatched_comparisons_gain_nothing(batch, student, names):
    assert score(batch, student) == 0.0  # every check after the tampering refuses to pass
    assert any("Tampering detected" in p and names in p for p in H.problems(batch.out, student))


def test_tampered_test_cell_is_restored(batch):
    assert score(batch, "tampered_test") == 3.0
    assert any("'fixture_double_tests' was edited" in p for p in H.problems(batch.out, "tampered_test"))


def test_deleted_test_cell_is_restored(batch):
    assert score(batch, "deleted_test") == FULL
    assert any("'fixture_rows_tests' was deleted" in p for p in H.problems(batch.out, "deleted_test"))


def test_duplicated_test_cell_counts_once(batch):
    assert score(batch, "duplicated_test") == FULL
    rows = [r for r in H.read_csv(batch.out / "grades_by_cell.csv") if r["student_id"] == "duplicated_test"]
    assert len(rows) == 2
    assert any("appears 2 times" in p for p in H.problems(batch.out, "duplicated_test"))


def test_invalid_json_is_reported_not_zeroed(batch):
    row = batch.grades[("invalid_json", A)]
    assert row["status"] == "could_not_grade" and row["score"] == ""
    assert any("not valid notebook JSON" in p for p in H.problems(batch.out, "invalid_json"))


def test_wrong_file_name_is_graded_and_reported(batch):
    assert score(batch, "wrong_name") == FULL
    assert any("should be named 'fixture.ipynb'" in p for p in H.problems(batch.out, "wrong_name"))


def test_bad_folders_are_reported(batch):
    every = H.problems(batch.out)
    assert any("'bad name!' is not a valid student id" in p for p in every)
    assert any("'99_nope' is not an assignment" in p for p in H.problems(batch.out, "unknown_assignment"))
    assert batch.grades[("unknown_assignment", A)]["status"] == "not_submitted"


def test_fifty_megabytes_of_output_are_cut(batch):
    assert score(batch, "big_output") == FULL
    html = batch.out / "feedback" / "big_output" / A / "fixture.html"
    assert html.exists() and html.stat().st_size < 2 * 2**20
    assert "<script>document.title" not in html.read_text()  # student HTML is sanitized


def test_feedback_hides_hidden_tests_and_keeps_the_diagnosis(batch):
    assert score(batch, "diagnosed") == 3.0
    html = (batch.out / "feedback" / "diagnosed" / A / "fixture.html").read_text()
    assert "You added the mean instead of doubling." in html
    assert "secret_marker" not in html and "default_rng(1234)" not in html
    for path in (batch.out / "feedback").rglob("*.html"):
        text = path.read_text()
        assert "secret_marker" not in text and "BEGIN HIDDEN TESTS" not in text, path


def test_every_student_has_one_row(batch):
    students = {s for s, _ in batch.grades}
    assert "earlier-student" in students  # from the course gradebook: not submitted
    assert batch.grades[("earlier-student", A)]["status"] == "not_submitted"
    assert len(batch.grades) == len(students)


def test_a_dying_grading_worker_costs_only_its_own_student(batch):
    row = batch.grades[("worker_dies", A)]
    assert row["status"] == "could_not_grade" and row["score"] == ""
    assert any("grading worker stopped" in p for p in H.problems(batch.out, "worker_dies"))

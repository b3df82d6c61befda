"""The whole course loop through a real JupyterHub, as a class lives it.

JupyterHub 5 with configurable-http-proxy, PAM accounts for one instructor and three students,
each student's Jupyter server started by the hub as that student's own Unix user
(LocalProcessSpawner), nbgrader's exchange in a temporary folder:

    instructor: nbgrader generate_assignment, release_assignment      (as the instructor's uid)
    students:   fetch, answer (right / wrong / blank), submit         (the hub's REST API, through
                                                                      the proxy, to each student's
                                                                      server: what the Assignments
                                                                      tab calls)
    instructor: nbgrader collect; `python -m autograder grade` on what was collected (as root, for
                the sandbox); nbgrader release_feedback of the grader's redacted feedback
    students:   fetch_feedback, and each reads only their own, redacted feedback

Why PAM and real Unix users rather than a shared password with SimpleLocalProcessSpawner: the
exchange keeps students apart with file permissions (an inbound folder students can write to
but not list, homes that are theirs alone). With every server running as root, as under
SimpleLocalProcessSpawner, "a student cannot read another's submission" could not even be
tested. The users exist only inside a mount namespace: the hub runs under bubblewrap with its
own /etc/passwd, /etc/group and /etc/shadow bound over the machine's, so the machine's accounts
are never touched, and in its own PID namespace, so every process it starts (proxy, servers,
kernels) ends with it.
"""
import html
import json
import os
import pathlib
import re
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time

import nbformat
import pytest

import grading_helpers as H

A, NB, COURSE = "00_fixture", "fixture.ipynb", "attention"
VENV_BIN = pathlib.Path(sys.prefix) / "bin"
CHP_DIR = H.REPO / ".venv" / "hub" / "node_modules" / ".bin"
USERS = ("teacher", "ada", "ben", "cleo")  # ada answers right, ben wrong, cleo leaves it blank
FIRST_UID = 62101
SERVICE = "course-test"


def _missing():
    reason = H.sandbox_unavailable()
    if reason:
        return f"the grading sandbox cannot run here: {reason}"
    if not (VENV_BIN / "jupyterhub").exists():
        return "jupyterhub is not installed (pip install -e '.[test]')"
    if not _chp():
        return ("configurable-http-proxy is not installed (npm ci --prefix .venv/hub, see "
                "docs/jupyterhub.md)")
    for tool in ("bwrap", "setpriv", "openssl"):
        if not shutil.which(tool):
            return f"{tool} is not installed"
    return None


def _chp():
    return shutil.which("configurable-http-proxy", path=f"{CHP_DIR}{os.pathsep}{os.environ.get('PATH', '')}")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Machine:
    """A temporary root with the accounts, homes, exchange and hub of one class."""

    def __init__(self, root):
        self.root = pathlib.Path(root)
        self.etc = self.root / "etc"
        self.homes = self.root / "home"
        self.exchange = self.root / "exchange"
        self.hub_dir = self.root / "hub"
        self.passwords = {u: secrets.token_urlsafe(12) for u in USERS}
        self.uid = {}
        taken_names = {line.split(":")[0] for line in open("/etc/passwd")}
        uid = FIRST_UID
        for user in USERS:
            while _uid_taken(uid):
                uid += 1
            self.uid[user] = uid
            uid += 1
        self.accounts(taken_names)
        self.exchange.mkdir()
        os.chmod(self.exchange, 0o1777)  # nbgrader: the exchange root is writable by everyone
        (self.etc / "jupyter").mkdir(parents=True)
        # Every user's nbgrader reads this (JUPYTER_CONFIG_PATH): where the exchange is.
        (self.etc / "jupyter" / "nbgrader_config.py").write_text(
            f"c = get_config()\nc.Exchange.root = {str(self.exchange)!r}\n"
            f"c.CourseDirectory.course_id = {COURSE!r}\n")
        for path in (self.etc, self.etc / "jupyter", self.etc / "jupyter" / "nbgrader_config.py"):
            os.chmod(path, 0o755 if path.is_dir() else 0o644)

    def accounts(self, taken_names):
        self.etc.mkdir(parents=True)
        ours = set(USERS)
        host_passwd = [ln for ln in open("/etc/passwd") if ln.split(":")[0] not in ours]
        host_group = [ln for ln in open("/etc/group") if ln.split(":")[0] not in ours]
        passwd, group, shadow = list(host_passwd), list(host_group), []
        for user in USERS:
            uid, home = self.uid[user], self.homes / user
            home.mkdir(parents=True)
            os.chown(home, uid, uid)
            os.chmod(home, 0o700)
            passwd.append(f"{user}:x:{uid}:{uid}:{user}:{home}:/bin/sh\n")
            group.append(f"{user}:x:{uid}:\n")
            digest = subprocess.run(["openssl", "passwd", "-6", "-stdin"], input=self.passwords[user],
                                    capture_output=True, text=True, check=True).stdout.strip()
            shadow.append(f"{user}:{digest}:20000:0:99999:7:::\n")
        for name, lines, mode in (("passwd", passwd, 0o644), ("group", group, 0o644), ("shadow", shadow, 0o600)):
            (self.etc / name).write_text("".join(lines))
            os.chmod(self.etc / name, mode)
        os.chmod(self.root, 0o755)
        os.chmod(self.homes, 0o755)

    def namespace(self, *, pid=True):
        """bubblewrap: this machine's view plus our accounts; its own PID namespace."""
        cmd = ["bwrap", "--dev-bind", "/", "/", "--proc", "/proc",
               "--bind", str(self.etc / "passwd"), "/etc/passwd",
               "--bind", str(self.etc / "group"), "/etc/group",
               "--bind", str(self.etc / "shadow"), "/etc/shadow", "--die-with-parent"]
        return cmd + _reachable_python() + (["--unshare-pid"] if pid else [])

    def user_env(self, user):
        home = self.homes / user
        return {"HOME": str(home), "USER": user, "LOGNAME": user, "LANG": "C.UTF-8",
                "PATH": f"{VENV_BIN}:/usr/bin:/bin", "JUPYTER_CONFIG_PATH": str(self.etc / "jupyter"),
                "MPLCONFIGDIR": str(home / ".mpl"), "IPYTHONDIR": str(home / ".ipython")}

    def as_user(self, user, argv, cwd=None, check=True, timeout=300):
        """Run a command as one of the class's Unix users (what their terminal would do)."""
        uid = self.uid[user]
        env = [f"{k}={v}" for k, v in self.user_env(user).items()]
        cmd = self.namespace() + ["--chdir", str(cwd or self.homes / user), "setpriv",
                                  f"--reuid={uid}", f"--regid={uid}", "--init-groups", "--",
                                  "env", "-i", *env, *argv]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise AssertionError(f"{user}: {' '.join(argv)} failed ({done.returncode}):\n"
                                 f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
        return done


def _reachable_python():
    """Bind options that let every user run this Python: when it lives in a folder only root
    may enter (pyenv under /root on these machines), that folder becomes an empty tmpfs in the
    namespace with the Python installation bound back, read-only. A hub's Python lives where
    users can reach it (TLJH: /opt/tljh/user), so a real install needs nothing of the kind."""
    base, path = os.path.realpath(sys.base_prefix), "/"
    for part in pathlib.Path(os.path.realpath(sys.base_prefix)).parts[1:]:
        path = os.path.join(path, part)
        if not os.stat(path).st_mode & stat.S_IXOTH:
            options, below = ["--perms", "0755", "--tmpfs", path], path
            for inner in pathlib.Path(os.path.relpath(base, path)).parts[:-1]:
                below = os.path.join(below, inner)
                options += ["--perms", "0755", "--dir", below]
            return options + ["--ro-bind", base, base]
    return []


def _uid_taken(uid):
    import pwd
    try:
        pwd.getpwuid(uid)
        return True
    except KeyError:
        return False


class Hub:
    """jupyterhub + configurable-http-proxy, started as root inside the machine's namespace."""

    def __init__(self, machine):
        self.m = machine
        self.port, self.hub_port, self.api_port = _free_port(), _free_port(), _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.token = secrets.token_hex(32)
        self.proc = None

    def config(self):
        d = self.m.hub_dir
        d.mkdir(mode=0o700)
        students = [u for u in USERS if u != "teacher"]
        text = f"""
c = get_config()
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {self.port}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {self.hub_port}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{self.api_port}"
c.ConfigurableHTTPProxy.command = [{_chp()!r}]
c.ConfigurableHTTPProxy.auth_token = {secrets.token_hex(32)!r}
c.JupyterHub.db_url = "sqlite:///{d}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = "{d}/jupyterhub_cookie_secret"
c.JupyterHub.pid_file = "{d}/jupyterhub.pid"
# Local accounts, checked by PAM; no PAM session (it would write the machine's login records).
c.JupyterHub.authenticator_class = "pam"
c.PAMAuthenticator.open_sessions = False
c.Authenticator.allowed_users = {set(USERS)!r}
# Each user's server runs as that user (setuid from root), in their own home.
c.JupyterHub.spawner_class = "localprocess"
c.Spawner.cmd = ["{VENV_BIN}/jupyterhub-singleuser"]
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120
c.Spawner.environment = {{"JUPYTER_CONFIG_PATH": "{self.m.etc}/jupyter", "LANG": "C.UTF-8"}}
# The test drives the hub as a service with the admin role.
c.JupyterHub.services = [{{"name": "{SERVICE}", "api_token": "{self.token}"}}]
c.JupyterHub.load_roles = [{{"name": "admin", "services": ["{SERVICE}"]}}]
c.JupyterHub.cleanup_servers = True
"""
        (d / "jupyterhub_config.py").write_text(text)
        (d / "students.json").write_text(json.dumps(students))
        return d / "jupyterhub_config.py"

    def start(self):
        config = self.config()
        env = {"HOME": str(self.m.hub_dir), "PATH": f"{VENV_BIN}:{CHP_DIR}:/usr/bin:/bin",
               "LANG": "C.UTF-8", "JUPYTER_CONFIG_DIR": str(self.m.hub_dir / ".jupyter"),
               "JUPYTER_DATA_DIR": str(self.m.hub_dir / ".local"),
               "JUPYTER_RUNTIME_DIR": str(self.m.hub_dir / ".runtime")}
        self.log = open(self.m.hub_dir / "hub.log", "w")
        cmd = self.m.namespace() + ["--chdir", str(self.m.hub_dir), str(VENV_BIN / "jupyterhub"),
                                    "-f", str(config)]
        self.proc = subprocess.Popen(cmd, env=env, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"the hub exited ({self.proc.returncode}):\n{self.logs()}")
            try:
                if self.api("GET", "/").status_code == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.3)
        raise AssertionError(f"the hub did not answer within 90 s:\n{self.logs()}")

    def logs(self):
        try:
            return (self.m.hub_dir / "hub.log").read_text()[-6000:]
        except OSError:
            return ""

    def api(self, method, path, **kwargs):
        import requests
        headers = {"Authorization": f"token {self.token}"}
        return requests.request(method, f"{self.url}/hub/api{path}", headers=headers, timeout=30, **kwargs)

    def start_server(self, user):
        r = self.api("POST", f"/users/{user}/server")
        assert r.status_code in (201, 202), (r.status_code, r.text)

    def wait_ready(self, user, timeout=150):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            model = self.api("GET", f"/users/{user}").json()
            server = (model.get("servers") or {}).get("")
            if server and server.get("ready"):
                return
            time.sleep(0.5)
        raise AssertionError(f"{user}'s server did not start:\n{self.logs()}")

    def user_token(self, user):
        r = self.api("POST", f"/users/{user}/tokens", json={"note": "course test", "expires_in": 3600})
        assert r.status_code == 201, (r.status_code, r.text)
        return r.json()["token"]

    def stop(self):
        if self.proc is None:
            return
        try:
            self.api("POST", "/shutdown", json={"servers": True, "proxy": True})
            self.proc.wait(timeout=30)
        except Exception:  # noqa: BLE001 - fall through to the kill
            pass
        if self.proc.poll() is None:
            # bubblewrap's --die-with-parent and PID namespace: killing it ends everything inside
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        self.log.close()


class Student:
    """A student's browser, reduced to the requests the JupyterLab Assignments tab makes."""

    def __init__(self, hub, name, token):
        import requests
        self.name, self.base = name, f"{hub.url}/user/{name}"
        self.http = requests.Session()
        self.http.headers["Authorization"] = f"token {token}"

    def assignments(self, action=None):
        if action is None:
            r = self.http.get(f"{self.base}/assignments", params={"course_id": COURSE}, timeout=60)
        else:
            r = self.http.post(f"{self.base}/assignments/{action}",
                               data={"course_id": COURSE, "assignment_id": A}, timeout=120)
        assert r.status_code == 200, (self.name, action, r.status_code, r.text[:2000])
        return r.json()

    def read(self, path):
        r = self.http.get(f"{self.base}/api/contents/{path}", params={"content": 1}, timeout=60)
        assert r.status_code == 200, (self.name, path, r.status_code, r.text[:500])
        return r.json()

    def save_notebook(self, path, nb):
        r = self.http.put(f"{self.base}/api/contents/{path}", timeout=60,
                          json={"type": "notebook", "format": "json", "content": json.loads(nbformat.writes(nb))})
        assert r.status_code in (200, 201), (self.name, r.status_code, r.text[:500])


_MARKERS = re.compile(r"[ \t]*### (BEGIN|END) SOLUTION\n?")


def _answer(nb, student):
    """ada: the solution; ben: double right, row_sums over the wrong axis; cleo: nothing."""
    solution = nbformat.read(H.FIXTURE / A / NB, as_version=4)
    answers = {c.metadata["nbgrader"]["grade_id"]: _MARKERS.sub("", c.source) for c in solution.cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    if student == "ben":
        answers["fixture_rows"] = "def row_sums(m):\n    return np.asarray(m, dtype=float).sum(axis=0)\n"
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if student != "cleo" and gid in answers:
            cell.source = answers[gid]
    return nb


PROBE = r"""
import glob, json, os, sys
checks = {}
for name, path in json.loads(sys.argv[1]).items():
    try:
        if os.path.isdir(path):
            os.listdir(path)
        else:
            open(path, "rb").read(1)
        checks[name] = "read"
    except PermissionError:
        checks[name] = "denied"
    except FileNotFoundError:
        checks[name] = "missing"
print(json.dumps(checks))
"""


@pytest.fixture(scope="module")
def machine():
    missing = _missing()
    if missing:
        pytest.fail(f"the hub test cannot run here: {missing} (make test-tools installs it)")
    root = tempfile.mkdtemp(prefix="course-hub-", dir="/tmp")
    try:
        yield Machine(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _processes_of(uids):
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/status") as fh:
                uid = int(next(ln for ln in fh if ln.startswith("Uid:")).split()[1])
        except (OSError, StopIteration):
            continue
        if uid in uids:
            found.append(pid)
    return found


@pytest.mark.slow
def test_a_class_through_jupyterhub(machine):
    m, started = machine, time.monotonic()
    teacher = m.homes / "teacher"
    course = teacher / "course"
    shutil.copytree(H.FIXTURE / A, course / "solutions" / A)
    (course / "nbgrader_config.py").write_text(
        "c = get_config()\n"
        f"c.CourseDirectory.root = {str(course)!r}\n"
        "c.CourseDirectory.source_directory = 'solutions'\n"
        "c.CourseDirectory.release_directory = 'release'\n")
    # The grader's config (read by `python -m autograder grade`): a due date an hour ago.
    due = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(time.time() - 3600))
    (course / "autograder").mkdir()
    (course / "autograder" / "nbgrader_config.py").write_text(
        f"c = get_config()\nc.LatePolicy.due = {{{A!r}: {due!r}}}\nc.LatePolicy.per_day = 0.1\n")
    subprocess.run(["chown", "-R", f"{m.uid['teacher']}:{m.uid['teacher']}", str(teacher)], check=True)

    # -- the instructor releases the assignment -------------------------------------------------
    m.as_user("teacher", ["nbgrader", "generate_assignment", A], cwd=course)
    m.as_user("teacher", ["nbgrader", "release_assignment", A], cwd=course)
    outbound = m.exchange / COURSE / "outbound" / A / NB
    assert outbound.is_file()
    assert "secret_marker" not in outbound.read_text()  # hidden tests never reach the exchange

    hub = Hub(m)
    try:
        hub.start()
        timings = {"hub up": time.monotonic() - started}
        # A student logs in with their own password, not with someone else's.
        import requests
        login = requests.Session()
        page = login.get(f"{hub.url}/hub/login", timeout=30)
        xsrf = re.search(r'name="_xsrf" value="([^"]+)"', page.text).group(1)
        wrong = login.post(f"{hub.url}/hub/login", timeout=30, allow_redirects=False,
                           data={"username": "ada", "password": m.passwords["ben"], "_xsrf": xsrf})
        assert wrong.status_code == 403 and "Invalid username or password" in wrong.text
        right = login.post(f"{hub.url}/hub/login", timeout=30, allow_redirects=False,
                           data={"username": "ada", "password": m.passwords["ada"], "_xsrf": xsrf})
        assert right.status_code == 302, (right.status_code, right.text[:500])

        students = {}
        for name in ("ada", "ben", "cleo"):
            hub.start_server(name)
        for name in ("ada", "ben", "cleo"):
            hub.wait_ready(name)
            students[name] = Student(hub, name, hub.user_token(name))
        timings["servers up"] = time.monotonic() - started

        # -- students fetch, answer and submit, through the hub ------------------------------------
        for name, st in students.items():
            listed = st.assignments()
            assert listed["success"], listed
            assert [a["assignment_id"] for a in listed["value"] if a["status"] == "released"] == [A]
            st.assignments("fetch")
            model = st.read(f"{A}/{NB}")
            nb = nbformat.from_dict(model["content"])
            st.save_notebook(f"{A}/{NB}", _answer(nb, name))
            submitted = st.assignments("submit")
            assert submitted["success"], submitted
            assert any(a["status"] == "submitted" and a["student_id"] == name for a in submitted["value"]), submitted
        # Nobody reaches another student's server through the hub.
        r = students["ben"].http.get(f"{hub.url}/user/ada/api/contents/{A}", timeout=30, allow_redirects=False)
        assert r.status_code in (302, 403) and r.status_code != 200, r.status_code

        # -- what a student's own code could read on the machine -------------------------------
        inbound = m.exchange / COURSE / "inbound"
        ada_submission = next(p for p in inbound.iterdir() if p.name.startswith("ada+"))
        probe = {"the inbound folder (everyone's submissions)": str(inbound),
                 "ada's home": str(m.homes / "ada"),
                 "ada's notebook": str(m.homes / "ada" / A / NB),
                 "the instructor's home": str(teacher),
                 "the instructor's solutions": str(course / "solutions" / A / NB),
                 "the gradebook": str(course / "gradebook.db")}
        seen = json.loads(m.as_user("ben", [str(VENV_BIN / "python"), "-c", PROBE, json.dumps(probe)]).stdout)
        assert seen == {name: "denied" for name in probe}, seen
        # ...while the released assignment is readable: the check can fail.
        seen = json.loads(m.as_user("ben", [str(VENV_BIN / "python"), "-c", PROBE,
                                            json.dumps({"release": str(outbound)})]).stdout)
        assert seen == {"release": "read"}
        assert ada_submission.name.count("+") == 3  # the random part that keeps it unguessable

        # -- the instructor collects; the grader grades what was collected ----------------------
        m.as_user("teacher", ["nbgrader", "collect", A], cwd=course)
        submitted_dir = course / "submitted"
        assert sorted(os.listdir(submitted_dir)) == ["ada", "ben", "cleo"]
        assert (submitted_dir / "ada" / A / "timestamp.txt").is_file()
        graded = course / "graded"
        done = H.grade(submitted_dir, graded, course, "--jobs", "2", "--gradebook", str(course / "gradebook.db"))
        assert done.returncode == 0, done.stderr[-4000:]
        timings["graded"] = time.monotonic() - started
        rows = {r["student_id"]: r for r in H.read_csv(graded / "grades.csv")}
        assert {s: rows[s]["score"] for s in rows} == {"ada": "5", "ben": "2", "cleo": "0"}
        # The late penalty comes from the exchange's own timestamp.txt, in its own columns.
        for s in ("ada", "ben", "cleo"):
            stamp = (submitted_dir / s / A / "timestamp.txt").read_text().strip()
            assert rows[s]["submitted_at"].startswith(stamp[:19].replace(" ", "T")), (rows[s], stamp)
            assert rows[s]["days_late"] == "1" and rows[s]["penalty"] == "0.1"
        assert rows["ada"]["final_score"] == "4.5" and rows["ben"]["final_score"] == "1.8"
        assert not [p for p in H.problems(graded) if "extra file" in p]  # timestamp.txt is not a stray
        assert {r["Username"] for r in H.read_csv(graded / "moodle.csv")} == {"ada", "ben", "cleo"}

        # -- feedback: the grader's redacted pages, released through the exchange ---------------
        subprocess.run(["chown", "-R", f"{m.uid['teacher']}:{m.uid['teacher']}", str(graded / "feedback")], check=True)
        m.as_user("teacher", ["nbgrader", "release_feedback", A,
                              f"--CourseDirectory.feedback_directory={graded / 'feedback'}"], cwd=course)
        pages = {}
        for name, st in students.items():
            listed = st.assignments("fetch_feedback")
            assert listed["success"], listed
            feedback_dir = st.read(f"{A}/feedback")["content"]
            assert len(feedback_dir) == 1, feedback_dir  # one submission, one timestamp
            pages[name] = st.read(f"{feedback_dir[0]['path']}/fixture.html")["content"]
        for name, page in pages.items():
            assert "secret_marker" not in page and "HIDDEN TESTS" not in page, name
            assert page == (graded / "feedback" / name / A / "fixture.html").read_text()
        text = {name: html.unescape(re.sub(r"<[^>]+>", "", page)) for name, page in pages.items()}
        assert "sum(axis=0)" in text["ben"] and "sum(axis=0)" not in text["ada"] + text["cleo"]
        assert "sum(axis=1)" in text["ada"] and "sum(axis=1)" not in text["ben"] + text["cleo"]
        assert "NotImplementedError" in text["cleo"] and "NotImplementedError" not in text["ada"]
        # Another student's feedback cannot be listed or fetched.
        seen = json.loads(m.as_user("ben", [str(VENV_BIN / "python"), "-c", PROBE, json.dumps(
            {"released feedback": str(m.exchange / COURSE / "feedback"),
             "ada's fetched feedback": str(m.homes / "ada" / A / "feedback")})]).stdout)
        assert seen == {"released feedback": "denied", "ada's fetched feedback": "denied"}, seen
        timings["feedback fetched"] = time.monotonic() - started
    finally:
        hub.stop()
    uids = set(m.uid.values())
    assert _processes_of(uids) == [], "a process of the class outlived the hub"
    print("hub test timings (s from start): " + ", ".join(f"{k} {v:.1f}" for k, v in timings.items()))

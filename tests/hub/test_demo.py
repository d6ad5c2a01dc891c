"""`nbjobs demo` end to end, the way a browser uses it: log in, spawn, submit, read."""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import re
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import nbformat
import psutil
import pytest
import requests

from tests.ports import free_port

from .hubproc import login, start_server, terminal_says, xsrf

#: this run's OS accounts (d1a2b3c-ada): a demo running on the machine keeps its demo-ada
PREFIX = f"d{uuid.uuid4().hex[:6]}-"


@pytest.fixture(scope="module")
def demo():
    # a folder other accounts may pass through (pytest's own is root's alone): as root the
    # demo then gives every user an OS account, as a newcomer's clone would
    public = Path(tempfile.mkdtemp(prefix="nbjobs-demo-test-"))
    public.chmod(0o755)
    workdir = public / "demo"
    port = free_port()
    command = [sys.executable, "-m", "nbjobs.cli", "demo", "--workdir", str(workdir)]
    command += [f"--port={port}", f"--hub-port={free_port()}", f"--service-port={free_port()}"]
    command += [f"--proxy-api-port={free_port()}", f"--inbox-port={free_port()}"]
    command += [f"--smtp-port={free_port()}", f"--prefix={PREFIX}"]
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    lines = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        lines.append(line)
        if "Ctrl-C stops the demo" in line or proc.poll() is not None:
            break
    if proc.poll() is not None:
        proc.stdout.close()
        pytest.fail("".join(lines))
    yield f"http://127.0.0.1:{port}", workdir, proc, "".join(lines)
    if proc.poll() is None:  # stopped as Ctrl-C does: the hub stops the servers it started
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    proc.stdout.close()
    removed = subprocess.run(
        [*command[:4], "--remove-accounts", f"--prefix={PREFIX}"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "removed" in removed.stdout
    shutil.rmtree(public, ignore_errors=True)


def servers_of(workdir: Path, user: str, attrs: tuple[str, ...] = ()) -> list[psutil.Process]:
    """``user``'s notebook server processes of this demo (its folder in NBJOBS_ROOT): a
    hub of another test beside it on the machine has its own ada."""
    found = []
    for p in psutil.process_iter(["environ", "cmdline", *attrs]):
        env = p.info["environ"] or {}
        if env.get("JUPYTERHUB_USER") == user and env.get("NBJOBS_ROOT", "").startswith(
            str(workdir) + "/"
        ):
            found.append(p)
    return found


def test_the_demo_prints_where_to_go_and_who_to_be(demo):
    url, _, _, out = demo
    assert f"nbjobs demo is running at {url}" in out
    assert "password: nbjobs" in out
    # the guides show a Credits tab: the demo says it has none, and how to get it
    assert "credits: off" in out
    assert "nbjobs demo --credits turns them on" in out


def test_a_student_submits_from_her_notebook_server_and_gets_the_result(demo):
    url, workdir, _, _ = demo
    s = login(url, "ada")
    start_server(url, s, "ada")
    api = f"{url}/user/ada/nbjobs/api/"

    flavors = s.get(api + "flavors").json()
    refused = s.post(api + "jobs", json={"path": "hello.ipynb", "flavor": "cpu"})
    job = s.post(
        api + "jobs",
        json={"path": "hello.ipynb", "flavor": "cpu", "parameters": {"steps": 5}},
        headers={"X-XSRFToken": xsrf(s, "/user/ada/")},
    ).json()
    deadline = time.monotonic() + 90
    while (state := s.get(api + f"jobs/{job['id']}").json())["state"] not in (
        "succeeded",
        "failed",
    ):
        assert time.monotonic() < deadline
        time.sleep(0.5)

    assert [f["name"] for f in flavors][:1] == ["cpu"]
    assert refused.status_code == 403  # a cookie without the XSRF token
    assert job["user"] == "ada"
    assert state["state"] == "succeeded", state
    output = workdir / "home" / "ada" / state["output_path"]
    assert nbformat.read(output, as_version=4).metadata["nbjobs"]["parameters"] == {"steps": 5}


def test_notebook_servers_are_cpu_only_and_know_the_service(demo):
    url, workdir, _, _ = demo
    s = login(url, "bob")
    start_server(url, s, "bob")
    servers = servers_of(workdir, "bob")
    assert servers
    env = servers[0].info["environ"]
    assert env["CUDA_VISIBLE_DEVICES"] == ""
    assert env["NVIDIA_VISIBLE_DEVICES"] == "void"
    assert env["NBJOBS_URL"].endswith("/services/nbjobs/")
    assert env["NBJOBS_ROOT"] == str(workdir / "home" / "bob")


def test_the_teacher_provisions_a_class_from_a_terminal_in_her_server(demo):
    url, workdir, _, _ = demo
    s = login(url, "tess")
    start_server(url, s, "tess")
    server = servers_of(workdir, "tess")[0]
    env = server.info["environ"]  # what a JupyterLab terminal of hers has
    roster = workdir / "home" / "tess" / "roster.csv"
    roster.write_text("username\ncarl\ndee\n")

    made = subprocess.run(
        [sys.executable, "-m", "nbjobs.cli", "class", "create", "extra", "--roster", str(roster)],
        env={
            "PATH": os.environ["PATH"],
            **{k: env[k] for k in env if k.startswith(("NBJOBS", "JUPYTERHUB"))},
        },
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert made.returncode == 0, made.stderr
    assert "students:   2: carl, dee" in made.stdout
    # carl can log in to the demo at once and is in the class
    carl = login(url, "carl")
    # the class's hub group lives in nbjobs' own namespace, where it grants nothing
    assert carl.get(f"{url}/hub/api/user").json()["groups"] == ["nbjobs-class-extra"]


def test_the_nbjobs_command_works_in_a_lab_terminal_as_the_readme_says(demo):
    url, _, _, _ = demo
    s = login(url, "ada")
    start_server(url, s, "ada")
    said = terminal_says(url, s, "ada", "nbjobs submit hello.ipynb --flavor cpu && nbjobs list")
    assert "command not found" not in said
    submitted = re.search(r"submitted: (\w+) ", said)
    assert submitted, said
    after = said[submitted.end() :].split("\n", 1)[-1]
    assert submitted.group(1) in after, said  # then listed by the CLI


def test_the_demo_class_has_two_students_and_a_teacher(demo):
    url, workdir, _, _ = demo
    s = login(url, "tess")
    r = s.post(f"{url}/hub/api/users/tess/server", headers={"X-XSRFToken": xsrf(s, "/hub/")})
    assert r.status_code in (201, 202, 400), r.text  # 400: already running
    deadline = time.monotonic() + 90
    while not s.get(f"{url}/hub/api/users/tess").json()["servers"].get("", {}).get("ready"):
        assert time.monotonic() < deadline
        time.sleep(0.5)
    server = servers_of(workdir, "tess")[0]
    env = server.info["environ"]

    listed = subprocess.run(
        [sys.executable, "-m", "nbjobs.cli", "class", "list", "demo-class", "--json"],
        env={
            "PATH": os.environ["PATH"],
            **{k: env[k] for k in env if k.startswith(("NBJOBS", "JUPYTERHUB"))},
        },
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert listed.returncode == 0, listed.stderr
    cls = json.loads(listed.stdout)
    assert cls["name"] == "demo-class"
    assert sorted(cls["students"]) == ["ada", "bob"]
    assert cls["teachers"] == ["tess"]
    # a class of the hub's, with a budget: tess changes its roster and grants hours
    assert (cls["source"], cls["gpu_hours"], cls["period"]) == ("hub", 2, "week")
    assert cls["flavors"] == ["cpu", "gpu", "gpu-long"]
    # the students' flavors are the class's
    ada = login(url, "ada")
    assert ada.get(f"{url}/hub/api/user").json()["name"] == "ada"


def test_without_a_gpu_the_demo_simulates_some_and_says_so_everywhere(demo):
    url, workdir, _, out = demo
    assert "GPUs: 2 SIMULATED (this machine has none)" in out
    s = login(url, "bob")
    start_server(url, s, "bob")
    api = f"{url}/user/bob/nbjobs/api/"
    headers = {"X-XSRFToken": xsrf(s, "/user/bob/")}
    gpu = next(f for f in s.get(api + "flavors").json() if f["name"] == "gpu")
    assert (gpu["display_name"], gpu["simulated"], gpu["total_gpus"]) == (
        "1 GPU (simulated)",
        True,
        2,
    )
    # bob may hold one GPU at a time: his second GPU job queues behind the first
    body = {"path": "hello.ipynb", "flavor": "gpu", "parameters": {"steps": 40}}
    first = s.post(api + "jobs", json=body, headers=headers).json()
    second = s.post(api + "jobs", json=body, headers=headers).json()
    deadline = time.monotonic() + 90
    while not (waiting := s.get(api + f"jobs/{second['id']}").json())["waiting_reason"]:
        assert time.monotonic() < deadline
        time.sleep(0.3)
    assert waiting["state"] == "queued"
    assert "may use 1 GPU(s) at once" in waiting["waiting_reason"]
    while (done := s.get(api + f"jobs/{first['id']}").json())["state"] not in (
        "succeeded",
        "failed",
    ):
        assert time.monotonic() < deadline + 90
        time.sleep(0.5)
    assert done["state"] == "succeeded", done
    output = nbformat.read(workdir / "home" / "bob" / done["output_path"], as_version=4)
    assert output.metadata["nbjobs"]["gpus_simulated"] is True
    assert "It ran on a simulated GPU" in output.cells[0].source
    log = s.get(api + f"jobs/{first['id']}/logs").text
    assert " is simulated" in log  # one GPU: "GPU 0 is simulated"
    s.post(api + f"jobs/{second['id']}/cancel", headers=headers)


# -- every role's flow: approvals, notifications in the demo's inbox --------------------


def inbox(url: str, s) -> dict:
    """The user's demo inbox, through the hub (its OAuth round on the way)."""
    r = s.get(f"{url}/services/demo-inbox/api/messages")
    assert r.status_code == 200, r.text
    return r.json()


def wait_for_message(url: str, s, kind: str, words: str, timeout: float = 90) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        found = [m for m in inbox(url, s)["messages"] if m["kind"] == kind and words in m["text"]]
        if found:
            return found[0]
        assert time.monotonic() < deadline, inbox(url, s)
        time.sleep(0.5)


def test_a_job_on_the_approval_flavor_waits_for_tess(demo):
    url, _, _, out = demo
    assert "'4 h (needs approval)' waits for tess or admin" in out
    bob = login(url, "bob")
    start_server(url, bob, "bob")
    api = f"{url}/user/bob/nbjobs/api/"
    body = {"path": "hello.ipynb", "flavor": "gpu-long", "parameters": {"steps": 2}}
    job = bob.post(api + "jobs", json=body, headers={"X-XSRFToken": xsrf(bob, "/user/bob/")})
    assert job.status_code == 201, job.text
    assert job.json()["state"] == "pending_approval"
    assert "an admin or your teacher must approve" in job.json()["waiting_reason"]

    tess = login(url, "tess")
    start_server(url, tess, "tess")
    tess_api = f"{url}/user/tess/nbjobs/api/"
    waiting = tess.get(tess_api + "dashboard/approvals").json()
    assert [j["id"] for j in waiting] == [job.json()["id"]]
    approved = tess.post(
        tess_api + f"jobs/{job.json()['id']}/approve",
        headers={"X-XSRFToken": xsrf(tess, "/user/tess/")},
    )
    assert approved.status_code == 200, approved.text
    assert approved.json()["state"] in ("queued", "starting", "running", "succeeded")


def test_notifications_land_in_each_users_demo_inbox(demo):
    url, _, _, out = demo
    assert f"mail and webhooks: {url}/services/demo-inbox/" in out
    ada = login(url, "ada")
    start_server(url, ada, "ada")
    api = f"{url}/user/ada/nbjobs/api/"
    headers = {"X-XSRFToken": xsrf(ada, "/user/ada/")}
    # the inbox page names her address and her webhook URL
    page = ada.get(f"{url}/services/demo-inbox/")
    assert page.status_code == 200, page.text
    assert "Demo inbox of ada" in page.text
    hook = re.search(r"http://127\.0\.0\.1:\d+/services/demo-inbox/hook/ada/[0-9a-f]+", page.text)
    assert hook is not None, page.text
    assert inbox(url, ada)["address"] == "ada@demo.test"

    # she asks for mail and a webhook: the code to confirm her address arrives first
    wanted = {"email": "ada@demo.test", "webhook": hook.group(0), "on": ["succeeded"]}
    saved = ada.put(api + "notifications/settings", json=wanted, headers=headers)
    assert saved.status_code == 200, saved.text
    assert saved.json()["email_confirmed"] is False
    code = re.search(r"Code: (\S+)", wait_for_message(url, ada, "mail", "Code: ")["text"])
    assert code is not None
    answer = {"code": code.group(1)}
    confirmed = ada.post(api + "notifications/confirm", json=answer, headers=headers)
    assert confirmed.status_code == 200, confirmed.text

    # a job of hers succeeds: the mail and the webhook say so, with a link to the result
    body = {"path": "hello.ipynb", "flavor": "cpu", "parameters": {"steps": 2}, "name": "told"}
    job = ada.post(api + "jobs", json=body, headers=headers).json()
    mail = wait_for_message(url, ada, "mail", f"({job['id']})", timeout=120)
    assert "succeeded" in mail["subject"], mail
    assert f"{url}/hub/user-redirect/lab/tree/" in mail["text"]
    sent = wait_for_message(url, ada, "webhook", job["id"])
    assert json.loads(sent["text"])["state"] == "succeeded"

    # bob's inbox has none of it, and he cannot read hers
    bob = login(url, "bob")
    assert all(job["id"] not in m["text"] for m in inbox(url, bob)["messages"])
    assert inbox(url, bob)["address"] == "bob@demo.test"
    # nor post to her webhook with his own key
    bob_hook = re.search(r"/hook/bob/([0-9a-f]+)", bob.get(f"{url}/services/demo-inbox/").text)
    assert bob_hook is not None
    forged = requests.post(hook.group(0).rsplit("/", 1)[0] + "/" + bob_hook.group(1), json={})
    assert forged.status_code == 404


# -- one machine, many users: accounts, files, secrets, devices -------------------------


def service_processes(demo: Any) -> list[psutil.Process]:
    """The demo's hub, its proxy and its job service: every process holding a secret of
    theirs (the demo's own, not another test's hub that may come and go meanwhile)."""
    found = []
    for process in psutil.Process(demo[2].pid).children(recursive=True):
        with contextlib.suppress(psutil.Error):
            line = " ".join(process.cmdline())
            if any(
                w in line for w in ("hub_config.run -f", "nbjobs.cli service", "configurable-http")
            ):
                found.append(process)
    return found


def service_token(demo: Any) -> str:
    service = next(
        p for p in service_processes(demo) if "nbjobs.cli service" in " ".join(p.cmdline())
    )
    return service.environ()["JUPYTERHUB_API_TOKEN"]


def test_as_root_each_user_is_their_own_os_account(demo):
    url, workdir, _, out = demo
    names = ", ".join(f"{PREFIX}{user}" for user in ("ada", "bob", "tess", "admin"))
    assert f"users: each their own OS account ({names})" in out
    s = login(url, "ada")
    start_server(url, s, "ada")
    ada = pwd.getpwnam(f"{PREFIX}ada")
    home = workdir / "home" / "ada"
    server = next(
        p
        for p in servers_of(workdir, "ada", ("uids",))
        if "nbjobs.spawner.singleuser" in " ".join(p.info["cmdline"] or [])
    )
    assert server.info["uids"].real == server.info["uids"].effective == ada.pw_uid
    assert ada.pw_dir == str(home)
    assert (home.stat().st_uid, stat.S_IMODE(home.stat().st_mode)) == (ada.pw_uid, 0o700)
    assert (home / "hello.ipynb").stat().st_uid == ada.pw_uid  # she can save it
    assert f"{PREFIX}ada" in terminal_says(url, s, "ada", "id -un")


def test_bob_reads_nothing_of_ada_nor_of_the_services(demo):
    url, workdir, _, _ = demo
    token = service_token(demo)
    private = [
        workdir / "home" / "ada" / "hello.ipynb",
        workdir / "nbjobs.yaml",
        workdir / "jobs.sqlite",
        workdir / "jupyterhub_config.py",
        workdir / "jupyterhub_cookie_secret",
        workdir / "jupyterhub.sqlite",
        workdir / "jupyterhub.log",
    ]
    processes = service_processes(demo)
    assert len(processes) >= 3  # the hub, its proxy, the job service
    for process in processes:
        private += [Path(f"/proc/{process.pid}/environ"), Path(f"/proc/{process.pid}/mem")]
    assert all(p.exists() for p in private)
    s = login(url, "bob")
    start_server(url, s, "bob")
    tries = "; ".join(f"cat {p} >/dev/null" for p in private)
    tries += f"; ls {workdir / 'home' / 'ada'}; ls {workdir}"
    # the token, anywhere bob can read: every process's command line, the demo's files and
    # /tmp (searched by a program that gets the token on its input, not on its command
    # line). Only files written since the demo began can hold it: older ones (another
    # test's clones, node_modules) are passed over, else a busy /tmp takes minutes.
    since = workdir.parent.stat().st_mtime - 5  # the demo's folder, made just before it
    find = FIND_TOKEN % {"top": str(workdir), "since": since}
    # a word bob may see, in one world-readable file and one command line: the search must
    # find each once, or it did not look where it says
    control = f"control-{os.urandom(8).hex()}"
    with tempfile.NamedTemporaryFile("w", prefix="nbjobs-control-", dir="/tmp") as planted:
        planted.write(control)
        planted.flush()
        os.chmod(planted.name, 0o644)
        waiting = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", control])
        try:
            tries += f"; printf '%s\\n%s' {token} {control} | python3 -c {shlex.quote(find)}"
            said = terminal_says(url, s, "bob", tries)
        finally:
            waiting.kill()
            waiting.wait()

    denied = said.count("Permission denied")
    assert denied == len(private) + 2, said
    found = re.search(r"token=(\d+),(\d+) control=(\d+),(\d+)", said)
    assert found is not None, said
    cmdlines, files, control_cmdlines, control_files = map(int, found.groups())
    assert (cmdlines, files) == (0, 0), said
    assert (control_cmdlines, control_files) == (1, 1), said


FIND_TOKEN = """
import os, sys
words = [w.encode() for w in sys.stdin.read().split()]
cmdlines = [0, 0]
files = [0, 0]
for pid in filter(str.isdigit, os.listdir("/proc")):
    if int(pid) == os.getpid():
        continue
    try:
        line = open(f"/proc/{pid}/cmdline", "rb").read()
    except OSError:
        continue
    for i, word in enumerate(words):
        cmdlines[i] += word in line
for top in (%(top)r, "/tmp"):
    for folder, _, names in os.walk(top):
        for name in names:
            try:
                path = os.path.join(folder, name)
                if os.lstat(path).st_mtime < %(since)r:
                    continue
                with open(path, "rb") as f:
                    read = f.read(10_000_000)
            except OSError:
                continue
            for i, word in enumerate(words):
                files[i] += word in read
print(f"token={cmdlines[0]},{files[0]} control={cmdlines[1]},{files[1]}")
"""


ROGUE_JOB = """
import errno, json, os, pathlib
seen = {"uid": os.getuid(), "environ": {}, "devices": {}}
for pid in %(pids)r:
    try:
        seen["environ"][pid] = open(f"/proc/{pid}/environ").read()
    except OSError as exc:
        seen["environ"][pid] = exc.strerror
try:
    os.listdir(%(bob)r)
    seen["bob"] = "listed"
except OSError as exc:
    seen["bob"] = exc.strerror
given = os.environ["CUDA_VISIBLE_DEVICES"]
os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"  # asks for every GPU: changes nothing
for minor in (0, 1):
    try:
        os.close(os.open(f"%(devices)s/nvidia{minor}", os.O_RDWR))
        seen["devices"][minor] = "opened"
    except OSError as exc:
        seen["devices"][minor] = errno.errorcode[exc.errno]
seen["given"] = given
pathlib.Path("rogue-%(flavor)s.json").write_text(json.dumps(seen))
"""


@pytest.fixture
def stand_in_gpus():
    """Device nodes of two GPUs (major 195, minors 0 and 1) that anyone may open: the
    control group alone stands between a process and them. No driver is behind them, so
    an open that the group allows fails with ENXIO, one it forbids with EPERM."""
    folder = Path(tempfile.mkdtemp(prefix="nbjobs-dev-"))
    folder.chmod(0o755)
    for minor in (0, 1):
        os.mknod(folder / f"nvidia{minor}", 0o666 | stat.S_IFCHR, os.makedev(195, minor))
        (folder / f"nvidia{minor}").chmod(0o666)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("flavor", ["gpu", "cpu"])
def test_a_job_runs_as_its_owner_sees_no_secret_and_opens_only_its_gpu(demo, stand_in_gpus, flavor):
    url, workdir, _, _ = demo
    s = login(url, "ada")
    start_server(url, s, "ada")
    home = workdir / "home" / "ada"
    pids = [p.pid for p in service_processes(demo)]
    source = ROGUE_JOB % {
        "pids": pids,
        "bob": str(workdir / "home" / "bob"),
        "devices": stand_in_gpus,
        "flavor": flavor,
    }
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
    api = f"{url}/user/ada/nbjobs/api/"
    headers = {"X-XSRFToken": xsrf(s, "/user/ada/")}
    put = s.put(
        f"{url}/user/ada/api/contents/rogue.ipynb",
        json={"type": "notebook", "content": notebook},
        headers=headers,
    )
    assert put.status_code in (200, 201), put.text
    job = s.post(api + "jobs", json={"path": "rogue.ipynb", "flavor": flavor}, headers=headers)
    assert job.status_code == 201, job.text
    deadline = time.monotonic() + 120
    while (state := s.get(api + f"jobs/{job.json()['id']}").json())["state"] not in (
        "succeeded",
        "failed",
        "cancelled",
    ):
        assert time.monotonic() < deadline, state
        time.sleep(0.5)
    assert state["state"] == "succeeded", state

    seen = json.loads((home / f"rogue-{flavor}.json").read_text())
    assert seen["uid"] == pwd.getpwnam(f"{PREFIX}ada").pw_uid
    # the service's processes are root's (closed to the job), and in the job's own PID
    # namespace not even there
    unreadable = {"Permission denied", "No such file or directory"}
    assert seen["environ"], seen
    assert set(seen["environ"].values()) <= unreadable, seen["environ"]
    assert seen["bob"] == "Permission denied"
    if flavor == "gpu":
        mine = int(seen["given"])
        assert seen["devices"] == {str(mine): "ENXIO", str(1 - mine): "EPERM"}
    else:
        assert seen["devices"] == {"0": "EPERM", "1": "EPERM"}


def test_a_notebook_server_opens_no_gpu(demo, stand_in_gpus):
    url, _, _, _ = demo
    s = login(url, "bob")
    start_server(url, s, "bob")
    said = terminal_says(url, s, "bob", f"cat {stand_in_gpus}/nvidia0 {stand_in_gpus}/nvidia1")
    assert said.count("Operation not permitted") == 2, said


def test_ctrl_c_while_starting_stops_all_it_started(tmp_path):
    names = ("port", "hub-port", "service-port", "proxy-api-port", "inbox-port", "smtp-port")
    ports = {name: free_port() for name in names}
    command = [sys.executable, "-m", "nbjobs.cli", "demo", "--workdir", str(tmp_path)]
    command += [f"--{name}={port}" for name, port in ports.items()]
    # control groups of its own (nbjobs-<prefix>): its stop removes its instance's empty
    # ones, never those of the module's demo, another demo or a copy of this test beside it
    command += [f"--prefix=c{uuid.uuid4().hex[:6]}-"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    demo_process = psutil.Process(proc.pid)
    # Interrupt once the hub has started its proxy and the job service, before it is up.
    deadline = time.monotonic() + 90
    while True:
        family = demo_process.children(recursive=True)
        commands = []
        for child in family:
            with contextlib.suppress(psutil.NoSuchProcess):
                commands.append(" ".join(child.cmdline()))
        proxy = any("configurable-http-proxy" in c for c in commands)
        if proxy and any("nbjobs.cli service" in c for c in commands):
            break
        assert proc.poll() is None, commands
        assert time.monotonic() < deadline, commands
        # each look reads every process of the machine: ten a second (the service takes
        # seconds to come up after its start) rather than fifty
        time.sleep(0.1)

    os.kill(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=90)

    assert "Ctrl-C stops the demo" not in out, "interrupted too late to test start-up"
    assert "interrupted while starting" in out
    assert "nbjobs demo: stopped" in out
    assert proc.returncode == 130
    _, alive = psutil.wait_procs(family, timeout=30)
    assert [p for p in alive if p.status() != psutil.STATUS_ZOMBIE] == []
    for name, port in ports.items():
        with pytest.raises(ConnectionRefusedError):  # nothing listens there
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
        with socket.socket() as s:
            # a new demo can listen there (servers reuse ports in TIME_WAIT, as here)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", port))
            s.listen()
            assert s.getsockname()[1] == port, name


def test_ctrl_c_stops_the_demo_and_its_hub(demo):
    _, _, proc, _ = demo
    children = psutil.Process(proc.pid).children(recursive=True)

    os.kill(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=60)

    assert proc.returncode == 0
    assert "nbjobs demo: stopped" in out
    _, alive = psutil.wait_procs(children, timeout=30)
    assert [p for p in alive if p.status() != psutil.STATUS_ZOMBIE] == []

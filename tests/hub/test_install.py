"""``nbjobs install`` on this machine as a school's admin runs it, twice; then a class's
first day through what it installed; then ``nbjobs uninstall``.

Everything is real: root (CI's), OS accounts, the units' files, the hub and the job
service started by the commands the installer printed (no systemd runs here), the
first-use login, a spawn, a job on the GPU flavor (the GPUs come from a stand-in
``nvidia-smi -L``; the notebook computes nothing on them). Its folders are under one
temporary folder instead of /etc, /var/lib and /srv, and its OS accounts have a prefix
of this test run's own: an install or a demo running on the machine is never touched.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import nbformat
import pytest
import requests
import yaml

from nbjobs.accounts import account_for, prepare_home
from nbjobs.cgroups import Cgroups, Limits
from nbjobs.config import AccountsConfig
from tests.waiting import wait_until_answering

from .hubproc import free_port, start_server, xsrf

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="nbjobs install needs root (CI's)")

NVIDIA_SMI = """#!/bin/sh
# stand-in: the listing of a server with two A100s
echo "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-11111111-2222-3333-4444-555555555555)"
echo "GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-66666666-7777-8888-9999-000000000000)"
"""


def folders(top: Path) -> dict[str, Path]:
    """An install's folders under ``top``, as /etc, /var/lib and /srv hold them."""
    return {
        "config-dir": top / "etc" / "nbjobs",
        "state-dir": top / "var" / "lib" / "nbjobs",
        "storage": top / "srv" / "nbjobs",
        "units-dir": top / "etc" / "systemd" / "system",
    }


@pytest.fixture
def machine():
    """A machine's folders of each test's own: an uninstall keeps users' folders, owned by
    the uid of an account it removed, which another test's new account may take meanwhile
    (and an install of the same prefix then rightly refuses to hand the folder over)."""
    top = Path(tempfile.mkdtemp(prefix="nbjobs-install-"))
    top.chmod(0o755)
    tools = top / "bin"
    tools.mkdir()
    (tools / "nvidia-smi").write_text(NVIDIA_SMI)
    (tools / "nvidia-smi").chmod(0o755)
    dirs = folders(top)
    path_args = [f"--{name}={path}" for name, path in dirs.items()]
    env = {**os.environ, "PATH": f"{tools}:{Path(sys.executable).parent}:{os.environ['PATH']}"}
    yield top, dirs, path_args, env
    for args in (path_args, _args(folders(top / "second"))):
        subprocess.run(
            [sys.executable, "-m", "nbjobs.cli", "uninstall", *args, "--remove-user-files"],
            env=env,
            capture_output=True,
        )
    shutil.rmtree(top, ignore_errors=True)


def _args(dirs: dict[str, Path]) -> list[str]:
    return [f"--{name}={path}" for name, path in dirs.items()]


#: this run's account prefixes: jupyter- is a real install's
PREFIX, OTHER_PREFIX = f"t{uuid.uuid4().hex[:6]}-", f"u{uuid.uuid4().hex[:6]}-"


def nbjobs(env, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nbjobs.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def claim(url: str, user: str, password: str) -> requests.Response:
    """Log in as ``user`` with ``password`` through the hub's form; the answer."""
    s = requests.Session()
    s.get(f"{url}/hub/login", timeout=30)
    return s.post(
        f"{url}/hub/login",
        data={"username": user, "password": password, "_xsrf": s.cookies["_xsrf"]},
        allow_redirects=False,
        timeout=30,
    )


def use_invitation(link: str, password: str) -> requests.Session:
    """Open an invitation's link and choose the password: a session logged in."""
    s = requests.Session()
    assert s.get(link, timeout=30).status_code == 200
    chosen = s.post(
        link,
        data={"password": password, "password_again": password, "_xsrf": s.cookies["_xsrf"]},
        allow_redirects=False,
        timeout=30,
    )
    assert chosen.status_code == 302, chosen.text
    return s


def test_install_twice_then_a_class_s_first_day_then_uninstall(machine):
    _, dirs, path_args, env = machine
    port = free_port()
    ports = [f"--port={port}", f"--hub-port={free_port()}", f"--service-port={free_port()}"]
    ports += [f"--proxy-api-port={free_port()}", "--ip=127.0.0.1"]
    command = ["install", *path_args, *ports, "--admin", "boss", f"--prefix={PREFIX}"]

    first = nbjobs(env, *command)
    again = nbjobs(env, *command)

    assert first.returncode == 0, first.stdout + first.stderr
    assert again.returncode == 0, again.stdout + again.stderr
    config_dir, state_dir, storage = dirs["config-dir"], dirs["state-dir"], dirs["storage"]
    assert "GPUs found: 0: A100-SXM4-80GB, 1: A100-SXM4-80GB" in first.stdout
    assert f"kept {config_dir / 'nbjobs.yaml'}" in again.stdout
    assert f"kept {storage}" in again.stdout
    settings = yaml.safe_load((config_dir / "nbjobs.yaml").read_text())
    assert [f["name"] for f in settings["flavors"]] == ["cpu", "gpu", "gpu-2"]
    local = settings["backend"]["local"]
    assert local["accounts"] == {"mode": "create", "prefix": PREFIX}
    assert re.fullmatch(r"nbjobs-[0-9a-f]{8}", local["instance"])  # not the first install's
    assert settings["admin"]["users"] == ["boss"]
    # what holds a secret, or users' records, is root's alone
    files = {p.name: stat.S_IMODE(p.stat().st_mode) for p in config_dir.iterdir()}
    assert files == dict.fromkeys(
        ["nbjobs.yaml", "jupyterhub_config.py", "service.env", "hub.env"], 0o600
    )
    assert stat.S_IMODE(state_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(storage.stat().st_mode) == 0o711  # users pass through to their own
    token = (config_dir / "service.env").read_text()
    assert token.count("JUPYTERHUB_API_TOKEN=") == 1
    units = sorted(p.name for p in dirs["units-dir"].iterdir())
    instance = local["instance"]  # named after it: the first install's units stay its own
    assert units == [f"{instance}-hub.service", f"{instance}-jobs.service"]
    hub_unit = (dirs["units-dir"] / f"{instance}-hub.service").read_text()
    assert f"EnvironmentFile={config_dir / 'hub.env'}" in hub_unit
    assert (
        f"ExecStart={Path(sys.executable).parent / 'python'} -m nbjobs.hub_config.run -f"
        in hub_unit
    )
    assert "JUPYTERHUB_API_TOKEN" not in hub_unit  # secrets stay in the 0600 files

    # no systemd here: the installer says how to start the two, and that is what we run
    assert "systemd is not running here" in again.stdout
    lines = [line.strip() for line in again.stdout.splitlines() if line.strip().startswith("sh -c")]
    assert len(lines) == 2
    for line in lines:
        subprocess.run(["bash", "-c", line], env=env, check=True)
    url = f"http://127.0.0.1:{port}"
    # up, and asking for a token
    ready = lambda r: r.status_code == 401  # noqa: E731
    wait_until_answering(f"{url}/services/nbjobs/api/health", ready=ready, timeout=90)

    # the admin chooses the password with the invitation the installer printed; ada is
    # added in the hub; her password is chosen by whoever holds the invitation made for her
    [link] = re.findall(r"boss chooses their password at (http://\S+/hub/invite/\S+)", again.stdout)
    assert claim(url, "boss", "first-day-secret").status_code == 403  # not by logging in
    boss = use_invitation(link, "first-day-secret")
    added = boss.post(f"{url}/hub/api/users/ada", headers={"X-XSRFToken": xsrf(boss, "/hub/")})
    assert added.status_code == 201, added.text
    assert claim(url, "mallory", "whatever1").status_code == 403  # a stranger cannot log in
    claimed = claim(url, "ada", "mallorys-pick")  # a classmate who saw the name
    assert claimed.status_code == 403
    assert "ada has no password yet: open the invitation link" in claimed.text
    made = boss.post(
        f"{url}/hub/api/users/boss/tokens", json={}, headers={"X-XSRFToken": xsrf(boss, "/hub/")}
    )
    invited = nbjobs(
        {**env, "NBJOBS_URL": f"{url}/services/nbjobs/", "NBJOBS_TOKEN": made.json()["token"]},
        "invite",
        "ada",
    )
    assert invited.returncode == 0, invited.stderr
    ada = use_invitation(invited.stdout.split()[1], "adas-own-secret")
    assert claim(url, "ada", "mallorys-pick").status_code == 403
    start_server(url, ada, "ada")
    account = pwd.getpwnam(f"{PREFIX}ada")
    home = storage / "ada"
    assert (home.stat().st_uid, stat.S_IMODE(home.stat().st_mode)) == (account.pw_uid, 0o700)

    notebook = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(
                "import os; print(os.getuid(), os.environ['CUDA_VISIBLE_DEVICES'])"
            )
        ]
    )
    headers = {"X-XSRFToken": xsrf(ada, "/user/ada/")}
    put = ada.put(
        f"{url}/user/ada/api/contents/train.ipynb",
        json={"type": "notebook", "content": notebook},
        headers=headers,
    )
    assert put.status_code == 201, put.text
    api = f"{url}/user/ada/nbjobs/api/"
    job = ada.post(api + "jobs", json={"path": "train.ipynb", "flavor": "gpu"}, headers=headers)
    assert job.status_code == 201, job.text
    deadline = time.monotonic() + 120
    while (done := ada.get(api + f"jobs/{job.json()['id']}").json())["state"] not in (
        "succeeded",
        "failed",
        "cancelled",
    ):
        assert time.monotonic() < deadline, done
        time.sleep(0.5)
    assert done["state"] == "succeeded", done
    result = home / done["output_path"]
    assert result.parent == home  # beside the source
    printed = nbformat.read(result, as_version=4).cells[-1].outputs[0].text.split()
    assert printed[0] == str(account.pw_uid)
    assert printed[1] in ("0", "1")

    gone = nbjobs(env, "uninstall", *path_args)

    assert gone.returncode == 0, gone.stdout + gone.stderr
    assert f"removed the OS account {PREFIX}ada" in gone.stdout
    assert not [e for e in pwd.getpwall() if e.pw_name.startswith(PREFIX)]
    assert not dirs["units-dir"].exists() or not list(dirs["units-dir"].iterdir())
    assert not config_dir.exists()
    assert not state_dir.exists()
    assert (home / "train.ipynb").exists()  # users' folders are kept
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{url}/hub/api/", timeout=5)
    assert json.dumps(sorted(p.name for p in storage.iterdir())) == '["ada"]'


def test_a_second_install_keeps_to_its_own_and_its_uninstall_leaves_the_first_alone(machine):
    """Two classes' installs on one server: the second cannot take the first's account
    names, and removing it stops, deletes and empties nothing of the first's (ada's
    account, what runs as it in the first's control group, an ended job's empty group)."""
    top, dirs, path_args, env = machine
    first = nbjobs(env, "install", *path_args, *_ports(), f"--prefix={PREFIX}", "--no-start")
    assert first.returncode == 0, first.stdout + first.stderr
    settings = yaml.safe_load((dirs["config-dir"] / "nbjobs.yaml").read_text())
    instance = settings["backend"]["local"]["instance"]
    home = dirs["storage"] / "ada"
    account = account_for(
        "ada", AccountsConfig(mode="create", prefix=PREFIX), home, instance=instance
    )
    assert account is not None
    prepare_home(account, home)
    cgroups = Cgroups(parent=instance)
    server, ended = cgroups.group("server-of-ada"), cgroups.group("job-ended-unwatched")
    server.create(Limits(memory=2**30))
    ended.create(Limits(memory=2**30))
    # ada's notebook server, as the first install's hub runs it: her account, its group
    as_ada = ["setpriv", f"--reuid={account.uid}", f"--regid={account.gid}", "--clear-groups"]
    running = subprocess.Popen(
        [*as_ada, "sleep", "300"],
        preexec_fn=server.join if cgroups.enforced else None,
    )
    second = _args(folders(top / "second"))
    try:
        same = nbjobs(env, "install", *second, *_ports(), f"--prefix={PREFIX}")
        made_nothing = not (top / "second").exists()
        beside = nbjobs(env, "install", *second, *_ports(), f"--prefix={OTHER_PREFIX}")
        theirs = yaml.safe_load((top / "second/etc/nbjobs/nbjobs.yaml").read_text())
        their_units = sorted(p.name for p in (top / "second/etc/systemd/system").iterdir())
        gone = nbjobs(env, "uninstall", *second, "--remove-user-files")

        assert same.returncode == 2
        assert same.stderr == (
            f"nbjobs install: the OS accounts {PREFIX}ada belong to another nbjobs on this "
            f"machine (their homes are in {dirs['storage']}); run nbjobs install again with "
            "--prefix naming accounts of this install's own (a prefix no other nbjobs here "
            "uses, like --prefix class2-)\n"
        )
        assert made_nothing  # refused before it made anything
        assert beside.returncode == 0, beside.stdout + beside.stderr
        their_instance = theirs["backend"]["local"]["instance"]
        assert their_instance not in (instance, "nbjobs")
        # its units never take the first's names (nbjobs-hub.service, where systemd runs)
        assert their_units == [f"{their_instance}-hub.service", f"{their_instance}-jobs.service"]
        assert gone.returncode == 0, gone.stdout + gone.stderr
        assert "removed the OS account" not in gone.stdout
        assert pwd.getpwnam(f"{PREFIX}ada").pw_uid == account.uid
        assert running.poll() is None  # ada's server still runs
        if cgroups.enforced:
            assert server.pids() == [running.pid]
            assert all(p.is_dir() for p in ended.paths().values())

        # the first's own uninstall removes its account, stops what ran as it, and
        # removes its control groups
        removed = nbjobs(env, "uninstall", *path_args)
        assert removed.returncode == 0, removed.stdout + removed.stderr
        assert f"removed the OS account {PREFIX}ada" in removed.stdout
        assert running.wait(timeout=30) is not None
        assert not any(p.exists() for p in cgroups.parent_folders())
    finally:
        running.kill()
        running.wait()
        server.remove()
        ended.remove()


def _ports() -> list[str]:
    ports = [f"--port={free_port()}", f"--hub-port={free_port()}", "--ip=127.0.0.1"]
    return [*ports, f"--service-port={free_port()}", f"--proxy-api-port={free_port()}"]


def test_every_command_the_installer_and_its_files_print_works_as_printed(machine):
    """An admin copies what the installer says (check the file with ...) and what the
    files it wrote say: each of those commands runs; a bare command's name is one
    nbjobs knows."""
    _, dirs, path_args, env = machine
    command = ["install", *path_args, *_ports(), f"--prefix={PREFIX}", "--no-start"]
    said = nbjobs(env, *command).stdout + nbjobs(env, *command).stdout
    written = [p.read_text() for p in dirs["config-dir"].iterdir() if p.is_file()]
    written += [p.read_text() for p in dirs["units-dir"].iterdir()]

    printed = set(re.findall(r"`(nbjobs [^`]+)`", "\n".join([said, *written])))

    assert f"nbjobs check-config {dirs['config-dir'] / 'nbjobs.yaml'}" in printed
    program = shutil.which("nbjobs", path=env["PATH"])
    assert program is not None
    for line in sorted(printed):
        words = shlex.split(line)
        if len(words) == 2:  # a command named, not one to run here: `nbjobs uninstall`
            words.append("--help")
        ran = subprocess.run(
            [program, *words[1:]], env=env, capture_output=True, text=True, timeout=120
        )
        assert ran.returncode == 0, f"{line}: {ran.stdout}{ran.stderr}"

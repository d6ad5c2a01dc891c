"""A hub whose users are the machine's own accounts: JupyterHub's PAM login, nbjobs'
``accounts: existing`` (no prefix), and a profile's memory and tasks as the server's
limits.

Real OS accounts with passwords (CI runs as root), a real hub with its proxy, real
servers and terminals. What a user would notice: they log in with their system
password, their server and jobs run as them, and a notebook that allocates past the
profile's memory is killed while the server lives on, with the hub saying why; so is
a fork loop past the profile's tasks refused.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import psutil
import pytest

from nbjobs.cgroups import Cgroups
from tests.loops import FORK_LOOP

from .hubproc import (
    basics,
    free_port,
    local_nbjobs_yaml,
    login,
    running_hub,
    start_server,
    terminal_says,
)

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not Cgroups().enforced,
    reason="OS accounts and control groups need root (CI runs as root)",
)

HUB_CONFIG = """
from nbjobs.hub_config import configure
configure(c, {config!r}, service_port={service_port})
c.JupyterHub.authenticator_class = "pam"
c.Authenticator.allowed_users = {{{user!r}}}
c.Spawner.poll_interval = 1
"""


@pytest.fixture(scope="module")
def pam_hub():
    public = Path(tempfile.mkdtemp(prefix="nbjobs-pam-"))
    public.chmod(0o755)
    user, password = f"nbpam{uuid.uuid4().hex[:6]}", secrets.token_urlsafe(12)
    subprocess.run(["useradd", "--no-create-home", "--user-group", user], check=True)
    subprocess.run(["chpasswd"], input=f"{user}:{password}", text=True, check=True)
    accounts = {"mode": "existing", "prefix": ""}
    nbjobs_yaml = local_nbjobs_yaml(
        public,
        backend={"kind": "local", "local": {"gpus": [], "cpu_slots": 1, "accounts": accounts}},
        profiles=[{"name": "small", "cpu": "1", "memory": "256Mi", "tasks": 100, "default": True}],
    )
    port = free_port()
    config = basics(public, port, free_port()).replace(
        'c.JupyterHub.authenticator_class = "dummy"\n', ""
    )
    config += HUB_CONFIG.format(config=str(nbjobs_yaml), service_port=free_port(), user=user)
    try:
        with running_hub(public, config, port) as url:
            yield url, user, password, public
    finally:
        for process in psutil.process_iter(["uids"]):
            if process.info["uids"] and process.info["uids"].real == pwd.getpwnam(user).pw_uid:
                process.kill()
        subprocess.run(["userdel", user], capture_output=True, check=False)
        shutil.rmtree(public, ignore_errors=True)


def hub_log_says(public: Path, line: str) -> None:
    """The hub's log says ``line`` within 20 s (the spawner's poll sees the server's
    control group say why)."""
    log = public / "hub.log"
    deadline = time.monotonic() + 20
    while line not in log.read_text():
        assert time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.5)


def test_a_system_account_logs_in_with_its_password_and_its_server_runs_as_it(pam_hub):
    url, user, password, public = pam_hub
    account = pwd.getpwnam(user)
    s = login(url, user, password)
    start_server(url, s, user)

    server = next(
        p
        for p in psutil.process_iter(["environ", "uids", "cmdline"])
        if (p.info["environ"] or {}).get("JUPYTERHUB_USER") == user
        and "nbjobs.spawner.singleuser" in " ".join(p.info["cmdline"] or [])
    )
    assert server.info["uids"].real == account.pw_uid
    folder = public / "shared" / "home" / user
    assert folder.stat().st_uid == account.pw_uid
    said = terminal_says(url, s, user, "echo user=$(id -un) home=$HOME")
    assert f"user={user} " in said
    assert f"home={folder}" in said


def test_a_notebook_past_its_profiles_memory_is_killed_and_the_hub_says_why(pam_hub):
    url, user, password, public = pam_hub
    s = login(url, user, password)
    start_server(url, s, user)

    said = terminal_says(
        url, s, user, "python3 -c 'hog = bytearray(600 * 2**20)'; echo exit=$?; echo alive"
    )

    assert "exit=137" in said, said  # SIGKILL, from the kernel
    assert "alive" in said.split("exit=137")[1]  # the server and its terminal live on
    hub_log_says(public, f"{user}'s notebook server ran out of memory (limit 256 MiB)")


def test_a_fork_loop_in_a_terminal_stops_at_the_profiles_tasks_and_the_hub_says_so(pam_hub):
    url, user, password, public = pam_hub
    s = login(url, user, password)
    start_server(url, s, user)
    (public / "shared" / "home" / user / "forks.py").write_text(FORK_LOOP)

    said = terminal_says(url, s, user, "python3 forks.py 300; echo alive")

    assert "refused after" in said, said  # the kernel refused a fork before 300
    assert int(said.split("refused after")[1].split()[0]) < 100, said
    assert "alive" in said.split("refused after")[1]  # the server and its terminal live on
    hub_log_says(public, f"{user}'s notebook server reached its task limit (limit 100;")

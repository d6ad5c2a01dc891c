"""What a job gets from the job service: an environment built from an allow-list and
nbjobs.yaml, never the service's own (its hub token, its passwords, its cloud keys);
its parameters in a private file, never on a command line; and, with
``backend.local.run_as: user``, the submitting user's OS account instead of the
service's.

Real service, real runner processes and kernels; the notebooks report what they see.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from nbjobs.job_service.backends.base import LaunchSpec
from nbjobs.job_service.backends.kubernetes_objects import (
    make_job,
)

from nbjobs.config import ConfigError, Flavor, KubernetesBackendConfig, StorageConfig, parse_config
from nbjobs.storage import job_folder
from tests.machine import job_tmp

from .conftest import BASE_CONFIG, start_service, stop_all

#: what a service may hold in its environment that no job may see
SECRETS = {
    "JPY_API_TOKEN": "jpy-" + uuid.uuid4().hex,
    "JUPYTERHUB_API_TOKEN": "hub-" + uuid.uuid4().hex,
    "JUPYTERHUB_API_URL": "http://127.0.0.1:1/hub/api-" + uuid.uuid4().hex,
    "JUPYTERHUB_SERVICE_PREFIX": "/services/nbjobs-" + uuid.uuid4().hex + "/",
    "AWS_SECRET_ACCESS_KEY": "aws-" + uuid.uuid4().hex,
    "NBJOBS_DATABASE_PASSWORD": "db-" + uuid.uuid4().hex,
    "PGPASSWORD": "pg-" + uuid.uuid4().hex,
    "NBJOBS_SERVICE_TOKENS": json.dumps({"tok-" + uuid.uuid4().hex: "root"}),
    "SOME_UNLISTED_SETTING": "unlisted-" + uuid.uuid4().hex,
}

#: what the kernel machinery (jupyter_client, ipykernel's shell) sets in a kernel itself
KERNEL_SETS = {"JPY_PARENT_PID", "JPY_SESSION_NAME", "PYDEVD_USE_FRAME_EVAL", "PAGER"}
KERNEL_SETS |= {"CLICOLOR", "CLICOLOR_FORCE", "FORCE_COLOR", "GIT_PAGER", "MPLBACKEND", "TERM"}

#: a job that holds the only slot until the test creates ``go`` in the user's folder
WAIT_FOR_GO = "import os, time\nwhile not os.path.exists('go'):\n    time.sleep(0.05)"

DUMP_ENVIRONMENT = """
import getpass, json, os, tempfile
from IPython.paths import get_ipython_dir
with tempfile.NamedTemporaryFile() as scratch:
    scratch_made = os.path.isfile(scratch.name)
json.dump(
    {
        "env": dict(os.environ),
        "ipython_dir": get_ipython_dir(),
        "profile_dir": get_ipython().profile_dir.location,
        "user": getpass.getuser(),
        "made": [
            os.path.isdir(get_ipython().profile_dir.location),
            scratch_made,
        ],
        "runner_argv": open(f"/proc/{os.getppid()}/cmdline").read().split("\\0"),
    },
    open("seen.json", "w"),
)
"""


def local_backend(**local: Any) -> dict[str, Any]:
    return {"backend": {"kind": "local", "local": {"gpus": [0, 1], "cpu_slots": 2, **local}}}


async def run_job(svc: Any, user: str, path: str, flavor: str = "cpu", **extra: Any) -> dict:
    job = await svc.submit(user, path, flavor, **extra)
    return await svc.wait(user, job["id"])


async def test_a_job_sees_none_of_the_services_secrets(tmp_path, monkeypatch):
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.setenv("LC_MESSAGES", "C")
    monkeypatch.setenv("TZ", "Europe/Paris")
    monkeypatch.setenv("NBJOBS_TEST_PASSED_ON", "passed-by-name")
    flavors = [{"name": "cpu", "gpus": 0, "env": {"HF_HOME": "/data/hf"}}]
    overrides = {
        **local_backend(
            env={"SITE_NAME": "the admin's"},
            pass_env=["NBJOBS_TEST_PASSED_ON", "NOT_SET_IN_THE_SERVICE"],
        ),
        "flavors": flavors,
    }
    svc = await start_service(tmp_path, overrides)
    # Planted once the service runs standalone (JUPYTERHUB_API_TOKEN at its start would
    # make it a hub service); the backend builds each job's environment at its start.
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    try:
        svc.write("ada", "env.ipynb", DUMP_ENVIRONMENT)
        job = await run_job(svc, "ada", "env.ipynb")
    finally:
        await stop_all(svc)

    assert job["state"] == "succeeded", job
    home = svc.home("ada")
    seen = json.loads((home / "seen.json").read_text())
    env = seen["env"]
    everything = json.dumps(seen)
    everything += (home / job["output_path"]).read_text()
    everything += (job_folder(home, job["id"]) / "log.txt").read_text()
    for name, value in SECRETS.items():
        assert name not in env
        assert value not in everything, f"the value of ${name} reached the job"
    assert [n for n in env if n.startswith(("JUPYTERHUB_", "JPY_API"))] == []

    # what it does get: the allow-list, HOME in the user's folder, the admin's and the
    # flavor's additions, and what nbjobs sets per job
    assert env["PATH"] == os.environ["PATH"]
    assert (env["LANG"], env["LC_MESSAGES"], env["TZ"]) == ("C.UTF-8", "C", "Europe/Paris")
    assert env["HOME"] == str(home)
    assert env["USER"] == env["LOGNAME"] == pwd.getpwuid(os.getuid()).pw_name
    assert env["SITE_NAME"] == "the admin's"
    assert env["NBJOBS_TEST_PASSED_ON"] == "passed-by-name"
    assert "NOT_SET_IN_THE_SERVICE" not in env
    assert env["HF_HOME"] == "/data/hf"
    assert env["NBJOBS_JOB_ID"] == job["id"]
    assert env["CUDA_VISIBLE_DEVICES"] == ""
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    expected = {"PATH", "LANG", "LC_MESSAGES", "TZ", "HOME", "USER", "LOGNAME", "SHELL"}
    expected |= {"SITE_NAME", "NBJOBS_TEST_PASSED_ON", "HF_HOME", "NBJOBS_JOB_ID"}
    expected |= {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"}
    # its own temporary folder, not the service's (local_job_setup.job_tmp)
    assert env["TMPDIR"] == str(job_tmp(job["id"]))
    expected |= {"TMPDIR"}
    expected |= {n for n in ("LD_LIBRARY_PATH", "VIRTUAL_ENV") if n in os.environ}
    expected |= {n for n in ("CONDA_PREFIX", "CONDA_DEFAULT_ENV", "LANGUAGE") if n in os.environ}
    expected |= {n for n in os.environ if n.startswith("LC_")}
    assert set(env) - KERNEL_SETS <= expected, "only allow-listed variables reach a job"

    # the kernel and IPython work in it: their folders are in the user's folder
    assert seen["ipython_dir"] == str(home / ".ipython")
    assert seen["profile_dir"].startswith(f"{home}/")
    assert seen["made"] == [True, True]  # the profile folder, and a temp file
    assert seen["user"] == env["USER"]


async def test_parameters_reach_the_runner_in_a_private_file_never_on_its_command_line(
    tmp_path,
):
    # One job at a time, so that the second waits and a link can be planted in its folder.
    overrides = {
        **local_backend(gpus=[], cpu_slots=1),
        "limits": {"request_body": "8MiB", "parameters": "4MiB"},
    }
    svc = await start_service(tmp_path, overrides)
    try:
        home = svc.home("ada")
        svc.write("ada", "wait.ipynb", WAIT_FOR_GO)
        svc.write("ada", "params.ipynb", "text = ''\nlabel = ''", DUMP_ENVIRONMENT)
        big = "p" * 1_000_000  # one argv string may hold 128 KiB at most
        label = "label-" + uuid.uuid4().hex
        first = await svc.submit("ada", "wait.ipynb")
        job = await svc.submit("ada", "params.ipynb", parameters={"text": big, "label": label})
        await svc.wait("ada", first["id"], until=lambda j: j["state"] == "running")
        # Plant a link where the parameters file will go: the service must not write
        # through it into someone else's file.
        victim = tmp_path / "bobs-file"
        victim.write_text("bob's data")
        folder = job_folder(home, job["id"])
        (folder / "parameters.json").symlink_to(victim)
        (home / "go").touch()
        done = await svc.wait("ada", job["id"])
    finally:
        await stop_all(svc)

    assert done["state"] == "succeeded", done
    assert victim.read_text() == "bob's data"
    written = folder / "parameters.json"
    assert not written.is_symlink()
    assert stat.S_IMODE(written.lstat().st_mode) == 0o600
    assert json.loads(written.read_text()) == {"text": big, "label": label}
    seen = json.loads((home / "seen.json").read_text())
    argv = seen["runner_argv"]
    assert "nbjobs.job_runner" in argv
    assert argv[argv.index("--parameters") + 1] == str(written)
    assert label not in json.dumps(argv)
    # the kernel ran the injected values
    output = json.loads((home / done["output_path"]).read_text())
    assert output["metadata"]["nbjobs"]["parameters"]["label"] == label


async def test_a_link_planted_as_a_queued_jobs_log_is_never_written_through(tmp_path):
    svc = await start_service(tmp_path, local_backend(gpus=[], cpu_slots=1))
    try:
        home = svc.home("ada")
        svc.write("ada", "wait.ipynb", WAIT_FOR_GO)
        svc.write("ada", "b.ipynb", "print('a line for the log')")
        first = await svc.submit("ada", "wait.ipynb")
        job = await svc.submit("ada", "b.ipynb")
        await svc.wait("ada", first["id"], until=lambda j: j["state"] == "running")
        victim = tmp_path / "bobs-notebook.ipynb"
        victim.write_text("bob's notebook")
        folder = job_folder(home, job["id"])
        (folder / "log.txt").symlink_to(victim)
        (home / "go").touch()
        done = await svc.wait("ada", job["id"])
    finally:
        await stop_all(svc)

    assert victim.read_text() == "bob's notebook"
    assert done["state"] == "failed"
    assert done["message"] == (
        f"the backend could not start the job: the job's folder {folder} could not be prepared "
        "(a link, not a file: log.txt); it and its files must be real files, "
        "not links: re-submit the notebook"
    )


@pytest.mark.parametrize(
    ("setting", "name"),
    [
        ("pass_env", "JPY_API_TOKEN"),
        ("pass_env", "JUPYTERHUB_API_TOKEN"),
        ("pass_env", "JUPYTERHUB_API_URL"),
        ("pass_env", "NBJOBS_SERVICE_TOKENS"),
        ("pass_env", "DATABASE_URL"),
        ("env", "JPY_API_TOKEN"),
    ],
)
def test_an_admin_cannot_hand_the_services_secrets_to_jobs(setting, name):
    value: Any = [name] if setting == "pass_env" else {name: "x"}
    text = json.dumps({"backend": {"local": {setting: value}}})

    with pytest.raises(ConfigError) as refused:
        parse_config(text)

    assert str(refused.value) == (
        f"nbjobs.yaml, line 1: backend.local.{setting}: {name} belongs to the job service "
        "(its hub token and hub settings, its tokens, its database) and never reaches a job; "
        "remove it, and give jobs a credential of their own under another name if they need one"
    )


def test_nbjobs_yaml_may_not_set_what_nbjobs_sets_per_job_or_a_bad_name():
    with pytest.raises(ConfigError, match="nbjobs sets CUDA_VISIBLE_DEVICES for each job itself"):
        parse_config('{"backend": {"local": {"env": {"CUDA_VISIBLE_DEVICES": "0"}}}}')
    with pytest.raises(ConfigError, match="'A-B' is not an environment variable name"):
        parse_config('{"backend": {"local": {"pass_env": ["A-B"]}}}')
    ok = parse_config('{"backend": {"local": {"pass_env": ["PYTHONPATH"], "run_as": "user"}}}')
    assert ok.backend.local.pass_env == ["PYTHONPATH"]


def test_a_flavor_may_not_set_what_nbjobs_sets_per_job_or_the_services_secrets():
    """A flavor's env reaches its jobs like backend.local.env: a CUDA_VISIBLE_DEVICES there
    would hand the job GPUs it was not given."""
    flavor = '{"flavors": [{"name": "g", "gpus": 1, "env": {"%s": "0,1"}}]}'
    with pytest.raises(ConfigError) as per_job:
        parse_config(flavor % "CUDA_VISIBLE_DEVICES")
    with pytest.raises(ConfigError, match="JUPYTERHUB_API_TOKEN belongs to the job service"):
        parse_config(flavor % "JUPYTERHUB_API_TOKEN")

    assert str(per_job.value) == (
        "nbjobs.yaml, line 1: flavors.0.env: nbjobs sets CUDA_VISIBLE_DEVICES for each job "
        "itself; remove it"
    )
    assert parse_config(flavor % "OMP_NUM_THREADS").flavors[0].env == {"OMP_NUM_THREADS": "0,1"}


def test_the_mail_password_is_not_handed_to_jobs():
    text = json.dumps(
        {
            "backend": {"local": {"pass_env": ["SMTP_PASSWORD"]}},
            "notifications": {
                "email": {
                    "smtp_host": "mail",
                    "from": "jobs@uni.example",
                    "password_env": "SMTP_PASSWORD",
                }
            },
        }
    )
    with pytest.raises(ConfigError, match=r"pass_env lists SMTP_PASSWORD, the mail"):
        parse_config(text)


def test_a_job_pod_holds_nothing_of_the_services_environment(monkeypatch):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    storage = StorageConfig(
        root=Path("/srv/nbjobs"), volume={"nfs": {"server": "nfs", "path": "/x"}}, uid=1000
    )
    settings = KubernetesBackendConfig(default_image="example.org/nb:1")
    home = storage.root / "ada"
    folder = home / ".nbjobs/jobs/0123456789ab"
    label = "label-" + uuid.uuid4().hex
    spec = LaunchSpec(
        job_id="0123456789ab",
        user="ada",
        flavor=Flavor(name="cpu", env={"HF_HOME": "/data/hf"}),
        snapshot_file=folder / "input.ipynb",
        output_file=home / "a.out.ipynb",
        status_file=folder / "status.json",
        log_file=folder / "log.txt",
        cwd=home,
        parameters={"label": label},
    )

    manifest = make_job(spec, storage, settings)

    container = manifest["spec"]["template"]["spec"]["containers"][0]
    names = {e["name"] for e in container["env"]}
    assert names == {"HF_HOME", "NBJOBS_JOB_ID", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"}
    text = json.dumps(manifest)
    assert not [name for name, value in SECRETS.items() if value in text]
    assert label not in text  # parameters travel in a file on the shared storage
    command = container["command"]
    assert command[command.index("--parameters") + 1] == (
        "/home/jovyan/.nbjobs/jobs/0123456789ab/parameters.json"
    )


# -- run_as: user ----------------------------------------------------------------


@pytest.fixture
def public_folder() -> Iterator[Path]:
    """A folder other accounts can reach (pytest's own temp folder is root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="nbjobs-run-as-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def os_account(public_folder: Path) -> Iterator[pwd.struct_passwd]:
    """A throwaway OS account, its home under the nbjobs storage root; removed after."""
    if os.geteuid() != 0:
        pytest.skip(f"creating OS accounts and switching to them needs root (uid {os.geteuid()})")
    name = "nbjt" + uuid.uuid4().hex[:8]  # letters and digits: its folder keeps the name
    home = public_folder / "home" / name
    subprocess.run(
        ["useradd", "--no-create-home", "--home-dir", str(home), "--user-group", name],
        check=True,
        capture_output=True,
    )
    account = pwd.getpwnam(name)
    try:
        home.mkdir(parents=True)
        os.chown(home, account.pw_uid, account.pw_gid)
        home.chmod(0o700)
        yield account
    finally:
        for process in psutil.process_iter(["uids"]):  # what this test's jobs left running
            if process.info["uids"] and process.info["uids"].real == account.pw_uid:
                with contextlib.suppress(psutil.Error):
                    process.kill()
        subprocess.run(["userdel", name], check=False, capture_output=True)


def python_for(account: pwd.struct_passwd, folder: Path) -> str:
    """A Python with this checkout's packages that ``account`` may start."""
    probe = ["runuser", "-u", account.pw_name, "--"]
    check = ["-c", "import nbjobs.job_runner, ipykernel"]
    if subprocess.run([*probe, sys.executable, *check], capture_output=True).returncode == 0:
        return sys.executable
    # The venv's interpreter lies in a folder closed to other accounts (under /root
    # here): a venv of the system's Python of the same version, over the same packages.
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    base = next(
        (
            path
            for path in (f"/usr/bin/{version}", f"/usr/local/bin/{version}")
            if os.access(path, os.X_OK) and not os.path.realpath(path).startswith("/root/")
        ),
        None,
    )
    assert base, f"no {version} here that other accounts may run; install it to run this test"
    venv = folder / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(base)
    (venv / "lib" / version).mkdir(parents=True)
    (venv / "lib" / version / "site-packages").symlink_to(sysconfig.get_paths()["purelib"])
    (venv / "pyvenv.cfg").write_text(f"home = {os.path.dirname(base)}\n")
    python = str(venv / "bin" / "python")
    subprocess.run([*probe, python, *check], check=True, capture_output=True)
    return python


async def service_of_account(
    tmp_path: Path, name: str, overrides: dict[str, Any], python: str
) -> Any:
    """A service whose token ``own-token`` is the OS account ``name``'s, its jobs run by
    ``python``."""
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"own-token": name}))
    tokens.chmod(0o600)
    argv = (f"--StaticTokenAuth.tokens_file={tokens}", f"--LocalBackend.python={python}")
    return await start_service(tmp_path, overrides, argv)


async def run_as_owner(svc: Any, body: dict[str, Any]) -> dict:
    """Submit ``body`` with ``own-token`` (:func:`service_of_account`); the job once ended."""
    async with httpx.AsyncClient(base_url=svc.url + "api/", timeout=60) as http:
        own = {"Authorization": "token own-token"}
        job = (await http.post("jobs", json=body, headers=own)).json()
        while job["state"] not in ("succeeded", "failed", "cancelled"):
            await asyncio.sleep(0.1)
            job = (await http.get(f"jobs/{job['id']}", headers=own)).json()
    return job


WHO_AM_I = """
import json, os
seen = {{"uid": os.getuid(), "gid": os.getgid(), "euid": os.geteuid(), "home": os.environ["HOME"]}}
seen["user"] = os.environ["USER"]
try:
    seen["secret"] = open({secret!r}).read()
except PermissionError:
    seen["secret"] = "denied"
json.dump(seen, open("whoami.json", "w"))
"""


async def test_jobs_run_as_the_submitting_users_own_account(tmp_path, public_folder, os_account):
    name = os_account.pw_name
    secret = public_folder / "root-only.txt"
    secret.write_text("root's secret")
    secret.chmod(0o600)
    python = python_for(os_account, public_folder)
    overrides = {
        **local_backend(gpus=[], run_as="user"),
        "storage": {"root": str(public_folder / "home")},
    }
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"own-token": name, "none-token": "nbjtnoaccount"}))
    tokens.chmod(0o600)
    argv = (f"--StaticTokenAuth.tokens_file={tokens}", f"--LocalBackend.python={python}")
    svc = await start_service(tmp_path, overrides, argv)
    try:
        home = svc.home(name)
        svc.write(name, "who.ipynb", WHO_AM_I.format(secret=str(secret)))
        svc.write("nbjtnoaccount", "who.ipynb", "print('never runs')")
        async with httpx.AsyncClient(base_url=svc.url + "api/", timeout=60) as http:
            own = {"Authorization": "token own-token"}
            none = {"Authorization": "token none-token"}
            body = {"path": "who.ipynb", "flavor": "cpu", "parameters": {"n": 1}}
            job = (await http.post("jobs", json=body, headers=own)).json()
            orphan = await http.post("jobs", json=body, headers=none)
            while job["state"] not in ("succeeded", "failed", "cancelled"):
                await asyncio.sleep(0.1)
                job = (await http.get(f"jobs/{job['id']}", headers=own)).json()
    finally:
        await stop_all(svc)

    assert job["state"] == "succeeded", job
    seen = json.loads((home / "whoami.json").read_text())
    assert seen["uid"] == seen["euid"] == os_account.pw_uid
    assert seen["gid"] == os_account.pw_gid
    assert seen["secret"] == "denied"
    assert (seen["user"], seen["home"]) == (name, str(home))
    # The job's folder and files are the account's: it wrote its status file and log there.
    folder = job_folder(home, job["id"])
    owned = [folder, folder / "input.ipynb", folder / "log.txt", folder / "status.json"]
    owned += [folder / "parameters.json", home / job["output_path"], home / "whoami.json"]
    assert {p.name: p.lstat().st_uid for p in owned} == {p.name: os_account.pw_uid for p in owned}
    assert stat.S_IMODE((folder / "parameters.json").lstat().st_mode) == 0o600
    assert stat.S_IMODE((folder / "log.txt").lstat().st_mode) == 0o600

    # a user with no OS account here is refused at submit
    assert orphan.status_code == 409
    assert orphan.json()["message"] == (
        "jobs here run under the submitting user's own OS account (backend.local.run_as: "
        "user), and this machine has no account named 'nbjtnoaccount'; ask an admin to "
        "create it"
    )


RANK_WHO_AM_I = """
import json, os
rank = os.environ["RANK"]
seen = {{"uid": os.getuid(), "euid": os.geteuid()}}
try:
    seen["secret"] = open({secret!r}).read()
except PermissionError:
    seen["secret"] = "denied"
json.dump(seen, open(f"whoami-{{rank}}.json", "w"))
"""


async def test_every_rank_of_a_multi_node_job_runs_as_its_owner(
    tmp_path, public_folder, os_account
):
    """Each rank is a runner of its own: every one under the owner's account (never the
    service's), its files in the job's folder the account's, the service's secret shut."""
    name = os_account.pw_name
    secret = public_folder / "root-only.txt"
    secret.write_text("root's secret")
    secret.chmod(0o600)
    python = python_for(os_account, public_folder)
    overrides = {
        **local_backend(gpus=[], run_as="user"),
        "flavors": [*BASE_CONFIG["flavors"], {"name": "cpu-pair", "gpus": 0, "nodes": 2}],
        "storage": {"root": str(public_folder / "home")},
    }
    svc = await service_of_account(tmp_path, name, overrides, python)
    try:
        home = svc.home(name)
        (home / "who.py").write_text(RANK_WHO_AM_I.format(secret=str(secret)))
        job = await run_as_owner(svc, {"path": "who.py", "flavor": "cpu-pair"})
    finally:
        await stop_all(svc)

    assert job["state"] == "succeeded", job
    for rank in (0, 1):
        seen = json.loads((home / f"whoami-{rank}.json").read_text())
        assert seen == {"uid": os_account.pw_uid, "euid": os_account.pw_uid, "secret": "denied"}
    folder = job_folder(home, job["id"])
    owned = [folder / "log-rank-1.txt", folder / "status-rank-1.json", folder / "log.txt"]
    assert {p.name: p.lstat().st_uid for p in owned} == {p.name: os_account.pw_uid for p in owned}
    assert stat.S_IMODE((folder / "log-rank-1.txt").lstat().st_mode) == 0o600


def test_run_as_user_needs_a_service_running_as_root(public_folder, os_account):
    config = public_folder / "nbjobs.yaml"
    config.write_text(
        json.dumps(
            {
                **BASE_CONFIG,
                **local_backend(run_as="user"),
                "storage": {"root": str(public_folder / "home")},
                "database": {"url": f"sqlite:///{public_folder / 'jobs.sqlite'}"},
            }
        )
    )
    public_folder.chmod(0o777)  # the service may make its database there
    python = python_for(os_account, public_folder)
    command = ["runuser", "-u", os_account.pw_name, "--", python, "-m", "nbjobs.cli", "service"]

    started = subprocess.run(
        [*command, "--config", str(config), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=public_folder,
    )

    assert started.returncode == 2, started.stdout + started.stderr
    assert started.stdout.strip() == (
        f"nbjobs service: nbjobs.yaml: backend.local.run_as is 'user', but the job service "
        f"runs as '{os_account.pw_name}' (uid {os_account.pw_uid}), not root, so it cannot "
        "start jobs under users' accounts; run the service as root, or set run_as: service"
    )
    assert "Traceback" not in started.stderr

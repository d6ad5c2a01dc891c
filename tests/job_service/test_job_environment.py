"""What a job gets from the job service: an environment built from an allow-list and
nbjobs.yaml, never the service's own (its hub token, its passwords, its cloud keys);
its parameters in a private file, never on a command line; and, with
``backend.local.run_as: user``, the submitting user's OS account instead of the
service's.

Real service, real runner processes and kernels; the notebooks report what they see.
"""

from __future__ import annotations

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
import pytest
from nbjobs.job_service.backends.base import LaunchSpec
from nbjobs.job_service.backends.kubernetes_objects import make_job

from nbjobs.config import ConfigError, Flavor, KubernetesBackendConfig, StorageConfig, parse_config
from nbjobs.storage import job_folder

from .conftest import BASE_CONFIG, TOKENS, notebook, start_service, stop_all

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

DUMP_ENVIRONMENT = """
import getpass, json, os, tempfile
from IPython.paths import get_ipython_dir
json.dump(
    {
        "env": dict(os.environ),
        "ipython_dir": get_ipython_dir(),
        "profile_dir": get_ipython().profile_dir.location,
        "user": getpass.getuser(),
        "tmp": tempfile.gettempdir(),
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
    expected |= {n for n in ("TMPDIR", "LD_LIBRARY_PATH", "VIRTUAL_ENV") if n in os.environ}
    expected |= {n for n in ("CONDA_PREFIX", "CONDA_DEFAULT_ENV", "LANGUAGE") if n in os.environ}
    expected |= {n for n in os.environ if n.startswith("LC_")}
    assert set(env) - KERNEL_SETS <= expected, "only allow-listed variables reach a job"

    # the kernel and IPython work in it: their folders are in the user's folder
    assert seen["ipython_dir"] == str(home / ".ipython")
    assert Path(seen["profile_dir"]).is_dir()
    assert Path(seen["profile_dir"]).is_relative_to(home)
    assert seen["user"] == env["USER"]
    assert Path(seen["tmp"]).is_dir()


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
        svc.write(
            "ada", "wait.ipynb", "import os, time\nwhile not os.path.exists('go'): time.sleep(0.05)"
        )
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

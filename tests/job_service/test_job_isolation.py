"""A job cannot act as its owner's notebook server: on one machine both run as the
user's own OS account, and a job once read the server's token from its runtime file
(or its environment in /proc) and opened a terminal in it that outlived the job.

Real service, real runner under a real OS account; a stand-in "server" of the same
account holds a token in its environment and in a runtime folder as a real one does.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid

import psutil
import pytest

from nbjobs.accounts import Account, drop_privileges
from nbjobs.sandbox import remove_server_runtime, server_runtime_folder

from .conftest import stop_all
from .test_job_environment import (  # noqa: F401 (fixtures)
    local_backend,
    os_account,
    public_folder,
    python_for,
    run_as_owner,
    service_of_account,
)

LOOK_FOR_THE_SERVER = """
import glob, json, os, subprocess
token = {token!r}
found = []
pids = [p for p in os.listdir("/proc") if p.isdigit()]
for pid in pids:
    try:
        if token.encode() in open(f"/proc/{{pid}}/environ", "rb").read():
            found.append(f"environ of {{pid}}")
    except OSError:
        pass
for path in glob.glob("/run/nbjobs/servers/*/*") + glob.glob({runtime!r} + "/*"):
    try:
        if token in open(path).read():
            found.append(path)
    except OSError:
        pass
subprocess.Popen(["sleep", "600", {mark!r}], start_new_session=True)
json.dump({{"found": found, "pids": len(pids)}}, open("looked.json", "w"))
"""


@pytest.fixture
def server_of(os_account):  # noqa: F811
    """A stand-in notebook server of the account: its token in its environment and in
    its runtime folder, as jupyterhub-singleuser keeps it."""
    account = Account.of(os_account)
    token = "server-token-" + uuid.uuid4().hex
    runtime = server_runtime_folder(account)
    (runtime / "jpserver-1.json").write_text(json.dumps({"token": token}))
    os.chown(runtime / "jpserver-1.json", account.uid, account.gid)
    env = {"PATH": os.environ["PATH"], "JUPYTERHUB_API_TOKEN": token}
    server = subprocess.Popen(
        ["sleep", "600"], env=env, preexec_fn=lambda: drop_privileges(account)
    )
    try:
        yield token, runtime
    finally:
        server.kill()
        server.wait()
        remove_server_runtime(runtime)


async def test_a_job_sees_neither_its_owners_server_nor_its_files_and_takes_what_it_started(
    tmp_path,
    public_folder,  # noqa: F811
    os_account,  # noqa: F811
    server_of,
):
    token, runtime = server_of
    name = os_account.pw_name
    mark = f"nbjobs-job-left-{uuid.uuid4().hex[:8]}"
    python = python_for(os_account, public_folder)
    overrides = {
        **local_backend(gpus=[], run_as="user"),
        "storage": {"root": str(public_folder / "home")},
    }
    svc = await service_of_account(tmp_path, name, overrides, python)
    look = LOOK_FOR_THE_SERVER.format(token=token, runtime=str(runtime), mark=mark)
    try:
        svc.write(name, "look.ipynb", look)
        job = await run_as_owner(svc, {"path": "look.ipynb", "flavor": "cpu"})
    finally:
        await stop_all(svc)

    assert job["state"] == "succeeded", job
    looked = json.loads((svc.home(name) / "looked.json").read_text())
    assert looked["found"] == []
    # its namespace's first process, the runner, its kernel and what the cell started
    assert looked["pids"] < 10, looked
    left = [p for p in psutil.process_iter(["cmdline"]) if mark in (p.info["cmdline"] or [])]
    assert left == [], "a process the job started outlived it"
    # the server's own file is where it was, for the server
    assert token in (runtime / "jpserver-1.json").read_text()


LOOK_AT_TMP = """
import glob, json, os, signal, tempfile
from ipykernel.connect import get_connection_file
tmp = tempfile.gettempdir()
st = os.stat(tmp)
kernel = glob.glob(os.path.join(tmp, "nbjobs-kernel-*")) + [get_connection_file()]
seen = {{"tmp": tmp, "uid": st.st_uid, "mode": oct(st.st_mode & 0o777),
        "others": sorted(set(os.listdir(tmp)) - {{os.path.basename(k) for k in kernel}}),
        "kernel": kernel}}
open(os.path.join(tmp, "left-by-{name}"), "w").write("scratch")
json.dump(seen, open("{name}.json", "w"))
if {kill}:  # the runner (this kernel's parent) killed hard: nothing of it cleans up
    os.kill(os.getppid(), signal.SIGKILL)
"""


async def test_a_job_has_a_temporary_folder_of_its_own_that_goes_with_it(
    tmp_path,
    public_folder,  # noqa: F811
    os_account,  # noqa: F811
):
    """On one machine jobs shared /tmp: a job saw what others left there, and a runner
    killed hard left its kernel's sockets behind for good. Now each job's TMPDIR is an
    empty file system of its own account's that ends with the job."""
    name = os_account.pw_name
    python = python_for(os_account, public_folder)
    overrides = {
        **local_backend(gpus=[], run_as="user"),
        "storage": {"root": str(public_folder / "home")},
    }
    svc = await service_of_account(tmp_path, name, overrides, python)
    try:
        svc.write(name, "first.ipynb", LOOK_AT_TMP.format(name="first", kill=False))
        first = await run_as_owner(svc, {"path": "first.ipynb", "flavor": "cpu"})
        svc.write(name, "second.ipynb", LOOK_AT_TMP.format(name="second", kill=True))
        second = await run_as_owner(svc, {"path": "second.ipynb", "flavor": "cpu"})
    finally:
        await stop_all(svc)

    assert first["state"] == "succeeded", first
    assert second["state"] == "failed", second  # its runner was killed
    seen = [json.loads((svc.home(name) / f"{n}.json").read_text()) for n in ("first", "second")]
    for one in seen:
        assert one["tmp"] == "/run/nbjobs/tmp"
        assert (one["uid"], one["mode"]) == (os_account.pw_uid, "0o700")
        assert one["others"] == []  # nothing of another job's: not the first's file
        # the kernel's sockets and connection file were in it
        assert len(one["kernel"]) == 2, one
        assert all(path.startswith("/run/nbjobs/tmp/") for path in one["kernel"]), one
    # on the machine nothing of either: not made there, and gone with each job
    assert "tmp" not in os.listdir("/run/nbjobs")

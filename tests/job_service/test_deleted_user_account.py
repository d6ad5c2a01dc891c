"""On one machine, a deleted user's OS account goes with them: what still runs as it is
stopped, the account removed, the folder moved aside; the next person of the name gets a
new account and an empty folder.

A real job service (accounts ``create``, as ``nbjobs install`` sets it up) and real OS
accounts, made for this test run's own user name and removed afterwards.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import subprocess
import uuid
from pathlib import Path

import pytest

from nbjobs.accounts import account_for, account_name, prepare_home, remove_account
from nbjobs.config import AccountsConfig
from nbjobs.storage import user_folder

from .conftest import start_service, stop_all


@pytest.fixture
def name():
    """A hub user name of this run alone (so is its account, jupyter-<name>)."""
    if os.geteuid() != 0:
        pytest.skip(f"creating and removing OS accounts needs root (uid {os.geteuid()})")
    name = "gone" + uuid.uuid4().hex[:8]
    yield name
    remove_account(account_name(name, "jupyter-"))  # stops what still runs as it


async def test_a_deleted_users_account_and_processes_go_and_the_next_one_gets_new_ones(
    tmp_path, name
):
    accounts = {"mode": "create"}
    stopping: list[subprocess.Popen] = []  # what the test started, stopped whatever happens
    svc = await start_service(
        tmp_path,
        {"backend": {"kind": "local", "local": {"gpus": [], "accounts": accounts}}},
    )
    try:
        home = user_folder(svc.service.config.storage, name)
        # the account is made by this service's nbjobs (its instance), as its hub would
        instance = svc.service.config.backend.local.instance
        # their first spawn (the hub's spawner does this) made the account and its home
        before = account_for(name, AccountsConfig(mode="create"), home, instance=instance)
        assert before is not None
        home.mkdir(parents=True)
        os.chown(home, before.uid, before.gid)
        (home / "draft.txt").write_text("the earlier person's draft")
        # a server or job of theirs still running as the account
        left_running = await asyncio.to_thread(
            subprocess.Popen, ["sleep", "600"], user=before.uid, group=before.gid, extra_groups=[]
        )
        stopping.append(left_running)

        async with svc.client("root") as admin:
            done = await admin.delete(f"dashboard/users/{name}")

        assert done.status_code == 200, done.text
        assert done.json()["account"] == before.name
        assert left_running.wait(timeout=30) is not None  # stopped with the account
        with pytest.raises(KeyError):
            pwd.getpwnam(before.name)
        assert not home.exists()
        archived = done.json()["folder"]
        assert (Path(archived) / "draft.txt").read_text() == "the earlier person's draft"
        # the next person of the name: a new account, an empty folder of theirs
        after = account_for(name, AccountsConfig(mode="create"), home, instance=instance)
        assert after is not None
        prepare_home(after, home)
        assert list(home.iterdir()) == []
        assert home.stat().st_uid == after.uid
        async with svc.client("root") as admin:
            listed = (await admin.get("dashboard/users")).json()
        [retired] = listed["deleted"]
        assert retired["why"] == "deleted by root through nbjobs"
        assert (retired["account"], retired["problems"]) == (before.name, None)
    finally:
        await stop_all(svc)
        for process in stopping:
            process.kill()
            process.wait()

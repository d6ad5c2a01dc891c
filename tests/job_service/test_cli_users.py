"""``nbjobs users``: an admin deletes a user from a terminal and reads what was done; a
user who is not an admin is refused in words. The real command against a real service."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

from .conftest import TOKENS


def nbjobs(svc, user, *args):
    token = {v: k for k, v in TOKENS.items()}[user]
    env = {**os.environ, "NBJOBS_URL": svc.url, "NBJOBS_TOKEN": token}
    return subprocess.run(
        [sys.executable, "-m", "nbjobs.cli", "users", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


async def test_an_admin_deletes_a_user_from_the_terminal(svc):
    svc.write("bob", "report.ipynb", "print('weekly')")
    async with svc.client("bob") as bob:
        made = await bob.post(
            "definitions",
            json={"path": "report.ipynb", "flavor": "cpu", "schedule": {"cron": "0 6 * * 1"}},
        )
    assert made.status_code == 201, made.text

    refused = await asyncio.to_thread(nbjobs, svc, "ada", "--delete", "bob")
    done = await asyncio.to_thread(nbjobs, svc, "root", "--delete", "bob")
    listed = await asyncio.to_thread(nbjobs, svc, "root")
    as_json = await asyncio.to_thread(nbjobs, svc, "root", "--json")

    assert refused.returncode != 0
    assert "is for nbjobs admins" in refused.stderr
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(
        "deleted bob: 0 job(s), 1 definition(s), 0 notification setting(s) archived as bob/deleted-"
    )
    assert listed.stdout.splitlines()[0] == "users.on_delete: archive"
    assert "bob: deleted by root through nbjobs; 0 job(s), 1 definition(s)" in listed.stdout
    [retired] = json.loads(as_json.stdout)["deleted"]
    assert retired["name"] == "bob"
    async with svc.client("bob") as bob:  # whoever is bob now has no schedule
        assert (await bob.get("definitions")).json()["definitions"] == []

"""What a deleted user leaves, as admins and the next person of the name see it: the
credits ledger carries their balance to the archive name, and with ``users.on_delete:
remove`` their jobs go while the GPU time they used stays in the usage report, never in
the new person's. A real service; the admin deletes through the API the dashboard uses."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import quote

import pytest

from .conftest import new_postgres_database, record_gpu_time, start_service, stop_all


def on(database: str, request, tmp_path, **config: object) -> dict:
    """nbjobs.yaml's ``config`` with the job database on ``database``."""
    if database == "postgresql":
        url = new_postgres_database(request.getfixturevalue("postgres_url"), tmp_path)
        config["database"] = {"url": url}
    return config


async def delete(svc, name: str) -> dict:
    async with svc.client("root") as admin:
        done = await admin.delete(f"dashboard/users/{name}")
    assert done.status_code == 200, done.text
    return done.json()


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
async def test_the_next_person_of_a_name_starts_from_the_standing_credits(
    tmp_path, request, database
):
    config = on(database, request, tmp_path, credits={"enabled": True, "users": {"ada": 2}})
    svc = await start_service(tmp_path, config)
    try:
        async with svc.client("root") as admin:
            granted = await admin.post("credits/user:ada/grants", json={"amount": 5})
        assert granted.status_code == 201, granted.text

        retired = await delete(svc, "ada")

        async with svc.client("ada") as ada:
            [mine] = (await ada.get("credits")).json()
        assert (mine["account"], mine["granted"], mine["balance"]) == ("user:ada", 0.0, 2.0)
        archive = f"user:{retired['archived_as']}"
        async with svc.client("root") as admin:
            kept = (await admin.get(f"credits/{quote(archive, safe=':')}")).json()
        assert kept["account"]["balance"] == 5.0
        assert [e["note"] for e in kept["entries"]] == [
            "carried over from user:ada when ada was deleted"
        ]
    finally:
        await stop_all(svc)


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
async def test_removed_jobs_go_and_their_gpu_time_stays_in_the_report(tmp_path, request, database):
    svc = await start_service(
        tmp_path, on(database, request, tmp_path, users={"on_delete": "remove"})
    )
    try:
        job_id = record_gpu_time(
            svc, "ada", gpus=1, started_ago=timedelta(hours=3), finished_ago=timedelta(hours=1)
        )
        (svc.home("ada") / "thesis.ipynb").write_text("{}")

        retired = await delete(svc, "ada")

        assert (retired["action"], retired["jobs"], retired["folder"]) == ("remove", 1, None)
        assert not svc.home("ada").joinpath("thesis.ipynb").exists()
        async with svc.client("root") as admin:
            assert (await admin.get(f"jobs/{job_id}")).status_code == 404
            report = (await admin.get("usage")).json()
        hours = {line["name"]: line["gpu_hours_allocated"] for line in report["breakdown"]}
        assert hours == {retired["archived_as"]: 2.0}
        async with svc.client("ada") as ada:  # whoever is ada now has used nothing
            mine = (await ada.get("usage")).json()
        assert mine["breakdown"] == []
        assert mine["users"] == []
    finally:
        await stop_all(svc)

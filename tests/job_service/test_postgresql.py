"""The same service on PostgreSQL: records, concurrency and restarts as on SQLite."""

from __future__ import annotations

import asyncio

from .conftest import new_postgres_database, stop_service


def running(job):
    return job["state"] == "running"


async def test_jobs_run_and_survive_a_restart_on_postgresql(start, postgres_url, tmp_path):
    # Each test gets its own database in the shared server.
    url = new_postgres_database(postgres_url, tmp_path)

    first = await start({"database": {"url": url}})
    first.write("ada", "pg.ipynb", "import time; time.sleep(2)", "print('on postgres')")
    job = await first.submit("ada", "pg.ipynb")
    await first.wait("ada", job["id"], running)
    async with first.client("ada") as c:
        burst = await asyncio.gather(
            *(c.post("jobs", json={"path": "pg.ipynb", "flavor": "gpu"}) for _ in range(50))
        )
    assert [r.status_code for r in burst] == [201] * 50
    await stop_service(first)

    second = await start({"database": {"url": url}})
    try:
        done = await second.wait("ada", job["id"])
        assert done["state"] == "succeeded"
        async with second.client("ada") as c:
            listed = (await c.get("jobs", params={"limit": 500})).json()
        assert listed["total"] == 51
        assert len({j["id"] for j in listed["jobs"]}) == 51
    finally:
        for j in list(second.service.backend.running.values()):
            await second.service.backend.cancel(f"{j.job_id}:{j.pid}:{j.created:.3f}")
        await stop_service(second)

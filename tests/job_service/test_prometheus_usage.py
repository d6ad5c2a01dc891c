"""GPU-hours in Prometheus: counters of GPU-seconds held and busy by the jobs that ended,
by user, flavor and node, that never go down (a forgotten job's stay counted), with the
class and group memberships to sum them by either; a database from before the counters
gets its ended jobs' GPU-seconds worked out once at start."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy
from nbjobs.job_service.db import connect
from prometheus_client.parser import text_string_to_metric_families

from .conftest import stop_service

CLASSES = {"classes": [{"name": "ml101", "teachers": ["eve"], "students": ["ada", "bob"]}]}


async def counters(svc) -> dict[str, dict[tuple, float]]:
    async with svc.client("root") as c:
        response = await c.get(svc.url + "metrics")
    assert response.status_code == 200, response.text
    found: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            found.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return found


async def test_ended_jobs_count_their_gpu_seconds_and_forgetting_one_keeps_them(start):
    svc = await start(CLASSES)
    try:
        svc.write("ada", "g.ipynb", "import time; time.sleep(1)")
        job = await svc.submit("ada", "g.ipynb", "gpu")
        done = await svc.wait("ada", job["id"])
        assert done["state"] == "succeeded"
        ran = (
            datetime.fromisoformat(done["finished_at"]) - datetime.fromisoformat(done["started_at"])
        ).total_seconds()
        # counted under the machine's name, the node the job ran on (as usage by node is)
        key = (("flavor", "gpu"), ("node", svc.service.backend.node), ("user", "ada"))

        first = await counters(svc)
        assert abs(first["nbjobs_gpu_allocated_seconds_total"][key] - ran) < 0.01  # 1 GPU
        assert first["nbjobs_gpu_busy_seconds_total"][key] == 0.0  # no GPU readings here
        assert first["nbjobs_user_class_info"] == {
            (("class", "ml101"), ("user", "ada")): 1.0,
            (("class", "ml101"), ("user", "bob")): 1.0,
        }
        assert first["nbjobs_user_group_info"][(("group", "students"), ("user", "ada"))] == 1.0

        async with svc.client("ada") as c:
            assert (await c.delete(f"jobs/{job['id']}")).status_code == 204
        after = await counters(svc)
        assert (
            after["nbjobs_gpu_allocated_seconds_total"][key]
            == (first["nbjobs_gpu_allocated_seconds_total"][key])
        )
    finally:
        await stop_service(svc)


async def test_jobs_that_ended_before_the_counters_get_their_gpu_seconds_once(start, tmp_path):
    svc = await start()
    svc.write("bob", "g.ipynb", "1")
    job = await svc.wait("bob", (await svc.submit("bob", "g.ipynb", "gpu"))["id"])
    await stop_service(svc)
    # the database as an older nbjobs left it (from before Alembic): no such column
    url = f"sqlite:///{tmp_path / 'jobs.sqlite'}"
    engine = sqlalchemy.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sqlalchemy.text("ALTER TABLE nbjobs_jobs DROP COLUMN gpu_seconds_held"))
        conn.execute(sqlalchemy.text("DROP TABLE alembic_version"))
        conn.execute(sqlalchemy.text("UPDATE nbjobs_schema SET version = 1"))
    engine.dispose()

    connect(url)  # the upgrade adds the column and fills it
    ran = (
        datetime.fromisoformat(job["finished_at"]) - datetime.fromisoformat(job["started_at"])
    ).total_seconds()
    engine = sqlalchemy.create_engine(url)
    with engine.connect() as conn:
        held = conn.execute(
            sqlalchemy.text("SELECT gpu_seconds_held FROM nbjobs_jobs WHERE id = :id"),
            {"id": job["id"]},
        ).scalar()
    engine.dispose()
    assert abs(held - ran) < 0.01

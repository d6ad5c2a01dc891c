"""A job's telemetry series: kept from its status file, bounded, summarised, served.

The runner is played by the test: each test writes the status file of a job recorded
as running (its ``telemetry`` and ``telemetry_summary``, as the contract says), so no
runner competes for the file; the collector's passes are run by the test too.
"""

from __future__ import annotations

import asyncio
import itertools
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import requests
from nbjobs.job_runner import parse_status
from nbjobs.job_service.db import JobRecord, JobSample
from nbjobs.job_service.telemetry import (
    MAX_SAMPLES,
    clean_sample,
    clean_summary,
    record_final,
    summarise,
    usage_hint,
)
from openapi_core import OpenAPI
from openapi_core.contrib.requests import RequestsOpenAPIRequest, RequestsOpenAPIResponse
from sqlalchemy import func, select

from .conftest import TOKENS
from .telemetry_helpers import GIB, insert_job, sample, summary, write_status

SPEC_FILE = Path(__file__).resolve().parents[2] / "api" / "openapi.yaml"
TOKEN = {v: k for k, v in TOKENS.items()}
NOW = datetime.now(timezone.utc).replace(microsecond=0)


@pytest.fixture
async def svc(svc):
    """The service, its collector's own loop stopped: each test runs the passes it means."""
    await svc.service.telemetry.stop()
    return svc


def sample_count(svc, job_id: str) -> int:
    with svc.service.sessions() as db:
        return db.scalar(select(func.count()).where(JobSample.job_id == job_id)) or 0


async def metrics(svc, user: str, job_id: str, **params) -> dict:
    async with svc.client(user) as c:
        r = await c.get(f"jobs/{job_id}/metrics", params=params)
    assert r.status_code == 200, r.text
    return r.json()


async def test_a_running_jobs_samples_are_kept_once_each_and_served(svc):
    job_id, jobdir = insert_job(svc.service, "ada", gpu_count=2)
    t0 = NOW - timedelta(seconds=30)
    write_status(jobdir / "status.json", telemetry=sample(t0, [40.0, 60.0]))

    assert await svc.service.telemetry.collect() == 1
    assert await svc.service.telemetry.collect() == 0  # the same sample: kept once
    write_status(
        jobdir / "status.json",
        telemetry=sample(t0 + timedelta(seconds=10), [90.0, None]),
        telemetry_summary=summary([65.0, 30.0], 20.0, since=t0),
    )
    assert await svc.service.telemetry.collect() == 1

    body = await metrics(svc, "ada", job_id)
    assert body["job_id"] == job_id
    assert body["state"] == "running"
    assert body["interval_seconds"] == 10.0
    first, second = body["samples"]
    assert first["gpu_utilization_percent"] == 50.0  # the mean over its GPUs
    assert first["gpu_memory_used_bytes"] == 4 * GIB  # the sum
    assert first["gpu_memory_total_bytes"] == 80 * GIB
    assert (first["cpu_percent"], first["memory_bytes"]) == (95.0, 3 * GIB)
    assert [g["utilization_percent"] for g in first["gpus"]] == [40.0, 60.0]
    assert first["gpus"][0]["name"] == "NVIDIA A100-SXM4-40GB"
    assert second["gpu_utilization_percent"] == 90.0  # a GPU without a reading is left out
    assert datetime.fromisoformat(second["at"]) == t0 + timedelta(seconds=10)
    # the summary so far: busy over sampled, over both GPUs
    assert body["summary"]["gpu_allocated_seconds"] == 40.0
    assert body["summary"]["gpu_busy_seconds"] == 19.0
    assert body["summary"]["gpu_utilization_mean_percent"] == 47.5
    assert body["hint"] is None  # 20 s sampled say too little
    # ... and on the record, for metering and the Prometheus metrics
    with svc.service.sessions() as db:
        record = db.get(JobRecord, job_id)
        assert (record.gpu_busy_seconds, record.gpu_allocated_seconds) == (19.0, 40.0)
        assert record.gpu_utilization_peak_percent == 100.0
        assert record.gpu_memory_peak_bytes == 2 * GIB

    # a reader that has the first sample asks for what came after it
    later = await metrics(svc, "ada", job_id, since=first["at"])
    assert [s["at"] for s in later["samples"]] == [second["at"]]


async def test_the_answer_is_live_between_two_passes_of_the_collector(svc):
    """Between passes (10 s apart by default) the answer is the status file's as it was
    at most RunnerStatuses.max_age (1 s) ago: read again once that old."""
    now = [0.0]
    svc.service.runners.clock = lambda: now[0]
    job_id, jobdir = insert_job(svc.service, "ada")
    write_status(jobdir / "status.json", telemetry=sample(NOW - timedelta(seconds=20), [10.0]))
    await svc.service.telemetry.collect()
    write_status(
        jobdir / "status.json",
        telemetry=sample(NOW - timedelta(seconds=10), [70.0]),
        telemetry_summary=summary([40.0], 10.0),
    )
    now[0] += svc.service.runners.max_age

    body = await metrics(svc, "ada", job_id)

    assert [s["gpu_utilization_percent"] for s in body["samples"]] == [10.0, 70.0]
    assert body["summary"]["gpu_utilization_mean_percent"] == 40.0
    assert sample_count(svc, job_id) == 1  # the live one is the collector's to keep


async def test_the_series_is_bounded_and_thinned_from_the_old_end(svc):
    collector = svc.service.telemetry
    collector.max_samples = 20
    job_id, jobdir = insert_job(svc.service, "ada")
    start = NOW - timedelta(hours=1)
    times = [start + timedelta(seconds=10 * i) for i in range(60)]

    for at in times:
        write_status(jobdir / "status.json", telemetry=sample(at, [float(len(times))]))
        await collector.collect()
        assert sample_count(svc, job_id) <= 20

    kept = [datetime.fromisoformat(s["at"]) for s in (await metrics(svc, "ada", job_id))["samples"]]
    assert kept == sorted(kept)
    assert kept[0] == times[0]
    assert kept[-1] == times[-1]
    assert kept[-5:] == times[-5:]  # the recent past at full grain
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(kept)]
    assert max(gaps) > 10
    assert gaps[-1] == 10
    assert MAX_SAMPLES == 720  # the default: two hours at the default interval


async def test_a_job_that_used_its_gpu_little_gets_a_hint_once_it_says_enough(svc):
    idle, idle_dir = insert_job(svc.service, "ada", state="running")
    write_status(
        idle_dir / "status.json",
        telemetry=sample(NOW, [6.0]),
        telemetry_summary=summary([6.0], 1200.0, peak_gib=1.5),
    )
    short, short_dir = insert_job(svc.service, "ada")
    write_status(short_dir / "status.json", telemetry_summary=summary([6.0], 120.0))
    busy, busy_dir = insert_job(svc.service, "ada")
    write_status(busy_dir / "status.json", telemetry_summary=summary([85.0], 1200.0))
    pair, pair_dir = insert_job(svc.service, "ada", gpu_count=2)
    write_status(pair_dir / "status.json", telemetry_summary=summary([90.0, 1.0], 1200.0))
    cpu, cpu_dir = insert_job(svc.service, "ada", flavor="cpu", gpu_count=0)
    write_status(cpu_dir / "status.json", telemetry=sample(NOW, []))

    hints = {job: (await metrics(svc, "ada", job))["hint"] for job in (idle, short, busy, pair)}

    assert hints[idle] == (
        "GPU busy 6 % on average: a CPU or a smaller GPU flavor would do "
        "(its GPU memory peaked at 1.5 GiB of 40.0 GiB)"
    )
    assert hints[short] is None  # two minutes: too little to judge
    assert hints[busy] is None
    assert hints[pair] == (
        "1 of its 2 GPUs stayed idle (under 5 % busy on average): a flavor with fewer GPUs would do"
    )
    cpu_body = await metrics(svc, "ada", cpu)
    assert cpu_body["hint"] is None
    assert cpu_body["summary"] is None
    assert cpu_body["samples"][0]["gpus"] == []
    assert cpu_body["samples"][0]["gpu_utilization_percent"] is None


async def test_an_ended_job_keeps_its_final_summary_and_last_sample(svc):
    job_id, jobdir = insert_job(svc.service, "ada")
    final = summary([6.0], 900.0)
    last = sample(NOW - timedelta(seconds=1), [4.0])
    write_status(
        jobdir / "status.json",
        "succeeded",
        telemetry=last,
        telemetry_summary=final,
        exit_code=0,
        cells_total=1,
        cells_done=1,
    )

    def finish() -> None:  # as Follower._record_end does when the backend says it ended
        with svc.service.sessions() as db:
            record = db.get(JobRecord, job_id)
            svc.service.follower.finish(record, 0, None)
            db.commit()

    await svc.service.in_db(finish)

    body = await metrics(svc, "ada", job_id)
    assert body["state"] == "succeeded"
    assert body["summary"]["gpu_busy_seconds"] == 54.0
    assert body["summary"]["gpu_allocated_seconds"] == 900.0
    assert body["summary"]["cpu_peak_percent"] == 180.0
    assert body["hint"].startswith("GPU busy 6 % on average")
    assert [s["gpu_utilization_percent"] for s in body["samples"]] == [4.0]
    with svc.service.sessions() as db:
        record = db.get(JobRecord, job_id)
        assert record.gpu_busy_seconds == 54.0
        assert record.gpu_utilization_mean_percent == 6.0
    # the collector leaves an ended job's summary alone
    write_status(jobdir / "status.json", "running", telemetry_summary=summary([99.0], 5.0))
    await svc.service.telemetry.collect()
    assert (await metrics(svc, "ada", job_id))["summary"]["gpu_busy_seconds"] == 54.0


async def test_only_who_may_see_the_job_sees_its_metrics(svc):
    job_id, jobdir = insert_job(svc.service, "ada")
    write_status(jobdir / "status.json", telemetry=sample(NOW, [50.0]))
    await svc.service.telemetry.collect()

    async with svc.client("bob") as bob, svc.client(None) as nobody:
        assert (await bob.get(f"jobs/{job_id}/metrics")).status_code == 404
        assert (await nobody.get(f"jobs/{job_id}/metrics")).status_code == 401
        assert (await bob.get("jobs/abc123/metrics")).status_code == 404
    assert len((await metrics(svc, "root", job_id))["samples"]) == 1  # an admin sees all
    async with svc.client("ada") as ada:
        bad = await ada.get(f"jobs/{job_id}/metrics", params={"since": "yesterday"})
    assert bad.status_code == 400
    assert "since must be a time in ISO 8601" in bad.json()["message"]


async def test_samples_go_with_their_job(svc):
    job_id, _jobdir = insert_job(svc.service, "ada", state="succeeded", finished_ago=1)
    other, _ = insert_job(svc.service, "ada", state="succeeded", finished_ago=1)
    with svc.service.sessions() as db:
        for job, value in ((job_id, 1.0), (other, 2.0), ("gone0000001", 3.0)):
            db.add(JobSample(job_id=job, at=NOW, gpu_utilization_percent=value, gpus=[]))
        db.commit()

    async with svc.client("ada") as ada:
        assert (await ada.delete(f"jobs/{job_id}")).status_code == 204
    assert sample_count(svc, job_id) == 0
    svc.service.telemetry._passes = 0  # the next pass sweeps for samples of jobs gone
    await svc.service.telemetry.collect()

    assert sample_count(svc, "gone0000001") == 0
    assert sample_count(svc, other) == 1


async def test_a_job_in_a_damaged_or_hostile_status_file_costs_nothing(svc):
    job_id, jobdir = insert_job(svc.service, "ada")
    (jobdir / "status.json").write_text('{"state": "running", "telemetry": [1, 2')
    assert await svc.service.telemetry.collect() == 0
    assert (await metrics(svc, "ada", job_id))["samples"] == []


def test_what_a_status_file_holds_is_checked_before_it_is_kept():
    hostile = {
        "at": "2025-01-01T00:00:00Z",
        "gpus": [
            {"index": 0, "utilization_percent": float("nan"), "memory_used_bytes": -5},
            {"index": "1", "utilization_percent": 250, "name": "x" * 10_000, "power_watts": True},
            "not a gpu",
        ]
        + [{"index": str(i)} for i in range(500)],
        "cpu_percent": "lots",
        "memory_bytes": 10**40,
    }

    cleaned = clean_sample(hostile)

    assert cleaned is not None
    first, second = cleaned["gpus"][:2]
    assert first["index"] == "0"
    assert first["utilization_percent"] is None
    assert first["memory_used_bytes"] is None
    assert second["utilization_percent"] == 100.0  # at most 100 %
    assert len(second["name"]) == 200
    assert second["power_watts"] is None
    assert len(cleaned["gpus"]) == 63  # the first 64 entries, less the one that is no GPU
    assert cleaned["cpu_percent"] is None
    assert cleaned["memory_bytes"] is None
    assert clean_sample({"gpus": []}) is None  # no time: not a sample
    assert clean_sample({"at": "9999-12-31T23:59:59-23:00"}) is None  # past datetime's range

    busy_beyond = clean_summary({"gpus": [{"busy_seconds": 99.0, "allocated_seconds": 10.0}]})
    assert busy_beyond is not None
    assert busy_beyond["gpus"][0]["busy_seconds"] == 10.0  # busy is a share of the time
    assert summarise(busy_beyond).gpu_utilization_mean_percent == 100.0  # type: ignore[union-attr]
    assert usage_hint(1, None) is None


async def test_a_full_answer_is_what_the_spec_says(svc):
    spec = OpenAPI.from_file_path(str(SPEC_FILE))
    job_id, jobdir = insert_job(svc.service, "ada", gpu_count=2)
    write_status(
        jobdir / "status.json",
        telemetry=sample(NOW, [3.0, None]),
        telemetry_summary=summary([3.0, 2.0], 900.0),
    )
    await svc.service.telemetry.collect()

    def call() -> requests.Response:
        request = requests.Request(
            "GET",
            svc.url + f"api/jobs/{job_id}/metrics",
            headers={"Authorization": f"token {TOKEN['ada']}"},
            params={"since": "2000-01-01T00:00:00Z"},
        ).prepare()
        with requests.Session() as session:
            response = session.send(request, timeout=30)
        spec.validate_request(RequestsOpenAPIRequest(request))
        spec.validate_response(RequestsOpenAPIRequest(request), RequestsOpenAPIResponse(response))
        return response

    body = (await asyncio.to_thread(call)).json()
    assert body["hint"].startswith("GPU busy 2 % on average")
    assert len(body["samples"]) == 1
    assert len(body["summary"]["gpus"]) == 2


async def test_a_multi_node_jobs_telemetry_is_every_ranks(svc):
    """Each rank samples its own GPUs into its own status file: the job's series and
    summary hold all of them, named by rank, with the ranks' CPU and memory added up;
    and so does the summary kept when the job ends."""
    job_id, jobdir = insert_job(svc.service, "ada", gpu_count=2)
    with svc.service.sessions() as db:
        db.get(JobRecord, job_id).nodes = 2
        db.commit()
    t0 = NOW - timedelta(seconds=30)
    write_status(
        jobdir / "status.json",
        telemetry=sample(t0, [20.0]),
        telemetry_summary=summary([20.0], 30.0, since=t0),
    )
    write_status(
        jobdir / "status-rank-1.json",
        telemetry=sample(t0, [80.0], cpu=50.0, memory=GIB),
        telemetry_summary=summary([80.0], 30.0, since=t0),
    )
    assert await svc.service.telemetry.collect() == 1
    body = await metrics(svc, "ada", job_id)
    [first] = body["samples"]
    assert [(g["index"], g["utilization_percent"]) for g in first["gpus"]] == [
        ("0 (rank 0)", 20.0),
        ("0 (rank 1)", 80.0),
    ]
    assert first["gpu_utilization_percent"] == 50.0
    assert (first["cpu_percent"], first["memory_bytes"]) == (145.0, 4 * GIB)
    assert body["summary"]["gpu_allocated_seconds"] == 60.0  # 2 GPUs x 30 s
    assert body["summary"]["gpu_utilization_mean_percent"] == 50.0
    assert len(body["summary"]["gpus"]) == 2

    # at its end, the final summary is every rank's too
    final = [
        parse_status((jobdir / name).read_bytes()) for name in ("status.json", "status-rank-1.json")
    ]
    with svc.service.sessions() as db:
        record = db.get(JobRecord, job_id)
        record_final(record, final[0], svc.service.log, final[1:])
        assert record.gpu_allocated_seconds == 60.0
        assert record.gpu_busy_seconds == 30.0  # 6 s of rank 0's GPU, 24 s of rank 1's

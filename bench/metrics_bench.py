"""Metrics with a big job database: the Prometheus scrape and a job's series, timed.

    python bench/metrics_bench.py [--jobs 10000] [--requests 200] [--database-url URL]

The real job service (tornado, the local backend, SQLite in a temporary folder, or
the database at ``--database-url``, emptied first: give a PostgreSQL database of its
own) runs on an event loop of its own in this process; the bench fills its database
directly with N jobs in a realistic mix of states (most ended; some queued; 5 %
running, each with a recent telemetry sample; a fifth of the ended GPU jobs with a
series of 30 samples; one running job with a full series of 720), then sends, one
after the other, ``--requests`` of each of these, with an admin's token:

  health     GET api/health                    the baseline: auth and an answer, no query
  list       GET api/jobs?limit=50             a page of jobs: the API's common query
  metrics    GET metrics                       the Prometheus scrape (goal: p50 < 50 ms)
  series     GET api/jobs/{id}/metrics         a running job's full series (720 samples)
  ended      GET api/jobs/{id}/metrics         an ended job's 30 samples and summary

and prints each one's p50 and p99 in milliseconds with their ratios to the health
and list baselines measured in the same run. The exit status is 1 when a request
failed, 0 otherwise (the goal's verdict is printed, not enforced).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Coroutine
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, TypeVar

import httpx

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # tests/, and this checkout's nbjobs before any other

from nbjobs.job_service.db import Base, JobRecord, JobSample  # noqa: E402
from nbjobs.job_service.telemetry import MAX_SAMPLES  # noqa: E402
from sqlalchemy import insert  # noqa: E402

from tests.job_service.conftest import TOKENS, Service, start_service, stop_all  # noqa: E402

T = TypeVar("T")
#: the Prometheus scrape's p50 with 10 000 jobs should stay under this (issue 17)
GOAL_P50_MS = 50.0
GIB = 1024**3
#: (state, share of the jobs)
MIX = [
    ("succeeded", 0.62),
    ("failed", 0.12),
    ("cancelled", 0.08),
    ("timed_out", 0.03),
    ("queued", 0.10),
    ("running", 0.05),
]
FLAVORS = [("cpu", 0), ("gpu", 1), ("gpu2", 2), ("slice", 1)]
ENDED_SERIES = 30
USERS = 200


@dataclass
class Timing:
    name: str
    what: str
    p50: float
    p99: float


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs in the database")
    parser.add_argument("--requests", type=int, default=200, help="requests of each kind")
    parser.add_argument("--database-url", help="a database of its own (default: SQLite)")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="nbjobs-metrics-bench-") as where:
        running = ServiceThread(Path(where), args.database_url)
        try:
            t0 = time.monotonic()
            ids = running.call(fill, running.svc, args.jobs)
            filled = time.monotonic() - t0
            timings, failures = measure(running.svc, ids, args.requests)
        finally:
            running.close()
    print(
        f"{args.jobs} jobs ({ids['samples']} samples) in "
        f"{'the given database' if args.database_url else 'SQLite'}, filled in {filled:.1f} s; "
        f"{args.requests} sequential requests of each kind, an admin's token"
    )
    print_table(timings)
    scrape = next(t for t in timings if t.name == "metrics")
    verdict = "met" if scrape.p50 < GOAL_P50_MS else "MISSED"
    print(f"goal: metrics p50 < {GOAL_P50_MS:.0f} ms: {verdict} ({scrape.p50:.1f} ms)")
    for failure in failures[:5]:
        print(f"failed: {failure}", file=sys.stderr)
    return 1 if failures else 0


class ServiceThread:
    """The job service on an event loop of its own: the bench's requests wait on the
    service as a real client's would, and the service's loop is nobody else's."""

    def __init__(self, where: Path, database_url: str | None) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        # Nothing starts: the queued jobs stay queued (no CPU slot; no GPU within quota),
        # so the figures are the API's alone, with no dispatcher working beside it.
        overrides: dict[str, Any] = {
            "backend": {"kind": "local", "local": {"gpus": [0, 1], "cpu_slots": 0}},
            "quotas": {"default": {"max_running_gpus": 0}},
        }
        if database_url:
            empty(database_url)
            overrides["database"] = {"url": database_url}
        self.svc: Service = self.run(start_service(where, overrides))
        self.run(self.svc.service.telemetry.stop())  # the bench's samples stay as written

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=600)

    def call(self, func: Any, *args: Any) -> Any:
        async def on_loop() -> Any:
            return await self.svc.service.in_db(func, *args)

        return self.run(on_loop())

    def close(self) -> None:
        self.run(stop_all(self.svc))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=30)
        self.loop.close()


def empty(url: str) -> None:
    """Drop nbjobs' tables in a database given to the bench (it starts from none)."""
    from sqlalchemy import create_engine

    engine = create_engine(url)
    Base.metadata.drop_all(engine)
    engine.dispose()


def fill(svc: Service, jobs: int) -> dict[str, Any]:
    """Put ``jobs`` jobs and their samples into the service's database (database threads)."""
    rng = random.Random(17)
    service = svc.service
    now = datetime.now(timezone.utc)
    records: list[dict[str, Any]] = []
    samples: list[dict[str, Any]] = []
    full_series = ended_series = None
    for seq in range(1, jobs + 1):
        job_id = uuid.uuid4().hex[:12]
        state = rng.choices([s for s, _ in MIX], [share for _, share in MIX])[0]
        flavor, gpus = rng.choice(FLAVORS)
        if seq <= 2:  # whatever the size: a running GPU job, and an ended one with a series
            state, flavor, gpus = ("running", "gpu", 1) if seq == 1 else ("succeeded", "gpu2", 2)
        user = f"user{rng.randrange(USERS):03d}"
        submitted = now - timedelta(seconds=rng.uniform(60, 30 * 86400))
        started = submitted + timedelta(seconds=rng.uniform(1, 600))
        ran = rng.uniform(60, 4 * 3600)
        record = {
            "id": job_id,
            "seq": seq,
            "user": user,
            "groups": ["students"],
            "name": "train",
            "flavor": flavor,
            "state": state,
            "priority": 0,
            "path": "train.ipynb",
            "output_path": "train.out.ipynb",
            "source_file": f"/home/{user}/train.ipynb",
            "snapshot_file": f"/home/{user}/.nbjobs/jobs/{job_id}/input.ipynb",
            "output_file": f"/home/{user}/train.out.ipynb",
            "job_dir": f"/home/{user}/.nbjobs/jobs/{job_id}",
            "parameters": {},
            "gpu_count": gpus,
            "gpus": [str(i) for i in range(gpus)],
            "submitted_at": submitted,
            "started_at": None if state == "queued" else started,
            "finished_at": started + timedelta(seconds=ran) if state not in _LIVE else None,
            "backend_ref": f"bench-{seq}" if state == "running" else None,
            "node": f"gpu-{rng.randrange(40):02d}" if state != "queued" else None,
            "cells_done": 0,
            "cells_total": 0,
            "cancel_requested": 0,
            "requeues": 0,
        }
        utilization = rng.uniform(0, 100)
        if gpus and state not in _LIVE:
            busy = ran * gpus * utilization / 100
            record.update(
                gpu_busy_seconds=busy,
                gpu_allocated_seconds=ran * gpus,
                gpu_utilization_mean_percent=utilization,
                gpu_utilization_peak_percent=min(100.0, utilization * 1.5),
                gpu_memory_peak_bytes=int(rng.uniform(1, 40) * GIB),
            )
        records.append(record)
        if state == "running" and gpus:
            count = MAX_SAMPLES if full_series is None else 1
            full_series = full_series or job_id
            samples += series(job_id, now, count, gpus, rng)
        elif gpus and state in ("succeeded", "failed") and (seq == 2 or rng.random() < 0.2):
            ended_series = ended_series or job_id
            samples += series(job_id, started + timedelta(seconds=ran), ENDED_SERIES, gpus, rng)
    with service.sessions() as db:
        for i in range(0, len(records), 2000):
            db.execute(insert(JobRecord), records[i : i + 2000])
        for i in range(0, len(samples), 5000):
            db.execute(insert(JobSample), samples[i : i + 5000])
        db.commit()
    service.submissions.numbers.last = jobs
    return {"full": full_series, "ended": ended_series, "samples": len(samples)}


_LIVE = ("queued", "running")


def series(
    job_id: str, end: datetime, count: int, gpus: int, rng: random.Random
) -> list[dict[str, Any]]:
    """``count`` samples every 10 s up to ``end``, as the collector keeps them."""
    rows = []
    for k in range(count):
        readings = [
            {
                "index": str(g),
                "uuid": f"GPU-{g}",
                "name": "NVIDIA A100-SXM4-40GB",
                "utilization_percent": rng.uniform(0, 100),
                "memory_used_bytes": int(rng.uniform(1, 40) * GIB),
                "memory_total_bytes": 40 * GIB,
                "temperature_celsius": 50.0,
                "power_watts": 200.0,
                "error": None,
            }
            for g in range(gpus)
        ]
        rows.append(
            {
                "job_id": job_id,
                "at": end - timedelta(seconds=10 * (count - 1 - k)),
                "gpu_utilization_percent": statistics.fmean(
                    r["utilization_percent"] for r in readings
                ),
                "gpu_memory_used_bytes": sum(r["memory_used_bytes"] for r in readings),
                "gpu_memory_total_bytes": 40 * GIB * gpus,
                "cpu_percent": 100.0,
                "memory_bytes": 3 * GIB,
                "gpus": readings,
            }
        )
    return rows


def measure(svc: Service, ids: dict[str, Any], requests: int) -> tuple[list[Timing], list[str]]:
    """Each kind of request, ``requests`` times one after the other (after 10 to warm up)."""
    token = {v: k for k, v in TOKENS.items()}["root"]
    kinds = [
        ("health", "GET api/health", svc.url + "api/health"),
        ("list", "GET api/jobs?limit=50", svc.url + "api/jobs?limit=50"),
        ("metrics", "GET metrics (Prometheus)", svc.url + "metrics"),
        ("series", f"GET api/jobs/ID/metrics ({MAX_SAMPLES})", svc.url + "api/jobs/"),
        ("ended", f"GET api/jobs/ID/metrics ({ENDED_SERIES})", svc.url + "api/jobs/"),
    ]
    timings: list[Timing] = []
    failures: list[str] = []
    with httpx.Client(headers={"Authorization": f"token {token}"}, timeout=60) as client:
        for name, what, url in kinds:
            if name == "series":
                url += f"{ids['full']}/metrics"
            elif name == "ended":
                url += f"{ids['ended']}/metrics"
            took = []
            for i in range(requests + 10):
                t0 = time.perf_counter()
                response = client.get(url)
                elapsed = time.perf_counter() - t0
                if response.status_code != 200:
                    failures.append(f"{what}: {response.status_code} {response.text[:200]}")
                if i >= 10:
                    took.append(elapsed * 1000)
            timings.append(Timing(name, what, quantile(took, 0.5), quantile(took, 0.99)))
    return timings, failures


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def print_table(timings: list[Timing]) -> None:
    health = next(t for t in timings if t.name == "health")
    page = next(t for t in timings if t.name == "list")
    header = ("request", "p50 ms", "p99 ms", "p50/health", "p50/list")
    rows = [header]
    for t in timings:
        rows.append(
            (
                t.what,
                f"{t.p50:.1f}",
                f"{t.p99:.1f}",
                f"{t.p50 / health.p50:.2f}",
                f"{t.p50 / page.p50:.2f}",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for row in rows:
        print(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )


if __name__ == "__main__":
    sys.exit(main())

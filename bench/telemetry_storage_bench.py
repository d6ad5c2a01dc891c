"""How much the job database grows with GPU telemetry: bytes per job-hour, and what a
long job levels off at once its series is thinned.

    python bench/telemetry_storage_bench.py [--jobs 50] [--gpus 2] [--interval 10]

Runs the service's own collector step (``TelemetryCollector._store``: one sample per job
per pass, the older half thinned past 720) over an SQLite file, as passes ``interval``
seconds apart, and prints the file's growth per job-hour against the size of the jobs'
records alone (the baseline, measured in the same run), after 1, 2, 4 and 12 hours.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from nbjobs.job_service.db import JobRecord, JobSample, connect
from nbjobs.job_service.telemetry import MAX_SAMPLES, Reading, TelemetryCollector
from sqlalchemy import func, insert, select, text


def sample(at: datetime, gpus: int, step: int) -> dict[str, Any]:
    """A sample as the collector keeps it (checked), for ``gpus`` GPUs."""
    return {
        "at": at,
        "gpus": [
            {
                "index": str(i),
                "uuid": f"GPU-{i:08d}-1111-2222-3333-444455556666",
                "name": "NVIDIA A100-SXM4-80GB",
                "utilization_percent": float((step * 7 + i * 13) % 100),
                "memory_used_bytes": (20 + step % 40) << 30,
                "memory_total_bytes": 80 << 30,
                "temperature_celsius": 55.0 + step % 10,
                "power_watts": 250.5 + step % 50,
                "error": None,
            }
            for i in range(gpus)
        ],
        "cpu_percent": 105.0,
        "memory_bytes": 6 << 30,
    }


def size(url: str) -> int:
    """The database's bytes in use (pages in use, not free ones), after a checkpoint."""
    engine = connect(url).kw["bind"]
    with engine.connect() as conn:
        conn.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))
        pages = conn.execute(text("PRAGMA page_count")).scalar() or 0
        free = conn.execute(text("PRAGMA freelist_count")).scalar() or 0
        page = conn.execute(text("PRAGMA page_size")).scalar() or 0
    return int((pages - free) * page)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--gpus", type=int, default=2)
    parser.add_argument("--interval", type=float, default=10.0)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="nbjobs-telemetry-") as folder:
        url = f"sqlite:///{Path(folder) / 'jobs.sqlite'}"
        sessions = connect(url)
        start = datetime(2026, 11, 2, 9, tzinfo=timezone.utc)
        ids = [f"j{i:011d}" for i in range(args.jobs)]
        with sessions() as db:
            db.execute(
                insert(JobRecord),
                [
                    {
                        "id": job_id,
                        "seq": i,
                        "user": f"user{i % 20}",
                        "groups": ["students"],
                        "name": "train",
                        "flavor": "a100",
                        "state": "running",
                        "priority": 0,
                        "path": "work/train.ipynb",
                        "output_path": "work/train.2026-11-02T0900.abcdef12.ipynb",
                        "source_file": f"/home/user{i % 20}/work/train.ipynb",
                        "snapshot_file": f"/home/user{i % 20}/.nbjobs/jobs/{job_id}/input.ipynb",
                        "output_file": f"/home/user{i % 20}/work/train.out.ipynb",
                        "job_dir": f"/home/user{i % 20}/.nbjobs/jobs/{job_id}",
                        "parameters": {"epochs": 20},
                        "gpu_count": args.gpus,
                        "gpus": [str(g) for g in range(args.gpus)],
                        "submitted_at": start,
                        "started_at": start,
                    }
                    for i, job_id in enumerate(ids)
                ],
            )
            db.commit()
        baseline = size(url)
        collector = TelemetryCollector.__new__(TelemetryCollector)
        collector.ctx = SimpleNamespace(sessions=sessions)  # type: ignore[assignment]
        collector.max_samples = MAX_SAMPLES
        per_hour = int(3600 / args.interval)
        print(
            f"{args.jobs} jobs of {args.gpus} GPUs sampled every {args.interval:g} s; "
            f"their records alone: {baseline / args.jobs:,.0f} bytes a job"
        )
        columns = ("hours", "rows a job", "bytes a job", "/ record", "a job-hour")
        print(" ".join(f"{c:>{w}}" for c, w in zip(columns, (6, 11, 12, 9, 11), strict=True)))
        step = 0
        for hours in (1, 2, 4, 12):
            while step < hours * per_hour:
                at = start + timedelta(seconds=step * args.interval)
                readings = {j: Reading(sample=sample(at, args.gpus, step)) for j in ids}
                with sessions() as db:
                    counts = dict(
                        db.execute(
                            select(JobSample.job_id, func.count()).group_by(JobSample.job_id)
                        ).all()
                    )
                known = {
                    j: (None if step == 0 else at - timedelta(seconds=1), counts.get(j, 0))
                    for j in ids
                }
                collector._store(readings, known)
                step += 1
            grown = (size(url) - baseline) / args.jobs
            with sessions() as db:
                rows = db.scalar(select(func.count()).select_from(JobSample)) or 0
            print(
                f"{hours:>6} {rows / args.jobs:>11.0f} {grown:>12,.0f} "
                f"{grown / (baseline / args.jobs):>9.1f} {grown / hours:>11,.0f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())

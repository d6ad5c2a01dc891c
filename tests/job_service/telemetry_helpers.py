"""What the telemetry and metrics tests (and bench/metrics_bench.py) share: job records
put straight into a service's database, and status files written as a runner with
telemetry writes them (the contract's ``telemetry`` and ``telemetry_summary``)."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from nbjobs.job_runner import RunStatus
from nbjobs.job_runner.status import atomic_write_text
from nbjobs.job_service.db import JobRecord
from nbjobs.job_service.service import JobService

from nbjobs.storage import job_folder, user_folder

GIB = 1024**3


def iso(when: datetime) -> str:
    return when.astimezone(timezone.utc).isoformat(timespec="milliseconds")


def gpu_reading(index: int, utilization: float | None, used_gib: float = 2.0) -> dict[str, Any]:
    """One GPU's reading in a sample, as the runner writes it."""
    return {
        "index": str(index),
        "uuid": f"GPU-{index:04d}",
        "name": "NVIDIA A100-SXM4-40GB",
        "utilization_percent": utilization,
        "memory_used_bytes": int(used_gib * GIB),
        "memory_total_bytes": 40 * GIB,
        "temperature_celsius": 41.0,
        "power_watts": 93.5,
        "error": None,
    }


def sample(
    at: datetime, utilizations: list[float | None], cpu: float = 95.0, memory: int = 3 * GIB
) -> dict[str, Any]:
    """A telemetry sample (``telemetry`` of the status file) with one GPU per utilisation."""
    return {
        "at": iso(at),
        "gpus": [gpu_reading(i, u) for i, u in enumerate(utilizations)],
        "cpu_percent": cpu,
        "memory_bytes": memory,
    }


def summary(
    means: list[float],
    seconds: float,
    *,
    since: datetime | None = None,
    interval: float = 10.0,
    peak_gib: float = 2.0,
) -> dict[str, Any]:
    """A ``telemetry_summary``: each GPU busy ``means[i]`` % over ``seconds`` sampled."""
    since = since or datetime.now(timezone.utc) - timedelta(seconds=seconds)
    return {
        "samples": int(seconds // interval) + 1,
        "interval_seconds": interval,
        "since": iso(since),
        "until": iso(since + timedelta(seconds=seconds)),
        "gpus": [
            {
                "index": str(i),
                "uuid": f"GPU-{i:04d}",
                "name": "NVIDIA A100-SXM4-40GB",
                "utilization_mean_percent": mean,
                "utilization_peak_percent": min(100.0, mean * 2 + 1),
                "memory_peak_bytes": int(peak_gib * GIB),
                "memory_total_bytes": 40 * GIB,
                "busy_seconds": seconds * mean / 100.0,
                "allocated_seconds": seconds,
            }
            for i, mean in enumerate(means)
        ],
        "cpu_mean_percent": 90.0,
        "cpu_peak_percent": 180.0,
        "memory_peak_bytes": 5 * GIB,
    }


def write_status(
    path: Path,
    state: str = "running",
    telemetry: dict[str, Any] | None = None,
    telemetry_summary: dict[str, Any] | None = None,
    **fields: Any,
) -> None:
    """Write a status file as a runner with telemetry does (atomically, one JSON line)."""
    data = RunStatus(state, **fields).to_dict()
    data["telemetry"] = telemetry
    data["telemetry_summary"] = telemetry_summary
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(data) + "\n")


def insert_job(
    service: JobService,
    user: str,
    *,
    state: str = "running",
    flavor: str = "gpu",
    gpu_count: int = 1,
    submitted_ago: float = 120.0,
    started_ago: float | None = 60.0,
    finished_ago: float | None = None,
    backend_ref: str | None = "ref",
    node: str | None = None,
    job_id: str | None = None,
    make_folder: bool = True,
) -> tuple[str, Path]:
    """A job record in ``state``, as if the service had run it; its id and folder.

    No backend runs it: a test (or the bench) plays the runner by writing its status
    file in the folder.
    """
    now = datetime.now(timezone.utc)
    job_id = job_id or uuid.uuid4().hex[:12]
    folder = user_folder(service.config.storage, user)
    jobdir = job_folder(folder, job_id)
    if make_folder:
        jobdir.mkdir(parents=True, exist_ok=True)
    with service.sessions() as db:
        seq = service.submissions.numbers.next()
        db.add(
            JobRecord(
                id=job_id,
                seq=seq,
                user=user,
                groups=[],
                name="train",
                flavor=flavor,
                state=state,
                priority=0,
                path="train.ipynb",
                output_path="train.out.ipynb",
                source_file=str(folder / "train.ipynb"),
                snapshot_file=str(jobdir / "input.ipynb"),
                output_file=str(folder / "train.out.ipynb"),
                job_dir=str(jobdir),
                parameters={},
                gpu_count=gpu_count,
                gpus=[str(i) for i in range(gpu_count)],
                backend_ref=backend_ref if state not in ("queued",) else None,
                node=node,
                submitted_at=now - timedelta(seconds=submitted_ago),
                started_at=(
                    now - timedelta(seconds=started_ago)
                    if started_ago is not None and state != "queued"
                    else None
                ),
                finished_at=(
                    now - timedelta(seconds=finished_ago) if finished_ago is not None else None
                ),
            )
        )
        db.commit()
    return job_id, jobdir

"""Prometheus metrics of the job service, served at ``{prefix}metrics``.

A scrape reads the job database in a few grouped queries on the service's database
threads (:func:`read_snapshot`), the backend's view of its GPUs on the event loop,
and renders both, with what the service observed as it went (:class:`ServiceMetrics`:
queue waits, dispatch latency, failed starts), in Prometheus' text format.

Names follow Prometheus' conventions: the ``nbjobs_`` prefix, base units
(``_seconds``, ``_bytes``, ratios 0-1), ``_total`` for counters. What the metrics
are is :data:`METRICS` (name: help), the one list the monitoring guide and the Grafana
dashboard (``hub_config/examples/grafana-nbjobs.json``) are checked against.

Per-job series (GPU utilisation and memory of each running job, labelled job, user,
flavor and node) are bounded: at most :attr:`ServiceMetrics.max_jobs` jobs, those
holding the most GPUs first; ``nbjobs_jobs_unlisted`` counts the others, whose GPUs
still count in the per-flavor ``nbjobs_gpus_busy``.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from sqlalchemy import Text, cast, func, select
from sqlalchemy.orm import Session

from nbjobs.models import ClassInfo, JobState

from .counters import DEFAULT_MAX_JOBS, METRICS, ServiceMetrics
from .db import (
    ACTIVE_VALUES,
    BUSY_SHARE,
    CHARGED_GPUS,
    JobRecord,
    JobSample,
    RetiredUsage,
    utcnow,
)

if TYPE_CHECKING:
    from nbjobs.config import NbjobsConfig

    from .backends import Backend
    from .context import Context
    from .telemetry import TelemetryCollector

__all__ = ["DEFAULT_MAX_JOBS", "METRICS", "ServiceMetrics", "read_snapshot", "render"]

#: a running job's latest sample counts for this many telemetry intervals (at least a
#: minute): an older one is a runner that stopped sampling, not what its GPUs do now
FRESH_INTERVALS = 3


@dataclass
class StartedJob:
    """A started job as a scrape sees it: the record and its latest sample."""

    id: str
    user: str
    flavor: str
    node: str | None
    gpu_count: int
    #: what it counts as (a 0.25 slice: 0.25)
    gpus: float
    backend_ref: str | None
    state: str
    started_at: datetime | None
    sample_at: datetime | None
    utilization_percent: float | None
    memory_used_bytes: int | None
    memory_total_bytes: int | None


@dataclass
class Snapshot:
    """What a scrape read from the database."""

    #: (state, flavor) -> jobs
    counts: dict[tuple[str, str], int]
    #: flavor -> when its longest-waiting queued job was submitted
    oldest_queued: dict[str, datetime]
    started: list[StartedJob]
    taken_at: datetime
    #: (user, flavor, node) -> GPU-seconds held and busy by the jobs that ended
    ended: dict[tuple[str, str, str], tuple[float, float]]
    #: user -> the groups their jobs were submitted in
    groups: dict[str, set[str]]


def read_snapshot(ctx: Context) -> Snapshot:
    """The database's part of a scrape, in grouped queries (database threads)."""
    with ctx.sessions() as db:
        grouped = db.execute(
            select(
                JobRecord.state,
                JobRecord.flavor,
                func.count(),
                func.min(JobRecord.submitted_at),
            ).group_by(JobRecord.state, JobRecord.flavor)
        ).all()
        started = _started_jobs(db)
        ended = _ended_usage(db)
        groups = _groups_of_users(db)
    counts: dict[tuple[str, str], int] = {}
    oldest: dict[str, datetime] = {}
    for state, flavor, count, first in grouped:
        counts[(str(state), str(flavor))] = int(count)
        if state == JobState.QUEUED.value and isinstance(first, datetime):
            oldest[str(flavor)] = first
    return Snapshot(counts, oldest, started, utcnow(), ended, groups)


def _started_jobs(db: Session) -> list[StartedJob]:
    """The started jobs, each with its latest telemetry sample (if any)."""
    latest = (
        select(JobSample.job_id.label("job_id"), func.max(JobSample.at).label("at"))
        .join(JobRecord, JobRecord.id == JobSample.job_id)
        .where(JobRecord.state.in_(ACTIVE_VALUES))
        .group_by(JobSample.job_id)
        .subquery()
    )
    rows = db.execute(
        select(
            JobRecord.id,
            JobRecord.user,
            JobRecord.flavor,
            JobRecord.node,
            JobRecord.gpu_count,
            JobRecord.backend_ref,
            CHARGED_GPUS,
            JobRecord.state,
            JobRecord.started_at,
            JobSample.at,
            JobSample.gpu_utilization_percent,
            JobSample.gpu_memory_used_bytes,
            JobSample.gpu_memory_total_bytes,
        )
        .select_from(JobRecord)
        .outerjoin(latest, latest.c.job_id == JobRecord.id)
        .outerjoin(JobSample, (JobSample.job_id == latest.c.job_id) & (JobSample.at == latest.c.at))
        .where(JobRecord.state.in_(ACTIVE_VALUES))
    ).all()
    started: dict[str, StartedJob] = {}
    for row in rows:
        started[row[0]] = StartedJob(  # one per job, should two samples share a time
            id=row[0],
            user=row[1],
            flavor=row[2],
            node=row[3],
            gpu_count=int(row[4] or 0),
            backend_ref=row[5],
            gpus=float(row[6] or 0),
            state=row[7],
            started_at=row[8],
            sample_at=row[9],
            utilization_percent=row[10],
            memory_used_bytes=row[11],
            memory_total_bytes=row[12],
        )
    return list(started.values())


def _ended_usage(db: Session) -> dict[tuple[str, str, str], tuple[float, float]]:
    """GPU-seconds held and busy per (user, flavor, node) by the jobs that ended, those
    forgotten since (retired) included."""
    ended: dict[tuple[str, str, str], tuple[float, float]] = {}
    usage = [
        db.execute(
            select(
                JobRecord.user,
                JobRecord.flavor,
                JobRecord.node,
                func.sum(JobRecord.gpu_seconds_held),
                func.sum(JobRecord.gpu_busy_seconds * BUSY_SHARE),
            )
            .where(JobRecord.finished_at.is_not(None))
            .group_by(JobRecord.user, JobRecord.flavor, JobRecord.node)
        ).all(),
        db.execute(
            select(
                RetiredUsage.user,
                RetiredUsage.flavor,
                RetiredUsage.node,
                RetiredUsage.held_seconds,
                RetiredUsage.busy_seconds,
            )
        ).all(),
    ]
    for user, flavor, node, held, busy in (row for rows in usage for row in rows):
        key = (str(user), str(flavor), str(node or ""))
        before = ended.get(key, (0.0, 0.0))
        ended[key] = (before[0] + float(held or 0.0), before[1] + float(busy or 0.0))
    return ended


def _groups_of_users(db: Session) -> dict[str, set[str]]:
    """Each user's groups, as their jobs were submitted in them (damaged ones skipped)."""
    groups: dict[str, set[str]] = {}
    for user, stored in db.execute(
        select(JobRecord.user, cast(JobRecord.groups, Text)).distinct()
    ).all():
        try:
            names = json.loads(stored) if stored else []
        except ValueError:
            continue
        if isinstance(names, list):
            groups.setdefault(str(user), set()).update(n for n in names if isinstance(n, str))
    return groups


async def render(ctx: Context, telemetry: TelemetryCollector) -> bytes:
    """The service's metrics in Prometheus' text format (one scrape)."""
    snapshot = await ctx.in_db(read_snapshot, ctx)
    families = list(families_of(ctx, telemetry, snapshot))  # the backend's view: on the event loop
    families += [_without_created(f) for f in ctx.metrics.registry.collect()]
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(families))
    return generate_latest(registry)


def _without_created(family: Metric) -> Metric:
    """The family without its ``_created`` samples (when each series began, in this
    process): a series of its own per counter and histogram that no query here needs."""
    family.samples = [s for s in family.samples if not s.name.endswith("_created")]
    return family


class _Families:
    """A collector of families made for one scrape."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self.families)


def families_of(
    ctx: Context, telemetry: TelemetryCollector, snapshot: Snapshot
) -> Iterable[Metric]:
    """The gauges of one scrape: the snapshot, with the backend's view read now."""
    backend, config, metrics = ctx.backend, ctx.config, ctx.metrics
    flavors = sorted({f.name for f in config.flavors} | {f for _, f in snapshot.counts})
    for name in flavors:  # failed starts of every flavor show, 0 until one fails
        metrics.start_failures.labels(name)
    counts = Counter(snapshot.counts)
    runner_says = ctx.runners.states()
    allocated: defaultdict[tuple[str, str], float] = defaultdict(float)
    busy: dict[tuple[str, str], float] = {}
    listed: list[tuple[StartedJob, str]] = []
    interval = telemetry.interval or 10.0
    fresh_after = snapshot.taken_at - timedelta(seconds=max(60.0, FRESH_INTERVALS * interval))
    for job in snapshot.started:
        seen = backend.seen(job.backend_ref) if job.backend_ref else None
        if seen is not None and seen.waiting:
            # handed to a cluster that has not placed it: queued, as users see it
            counts[(job.state, job.flavor)] -= 1
            counts[(JobState.QUEUED.value, job.flavor)] += 1
            continue
        if job.state == JobState.STARTING.value and runner_says.get(job.id) == "running":
            counts[(job.state, job.flavor)] -= 1
            counts[(JobState.RUNNING.value, job.flavor)] += 1
        node = job.node or (seen.node if seen is not None else None) or ""
        if not job.backend_ref:
            continue  # being started: it holds no GPU yet
        allocated[(job.flavor, node)] += job.gpus
        sampled = job.sample_at is not None and job.sample_at >= fresh_after
        if sampled and job.utilization_percent is not None and job.gpu_count:
            share = job.gpus * job.utilization_percent / 100.0
            busy[(job.flavor, node)] = busy.get((job.flavor, node), 0.0) + share
            listed.append((job, node))

    jobs = GaugeMetricFamily("nbjobs_jobs", METRICS["nbjobs_jobs"], labels=["state", "flavor"])
    for state in JobState:
        for name in flavors:
            jobs.add_metric([state.value, name], max(0, counts.get((state.value, name), 0)))
    yield jobs

    yield from _queue_families(flavors, counts, snapshot)
    yield from _capacity_families(config, backend)

    held = GaugeMetricFamily(
        "nbjobs_gpus_allocated", METRICS["nbjobs_gpus_allocated"], labels=["flavor", "node"]
    )
    for (name, node), count in sorted(allocated.items()):
        held.add_metric([name, node], count)
    yield held
    working = GaugeMetricFamily(
        "nbjobs_gpus_busy", METRICS["nbjobs_gpus_busy"], labels=["flavor", "node"]
    )
    for key in sorted(allocated):
        working.add_metric(list(key), round(busy.get(key, 0.0), 6))
    yield working

    yield from _per_job(listed, metrics.max_jobs)
    yield from _usage(snapshot, ctx.classes.all())


def _queue_families(
    flavors: list[str], counts: Counter[tuple[str, str]], snapshot: Snapshot
) -> Iterator[Metric]:
    """Each flavor's queue: its length and how long its oldest job has waited."""
    queue = GaugeMetricFamily(
        "nbjobs_queue_length", METRICS["nbjobs_queue_length"], labels=["flavor"]
    )
    oldest = GaugeMetricFamily(
        "nbjobs_queue_oldest_wait_seconds",
        METRICS["nbjobs_queue_oldest_wait_seconds"],
        labels=["flavor"],
    )
    for name in flavors:
        queue.add_metric([name], max(0, counts.get((JobState.QUEUED.value, name), 0)))
        first = snapshot.oldest_queued.get(name)
        waited = (snapshot.taken_at - first).total_seconds() if first is not None else 0.0
        oldest.add_metric([name], max(0.0, waited))
    yield queue
    yield oldest


def _capacity_families(config: NbjobsConfig, backend: Backend) -> Iterator[Metric]:
    """Each flavor's GPUs, all and free, as the backend counts them now."""
    total = GaugeMetricFamily("nbjobs_gpus_total", METRICS["nbjobs_gpus_total"], labels=["flavor"])
    free = GaugeMetricFamily("nbjobs_gpus_free", METRICS["nbjobs_gpus_free"], labels=["flavor"])
    for flavor in config.flavors:
        gpus = backend.free_gpus(flavor)
        if gpus is not None:
            free.add_metric([flavor.name], gpus[0])
            total.add_metric([flavor.name], gpus[1])
    yield total
    yield free


def _usage(snapshot: Snapshot, classes: Iterable[ClassInfo]) -> Iterator[Metric]:
    """GPU-seconds of the jobs that ended, as counters (they never go down: a removed
    job's are kept apart), and who is in which class and group, to sum them by either."""
    labels = ["user", "flavor", "node"]
    held = CounterMetricFamily(
        "nbjobs_gpu_allocated_seconds", METRICS["nbjobs_gpu_allocated_seconds"], labels=labels
    )
    busy = CounterMetricFamily(
        "nbjobs_gpu_busy_seconds", METRICS["nbjobs_gpu_busy_seconds"], labels=labels
    )
    for key, (allocated, used) in sorted(snapshot.ended.items()):
        held.add_metric(list(key), round(allocated, 3))
        busy.add_metric(list(key), round(used, 3))
    yield held
    yield busy
    in_class = GaugeMetricFamily(
        "nbjobs_user_class_info", METRICS["nbjobs_user_class_info"], labels=["user", "class"]
    )
    for info in sorted(classes, key=lambda c: c.name):
        for student in sorted(set(info.students)):
            in_class.add_metric([student, info.name], 1)
    yield in_class
    in_group = GaugeMetricFamily(
        "nbjobs_user_group_info", METRICS["nbjobs_user_group_info"], labels=["user", "group"]
    )
    for user, names in sorted(snapshot.groups.items()):
        for group in sorted(names):
            in_group.add_metric([user, group], 1)
    yield in_group


def _per_job(listed: list[tuple[StartedJob, str]], most: int) -> Iterator[Metric]:
    """The per-job series: those holding the most GPUs (then the longest running) first."""
    labels = ["job", "user", "flavor", "node"]
    utilization = GaugeMetricFamily(
        "nbjobs_job_gpu_utilization_ratio",
        METRICS["nbjobs_job_gpu_utilization_ratio"],
        labels=labels,
    )
    used = GaugeMetricFamily(
        "nbjobs_job_gpu_memory_used_bytes",
        METRICS["nbjobs_job_gpu_memory_used_bytes"],
        labels=labels,
    )
    size = GaugeMetricFamily(
        "nbjobs_job_gpu_memory_total_bytes",
        METRICS["nbjobs_job_gpu_memory_total_bytes"],
        labels=labels,
    )
    far_past = datetime.min.replace(tzinfo=timezone.utc)
    listed.sort(key=lambda item: (-item[0].gpu_count, item[0].started_at or far_past, item[0].id))
    for job, node in listed[: max(0, most)]:
        values = [job.id, job.user, job.flavor, node]
        utilization.add_metric(values, round((job.utilization_percent or 0.0) / 100.0, 6))
        if job.memory_used_bytes is not None:
            used.add_metric(values, job.memory_used_bytes)
        if job.memory_total_bytes is not None:
            size.add_metric(values, job.memory_total_bytes)
    yield utilization
    yield used
    yield size
    unlisted = GaugeMetricFamily("nbjobs_jobs_unlisted", METRICS["nbjobs_jobs_unlisted"])
    unlisted.add_metric([], max(0, len(listed) - max(0, most)))
    yield unlisted

"""What the GPUs of each job do: the series of its runner's samples, and its summary.

The runner writes its latest telemetry sample and a summary of the run so far into
the job's status file (``telemetry``, ``telemetry_summary``; the contract is the
runner's, see ``job_runner/status.py``). The :class:`TelemetryCollector` reads the
status files of the started jobs every telemetry interval (``telemetry.interval`` in
nbjobs.yaml, 10 s by default), off the event loop, and keeps

* each new sample as a row of its own (:class:`~.db.JobSample`: at most
  :data:`MAX_SAMPLES` per job; past that the older half is thinned, every second row
  dropped, so a long job keeps its whole span at a coarser grain further back);
* the summary on the job's record (GPU-seconds busy and allocated, mean and peak
  utilisation, peak memory), which :meth:`record_final` sets for good from the final
  status when the job ends.

``GET api/jobs/{id}/metrics`` (:meth:`TelemetryCollector.job_metrics`) serves both,
with a hint for a GPU job that used its GPUs little (:func:`usage_hint`).

The status file lies in the user's folder: every number is checked (finite, not
negative, utilisation at most 100 %) and every list and text bounded before it is
kept; what does not fit is left out, never an error.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from nbjobs.job_runner import RunStatus
from pydantic import ValidationError
from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session, object_session

from nbjobs.config import NbjobsConfig
from nbjobs.models import (
    ACTIVE_STATES,
    GpuReading,
    GpuSummary,
    JobMetrics,
    JobState,
    TelemetrySample,
    TelemetrySummary,
)

from .db import ACTIVE_VALUES, JobRecord, JobSample
from .errors import Caller, DamagedRecord
from .live import read_rank_statuses, read_status
from .periodic import InRounds, Periodic

if TYPE_CHECKING:
    from .context import Context

#: seconds between samples when nbjobs.yaml says nothing (the runner's default too)
DEFAULT_INTERVAL = 10.0
#: samples kept per job: two hours at full grain with the default interval
MAX_SAMPLES = 720
#: the hint speaks when a GPU job's GPUs were busy less than this on average ...
HINT_BELOW_PERCENT = 20.0
#: ... over at least this many seconds sampled (a job that ran for less says too little)
HINT_MIN_SAMPLED_SECONDS = 300.0
#: a GPU of a multi-GPU job busy less than this on average counts as idle for the hint
IDLE_GPU_PERCENT = 5.0
#: collector passes between sweeps for samples whose job is gone (about an hour at 10 s)
SWEEP_EVERY = 360
#: the most GPUs one sample or summary may list (more are left out)
MAX_GPUS = 64
#: the longest text kept from a GPU's reading (its name, uuid, error)
MAX_TEXT = 200


def telemetry_interval(config: NbjobsConfig) -> float:
    """Seconds between samples from nbjobs.yaml's ``telemetry.interval`` (0: off)."""
    return float(config.telemetry.interval)


# -- reading the status file ---------------------------------------------------------


@dataclass
class Reading:
    """The telemetry of one status file, checked: the latest sample and the summary."""

    sample: dict[str, Any] | None = None
    summary: dict[str, Any] | None = None
    #: the runner's state (``running`` while its notebook runs)
    state: str | None = None


def reading_of(status: RunStatus | None) -> Reading | None:
    """The telemetry of a runner's status, checked (None without a status)."""
    if status is None:
        return None
    return Reading(
        clean_sample(_plain(status.telemetry)),
        clean_summary(_plain(status.telemetry_summary)),
        status.state,
    )


def with_ranks(first: Reading | None, others: list[Reading | None]) -> Reading | None:
    """A multi-node job's telemetry: rank 0's reading (its time, state and sample count)
    with every rank's GPUs (named ``0 (rank 1)``: GPU 0 of rank 1) and the ranks' CPU and
    memory added up. ``others``: ranks 1 onwards; a rank with no reading adds nothing."""
    if first is None or not others:
        return first
    ranks = [first, *others]
    sample = first.sample
    if sample is not None:
        sample = {**sample, "gpus": _ranked(ranks, "sample")}
        for key in ("cpu_percent", "memory_bytes"):
            sample[key] = _added(ranks, "sample", key)
    summary = first.summary
    if summary is not None:
        summary = {**summary, "gpus": _ranked(ranks, "summary")}
        for key in ("cpu_mean_percent", "cpu_peak_percent", "memory_peak_bytes"):
            summary[key] = _added(ranks, "summary", key)
    return Reading(sample, summary, first.state)


def _ranked(ranks: list[Reading | None], part: str) -> list[dict[str, Any]]:
    return [
        {**gpu, "index": f"{gpu['index']} (rank {rank})"}
        for rank, reading in enumerate(ranks)
        for gpu in ((getattr(reading, part) or {}).get("gpus") or [] if reading else [])
    ]


def _added(ranks: list[Reading | None], part: str, key: str) -> Any:
    values = [
        value
        for reading in ranks
        if reading is not None and (value := (getattr(reading, part) or {}).get(key)) is not None
    ]
    return sum(values) if values else None


def _plain(value: Any) -> Any:
    """A dataclass or model as plain data; anything else as it is."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    return value


# -- checking what the runner wrote ------------------------------------------------


def _number(value: Any, *, most: float | None = None) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    if not math.isfinite(number) or number < 0:
        return None
    return min(number, most) if most is not None else number


def _count(value: Any) -> int | None:
    number = _number(value)
    return int(number) if number is not None and number < 2**62 else None


def _text(value: Any) -> str | None:
    return value[:MAX_TEXT] if isinstance(value, str) else None


def status_time(value: Any) -> datetime | None:
    """A time a runner wrote (ISO 8601) as an aware UTC datetime; None if it is none."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    try:
        return when.astimezone(timezone.utc)
    except (OverflowError, ValueError):
        return None


def _index(value: Any, position: int) -> str:
    if isinstance(value, str) and value:
        return value[:32]
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return str(position)


def _gpus(value: Any) -> list[Any]:
    return [g for g in value[:MAX_GPUS] if isinstance(g, dict)] if isinstance(value, list) else []


def clean_sample(raw: Any) -> dict[str, Any] | None:
    """A sample as the contract describes it, checked; None when it has no time."""
    if not isinstance(raw, dict):
        return None
    at = status_time(raw.get("at"))
    if at is None:
        return None
    gpus = [
        {
            "index": _index(g.get("index"), i),
            "uuid": _text(g.get("uuid")),
            "name": _text(g.get("name")),
            "utilization_percent": _number(g.get("utilization_percent"), most=100.0),
            "memory_used_bytes": _count(g.get("memory_used_bytes")),
            "memory_total_bytes": _count(g.get("memory_total_bytes")),
            "temperature_celsius": _number(g.get("temperature_celsius")),
            "power_watts": _number(g.get("power_watts")),
            "error": _text(g.get("error")),
        }
        for i, g in enumerate(_gpus(raw.get("gpus")))
    ]
    return {
        "at": at,
        "gpus": gpus,
        "cpu_percent": _number(raw.get("cpu_percent")),
        "memory_bytes": _count(raw.get("memory_bytes")),
    }


def clean_summary(raw: Any) -> dict[str, Any] | None:
    """A summary as the contract describes it, checked (times as ISO text, for JSON)."""
    if not isinstance(raw, dict):
        return None
    since, until = status_time(raw.get("since")), status_time(raw.get("until"))
    gpus = []
    for i, g in enumerate(_gpus(raw.get("gpus"))):
        allocated = _number(g.get("allocated_seconds")) or 0.0
        gpus.append(
            {
                "index": _index(g.get("index"), i),
                "uuid": _text(g.get("uuid")),
                "name": _text(g.get("name")),
                "utilization_mean_percent": _number(g.get("utilization_mean_percent"), most=100.0),
                "utilization_peak_percent": _number(g.get("utilization_peak_percent"), most=100.0),
                "memory_peak_bytes": _count(g.get("memory_peak_bytes")),
                "memory_total_bytes": _count(g.get("memory_total_bytes")),
                # busy is a share of the time sampled, never more
                "busy_seconds": min(_number(g.get("busy_seconds")) or 0.0, allocated),
                "allocated_seconds": allocated,
            }
        )
    return {
        "samples": _count(raw.get("samples")) or 0,
        "interval_seconds": _number(raw.get("interval_seconds")),
        "since": since.isoformat() if since else None,
        "until": until.isoformat() if until else None,
        "gpus": gpus,
        "cpu_mean_percent": _number(raw.get("cpu_mean_percent")),
        "cpu_peak_percent": _number(raw.get("cpu_peak_percent")),
        "memory_peak_bytes": _count(raw.get("memory_peak_bytes")),
    }


# -- what is kept, and what the API shows ------------------------------------------


def sample_row(job_id: str, sample: dict[str, Any]) -> JobSample:
    """A checked sample as a row: the GPUs' aggregates beside each GPU's reading."""
    gpus = sample["gpus"]
    utilization = [g["utilization_percent"] for g in gpus if g["utilization_percent"] is not None]
    used = [g["memory_used_bytes"] for g in gpus if g["memory_used_bytes"] is not None]
    total = [g["memory_total_bytes"] for g in gpus if g["memory_total_bytes"] is not None]
    return JobSample(
        job_id=job_id,
        at=sample["at"],
        gpu_utilization_percent=sum(utilization) / len(utilization) if utilization else None,
        gpu_memory_used_bytes=sum(used) if used else None,
        gpu_memory_total_bytes=sum(total) if total else None,
        cpu_percent=sample["cpu_percent"],
        memory_bytes=sample["memory_bytes"],
        gpus=gpus,
    )


def sample_model(row: JobSample) -> TelemetrySample:
    """A stored sample as the API shows it."""
    return TelemetrySample(
        at=row.at,
        gpu_utilization_percent=row.gpu_utilization_percent,
        gpu_memory_used_bytes=row.gpu_memory_used_bytes,
        gpu_memory_total_bytes=row.gpu_memory_total_bytes,
        cpu_percent=row.cpu_percent,
        memory_bytes=row.memory_bytes,
        gpus=[GpuReading.model_validate(g) for g in row.gpus or []],
    )


def summarise(clean: dict[str, Any] | None) -> TelemetrySummary | None:
    """A checked summary with the job's totals over its GPUs (None: no summary)."""
    if not clean:
        return None
    gpus = [GpuSummary.model_validate(g) for g in clean.get("gpus") or []]
    busy = sum(g.busy_seconds for g in gpus) if gpus else None
    allocated = sum(g.allocated_seconds for g in gpus) if gpus else None
    means = [g.utilization_mean_percent for g in gpus if g.utilization_mean_percent is not None]
    if allocated:
        mean: float | None = 100.0 * (busy or 0.0) / allocated
    else:
        mean = sum(means) / len(means) if means else None
    peaks = [g.utilization_peak_percent for g in gpus if g.utilization_peak_percent is not None]
    fullest = max(
        (g for g in gpus if g.memory_peak_bytes is not None),
        key=lambda g: g.memory_peak_bytes or 0,
        default=None,
    )
    return TelemetrySummary(
        samples=clean.get("samples") or 0,
        since=clean.get("since"),
        until=clean.get("until"),
        gpu_busy_seconds=busy,
        gpu_allocated_seconds=allocated,
        gpu_utilization_mean_percent=round(mean, 3) if mean is not None else None,
        gpu_utilization_peak_percent=max(peaks) if peaks else None,
        gpu_memory_peak_bytes=fullest.memory_peak_bytes if fullest else None,
        gpu_memory_total_bytes=fullest.memory_total_bytes if fullest else None,
        cpu_mean_percent=clean.get("cpu_mean_percent"),
        cpu_peak_percent=clean.get("cpu_peak_percent"),
        memory_peak_bytes=clean.get("memory_peak_bytes"),
        gpus=gpus,
    )


def summary_columns(clean: dict[str, Any]) -> dict[str, Any]:
    """The job record's telemetry columns for a checked summary."""
    summary = summarise(clean)
    assert summary is not None
    return {
        "gpu_busy_seconds": summary.gpu_busy_seconds,
        "gpu_allocated_seconds": summary.gpu_allocated_seconds,
        "gpu_utilization_mean_percent": summary.gpu_utilization_mean_percent,
        "gpu_utilization_peak_percent": summary.gpu_utilization_peak_percent,
        "gpu_memory_peak_bytes": summary.gpu_memory_peak_bytes,
        "telemetry_summary": clean,
    }


#: the record's telemetry columns, cleared when a disrupted job goes back to the queue
SUMMARY_COLUMNS = (
    "gpu_busy_seconds",
    "gpu_allocated_seconds",
    "gpu_utilization_mean_percent",
    "gpu_utilization_peak_percent",
    "gpu_memory_peak_bytes",
    "telemetry_summary",
)


def usage_hint(
    gpu_count: int,
    summary: TelemetrySummary | None,
    min_seconds: float = HINT_MIN_SAMPLED_SECONDS,
) -> str | None:
    """A plain word for a GPU job that used its GPUs little, or None.

    It speaks once the job's samples cover at least ``min_seconds`` (nbjobs.yaml's
    ``telemetry.hint_after``, 5 minutes; per GPU; ended or still running), when its
    GPUs were busy less than :data:`HINT_BELOW_PERCENT` on average, or, with several
    GPUs, when some of them stayed under :data:`IDLE_GPU_PERCENT`.
    """
    if not gpu_count or summary is None or summary.gpu_utilization_mean_percent is None:
        return None
    count = len(summary.gpus) or gpu_count
    if (summary.gpu_allocated_seconds or 0.0) / count < min_seconds:
        return None
    mean = summary.gpu_utilization_mean_percent
    if mean < HINT_BELOW_PERCENT:
        hint = f"GPU busy {mean:.0f} % on average: a CPU or a smaller GPU flavor would do"
        peak, size = summary.gpu_memory_peak_bytes, summary.gpu_memory_total_bytes
        if peak is not None and size:
            hint += f" (its GPU memory peaked at {_gib(peak)} of {_gib(size)})"
        return hint
    idle = [
        g
        for g in summary.gpus
        if g.utilization_mean_percent is not None and g.utilization_mean_percent < IDLE_GPU_PERCENT
    ]
    if len(summary.gpus) > 1 and idle:
        return (
            f"{len(idle)} of its {len(summary.gpus)} GPUs stayed idle (under "
            f"{IDLE_GPU_PERCENT:.0f} % busy on average): a flavor with fewer GPUs would do"
        )
    return None


def _gib(size: int) -> str:
    return f"{size / 1024**3:.1f} GiB"


def delete_samples(db: Session, job_id: str) -> None:
    """Remove a job's samples (its record goes in the same transaction)."""
    db.execute(
        delete(JobSample)
        .where(JobSample.job_id == job_id)
        .execution_options(synchronize_session=False)
    )


def record_final(
    record: JobRecord,
    status: RunStatus | None,
    log: logging.Logger,
    others: list[RunStatus | None] | None = None,
) -> None:
    """Set an ending job's summary from its final status (and, for a multi-node job, its
    other ranks' ``others``), and keep its last sample.

    Called by :meth:`~.follow.Follower.finish` in its transaction. A status without
    telemetry (a CPU job, telemetry off, a runner that never wrote) leaves what the
    collector recorded while the job ran.
    """
    try:
        _record_final(record, status, others or [])
    except Exception:  # the job's end is recorded whatever its telemetry holds
        log.exception("job %s: its telemetry summary was not recorded", record.id)


def _record_final(
    record: JobRecord, status: RunStatus | None, others: list[RunStatus | None]
) -> None:
    reading = with_ranks(reading_of(status), [reading_of(s) for s in others])
    if reading is None:
        return
    if reading.summary is not None:
        for name, value in summary_columns(reading.summary).items():
            setattr(record, name, value)
    db = object_session(record)
    if reading.sample is not None and db is not None:
        last = db.scalar(select(func.max(JobSample.at)).where(JobSample.job_id == record.id))
        if last is None or reading.sample["at"] > last:
            db.add(sample_row(record.id, reading.sample))


def clear_summary(record: JobRecord) -> None:
    """Forget the summary of an attempt the cluster cut short (the job runs again)."""
    for name in SUMMARY_COLUMNS:
        setattr(record, name, None)


# -- the collector ------------------------------------------------------------------


class TelemetryCollector(InRounds):
    """Reads the started jobs' telemetry every interval and keeps it (see the module)."""

    def __init__(
        self, ctx: Context, visible: Callable[[Caller, JobRecord | None, str], JobRecord]
    ) -> None:
        self.ctx = ctx
        #: the record of a job the caller may see (else NotFound): the service's rule
        self._visible = visible
        #: samples kept per job (past it, the older half is thinned)
        self.max_samples = MAX_SAMPLES
        self._rounds = Periodic(
            self.collect,
            lambda: max(1.0, self.interval or DEFAULT_INTERVAL),
            what="telemetry: collecting the jobs' samples",
            log=lambda: self.log,
        )
        self._passes = 0
        #: one pass at a time (the loop's and one asked for): each sample is kept once
        self._one_pass = asyncio.Lock()

    @property
    def log(self) -> logging.Logger:
        return self.ctx.log

    @property
    def interval(self) -> float:
        """Seconds between samples (nbjobs.yaml ``telemetry.interval``; 0: off)."""
        return telemetry_interval(self.ctx.config)

    async def collect(self) -> int:
        """One pass: read every started job's status file and keep what is new.

        The list of jobs is read in one short query, the files outside any
        transaction (off the event loop), and what is new written in one more.
        Returns how many samples were stored.
        """
        async with self._one_pass:
            return await self._collect()

    async def _collect(self) -> int:
        ctx = self.ctx
        sweep = self._passes % SWEEP_EVERY == 0
        self._passes += 1
        if sweep:
            await ctx.in_db(self._sweep)
        jobs = await ctx.in_db(self._started_jobs)
        ctx.runners.keep_only(job_id for job_id, *_ in jobs)
        if not jobs:
            return 0
        readings = await asyncio.to_thread(self._read, [(j[0], j[1], j[4]) for j in jobs])
        known = {job_id: (last, count) for job_id, _, last, count, _ in jobs}
        return await ctx.in_db(self._store, readings, known)

    def _read(self, jobs: list[tuple[str, str, int]]) -> dict[str, Reading | None]:
        """Each job's status file, read now; what it says is everyone's latest word. A
        multi-node job's telemetry is all its ranks' (:func:`with_ranks`)."""
        readings = {}
        for job_id, job_dir, nodes in jobs:
            status = read_status(job_dir, self.log)
            self.ctx.runners.put(job_id, status)
            others = read_rank_statuses(job_dir, nodes, self.log)
            readings[job_id] = with_ranks(reading_of(status), [reading_of(s) for s in others])
        return readings

    def _started_jobs(self) -> list[tuple[str, str, datetime | None, int, int]]:
        """Each started job: its folder, its latest stored sample's time, its sample
        count, the nodes it spans."""
        with self.ctx.sessions() as db:
            rows = db.execute(
                select(
                    JobRecord.id,
                    JobRecord.job_dir,
                    func.max(JobSample.at),
                    func.count(JobSample.id),
                    JobRecord.nodes,
                )
                .outerjoin(JobSample, JobSample.job_id == JobRecord.id)
                .where(JobRecord.state.in_(ACTIVE_VALUES))
                .group_by(JobRecord.id, JobRecord.job_dir, JobRecord.nodes)
            ).all()
        return [(r[0], r[1], r[2], int(r[3] or 0), int(r[4] or 1)) for r in rows]

    def _store(
        self,
        readings: dict[str, Reading | None],
        known: dict[str, tuple[datetime | None, int]],
    ) -> int:
        stored = 0
        with self.ctx.sessions() as db:
            for job_id, reading in readings.items():
                if reading is None:
                    continue
                last, count = known[job_id]
                sample = reading.sample
                if sample is not None and (last is None or sample["at"] > last):
                    db.add(sample_row(job_id, sample))
                    stored += 1
                    count += 1
                if reading.summary is not None:
                    # only while it runs: the final summary is Follower.finish's to write
                    db.execute(
                        update(JobRecord)
                        .where(JobRecord.id == job_id, JobRecord.state.in_(ACTIVE_VALUES))
                        .values(**summary_columns(reading.summary))
                        .execution_options(synchronize_session=False)
                    )
                if count > self.max_samples:
                    db.flush()
                    self._thin(db, job_id, count)
            db.commit()
        return stored

    def _thin(self, db: Session, job_id: str, count: int) -> None:
        """Drop every second sample of the job's older half."""
        older = db.scalars(
            select(JobSample.id)
            .where(JobSample.job_id == job_id)
            .order_by(JobSample.at, JobSample.id)
            .limit(count // 2)
        ).all()
        dropped = list(older[1::2])
        if dropped:
            db.execute(
                delete(JobSample)
                .where(JobSample.id.in_(dropped))
                .execution_options(synchronize_session=False)
            )

    def _sweep(self) -> None:
        """Remove samples whose job's record is gone (forgotten, or removed by hand)."""
        with self.ctx.sessions() as db:
            db.execute(
                delete(JobSample)
                .where(JobSample.job_id.not_in(select(JobRecord.id)))
                .execution_options(synchronize_session=False)
            )
            db.commit()

    # -- the API -------------------------------------------------------------------

    def _hint_after(self) -> float:
        settings = getattr(self.ctx.config, "telemetry", None)
        after = getattr(settings, "hint_after", None)
        return float(after) if after is not None else HINT_MIN_SAMPLED_SECONDS

    def job_metrics(self, caller: Caller, job_id: str, since: datetime | None = None) -> JobMetrics:
        """``GET api/jobs/{id}/metrics``: the job's samples (those after ``since``),
        its summary and the hint; whoever may see the job may see these.

        A started job's latest sample and summary come from its status file now, so
        the answer is live even between two passes of the collector.
        """
        ctx = self.ctx
        with ctx.sessions() as db:
            record = self._visible(caller, db.get(JobRecord, job_id), job_id)
            query = select(JobSample).where(JobSample.job_id == job_id)
            if since is not None:
                query = query.where(JobSample.at > since)
            rows = db.scalars(query.order_by(JobSample.at, JobSample.id)).all()
            state_text, gpu_count = record.state, record.gpu_count
            job_dir, stored = record.job_dir, record.telemetry_summary
            nodes = record.nodes or 1
            try:
                state = JobState(state_text)
                samples = [sample_model(r) for r in rows]
                clean = clean_summary(stored)
                summary = summarise(clean)
            except (ValueError, TypeError, ValidationError) as exc:
                raise DamagedRecord(job_id, f"its telemetry cannot be read: {exc}") from None
        if state in ACTIVE_STATES:
            live = with_ranks(
                reading_of(self.ctx.runners.latest(job_id, job_dir)),
                [reading_of(s) for s in read_rank_statuses(job_dir, nodes, self.log)],
            )
            if live is not None and live.sample is not None:
                at = live.sample["at"]
                if (not samples or at > samples[-1].at) and (since is None or at > since):
                    samples.append(sample_model(sample_row(job_id, live.sample)))
            if live is not None and live.summary is not None:
                clean, summary = live.summary, summarise(live.summary)
        # the runner's own word on its interval, else nbjobs.yaml's (None: off)
        interval = (clean or {}).get("interval_seconds") or self.interval or None
        return JobMetrics(
            job_id=job_id,
            state=state,
            interval_seconds=interval,
            samples=samples,
            summary=summary,
            hint=usage_hint(gpu_count or 0, summary, self._hint_after()),
        )

"""Job records, through SQLAlchemy: SQLite by default, any SQLAlchemy URL (PostgreSQL) by config.

The tables are made and changed by Alembic revisions alone (``job_service/migrations``),
applied on start (:func:`upgrade_schema`); the schema version reached is also kept in
``nbjobs_schema``, where releases from before Alembic read it.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    Index,
    Integer,
    String,
    Text,
    create_engine,
    event,
    func,
    inspect,
    select,
    text,
)
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker
from sqlalchemy.types import TypeDecorator

from nbjobs.models import ACTIVE_STATES

#: The tables' version: the newest revision's number (0008 reaches 8), also recorded in
#: ``nbjobs_schema``. Every change to a table is a new revision that bumps it
#: (tests/job_service/test_schema_version.py keeps each version's outline and fails on a
#: change without one), so that a database says which nbjobs last shaped it.
#: 1: every table up to nbjobs 0.1 (columns were added without a bump);
#: 2: the same tables, numbered from here on;
#: 3: ``nbjobs_usage_kept``, the dated GPU time of deleted jobs (budgets and reports);
#: 4: ``nbjobs_mail_addresses``, the addresses users confirmed (or were mailed a code for);
#:    ``nbjobs_jobs.input_removed_at``, when an ended job's input went (storage.retention);
#: 5: ``nbjobs_audit``, who read another person's log or result (revision 0005);
#: 6: ``nbjobs_usage_days``, GPU time summed per day and key (job_service/usage.py),
#:    and ``usage_rolled`` on ``nbjobs_jobs`` and ``nbjobs_usage_kept``; credits
#:    (job_service/credits.py): ``nbjobs_credit_accounts``, ``nbjobs_credit_entries``
#:    (kept by triggers) and the jobs' ``credit_*`` columns (revision 0006);
#: 7: ``nbjobs_jobs.nodes``, the nodes a multi-node job spans (None: one; revision 0008,
#:    which adds it where the service of schema 7 had not at its start);
#: 8: ``nbjobs_users``, which person of each hub name the service knows, and
#:    ``nbjobs_deleted_users``, the users retired (job_service/deleted_users.py; revision 0007).
#: 9: ``nbjobs_instance``, the database's instance id, on every Kubernetes object the
#:    service makes (revision 0009).
SCHEMA_VERSION = 9
#: the newest Alembic revision, named after the schema version it makes
#: (tests/job_service/test_schema_version.py holds the revisions to it)
HEAD_REVISION = f"{SCHEMA_VERSION:04d}"

log = logging.getLogger("nbjobs.job_service")
T = TypeVar("T")


#: a job (or deleted job's kept time) not in the usage report's daily sums yet, in SQL;
#: the partial indexes' condition, which a query must repeat as it is to use them
NOT_ROLLED = "usage_rolled = false"

#: the states of a job that holds (or is getting) its backend's resources, as stored
ACTIVE_VALUES = tuple(state.value for state in ACTIVE_STATES)


def utcnow() -> datetime:
    """Now, in UTC (aware): what every time the service records is measured by."""
    return datetime.now(timezone.utc)


def rowcount(db: Any, statement: Any) -> int:
    """Rows a bulk UPDATE (or DELETE) matched, the session's objects left alone: a
    conditional UPDATE is how a state changes only if it is still what was read."""
    result = db.execute(statement.execution_options(synchronize_session=False))
    return int(getattr(result, "rowcount", 0) or 0)


class UTCDateTime(TypeDecorator[datetime]):
    """Datetimes stored naive in UTC (SQLite keeps no zone) and read back aware."""

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is not None:
            value = value.astimezone(timezone.utc).replace(tzinfo=None)
        return value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        return value.replace(tzinfo=timezone.utc) if value is not None else None


class Base(DeclarativeBase):
    pass


class JobRecord(Base):
    """One submission."""

    __tablename__ = "nbjobs_jobs"
    # a user's page of jobs, newest first: the API's most common query
    __table_args__ = (
        Index("ix_nbjobs_jobs_user_seq", "user", "seq"),
        # one job per run of a definition, even if a crash interrupts its recording
        Index("ix_nbjobs_jobs_definition_run", "definition_run", unique=True),
        # the outbox's query: ended jobs not told yet
        Index("ix_nbjobs_jobs_untold", "notified_end", "finished_at"),
        # the usage report's jobs not summed into its days yet: few, whatever the history
        Index(
            "ix_nbjobs_jobs_unrolled",
            "started_at",
            sqlite_where=text(NOT_ROLLED),
            postgresql_where=text(NOT_ROLLED),
        ),
        # the jobs whose credits are held and not charged yet, by account
        Index(
            "ix_nbjobs_jobs_uncharged",
            "credit_account",
            sqlite_where=text("credit_account IS NOT NULL AND credits_charged = false"),
            postgresql_where=text("credit_account IS NOT NULL AND credits_charged = false"),
        ),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    #: submission order, for a stable queue order when times tie
    seq: Mapped[int] = mapped_column(Integer, index=True)
    user: Mapped[str] = mapped_column(String(255), index=True)
    groups: Mapped[list[str]] = mapped_column(JSON, default=list)
    name: Mapped[str] = mapped_column(String(255))
    flavor: Mapped[str] = mapped_column(String(64), index=True)
    state: Mapped[str] = mapped_column(String(16), index=True)
    priority: Mapped[int] = mapped_column(Integer, default=0)
    #: the admin who last set the priority (moved the job in the queue), and when
    priority_set_by: Mapped[str | None] = mapped_column(String(255), nullable=True)
    priority_set_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    #: paths as the user sees them (relative to their folder)
    path: Mapped[str] = mapped_column(Text)
    output_path: Mapped[str] = mapped_column(Text)
    #: absolute paths on the service's machine
    source_file: Mapped[str] = mapped_column(Text)
    snapshot_file: Mapped[str] = mapped_column(Text)
    output_file: Mapped[str] = mapped_column(Text)
    job_dir: Mapped[str] = mapped_column(Text)
    parameters: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    time_limit: Mapped[float | None] = mapped_column(Float, nullable=True)
    gpu_count: Mapped[int] = mapped_column(Integer, default=0)
    #: what it counts in quotas and GPU-hours: its flavor's fraction of a GPU, else its
    #: GPUs (None: a job from before fractions, which counts ``gpu_count``)
    gpu_equivalents: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: the nodes it spans, ranks 0 to nodes - 1 (its flavor's ``nodes`` at submit;
    #: None: one). ``gpu_count`` and ``gpu_equivalents`` count all of them
    nodes: Mapped[int | None] = mapped_column(Integer, nullable=True)
    #: the devices (local) or resources (Kubernetes) the backend gave it
    gpus: Mapped[list[str]] = mapped_column(JSON, default=list)
    #: the backend's handle (a pid, a Kubernetes Job name)
    backend_ref: Mapped[str | None] = mapped_column(String(255), nullable=True)
    #: the dispatcher's token while it starts the job (queued -> starting): only the
    #: start that claimed the job records what the backend made
    claim: Mapped[str | None] = mapped_column(String(32), nullable=True)
    waiting_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    submitted_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    #: when its input (the snapshot) was removed, ``storage.retention`` after it ended
    input_removed_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    exit_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    message: Mapped[str | None] = mapped_column(Text, nullable=True)
    error: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    cells_done: Mapped[int] = mapped_column(Integer, default=0)
    cells_total: Mapped[int] = mapped_column(Integer, default=0)
    current_cell: Mapped[int | None] = mapped_column(Integer, nullable=True)
    cancel_requested: Mapped[int] = mapped_column(Integer, default=0)
    rerun_of: Mapped[str | None] = mapped_column(String(32), nullable=True)
    #: where the job ran (a Kubernetes node), when the backend knows
    node: Mapped[str | None] = mapped_column(String(255), nullable=True)
    #: times the cluster disrupted the job and it went back to the queue (None: 0)
    requeues: Mapped[int | None] = mapped_column(Integer, nullable=True, default=0)
    #: GPU-seconds it held, from its start to its end (set when it ends; Prometheus'
    #: nbjobs_gpu_allocated_seconds_total sums it)
    gpu_seconds_held: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: the idle-GPU warning its owner sees (job_service/reclaim.py), and since when
    warning: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: ``script`` or ``command`` (None: a notebook); a command's text
    kind: Mapped[str | None] = mapped_column(String(16), nullable=True)
    command: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: the kernel the owner chose at submit instead of the notebook's (None: its own)
    kernel: Mapped[str | None] = mapped_column(String(255), nullable=True)
    #: 1: an HTML copy of the result is written beside it (``output_file`` as ``.html``)
    html: Mapped[int | None] = mapped_column(Integer, nullable=True)
    #: the job definition it ran for, and the run (None: submitted by hand)
    definition_id: Mapped[str | None] = mapped_column(String(32), nullable=True, index=True)
    #: its end (1) and its long wait in the queue (1) went to the outbox of notifications
    notified_end: Mapped[int | None] = mapped_column(Integer, nullable=True)
    notified_wait: Mapped[int | None] = mapped_column(Integer, nullable=True)
    #: (unique: see ``ix_nbjobs_jobs_definition_run``)
    definition_run: Mapped[str | None] = mapped_column(String(32), nullable=True)
    idle_warned_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # What its GPUs did, from the runner's telemetry summary (job_service/telemetry.py):
    # updated while it runs, final when it ends; None where nothing was sampled.
    #: GPU-seconds busy: over its GPUs, seconds sampled x utilisation
    gpu_busy_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: GPU-seconds the samples cover (allocated and sampled)
    gpu_allocated_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    gpu_utilization_mean_percent: Mapped[float | None] = mapped_column(Float, nullable=True)
    gpu_utilization_peak_percent: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: the most memory any one of its GPUs held
    gpu_memory_peak_bytes: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    #: the runner's whole summary (per GPU, CPU, memory), as the metrics API shows it
    telemetry_summary: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    #: its GPU time is in the usage report's daily sums (job_service/usage.py)
    usage_rolled: Mapped[bool] = mapped_column(Boolean, default=False)
    #: the account that pays for it (credits on, a priced flavor), what is held there for
    #: it (its worst case), the price of a GPU-hour then, and whether it was charged
    #: (job_service/credits.py)
    credit_account: Mapped[str | None] = mapped_column(String(300), nullable=True)
    credit_hold: Mapped[float | None] = mapped_column(Float, nullable=True)
    credit_price: Mapped[float | None] = mapped_column(Float, nullable=True)
    credits_charged: Mapped[bool] = mapped_column(Boolean, default=False)

    @property
    def charged_gpus(self) -> float:
        """The GPUs it counts as (a 0.25 slice: 0.25)."""
        return charged(self.gpu_equivalents, self.gpu_count)

    def gpu_seconds(self, now: datetime) -> float:
        """GPU time this job held (so far, if it runs), in GPU-equivalents."""
        if self.started_at is None or not self.gpu_count:
            return 0.0
        end = self.finished_at or now
        return max(0.0, (end - self.started_at).total_seconds()) * self.charged_gpus


def charged(gpu_equivalents: float | None, gpu_count: int | None) -> float:
    """The GPUs a job counts as, from its two columns (as read without the ORM)."""
    if gpu_equivalents is not None:
        return float(gpu_equivalents)
    return float(gpu_count or 0)


#: the same in SQL
CHARGED_GPUS = func.coalesce(JobRecord.gpu_equivalents, JobRecord.gpu_count)
#: the part of its GPUs' busy time a job is charged: 1, or its share of a shared GPU
#: (the runner reads the whole GPU's utilisation; a 0.25 slice gets a quarter of it)
BUSY_SHARE = func.coalesce(JobRecord.gpu_equivalents / func.nullif(JobRecord.gpu_count, 0), 1.0)


class JobSample(Base):
    """One telemetry sample of a job (its runner's, as the collector read it).

    Bounded per job (:data:`~.telemetry.MAX_SAMPLES`: the older half is thinned when a
    job has more), removed with the job's record.
    """

    __tablename__ = "nbjobs_job_samples"
    __table_args__ = (Index("ix_nbjobs_job_samples_job_at", "job_id", "at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(String(32))
    #: when the runner took it (its clock)
    at: Mapped[datetime] = mapped_column(UTCDateTime)
    #: mean over the job's GPUs that answered
    gpu_utilization_percent: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: sums over the job's GPUs that answered
    gpu_memory_used_bytes: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    gpu_memory_total_bytes: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    #: the job's processes (runner and kernel); 100 = one core
    cpu_percent: Mapped[float | None] = mapped_column(Float, nullable=True)
    memory_bytes: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    #: each GPU's reading, as the runner wrote it (checked)
    gpus: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)


class DrainRecord(Base):
    """A node an admin drained: no new job starts there until it is undrained."""

    __tablename__ = "nbjobs_drains"

    node: Mapped[str] = mapped_column(String(255), primary_key=True)
    drained_by: Mapped[str] = mapped_column(String(255))
    drained_at: Mapped[datetime] = mapped_column(UTCDateTime)
    reason: Mapped[str] = mapped_column(Text, default="")


class BudgetExtension(Base):
    """More GPU-hours for one student of a class, for one of its periods from
    ``granted_at`` (see :mod:`.budgets`)."""

    __tablename__ = "nbjobs_budget_extensions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    class_name: Mapped[str] = mapped_column(String(255), index=True)
    student: Mapped[str] = mapped_column(String(255))
    hours: Mapped[float] = mapped_column(Float)
    granted_by: Mapped[str] = mapped_column(String(255))
    granted_at: Mapped[datetime] = mapped_column(UTCDateTime)


class LeaseRecord(Base):
    """Who dispatches jobs from this database, until when."""

    __tablename__ = "nbjobs_lease"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    #: ``host pid=N id=…`` of the holder, for people reading a refusal
    holder: Mapped[str] = mapped_column(String(255))
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)


class InstanceRecord(Base):
    """This database's nbjobs among others: made once, with the database. On a cluster
    every object the service makes carries it, and the service stops only objects that
    carry its own (a second service on the same namespace, with a database of its own,
    leaves this one's jobs alone)."""

    __tablename__ = "nbjobs_instance"

    #: always "this": one row, which a second insert cannot add
    key: Mapped[str] = mapped_column(String(16), primary_key=True)
    id: Mapped[str] = mapped_column(String(32))
    made_at: Mapped[datetime] = mapped_column(UTCDateTime)


def instance_id(sessions: sessionmaker[Session]) -> str:
    """The database's instance id, made at its first reading (two services starting at
    once on a new database agree: the second's insert fails and it reads the first's)."""
    with sessions() as db:
        found = db.scalars(select(InstanceRecord.id)).first()
        if found is not None:
            return found
        made = uuid.uuid4().hex[:12]
        db.add(InstanceRecord(key="this", id=made, made_at=utcnow()))
        try:
            db.commit()
            return made
        except IntegrityError:  # another service made it meanwhile: theirs is the one
            db.rollback()
    with sessions() as db:
        return db.scalars(select(InstanceRecord.id)).one()


class RetiredUsage(Base):
    """GPU-seconds of jobs whose records were removed (``forget``), per user, flavor and
    node, so that the usage counters Prometheus reads never go down."""

    __tablename__ = "nbjobs_usage_retired"

    user: Mapped[str] = mapped_column(String(255), primary_key=True)
    flavor: Mapped[str] = mapped_column(String(64), primary_key=True)
    node: Mapped[str] = mapped_column(String(255), primary_key=True)
    held_seconds: Mapped[float] = mapped_column(Float, default=0.0)
    busy_seconds: Mapped[float] = mapped_column(Float, default=0.0)


class KeptUsage(Base):
    """The GPU time of a job whose record was deleted, with its times: a period's budget
    and a usage report count it as they counted the job (deleting a job never gives
    GPU-hours back)."""

    __tablename__ = "nbjobs_usage_kept"
    __table_args__ = (
        Index(
            "ix_nbjobs_usage_kept_unrolled",
            "started_at",
            sqlite_where=text(NOT_ROLLED),
            postgresql_where=text(NOT_ROLLED),
        ),
    )

    job_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    user: Mapped[str] = mapped_column(String(255), index=True)
    groups: Mapped[list[str]] = mapped_column(JSON, default=list)
    flavor: Mapped[str] = mapped_column(String(64))
    node: Mapped[str | None] = mapped_column(String(255), nullable=True)
    #: the GPUs it counted as (a 0.25 slice: 0.25)
    gpus: Mapped[float] = mapped_column(Float)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
    #: GPU-seconds busy (its share), from its telemetry; None if never sampled
    busy_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: its GPU time is in the usage report's daily sums (job_service/usage.py)
    usage_rolled: Mapped[bool] = mapped_column(Boolean, default=False)


class SchemaVersion(Base):
    __tablename__ = "nbjobs_schema"

    version: Mapped[int] = mapped_column(Integer, primary_key=True)


class DatabaseUnusable(RuntimeError):
    """The job records cannot be opened; the text says which database and what to do."""


class ReadsFirst:
    """Reads that a caller waits for (the API's GETs) go before database work that can
    wait a moment (submits, the dispatcher's claims and records).

    The service's side of each query is Python, which runs one thread at a time: a
    list read while a database thread worked through a burst of submits took turns
    with it at every query and every row (SQLite's module lets go of the interpreter
    at each). Here the database thread, before it starts its next piece of work,
    waits while a read runs, for :attr:`most_wait` at most: reads that never stop
    coming hold the writes up no longer. Work already started goes on.
    """

    def __init__(self, most_wait: float = 0.05) -> None:
        #: seconds a piece of database work waits for the reads at most
        self.most_wait = most_wait
        #: pieces of database work waiting for reads now
        self.waiting = 0
        self._reads = 0
        self._changed = threading.Condition()

    def read(self, func: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``func(*args, **kwargs)``, a read that goes first."""
        with self._changed:
            self._reads += 1
        try:
            return func(*args, **kwargs)
        finally:
            with self._changed:
                self._reads -= 1
                if not self._reads:
                    self._changed.notify_all()

    def after_reads(self, func: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``func(*args, **kwargs)`` once no read runs (or :attr:`most_wait` passed)."""
        with self._changed:
            self.waiting += 1
            try:
                self._changed.wait_for(lambda: not self._reads, timeout=self.most_wait)
            finally:
                self.waiting -= 1
        return func(*args, **kwargs)


def connect(url: str) -> sessionmaker[Any]:
    """An engine for ``url`` with the schema in place, as a session factory.

    A database that cannot be used stops here with a :class:`DatabaseUnusable` that
    says why: an SQLite file of zero bytes (truncated or lost: starting empty would
    silently forget every job), one that is not a database or is damaged, one this
    process may not read or write, a server that does not answer.
    """
    kwargs: dict[str, Any] = {"future": True}
    shown = make_url(url).render_as_string(hide_password=True)
    if url.startswith("sqlite"):
        kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
        database = make_url(url).database
        if database and database != ":memory:" and not database.startswith("file:"):
            _check_sqlite_file(Path(database))
    engine = create_engine(url, **kwargs)
    if url.startswith("sqlite"):
        event.listen(engine, "connect", _sqlite_pragmas)
    try:
        upgrade_schema(engine)
    except SQLAlchemyError as exc:
        engine.dispose()
        reason = str(getattr(exc, "orig", None) or exc).splitlines()[0]
        raise DatabaseUnusable(
            f"cannot use the job database {shown} ({reason}); if it is an SQLite file, it "
            "may be damaged: restore it from a backup (the jobs' files stay in users' "
            "folders), or move it away to start with no job records"
        ) from None
    return sessionmaker(engine, expire_on_commit=False)


def _check_sqlite_file(path: Path) -> None:
    """Refuse an SQLite file that would start empty or fail later, with a sentence."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DatabaseUnusable(
            f"cannot make the folder of the job database {path} ({exc.strerror}); "
            "create it or point database.url in nbjobs.yaml elsewhere"
        ) from None
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        # A new database: made here, readable by the service alone (SQLite gives its
        # -wal and -shm files the same mode). A file made meanwhile is checked below.
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
            return
        except FileExistsError:
            size = path.stat().st_size
        except OSError as exc:
            raise DatabaseUnusable(
                f"cannot create the job database {path} ({exc.strerror}); "
                "point database.url in nbjobs.yaml at a folder this service may write"
            ) from None
    except OSError as exc:
        raise DatabaseUnusable(f"cannot read the job database {path} ({exc.strerror})") from None
    if size == 0:
        raise DatabaseUnusable(
            f"the job database {path} is empty (0 bytes): it was truncated or never "
            "written, and starting with it would forget every job; restore it from a "
            "backup, or delete the file to start with no job records"
        )
    if not os.access(path, os.R_OK | os.W_OK):
        raise DatabaseUnusable(
            f"this service (uid {os.getuid()}) may not read and write the job database "
            f"{path}; fix its owner or mode"
        )


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # WAL lets readers (the API) go on while the scheduler writes.
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def upgrade_schema(engine: Engine) -> None:
    """Bring the job database to the newest revision (``job_service/migrations``): a new
    database is made by the revisions from the base one, one from before Alembic is
    brought under it by the base revision (which adds what it lacks), and the schema
    version reached is recorded in ``nbjobs_schema`` too, where older releases look.
    Says in the log what changed.

    A database a newer nbjobs shaped (a revision this one does not know) is used as it
    is (an older version ignores what it does not know) and said so in the log.
    """
    if _at_head(engine):
        return  # the usual start: no Alembic to import (a sixth of a second), nothing to do
    from alembic import command
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory
    from alembic.util.exc import CommandError

    config = _alembic_config()
    script = ScriptDirectory.from_config(config)
    with engine.connect() as conn:
        revision = MigrationContext.configure(conn).get_current_revision()
        recorded = (
            conn.execute(text("SELECT max(version) FROM nbjobs_schema")).scalar()
            if inspect(conn).has_table("nbjobs_schema")
            else None
        )
    try:
        known = revision is None or script.get_revision(revision) is not None
    except CommandError:
        known = False
    if not known or (recorded is not None and recorded > SCHEMA_VERSION):
        shaped = (
            f"schema version {recorded}"
            if recorded is not None and recorded > SCHEMA_VERSION
            else f"revision {revision}, which this one does not have"
        )
        log.warning(
            "nbjobs: the job database was shaped by a newer nbjobs (%s; this one knows %s): "
            "it is used as it is, but what the newer version recorded may not make sense "
            "here; to go back for good, restore the backup taken before the upgrade",
            shaped,
            SCHEMA_VERSION,
        )
        return
    head = script.get_current_head()
    before = _tables_and_columns(engine)  # what the upgrade then says it added
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "head")
        conn.execute(text("DELETE FROM nbjobs_schema"))
        conn.execute(text("INSERT INTO nbjobs_schema (version) VALUES (:v)"), {"v": SCHEMA_VERSION})
    if not before:
        return  # a new database: nothing to tell
    # alembic_version is Alembic's, not a table of ours
    after = {(t, c) for t, c in _tables_and_columns(engine) if t != "alembic_version"}
    tables = sorted({t for t, _ in after} - {t for t, _ in before})
    columns = sorted((t, c) for t, c in after - before if c and t not in tables)
    applied = [r.revision for r in script.iterate_revisions(head, revision)]
    log.info(
        "nbjobs: upgraded the job database from schema version %s to %s (revisions %s; "
        "new tables: %s; new columns: %s)",
        recorded if recorded is not None else "unknown",
        SCHEMA_VERSION,
        ", ".join(sorted(applied)) or "none",
        ", ".join(tables) or "none",
        ", ".join(f"{t}.{c}" for t, c in columns) or "none",
    )


def _at_head(engine: Engine) -> bool:
    """Whether the database is at :data:`HEAD_REVISION` and :data:`SCHEMA_VERSION`
    already, read with plain SQL."""
    with engine.connect() as conn:
        tables = inspect(conn)
        if not (tables.has_table("alembic_version") and tables.has_table("nbjobs_schema")):
            return False
        revisions = conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
        recorded = conn.execute(text("SELECT max(version) FROM nbjobs_schema")).scalar()
    return revisions == [HEAD_REVISION] and recorded == SCHEMA_VERSION


#: where the job database's Alembic revisions are (job_service/migrations)
MIGRATIONS = Path(__file__).with_name("migrations")


def _alembic_config() -> Any:
    from alembic.config import Config

    logging.getLogger("alembic").setLevel(logging.WARNING)  # its steps; ours says what ran
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def _tables_and_columns(engine: Engine) -> set[tuple[str, str]]:
    """Each table of the database (with "" for the table itself) and each of its columns."""
    inspector = inspect(engine)
    found = set()
    for table in inspector.get_table_names():
        found.add((table, ""))
        found |= {(table, column["name"]) for column in inspector.get_columns(table)}
    return found


def engine_of(sessions: sessionmaker[Session]) -> Engine:
    """The engine a session factory of :func:`connect` binds (its connection pool)."""
    bind = sessions.kw["bind"]
    assert isinstance(bind, Engine)
    return bind

"""The tables of job definitions: each definition, every version of it, every run.

A definition is a saved submission (notebook, flavor, parameters, name, kernel, where
the result goes) owned by one user, with an optional schedule. Editing it makes a new
version; a run records the version it ran, so its parameters stay what they were.

A run of a tick is one row per (definition, tick): the database's unique constraint
is what makes a second start of the same tick impossible, even from a second service
process. The job a run starts records the run (``JobRecord.definition_run``) in the
same transaction that queues it, so a run whose job was queued before a crash is never
started twice either.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from ..db import Base, UTCDateTime

#: what a definition keeps of a submission (``SubmitRequest``'s fields)
SETTINGS = (
    "path",
    "flavor",
    "parameters",
    "priority",
    "name",
    "kernel",
    "outputs",
    "html",
    "time_limit",
    "command",
)


class DefinitionRecord(Base):
    """One definition, as its latest version says."""

    __tablename__ = "nbjobs_definitions"
    # the ticker's one query: the definitions due, soonest first
    __table_args__ = (Index("ix_nbjobs_definitions_due", "next_run_at", "paused"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    user: Mapped[str] = mapped_column(String(255), index=True)
    #: the owner's groups as last seen (flavor access and quotas at run time use them)
    groups: Mapped[list[str]] = mapped_column(JSON, default=list)
    name: Mapped[str] = mapped_column(String(255))
    version: Mapped[int] = mapped_column(Integer, default=1)
    #: the submission (see :data:`SETTINGS`)
    settings: Mapped[dict[str, Any]] = mapped_column(JSON)
    #: five cron fields; None: it runs when asked only
    cron: Mapped[str | None] = mapped_column(String(255), nullable=True)
    timezone: Mapped[str] = mapped_column(String(64), default="UTC")
    start_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    end_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    #: ticks missed while the service was away: ``once`` (one run when it is back) or
    #: ``skip`` (none; the history says so)
    catch_up: Mapped[str] = mapped_column(String(8), default="once")
    paused: Mapped[int] = mapped_column(Integer, default=0)
    #: the next tick to run (UTC); None: no schedule, paused past its end, or ended
    next_run_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    #: deleted definitions keep their row (their runs and outputs stay, and say so)
    deleted_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class DefinitionVersionRecord(Base):
    """What a definition said from one edit to the next."""

    __tablename__ = "nbjobs_definition_versions"

    definition_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("nbjobs_definitions.id"), primary_key=True
    )
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    settings: Mapped[dict[str, Any]] = mapped_column(JSON)
    cron: Mapped[str | None] = mapped_column(String(255), nullable=True)
    timezone: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    #: who saved it (the owner, or an admin)
    created_by: Mapped[str] = mapped_column(String(255))


class DefinitionRunRecord(Base):
    """One run of a definition: a tick of its schedule, or a "run now"."""

    __tablename__ = "nbjobs_definition_runs"
    __table_args__ = (
        # one run per tick, whatever restarts or second processes happen
        UniqueConstraint("definition_id", "scheduled_for", name="uq_nbjobs_definition_tick"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    definition_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("nbjobs_definitions.id"), index=True
    )
    version: Mapped[int] = mapped_column(Integer)
    #: the tick it is for (UTC); a "run now" is for the moment it was asked
    scheduled_for: Mapped[datetime] = mapped_column(UTCDateTime)
    #: ``tick``, ``catch_up`` (late: the service was away at its time) or ``manual``
    kind: Mapped[str] = mapped_column(String(16))
    #: ``starting`` (recorded, its job not queued yet), ``submitted`` (its job is
    #: ``job_id``), ``refused`` (the service said no: ``reason``), ``skipped``
    state: Mapped[str] = mapped_column(String(16))
    job_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: earlier ticks missed while the service was away, folded into this run
    missed: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    #: who asked (a "run now"); None for ticks
    requested_by: Mapped[str | None] = mapped_column(String(255), nullable=True)
    #: a refusal went to the outbox of notifications (1)
    notified: Mapped[int | None] = mapped_column(Integer, nullable=True)

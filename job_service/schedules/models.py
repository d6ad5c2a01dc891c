"""What ``api/definitions`` reads and answers (``api/openapi.yaml`` describes them)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from nbjobs.models import (
    FlavorName,
    JobName,
    JobState,
    KernelName,
    NotebookPath,
    OutputsPlace,
    Parameters,
    ShellCommand,
    SubmitRequest,
    TimeLimit,
)


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ScheduleSpec(_Body):
    """When a definition runs by itself."""

    #: five cron fields on the clock of ``timezone`` ("0 2 * * *": 02:00 every day)
    cron: str = Field(min_length=1, max_length=255)
    #: an IANA time zone (Europe/Paris); left out: ``schedules.default_timezone``
    timezone: str | None = Field(default=None, max_length=64)
    #: no run before this moment, none after that one
    start_at: datetime | None = None
    end_at: datetime | None = None
    #: ticks missed while the service was away: ``once`` (one run when it is back) or
    #: ``skip`` (none; the history says so)
    catch_up: Literal["once", "skip"] = "once"

    @field_validator("start_at", "end_at")
    @classmethod
    def _a_date_the_clock_reaches(cls, value: datetime | None) -> datetime | None:
        # far dates overflow once moved to UTC or a tick is added (9999-12-31 at -14:00)
        if value is None:
            return value
        try:
            moved = value.astimezone(timezone.utc) if value.tzinfo is not None else value
        except OverflowError:
            moved = None
        if moved is None or not YEARS[0] <= moved.year <= YEARS[1]:
            raise ValueError(f"give a date between the years {YEARS[0]} and {YEARS[1]}")
        return value


#: the years a schedule's first and last day may be in
YEARS = (1970, 9000)


class DefinitionRequest(SubmitRequest):
    """``POST api/definitions``: a submission (as ``POST api/jobs`` takes it) saved, with
    or without a schedule; each run submits it as its owner."""

    schedule: ScheduleSpec | None = None
    #: saved paused (its schedule does not run until resumed)
    paused: bool = False


class DefinitionUpdate(_Body):
    """``PATCH api/definitions/{id}``: what changes (a new version); ``schedule: null``
    removes the schedule, leaving it out keeps it."""

    path: NotebookPath | None = None
    flavor: FlavorName | None = None
    parameters: Parameters | None = None
    name: JobName | None = None
    kernel: KernelName | None = None
    outputs: OutputsPlace | None = None
    html: bool | None = None
    time_limit: TimeLimit | None = None
    command: ShellCommand | None = None
    schedule: ScheduleSpec | None = None


class ScheduleInfo(BaseModel):
    cron: str
    timezone: str
    start_at: datetime | None = None
    end_at: datetime | None = None
    catch_up: Literal["once", "skip"]
    #: the schedule in words ("At 02:00 on Monday through Friday (Europe/Paris)")
    description: str


class DefinitionRun(BaseModel):
    """One run of a definition, with what its job became."""

    id: str
    definition_id: str
    version: int
    #: the tick it was for, or when a "run now" was asked
    scheduled_for: datetime
    kind: Literal["tick", "catch_up", "manual"]
    state: Literal["starting", "submitted", "refused", "skipped"]
    #: why it was refused or skipped, in words
    reason: str | None = None
    #: earlier ticks missed while the service was away, folded into this run
    missed: int = 0
    requested_by: str | None = None
    job_id: str | None = None
    #: the job's state, output and how long it ran (None until it has a job, or when
    #: the job was removed from the list)
    job_state: JobState | None = None
    output_path: str | None = None
    duration_seconds: float | None = None
    #: the parameters its version ran with
    parameters: dict[str, Any] = {}
    #: what changed in them since the run before it: name -> [before, after]
    parameters_changed: dict[str, list[Any]] = {}


class Definition(BaseModel):
    """A definition as its latest version says, with its next and latest runs."""

    id: str
    user: str
    name: str
    version: int
    path: str
    flavor: str
    parameters: dict[str, Any] = {}
    kernel: str | None = None
    outputs: OutputsPlace | None = None
    html: bool | None = None
    time_limit: float | None = None
    schedule: ScheduleInfo | None = None
    paused: bool
    #: when its schedule runs it next (None: no schedule, paused or ended)
    next_run_at: datetime | None = None
    created_at: datetime
    updated_at: datetime
    last_run: DefinitionRun | None = None


class DefinitionList(BaseModel):
    definitions: list[Definition]


class RunList(BaseModel):
    runs: list[DefinitionRun]
    total: int

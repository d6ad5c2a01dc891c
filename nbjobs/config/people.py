"""Quotas, classes, teachers, admins and users: who may run what, how much."""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

from pydantic import (
    Field,
    field_validator,
)

from nbjobs.units import PERIOD_SPANS, PERIOD_WORDS  # noqa: F401  (the words, with the figures)

from .values import Duration, _check_queue, _Model

#: how long each budget period is (a rolling window ending now)
PERIODS = {"day": timedelta(days=1), "week": timedelta(weeks=1), "month": timedelta(days=30)}


class Quota(_Model):
    """Limits for a user (or each member of a group). None means no limit."""

    #: GPUs a user's running jobs may hold at once; fractions count as what they are
    #: (four 0.25 jobs hold 1)
    max_running_gpus: float | None = Field(default=None, ge=0)
    #: jobs a user may have waiting at once (queued or pending approval); a submit beyond it is
    #: refused
    max_queued_jobs: int | None = Field(default=None, ge=0)
    #: GPU-hours a user's jobs may hold in ``period`` (GPUs, fractions as they are, times how long
    #: they ran); once used up, GPU jobs are refused and queued ones wait; CPU jobs go on
    gpu_hours: float | None = Field(default=None, ge=0)
    #: what ``gpu_hours`` counts over: the last ``day``, ``week`` or ``month`` (30 days) up to now,
    #: a rolling window rather than the calendar's
    period: Literal["day", "week", "month"] = "week"


class QuotaConfig(_Model):
    #: the quota of a user with no entry in ``users`` and in no group of ``groups``. A limit left
    #: out of it is no limit (not the built-in 2 running GPUs and 20 queued jobs)
    default: Quota = Quota(max_running_gpus=2, max_queued_jobs=20)
    #: quotas by JupyterHub group; a member of several gets each limit at its most generous (the
    #: GPU-hour budget whole, from one group)
    groups: dict[str, Quota] = {}
    #: quotas by user name: a user's entry is their whole quota (their groups, the default and a
    #: class's GPU-hours no longer count)
    users: dict[str, Quota] = {}


class ClassConfig(_Model):
    """A teacher's class: a roster, its flavors and its GPU-hours."""

    #: the class's name (``ml101``); the hub config makes its students and teachers the
    #: JupyterHub group ``nbjobs-class-ml101``, which grants nothing
    name: str
    #: user names of its teachers: they see and cancel its students' jobs, decide their approval
    #: requests, grant them more GPU-hours and may use its flavors
    teachers: list[str] = []
    #: user names of its students: the class's flavors, GPU-hours and queue apply to their jobs
    students: list[str] = []
    #: the flavors its students may use, and no other open flavor (those their groups grant stay);
    #: empty: the flavors they would have anyway
    flavors: list[str] = []
    #: GPU-hours per student per ``period``, in place of their quota's (a ``quotas.users`` entry
    #: still wins; a teacher may grant a student more); None: their quota's
    gpu_hours: float | None = Field(default=None, ge=0)
    #: what ``gpu_hours`` counts over: the last ``day``, ``week`` or ``month`` (30 days) up to now
    period: Literal["day", "week", "month"] = "week"
    #: the queue its students' jobs go to (a Kueue LocalQueue, a KAI or Volcano queue),
    #: instead of their flavor's
    queue: str | None = None

    @field_validator("queue")
    @classmethod
    def _queue_name(cls, value: str | None) -> str | None:
        return _check_queue(value)


class TeachersConfig(_Model):
    """Who may provision classes (``nbjobs class create``) without an admin."""

    #: user names who may provision classes (the hub gives them ``custom:nbjobs:teach``)
    users: list[str] = []
    #: JupyterHub groups whose members may provision classes
    groups: list[str] = []
    #: the most GPU-hours per student per period a teacher may give a class (None: no cap)
    max_gpu_hours: float | None = Field(default=None, ge=0)
    #: flavors teachers may give their classes; empty means every flavor
    flavors: list[str] = []


class AdminConfig(_Model):
    """Who administers nbjobs (besides JupyterHub admins)."""

    #: user names who administer nbjobs: see and manage everyone's jobs (``custom:nbjobs:admin``)
    users: list[str] = []
    #: JupyterHub groups whose members administer nbjobs
    groups: list[str] = []


class UsersConfig(_Model):
    """What becomes of a hub user's nbjobs things (jobs, job definitions, notification
    settings, folder, OS account) when the hub deletes them, or when a user of the same
    name is made again: the new person never inherits them."""

    #: ``archive``: kept for admins under an archive name (``ada/deleted-20261129T0301Z``,
    #: which no hub user can have), the folder moved to ``.nbjobs-deleted`` under the
    #: storage root; ``remove``: the jobs, definitions, settings and folder are deleted
    #: (GPU time used stays in usage reports). Either way running jobs are cancelled and
    #: the OS account nbjobs made for them is removed
    on_delete: Literal["archive", "remove"] = "archive"
    #: how often the job service compares the users it knows with the hub's
    check_every: Duration = Field(default=60.0, ge=5, le=3600)

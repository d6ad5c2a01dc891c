"""What one request, one job's output and its telemetry may take, and credits."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    Field,
    field_validator,
)

from .values import _DURATION, Duration, Size, _Model

MIN_OUTPUT_LIMIT = 1024


class OutputsConfig(_Model):
    """Where executed notebooks are written, and in what forms."""

    #: ``beside``: next to the notebook (``train.2026-11-23T0930.1a2b3c4d.ipynb``);
    #: ``folder``: in a folder next to it (``folder``, made when first needed). Users may
    #: pick the other one per job in the Submit dialog or with ``nbjobs submit --outputs``
    location: Literal["beside", "folder"] = "beside"
    #: the folder's name when ``location`` is ``folder``: one name, made in the
    #: notebook's own folder
    folder: str = "nbjobs-outputs"
    #: also write an HTML copy of each executed notebook (nbconvert, where jobs run)
    #: unless the user says otherwise; users may ask for one per job either way
    html: bool = False

    @field_validator("folder")
    @classmethod
    def _one_name(cls, value: str) -> str:
        if not value or "/" in value or "\\" in value or value in {".", ".."}:
            raise ValueError(
                "outputs.folder is one folder name made next to each notebook "
                "(e.g. nbjobs-outputs), without '/'"
            )
        if value.startswith("."):
            raise ValueError(
                "outputs.folder may not start with '.': JupyterLab hides such folders, and "
                "users could not find their outputs"
            )
        return value


class LimitsConfig(_Model):
    """How much one request may send, and how much output a job keeps: what keeps one
    caller, or one notebook, from sinking the service."""

    #: the largest request body the job service reads (413 beyond it)
    request_body: Size = 1024**2
    #: the largest notebook a job may run (413 at submit beyond it)
    notebook: Size = 100 * 1024**2
    #: the largest set of parameters, as JSON (400 at submit beyond it)
    parameters: Size = 64 * 1024
    #: output a job's notebook keeps per code cell, in characters (about bytes); past it
    #: the start and end of what the cell printed and a note (the runner's
    #: ``--max-cell-output``)
    cell_output: Size = 2 * 1024**2
    #: output a job's notebook keeps for all cells together (``--max-output``)
    notebook_output: Size = 16 * 1024**2
    #: cell output a job's log gets (``--max-log-output``); the rest is counted
    log_output: Size = 32 * 1024**2
    #: how long past its time limit a job may run before nbjobs stops it from outside
    #: (the runner stops at the limit itself and saves its output; this is the backstop
    #: for one that cannot): the job service stops a local runner then, and a Kubernetes
    #: Job's ``activeDeadlineSeconds`` is the limit plus this
    time_limit_grace: Duration = 120.0
    #: the most cells a notebook may have (400 at submit beyond them); 300 000 tiny
    #: cells, as teaching notebooks sometimes have, are within the default
    cells: int = Field(default=500_000, ge=1)
    #: memory the check of one submitted notebook may take (it runs in a process of
    #: its own for notebooks over a few MiB; 413 at submit when it needs more)
    check_memory: Size = 2 * 1024**3
    #: how many big notebooks are checked at once, all users together (each user's
    #: submits are checked one at a time); others wait their turn
    checks_at_once: int = Field(default=2, ge=1, le=64)
    #: how long a submit waits for its notebook's check to begin (the user's earlier
    #: submits, the places for big notebooks) before it is answered 503, try again later,
    #: with Retry-After: a busy service says so rather than holding a request for minutes
    #: (null: wait as long as it takes)
    check_wait: Duration = 30.0

    @field_validator("cell_output", "notebook_output", "log_output")
    @classmethod
    def _at_least_the_runners_least(cls, value: int) -> int:
        if value < MIN_OUTPUT_LIMIT:
            raise ValueError(
                f"{value} bytes is too little output to keep; give at least 1KiB "
                "(e.g. 512KiB, 2MiB)"
            )
        return value

    @field_validator("check_memory")
    @classmethod
    def _enough_to_check(cls, value: int) -> int:
        if value < 256 * 1024**2:
            raise ValueError(
                f"{value} bytes is too little to check a notebook in (Python and nbformat "
                "alone take about 100MiB); give at least 256MiB (e.g. 1GiB, 2GiB)"
            )
        return value

    def runner_args(self) -> list[str]:
        """These limits as the runner's options (``--max-cell-output`` ...), in characters."""
        return [
            *("--max-cell-output", str(self.cell_output)),
            *("--max-output", str(self.notebook_output)),
            *("--max-log-output", str(self.log_output)),
        ]


#: the shortest telemetry interval, 0 (off) aside (the runner refuses less)
MIN_TELEMETRY_INTERVAL = 1.0


def parse_telemetry_interval(value: Any) -> float:
    """Seconds between telemetry samples from ``10s``, ``2m``, ``30`` (seconds), or ``0``
    (off); between 0 and 1 second is refused with a sentence saying why."""
    if isinstance(value, bool) or value is None:
        raise ValueError("give the seconds between samples (like 10s or 2m), or 0 for off")
    if isinstance(value, int | float) or re.fullmatch(r"\s*\d+(\.\d+)?\s*", str(value)):
        seconds = float(value)
    else:
        match = _DURATION.match(str(value))
        if not match or not any(match.groups()):
            raise ValueError(f"{value!r} is not a duration; write seconds or e.g. '10s', '2m'")
        d, h, m, s = (float(g) if g else 0.0 for g in match.groups())
        seconds = d * 86400 + h * 3600 + m * 60 + s
    if not seconds >= 0 or seconds == float("inf"):  # negative, NaN, infinite
        raise ValueError(f"{value!r} is not an interval; give e.g. 10s, or 0 for off")
    if 0 < seconds < MIN_TELEMETRY_INTERVAL:
        raise ValueError(
            f"{value!r} is too short an interval: sampling more than once a second costs "
            "jobs time and says little more; give at least 1s, or 0 to turn telemetry off"
        )
    return seconds


TelemetryInterval = Annotated[
    float, BeforeValidator(parse_telemetry_interval, json_schema_input_type=float | str)
]


class TelemetryConfig(_Model):
    """What each job's runner samples while its notebook runs: the GPUs it was given
    (utilisation, memory, temperature, power) and its processes' CPU and memory, into
    its status file, and a summary into the output notebook."""

    #: seconds between samples (``10s``, ``2m``, a number of seconds); 0 turns sampling
    #: off; at least 1s otherwise. The runner's ``--telemetry-interval``.
    interval: TelemetryInterval = 10.0
    #: how long a GPU job's samples must cover before the service hints that it used its
    #: GPUs little ("GPU busy 6 % on average: a CPU or a smaller GPU flavor would do")
    hint_after: Duration = 300.0

    def runner_args(self) -> list[str]:
        """The interval as the runner's option."""
        return ["--telemetry-interval", f"{self.interval:g}"]


class CreditsConfig(_Model):
    """Credits: jobs on a flavor with a ``cost_per_gpu_hour`` are paid from an account
    (a user's, a class's, a group's). A submission whose worst case (its time limit x
    its GPUs x the price) the account cannot cover is refused; at its end the job is
    charged what it cost. Every grant and charge is a dated row nobody can delete."""

    #: on: priced flavors need credits; off (the default): costs are only reported
    enabled: bool = False
    #: standing credits of named users' own accounts (``{ada: 50}``), before grants and
    #: charges
    users: dict[str, float] = {}
    #: standing credits of classes' accounts (``{ml101: 500}``): they pay for their
    #: students' jobs when a student has no account of their own
    classes: dict[str, float] = {}
    #: standing credits of groups' accounts (``{physics: 1000}``): they pay for their
    #: members' jobs when a member has neither an account nor a class's
    groups: dict[str, float] = {}
    #: the standing credits of every user's own account not named in ``users``; 0 (the
    #: default): a user has an account of their own only once named or granted credits
    each_user: float = Field(default=0.0, ge=0)

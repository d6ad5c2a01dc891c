"""``nbjobs.yaml``: the one file admins and teachers edit, its schema and its loader.

Shared by the job service, the spawner and the hub config (DESIGN.md: one
schema). A file that does not validate is refused as a whole, with the line
and a sentence saying what is wrong; nothing is half-applied.

A minimal file (everything else has a default)::

    flavors:
      - name: gpu
        gpus: 1
"""

from __future__ import annotations

import ipaddress
import os
import re
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from .class_groups import class_group_named
from .engines import (
    SCHEDULERS,
    Sharing,
    check_key,
    check_label_value,
    scheduler_name,
    sharing_of,
)

_DURATION = re.compile(
    r"^\s*(?:(\d+(?:\.\d+)?)\s*d)?\s*(?:(\d+(?:\.\d+)?)\s*h)?\s*"
    r"(?:(\d+(?:\.\d+)?)\s*m)?\s*(?:(\d+(?:\.\d+)?)\s*s)?\s*$"
)
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SCHEDULER = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
#: a queue's name: a Kueue LocalQueue (a DNS name), a KAI or Volcano queue
_QUEUE = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$")


def _check_queue(value: str | None) -> str | None:
    if value is not None and not _QUEUE.match(value):
        raise ValueError(
            f"queue {value!r} must be a queue's name: lowercase letters, digits, '-' and "
            "'.', at most 63, like physics-101"
        )
    return value


class ConfigError(ValueError):
    """``nbjobs.yaml`` cannot be used; ``str()`` is the file, line and reason."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None):
        self.path, self.line, self.reason = path, line, message
        where = path or "nbjobs.yaml"
        if line is not None:
            where += f", line {line}"
        super().__init__(f"{where}: {message}")


def parse_duration(value: Any) -> float | None:
    """Seconds from ``90``, ``"90s"``, ``"30m"``, ``"2h"``, ``"1h30m"`` or ``"1d"``."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError("a duration is a number of seconds or text like '2h' or '30m'")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        match = _DURATION.match(str(value))
        if not match or not any(match.groups()):
            raise ValueError(f"{value!r} is not a duration; write seconds or e.g. '90m', '2h'")
        d, h, m, s = (float(g) if g else 0.0 for g in match.groups())
        seconds = d * 86400 + h * 3600 + m * 60 + s
    if seconds <= 0:
        raise ValueError("a duration must be more than zero")
    return seconds


# What the file may hold (the JSON Schema says so) and what the loader makes of it.
Duration = Annotated[
    float | None, BeforeValidator(parse_duration, json_schema_input_type=float | str | None)
]


def _quantity(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value)
    if not _QUANTITY.match(text):
        raise ValueError(f"{value!r} is not a Kubernetes quantity (like 4, 500m, 16Gi)")
    return text


#: Kubernetes quantity suffixes, as multipliers
_SUFFIXES = {
    **{s: 1000**i for i, s in enumerate(["", "k", "M", "G", "T", "P", "E"])},
    **{s: 1024**i for i, s in enumerate(["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"], start=1)},
    "m": 0.001,
}


def quantity_bytes(value: str | None) -> int | None:
    """Bytes from a Kubernetes memory quantity (``2Gi``, ``512M``, ``1073741824``)."""
    if value is None:
        return None
    number = value.rstrip("kKMGTPEim")
    suffix = value[len(number) :]
    return int(float(number) * _SUFFIXES[suffix])


def quantity_cpus(value: str | None) -> float | None:
    """Cores from a Kubernetes CPU quantity (``2``, ``500m``)."""
    if value is None:
        return None
    return float(value[:-1]) / 1000 if value.endswith("m") else float(value)


Quantity = Annotated[
    str | None, BeforeValidator(_quantity, json_schema_input_type=int | float | str | None)
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


_BYTES = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B?|B)?\s*$", re.IGNORECASE)
_BYTE_UNITS = {"": 1, "b": 1, "k": 1000, "m": 1000**2, "g": 1000**3, "t": 1000**4}


def parse_size(value: Any) -> int:
    """Bytes from ``1048576``, ``"64KiB"``, ``"16MiB"``, ``"50MB"`` or ``"1GiB"``.

    ``KiB``/``MiB``/``GiB`` count in 1024s, ``KB``/``MB``/``GB`` in 1000s.
    """
    if isinstance(value, bool):
        raise ValueError("a size is a number of bytes or text like '16MiB'")
    if isinstance(value, int | float):
        size = float(value)
    else:
        match = _BYTES.match(str(value))
        if not match:
            raise ValueError(f"{value!r} is not a size; write bytes or e.g. '64KiB', '16MiB'")
        unit = (match.group(2) or "").lower().removesuffix("b")
        binary = unit.endswith("i")
        factor = 1024 ** ("kmgt".index(unit[0]) + 1) if binary else _BYTE_UNITS[unit]
        size = float(match.group(1)) * factor
    if size < 1:
        raise ValueError("a size must be at least 1 byte")
    return int(size)


Size = Annotated[int, BeforeValidator(parse_size, json_schema_input_type=int | str)]

#: the fewest tasks a job or a notebook server may be held to: a runner and its kernel
#: alone hold about 20 processes and threads, and a library may start one thread per core
MIN_TASKS = 64


def _task_count(value: int | None) -> int | None:
    if value is not None and value < MIN_TASKS:
        raise ValueError(
            f"tasks: {value} is too few: a job's runner and kernel alone hold about 20 "
            f"processes and threads, and libraries start one thread per core; give at "
            f"least {MIN_TASKS} (the default is 4096)"
        )
    return value


#: how many processes and threads (tasks) may run at once in one job or notebook server
TaskCount = Annotated[int | None, AfterValidator(_task_count)]


class StorageConfig(_Model):
    """Where users' files live: one folder per user under ``root``."""

    #: the shared folder (NFS on a cluster; any folder on one machine)
    root: Path = Path("nbjobs-home")
    #: a user's folder under root; ``{username}`` is the escaped user name
    user_dir: str = "{username}"
    #: where the user's folder appears inside notebook and job pods
    mount_path: str = "/home/jovyan"
    #: the Kubernetes volume holding root (e.g. ``{"nfs": {"server": ..., "path": ...}}``)
    volume: dict[str, Any] | None = None
    #: the user ID notebook pods and job pods run as on Kubernetes (``runAsUser``); it must be
    #: able to write users' folders. Job pods refuse 0 (root). None: the image's user. Unused on
    #: one machine
    uid: int | None = 1000
    #: the group ID of those pods (``runAsGroup`` and ``fsGroup``); None: the image's group. Unused
    #: on one machine
    gid: int | None = 100
    #: how long an ended job keeps its input (the copy of the notebook or script it ran) in
    #: the user's ``.nbjobs``; a job that never started loses it at once. Its log, status
    #: and output stay until the job is deleted. A re-run reads the notebook anew
    retention: Duration = 7 * 86400.0
    #: the most a user's ``.nbjobs`` (job inputs, logs, telemetry) may hold; a submit past
    #: it is refused (507) until old jobs are deleted. None: no limit
    max_job_files: Size | None = 5 * 1024**3

    @field_validator("uid")
    @classmethod
    def _not_root(cls, value: int | None) -> int | None:
        if value == 0:
            raise ValueError(
                "0 is root: notebook servers and jobs would run as root; give the uid that "
                "owns users' folders on the shared storage (1000, jovyan's, by default)"
            )
        return value

    @field_validator("user_dir")
    @classmethod
    def _has_username(cls, value: str) -> str:
        if "{username}" not in value:
            raise ValueError("user_dir must contain {username}, e.g. 'home/{username}'")
        if value.startswith("/") or ".." in Path(value).parts:
            raise ValueError("user_dir is relative to root and may not contain '..'")
        return value


class DatabaseConfig(_Model):
    """Job records: any SQLAlchemy URL; SQLite by default, PostgreSQL for production."""

    #: the job records' database as an SQLAlchemy URL: SQLite (``sqlite:///nbjobs.sqlite``, a
    #: relative path taken from nbjobs.yaml's folder, the file made when missing) or PostgreSQL
    #: (``postgresql+psycopg2://nbjobs:...@db/nbjobs``, with the ``nbjobs[postgresql]`` extra)
    url: str = "sqlite:///nbjobs.sqlite"


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: the job service's own secrets (the hub's tokens for it, its static tokens, its database):
#: no job ever gets them, whatever nbjobs.yaml says
SERVICE_SECRET_NAMES = frozenset(
    {
        "JPY_API_TOKEN",
        "CONFIGPROXY_AUTH_TOKEN",
        "NBJOBS_SERVICE_TOKENS",
        "NBJOBS_SERVICE_API_TOKEN",
    }
)
SERVICE_SECRET_PREFIXES = ("JUPYTERHUB_", "JPY_")
#: what nbjobs itself sets for each job; nbjobs.yaml cannot change it for every job
PER_JOB_NAMES = frozenset({"NBJOBS_JOB_ID", "CUDA_VISIBLE_DEVICES"})


def is_service_secret(name: str) -> bool:
    """Whether an environment variable is one of the job service's own secrets.

    The hub's tokens for the service (``JUPYTERHUB_*``, ``JPY_*``), the proxy's
    token, the service's static tokens and anything naming a database URL.
    """
    upper = name.upper()
    return (
        upper in SERVICE_SECRET_NAMES
        or upper.startswith(SERVICE_SECRET_PREFIXES)
        or upper.endswith("DATABASE_URL")
    )


def _job_env_name(name: str) -> str:
    if not _ENV_NAME.match(name):
        raise ValueError(
            f"{name!r} is not an environment variable name "
            "(letters, digits and '_', not starting with a digit)"
        )
    if is_service_secret(name):
        raise ValueError(
            f"{name} belongs to the job service (its hub token and hub settings, its "
            "tokens, its database) and never reaches a job; remove it, and give jobs a "
            "credential of their own under another name if they need one"
        )
    if name in PER_JOB_NAMES:
        raise ValueError(f"nbjobs sets {name} for each job itself; remove it")
    return name


def _job_env(value: dict[str, str]) -> dict[str, str]:
    for name in value:
        _job_env_name(name)
    return value


#: variables nbjobs.yaml gives jobs (``backend.local.env``, a flavor's ``env``): none of
#: the service's secrets, nothing nbjobs sets per job (a CUDA_VISIBLE_DEVICES there would
#: override the GPUs a job was given)
JobEnv = Annotated[dict[str, str], AfterValidator(_job_env)]


_ACCOUNT_PREFIX = re.compile(r"^([a-z_][a-z0-9_-]*)?$")
_INSTANCE = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")


class AccountsConfig(_Model):
    """Each hub user's own OS account on one machine: their notebook server, terminals and
    jobs run under it, their folder is its home (``0700``)."""

    #: ``none``: no accounts (servers run as the hub's account, jobs as the service's: one
    #: trusted person); ``create``: nbjobs makes ``{prefix}{name}`` on first use (the hub and
    #: the service run as root); ``existing``: the accounts exist already (PAM, LDAP,
    #: ``adduser``) and are looked up by ``{prefix}{name}``
    mode: Literal["none", "create", "existing"] = "none"
    #: what every account name starts with (``jupyter-ada``); ``""`` with PAM, whose accounts
    #: are named like the hub users
    prefix: str = "jupyter-"
    #: accounts below this uid (root, daemons) are never used for a hub user
    min_uid: int = Field(default=1000, ge=1)
    #: the login shell of the accounts nbjobs creates (their terminals use bash regardless)
    shell: str = "/bin/bash"
    #: more groups the accounts nbjobs creates join (they must exist)
    groups: list[str] = []

    @field_validator("prefix")
    @classmethod
    def _account_prefix(cls, value: str) -> str:
        if not _ACCOUNT_PREFIX.match(value) or len(value) > 20:
            raise ValueError(
                f"{value!r} cannot start an OS account name: use lowercase letters, digits, "
                "'-' and '_' (a letter first), at most 20, like 'jupyter-'"
            )
        return value


class LocalBackendConfig(_Model):
    """Jobs as processes on this machine."""

    #: GPU indices to hand out, or "auto" (NVML, when present; else none)
    gpus: list[int] | Literal["auto"] = "auto"
    #: GPUs that do not exist, to try nbjobs on a machine without one (``nbjobs demo``
    #: there): GPU flavors, queueing and quotas work, jobs see CUDA_VISIBLE_DEVICES and
    #: NBJOBS_SIMULATED_GPUS=1, and the dialog and every output say they were simulated;
    #: nothing computes on a GPU. 0: none (use ``gpus``)
    simulated_gpus: int = Field(default=0, ge=0, le=64)
    #: how many shared-flavor jobs may share one GPU
    slots_per_gpu: int = Field(default=2, ge=1)
    #: jobs with no GPU that may run at once
    cpu_slots: int = Field(default=2, ge=0)
    #: hub users' own OS accounts: who notebook servers and jobs run as
    accounts: AccountsConfig = AccountsConfig()
    #: whose OS account runs the jobs: ``service`` (the job service's own account) or
    #: ``user`` (the submitting user's: from ``accounts``, else the account named like the
    #: hub user; the job service must then run as root). None: ``user`` when ``accounts``
    #: is on, else ``service``
    run_as: Literal["service", "user"] | None = None
    #: kernel control groups for every notebook server and job: GPU devices (exactly the
    #: ones given), memory, CPU and tasks. ``auto``: what this machine offers, saying once at
    #: start what it cannot enforce; ``required``: refuse to start without all four; ``off``
    cgroups: Literal["auto", "required", "off"] = "auto"
    #: the most processes and threads (tasks; each thread counts) one job or notebook
    #: server may hold at once, where a flavor's or profile's ``tasks`` does not say;
    #: past it new ones fail, and a job ends "too many processes (limit N)". One fork
    #: bomb then takes no more than this of the machine's process slots. PyTorch's
    #: DataLoader workers and math libraries' threads (one per core) count: keep a few
    #: thousand. None: no limit
    tasks: TaskCount = 4096
    #: this nbjobs's name among others on the same machine (a second class's install, the
    #: demo): the parent of its control groups, and the mark on the OS accounts it makes,
    #: so that one never takes over, stops or removes another's. ``nbjobs install`` picks
    #: it (``nbjobs`` for the first install, ``nbjobs-<id>`` for one in other folders)
    instance: str = "nbjobs"
    #: variables every local job gets, on top of the few nbjobs passes (PATH, LANG, ...)
    env: JobEnv = {}
    #: variables copied by name from the job service's environment into every local job
    #: (e.g. PYTHONPATH, LD_LIBRARY_PATH, HTTPS_PROXY); the service's secrets are refused
    pass_env: list[str] = []

    @property
    def jobs_run_as(self) -> Literal["service", "user"]:
        """``run_as``, or what it means when not given."""
        if self.run_as is not None:
            return self.run_as
        return "user" if self.accounts.mode != "none" else "service"

    @model_validator(mode="after")
    def _user_accounts_for_user_jobs(self) -> LocalBackendConfig:
        if self.accounts.mode != "none" and self.run_as == "service":
            raise ValueError(
                "with accounts (accounts.mode: create or existing) jobs run as their owner's "
                "account: remove run_as: service (it would run every job as the job service)"
            )
        return self

    @model_validator(mode="after")
    def _real_or_simulated(self) -> LocalBackendConfig:
        if self.simulated_gpus and self.gpus != "auto":
            raise ValueError(
                "give either gpus (real ones) or simulated_gpus (for trying nbjobs without a "
                "GPU), not both"
            )
        return self

    @field_validator("pass_env")
    @classmethod
    def _pass_env_names(cls, value: list[str]) -> list[str]:
        for name in value:
            _job_env_name(name)
        return value

    @field_validator("instance")
    @classmethod
    def _instance_name(cls, value: str) -> str:
        if not _INSTANCE.match(value):
            raise ValueError(
                f"{value!r} cannot name a control group: use lowercase letters, digits, '-' "
                "and '_' (a letter first), at most 40, like 'nbjobs-physics'"
            )
        return value


#: the least output the runner keeps (its ``--max-*-output`` options refuse less)
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


def _network(value: str, where: str) -> str:
    """An IPv4 or IPv6 network as Kubernetes and nbjobs read it (``10.20.0.0/16``; a
    single address gets /32 or /128); a sentence for anything else."""
    try:
        network = ipaddress.ip_network(value.strip(), strict=True)
    except ValueError as exc:
        raise ValueError(
            f"{where}: {value!r} is not a network like 10.20.0.0/16 or 2001:db8::/32 ({exc})"
        ) from None
    return str(network)


class EgressRule(_Model):
    """Addresses the pods may open connections to."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    #: a network (``10.20.0.0/16``, ``0.0.0.0/0`` for every IPv4 address)
    cidr: str
    #: networks inside ``cidr`` left out (``169.254.169.254/32``, a cloud's metadata)
    except_: list[str] = Field(default=[], alias="except")
    #: the ports they may reach there; none: every port
    ports: list[int] = []
    #: the protocol of ``ports``
    protocol: Literal["TCP", "UDP", "SCTP"] = "TCP"

    @model_validator(mode="after")
    def _checked(self) -> EgressRule:
        cidr = ipaddress.ip_network(_network(self.cidr, "cidr"))
        for inner in self.except_:
            left_out = ipaddress.ip_network(_network(inner, "except"))
            if left_out.version != cidr.version or not left_out.subnet_of(cidr):  # type: ignore[arg-type]
                raise ValueError(f"except: {inner} is not inside {self.cidr}")
        for port in self.ports:
            if not 1 <= port <= 65535:
                raise ValueError(f"ports: {port} is not a port (1 to 65535)")
        return self


class PodNetwork(_Model):
    """Where the pods of one kind may connect to."""

    #: None (the default): anywhere, as the cluster allows. A list: only these
    #: destinations (an empty list: none), plus DNS when ``dns`` is true and what nbjobs
    #: itself needs (a notebook server reaches the hub and its proxy)
    egress: list[EgressRule] | None = None
    #: with ``egress`` rules: may the pods ask the cluster's DNS (port 53, UDP and TCP)?
    dns: bool = True


class SignInNetwork(_Model):
    """Where people may sign in to the hub from."""

    #: client networks allowed to sign in (``10.0.0.0/8``, ``2001:db8::/32``); empty (the
    #: default): from anywhere
    allow: list[str] = []
    #: proxies whose ``X-Forwarded-For`` is believed: the hub's own proxy on this machine
    #: (the default) and, on a cluster, the proxy pods' and load balancers' networks
    trusted_proxies: list[str] = ["127.0.0.0/8", "::1/128"]

    @field_validator("allow", "trusted_proxies")
    @classmethod
    def _networks(cls, value: list[str], info: Any) -> list[str]:
        return [_network(v, info.field_name) for v in value]


class NetworkConfig(_Model):
    """Network allow-lists: where jobs and notebook servers may connect to (as
    Kubernetes NetworkPolicies, which the cluster's network plugin enforces), and where
    people may sign in from."""

    #: the pods of GPU jobs
    jobs: PodNetwork = PodNetwork()
    #: users' notebook servers
    servers: PodNetwork = PodNetwork()
    #: the hub's sign-in
    sign_in: SignInNetwork = SignInNetwork()


class SchedulesConfig(_Model):
    """Job definitions that run on a schedule (``nbjobs schedule create``)."""

    #: the shortest time a schedule may leave between two runs (a cron expression that
    #: would run more often is refused when it is saved)
    min_interval: Duration = 60.0
    #: how often the service looks for definitions that are due (a run starts at most
    #: this late after its time)
    check_every: Duration = Field(default=15.0, ge=1, le=60)
    #: the time zone of a schedule that names none
    default_timezone: str = "UTC"
    #: the most definitions one user may keep (paused ones count)
    max_per_user: int = Field(default=100, ge=0)


class EmailConfig(_Model):
    """Mail about jobs, through the organisation's SMTP server."""

    #: the SMTP server's host name (``smtp.example.org``); required
    smtp_host: str
    #: the SMTP server's port: 587 with ``starttls``, 465 with ``ssl``, often 25 for a relay
    smtp_port: int = Field(default=587, ge=1, le=65535)
    #: the sender address
    from_: str = Field(alias="from", min_length=3)
    #: ``starttls`` (port 587), ``ssl`` (port 465) or ``none`` (a relay on localhost)
    security: Literal["starttls", "ssl", "none"] = "starttls"
    #: the account to log in to the server with; None: mail is sent without logging in
    username: str | None = None
    #: a file holding the password (a mounted Secret), read at each login; never write the
    #: password itself in nbjobs.yaml
    password_file: Path | None = None
    #: the job service's environment variable holding the password (``SMTP_PASSWORD``); used when
    #: ``password_file`` is not set (the file wins when both are)
    password_env: str | None = None
    #: the domains users may send mail to (``example.org`` also allows its subdomains);
    #: empty: any domain
    allowed_domains: list[str] = []
    #: how long the server may take to connect, or to answer a command, before the attempt fails
    #: (``20``, ``1m``)
    timeout: Duration = 20.0
    #: a PEM file of the certificate authorities that signed the server's certificate, for a
    #: server whose certificate the system does not trust (an internal relay with a private
    #: CA); only these are trusted then. None: the system's. The host name is checked either way
    ca_file: Path | None = None
    #: a user's hub name is their mail address (an OAuth hub whose user names are the
    #: addresses it verified): mail to that one address needs no confirmation. Leave it
    #: off where users choose their own names; then every address is confirmed by a
    #: code mailed to it before anything else is sent there
    names_are_addresses: bool = False

    @field_validator("allowed_domains")
    @classmethod
    def _lower(cls, value: list[str]) -> list[str]:
        return [d.strip().lower().lstrip("@").lstrip(".") for d in value if d.strip()]


class WebhookConfig(_Model):
    """JSON POSTs about jobs to the hosts admins allow (chat tools, automation)."""

    #: ``host`` (on port 443, or 80 over http) or ``host:port`` users may send to; a
    #: webhook to any other host or port is refused when it is set, so the service cannot be
    #: made to call internal addresses
    allowed_hosts: list[str] = []
    #: ``http://`` to an allowed host too (a test or a relay inside the cluster); else
    #: webhooks must be ``https://``
    allow_http: bool = False
    #: how long a webhook may take to connect, and to answer in full, before the attempt fails
    #: (``10``, ``30s``)
    timeout: Duration = 10.0

    @field_validator("allowed_hosts")
    @classmethod
    def _lower(cls, value: list[str]) -> list[str]:
        return [h.strip().lower() for h in value if h.strip()]


class NotifyRateConfig(_Model):
    """How many messages one user is sent, per channel, before the rest wait for one
    summary."""

    #: messages per user and channel within ``period``; past them the rest are held and
    #: sent as one summary once the period has room again
    messages: int = Field(default=10, ge=1, le=10_000)
    #: the window the messages are counted in (``1h``, ``30m``)
    period: Duration = 3600.0


class NotificationsConfig(_Model):
    """Telling users when their jobs end (or wait long), by email and webhook; JupyterLab
    always tells them while it is open."""

    #: mail through an SMTP server; None: no mail is sent, and users cannot ask for it
    email: EmailConfig | None = None
    #: webhooks to the hosts admins allow; None: none are sent, and users cannot set one
    webhook: WebhookConfig | None = None
    #: where links in messages point: the hub's public address (``https://hub.example.org``);
    #: None: messages name the output and the job instead of linking them
    links_base: str | None = None
    #: attempts per message before it is given up (each recorded)
    attempts: int = Field(default=5, ge=1, le=20)
    #: the wait after the first failed attempt; it doubles each time, up to ``max_delay``
    first_delay: Duration = 30.0
    #: the longest wait between two attempts (the doubling of ``first_delay`` stops there)
    max_delay: Duration = 3600.0
    #: at most this many messages per user and channel; the rest are summarised
    rate_limit: NotifyRateConfig = NotifyRateConfig()


class KueueConfig(_Model):
    """Hand every job to Kueue: its LocalQueue orders, admits and fair-shares them."""

    #: the LocalQueue (in the jobs' namespace) every job is submitted to
    queue_name: str
    #: a Kueue WorkloadPriorityClass for nbjobs' jobs (label ``kueue.x-k8s.io/priority-class``)
    priority_class: str | None = None


class KubernetesBackendConfig(_Model):
    """Jobs as Kubernetes ``batch/v1`` Jobs."""

    @model_validator(mode="before")
    @classmethod
    def _moved(cls, data: Any) -> Any:
        if isinstance(data, dict) and "deadline_grace_seconds" in data:
            raise ValueError(
                "deadline_grace_seconds is now limits.time_limit_grace (one grace for every "
                "backend): move it there"
            )
        return data

    #: the namespace of the jobs (the job service's ServiceAccount has a Role there)
    namespace: str = "nbjobs"
    #: with Kueue, every job is created suspended and Kueue admits it; nbjobs does not wait
    #: for free GPUs itself
    kueue: KueueConfig | None = None
    #: how long a finished Job (and its pod's log) stays in the cluster
    ttl_seconds_after_finished: int = Field(default=3600, ge=0)
    #: the job pods' ServiceAccount (its token is never mounted); None: the namespace default
    service_account: str | None = None
    #: the image of flavors that name none; it must have nbjobs installed (``pip install nbjobs``)
    default_image: str | None = None
    #: the Python in the image that runs ``-m nbjobs.job_runner``
    python: str = "python"
    #: seconds a stopped job gets to save its partial output before it is killed
    termination_grace_seconds: int = Field(default=30, ge=0)
    #: nodes no new job may start on (maintenance); running jobs finish. Labelling a node
    #: ``nbjobs.io/drain=true`` does the same without a restart of the service
    drained_nodes: list[str] = []
    #: how a multi-node flavor's job (``flavors[].nodes`` > 1) is made: ``jobset`` (a
    #: JobSet, jobset.x-k8s.io/v1alpha2: the JobSet controller must be installed) or
    #: ``indexed-job`` (a ``batch/v1`` Indexed Job and a headless Service, nothing to
    #: install). Either way Kueue admits all its pods at once, or none
    multi_node: Literal["jobset", "indexed-job"] = "jobset"
    #: ``Always``, ``IfNotPresent`` or ``Never``; None: Kubernetes' default for the tag
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = None


class BackendConfig(_Model):
    #: where jobs run: ``local`` (processes on this machine; notebook servers from nbjobs'
    #: LocalCPUSpawner) or ``kubernetes`` (``batch/v1`` Jobs; notebook pods from KubeSpawner)
    kind: Literal["local", "kubernetes"] = "local"
    #: the settings of ``kind: local``; ignored with ``kubernetes``
    local: LocalBackendConfig = LocalBackendConfig()
    #: the settings of ``kind: kubernetes``; ignored with ``local``
    kubernetes: KubernetesBackendConfig = KubernetesBackendConfig()


class ApprovalPolicy(_Model):
    """Jobs on a flavor wait for a person's yes (a flavor's ``approval``).

    A job of a member of ``groups`` (empty: of anyone but nbjobs admins) waits as
    ``pending_approval`` until an nbjobs admin, or a teacher of a class its owner is in,
    approves it (it is queued) or rejects it with a reason (it is cancelled, the reason
    recorded); unanswered after ``expires_after`` it is cancelled, saying so.
    """

    #: JupyterHub groups whose members' jobs wait for approval; empty: everyone's (admins' jobs
    #: never wait)
    groups: list[str] = []
    #: how long a request waits for an answer, from its submit, before the job is cancelled
    #: (``3d``, ``12h``; at least a minute)
    expires_after: Duration = 3 * 24 * 3600.0

    @field_validator("expires_after")
    @classmethod
    def _at_least_a_minute(cls, value: float | None) -> float:
        if value is None or value < 60:
            raise ValueError("expires_after needs to be a minute or more, like 3d or 12h")
        return value


class IdleGpuPolicy(_Model):
    """What happens to a job that leaves its GPUs idle (a flavor's ``idle_gpu``).

    Idle: the job's GPU utilisation (its runner's telemetry; the mean over its GPUs)
    stays below ``below_percent`` in every sample. After ``after`` of that its owner is
    warned (the job shows the warning); with ``action: cancel`` a job still idle
    ``grace`` later is cancelled, the reason recorded in the job and in its output's
    banner, its partial output kept. Jobs of ``exempt_groups`` are never warned or
    cancelled. Needs telemetry (``telemetry.interval`` not 0).
    """

    #: the GPU utilisation, in percent (the mean over the job's GPUs), below which a telemetry
    #: sample counts as idle
    below_percent: float = Field(default=5.0, gt=0, le=100)
    #: how long every sample must be idle before the owner is warned (``30m``; at least a minute)
    after: Duration = 30 * 60.0
    #: ``warn``: only warn (taken back once the GPUs work again); ``cancel``: also cancel a job
    #: still idle ``grace`` after the warning
    action: Literal["warn", "cancel"] = "warn"
    #: with ``action: cancel``, how long a warned job may stay idle before it is cancelled
    #: (``5m``; at least a minute)
    grace: Duration = 5 * 60.0
    #: JupyterHub groups whose members' jobs are never warned or cancelled (the groups the owner
    #: was in at submit)
    exempt_groups: list[str] = []

    @field_validator("after", "grace")
    @classmethod
    def _a_while(cls, value: float | None) -> float:
        if value is None or value < 60:
            raise ValueError("give at least a minute (60s, 5m), so that a pause is not idling")
        return value


class Flavor(_Model):
    """What a job runs on: GPUs, CPU, memory, image, time limit; and who may use it."""

    #: what users pick (``nbjobs submit -f``) and job records keep: lowercase letters, digits and
    #: '-', at most 40 (``a100-1``); classes and teachers name flavors by it
    name: str
    #: the name people see (``A100 (80 GB)``), in the Submit dialog beside ``name``; None: ``name``
    display_name: str | None = None
    #: a sentence the Submit dialog shows under the flavor (``For training; 80 GB of memory``)
    description: str = ""
    #: whole GPUs each job gets: on one machine of ``backend.local.gpus`` (its
    #: CUDA_VISIBLE_DEVICES), on Kubernetes that many ``gpu_resource``; 0: none, the job sees no
    #: GPU. ``shared`` and ``fraction`` need 1
    gpus: int = Field(default=0, ge=0)
    #: how many nodes one job spans (a multi-node job: torchrun, DeepSpeed), each with
    #: ``gpus``, ``cpu`` and ``memory``; they start together or not at all (on Kubernetes
    #: a JobSet or an Indexed Job, see ``backend.kubernetes.multi_node``; on one machine
    #: that many local ranks). Quotas, GPU-hours and credits count nodes x gpus
    nodes: int = Field(default=1, ge=1, le=64)
    #: the extended resource to ask for (a MIG slice: ``nvidia.com/mig-1g.10gb``)
    gpu_resource: str = "nvidia.com/gpu"
    #: the GPU's name people see with the flavor (``A100``); only a label: it selects no node
    #: (on Kubernetes ``node_selector`` does, e.g. ``nvidia.com/gpu.product``)
    gpu_type: str | None = None
    #: a fractional GPU: the job gets a slot of a GPU shared with other such jobs
    shared: bool = False
    #: CPUs per job, requested and limited alike (``4``, ``500m``); None: not asked for. On one
    #: machine the job's control group gets this CPU quota
    cpu: Quantity = None
    #: memory per job, requested and limited alike (``16Gi``); None: not asked for. On one
    #: machine the job's control group gets this limit (past it: "out of memory")
    memory: Quantity = None
    #: the most processes and threads a job may hold at once, on one machine (past it:
    #: "too many processes"); None: ``backend.local.tasks``. On Kubernetes the kubelet's
    #: ``podPidsLimit`` sets it for every pod
    tasks: TaskCount = None
    #: the job pods' image on Kubernetes, with nbjobs installed; None:
    #: ``backend.kubernetes.default_image`` (with neither, the flavor cannot run). Unused on one
    #: machine
    image: str | None = None
    #: the longest a job may run (``4h``, ``90m``, seconds); users may ask for less, not more. The
    #: runner stops the notebook there and keeps its output; None: no limit
    time_limit: Duration = 4 * 3600.0
    #: node labels a job pod must have on Kubernetes (``{nvidia.com/gpu.product: Tesla-T4}``);
    #: nbjobs counts free capacity on those nodes only
    node_selector: dict[str, str] = {}
    #: the job pods' tolerations on Kubernetes, as a pod spec writes them
    #: (``[{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]``)
    tolerations: list[dict[str, Any]] = []
    #: the job pods' ``affinity`` on Kubernetes, as a pod spec writes it; nbjobs adds its rule
    #: keeping jobs off drained nodes to each required node term
    affinity: dict[str, Any] | None = None
    #: the job pods' Kubernetes PriorityClass (``priorityClassName``; it must exist in the
    #: cluster), for the cluster's scheduler; nbjobs' own queue order does not use it
    priority_class: str | None = None
    #: JupyterHub groups allowed to use it; empty means everyone
    groups: list[str] = []
    #: environment variables every job of this flavor gets (``{HF_HOME: /data/hf}``); on one
    #: machine they go over ``backend.local.env``
    env: JobEnv = {}
    #: how many times a job the cluster stops for reasons of its own (evicted, preempted
    #: by a higher priority, its node lost) goes back to the queue to run again from the
    #: top; 0: it fails with the reason. A notebook's own failure is never re-queued.
    requeue_on_eviction: int = Field(default=0, ge=0, le=10)
    #: what one GPU-hour of this flavor costs (any currency: usage reports multiply the
    #: GPU-hours allocated by it); None: reports show no cost for it
    cost_per_gpu_hour: float | None = Field(default=None, ge=0)
    #: warn about (or cancel) jobs that leave their GPUs idle; None: never
    idle_gpu: IdleGpuPolicy | None = None
    #: jobs wait for an admin's (or their teacher's) approval; None: they queue at once
    approval: ApprovalPolicy | None = None
    #: the pod's scheduler: ``kai`` (KAI Scheduler), ``volcano``, any other
    #: ``schedulerName``; None or ``default``: the cluster's default scheduler
    scheduler: str | None = None
    #: the queue of this flavor's jobs (a Kueue LocalQueue, a KAI or Volcano queue); a
    #: class's own queue (``classes[].queue``) wins for its students' jobs
    queue: str | None = None
    #: the share of one GPU a job gets (0.25: a quarter); quotas, GPU-hours and usage
    #: count it as that much of a GPU. How it is asked for depends on ``gpu_sharing``
    fraction: float | None = Field(default=None, gt=0, lt=1)
    #: how the cluster shares GPUs: ``hami``, ``kai``, ``volcano``, ``time-slicing`` (a
    #: renamed resource like ``nvidia.com/gpu.shared``) or ``mig``; None: worked out from
    #: ``scheduler`` and ``gpu_resource``
    gpu_sharing: Sharing | None = None
    #: more requests (and equal limits) for the job's container, beside the GPU resource:
    #: e.g. HAMi's ``{nvidia.com/gpumem: 10000}`` (MiB)
    resources: dict[str, Quantity] = {}
    #: labels for the Job and its pod (nbjobs' own and the engines' queue and fraction keys are
    #: refused: they come from ``queue`` and ``fraction``)
    labels: dict[str, str] = {}
    #: annotations for the Job and its pod (the same keys are refused as for ``labels``)
    annotations: dict[str, str] = {}
    #: the kernels its image has (names as ``jupyter kernelspec list`` shows them): the
    #: Submit dialog offers them and a notebook on another kernel is refused at submit.
    #: Empty: on one machine the kernels installed there; on a cluster not known (a
    #: missing kernel then fails the job, saying so)
    kernels: list[str] = []

    @field_validator("name")
    @classmethod
    def _dns_name(cls, value: str) -> str:
        if not _NAME.match(value) or len(value) > 40:
            raise ValueError(
                f"flavor name {value!r} must be lowercase letters, digits and '-' "
                "(at most 40), like 'a100-1'"
            )
        return value

    @field_validator("scheduler")
    @classmethod
    def _scheduler_name(cls, value: str | None) -> str | None:
        if value is not None and not _SCHEDULER.match(value):
            raise ValueError(
                f"scheduler {value!r} must be kai, volcano, default or a scheduler's name "
                "(lowercase letters, digits, '-' and '.')"
            )
        return value

    @field_validator("queue")
    @classmethod
    def _queue_name(cls, value: str | None) -> str | None:
        return _check_queue(value)

    @field_validator("labels", "annotations")
    @classmethod
    def _keys(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        what = "label" if info.field_name == "labels" else "annotation"
        for key, text in value.items():
            problem = check_key(key, what) or (check_label_value(text) if what == "label" else None)
            if problem:
                raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _shared_needs_one_gpu(self) -> Flavor:
        if self.nodes > 1 and self.shares_a_gpu:
            raise ValueError(
                f"nodes: {self.nodes} with a share of a GPU (shared or fraction): a job on "
                "several nodes takes whole GPUs; set nodes: 1 or drop the share"
            )
        if self.shared and self.gpus != 1:
            raise ValueError("a shared (fractional) flavor takes a slot of one GPU: set gpus: 1")
        if self.idle_gpu is not None and not self.gpus:
            raise ValueError("idle_gpu is for flavors with GPUs; this one has none")
        for key in self.resources:
            if key in ("cpu", "memory", self.gpu_resource):
                raise ValueError(
                    f"resources: {key} is set by the flavor's "
                    f"{'gpus' if key == self.gpu_resource else key}: setting, not here"
                )
            problem = check_key(key, "resource")
            if problem and "written by nbjobs" not in problem:
                raise ValueError(problem)
        self._check_sharing()
        return self

    def _check_sharing(self) -> None:
        sharing = self.sharing
        if self.fraction is not None and self.gpus != 1:
            raise ValueError(
                f"fraction {self.fraction:g} is a share of one GPU: set gpus: 1 (not {self.gpus})"
            )
        if self.fraction is not None and sharing is None and not self.shared:
            raise ValueError(
                f"fraction {self.fraction:g} needs to say how the cluster shares GPUs: set "
                "gpu_sharing: hami, kai, volcano, time-slicing or mig (or scheduler: kai "
                "or volcano, or a gpu_resource such as nvidia.com/gpu.shared)"
            )
        if self.gpu_sharing is not None and not self.gpus:
            raise ValueError(f"gpu_sharing {self.gpu_sharing} is for flavors with gpus: 1")
        if sharing in ("kai", "hami", "volcano") and self.fraction is None:
            raise ValueError(
                f"gpu_sharing {sharing} hands out part of a GPU: give the part as "
                "fraction (e.g. 0.25)"
            )
        chosen = scheduler_name(self.scheduler)
        for engine in ("kai", "volcano"):
            wanted = SCHEDULERS[engine]
            if sharing == engine and chosen is not None and chosen != wanted:
                raise ValueError(
                    f"gpu_sharing {engine} needs scheduler: {engine} (the pods go to "
                    f"{wanted}), not {self.scheduler}"
                )
        if sharing == "mig" and not self.gpu_resource.startswith("nvidia.com/mig-"):
            raise ValueError(
                "gpu_sharing mig needs gpu_resource set to the MIG profile's resource, "
                "like nvidia.com/mig-1g.10gb"
            )
        if (
            sharing == "time-slicing"
            and self.gpu_resource == "nvidia.com/gpu"
            and (self.fraction is None)
        ):
            raise ValueError(
                "gpu_sharing time-slicing counts a replica of a GPU: give its share as "
                "fraction (1 / the device plugin's replicas, e.g. 0.25)"
            )

    @property
    def sharing(self) -> str | None:
        """How the cluster shares this flavor's GPU (None: whole GPUs)."""
        return sharing_of(self.fraction, self.gpu_sharing, self.scheduler, self.gpu_resource)

    @property
    def shares_a_gpu(self) -> bool:
        """A job of this flavor gets part of a GPU (a local slot, or a cluster's share)."""
        return self.shared or self.fraction is not None

    @property
    def gpu_equivalents(self) -> float:
        """What one job of this flavor counts in quotas, GPU-hours and usage: its
        fraction of a GPU, else its GPUs on all its nodes."""
        return self.fraction if self.fraction is not None else float(self.gpus * self.nodes)

    @property
    def gpu_count(self) -> int:
        """The GPUs one job holds, on all its nodes."""
        return self.gpus * self.nodes

    @property
    def label(self) -> str:
        """The name a person sees."""
        return self.display_name or self.name


def nodes_words(nodes: int) -> str:
    """``1 node``, ``2 nodes``: how a sentence says a job's span."""
    return f"{nodes} node{'' if nodes == 1 else 's'}"


#: settings that would give a notebook server a GPU; profiles are CPU-only, flavors are not
_PROFILE_GPU_KEYS = {
    "gpus",
    "gpu",
    "gpu_resource",
    "gpu_type",
    "shared",
    "extra_resource_limits",
    "extra_resource_guarantees",
    "nvidia.com/gpu",
}
_CPU_ONLY = (
    "notebook servers are CPU-only in nbjobs, so a profile cannot ask for a GPU ({key}); "
    "give GPUs to a flavor instead (flavors: [{{name: gpu, gpus: 1}}]) and submit the "
    "notebook as a job"
)


class ProfileOverride(_Model):
    """The KubeSpawner settings a profile may override (``kubespawner_override``).

    An allow-list: sizes, image, environment and placement. Anything that could
    give the pod a GPU, a device, credentials or extra containers is refused.
    """

    #: the notebook server's image (KubeSpawner's ``image``); the profile's ``image``, long form
    image: str | None = None
    #: ``Always``, ``IfNotPresent`` or ``Never``; None: Kubernetes' default for the tag
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = None
    #: the most CPU the server may use, in cores (``0.5``, ``2``); the profile's ``cpu``, long form
    cpu_limit: float | None = Field(default=None, gt=0)
    #: the CPU the pod requests (reserved for it), in cores; None: not set
    cpu_guarantee: float | None = Field(default=None, gt=0)
    #: the most memory the server may use (``4Gi``, ``512M``); the profile's ``memory``, long form
    mem_limit: Quantity = None
    #: the memory the pod requests (reserved for it), like ``2Gi``; None: not set
    mem_guarantee: Quantity = None
    #: variables the notebook server gets (``NVIDIA_*`` and ``CUDA_*`` names are refused)
    environment: dict[str, str] = {}
    #: the page the server opens at (JupyterHub's ``default_url``, e.g. ``/lab``); None: the
    #: spawner's own
    default_url: str | None = None
    #: node labels the notebook pod must have (``{node-pool: cpu}``)
    node_selector: dict[str, str] = {}
    #: the notebook pod's tolerations, as a pod spec writes them
    tolerations: list[dict[str, Any]] = []

    @model_validator(mode="before")
    @classmethod
    def _allowed(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        for key in data:
            if key in _PROFILE_GPU_KEYS:
                raise ValueError(_CPU_ONLY.format(key=f"kubespawner_override.{key}"))
        unknown = sorted(str(k) for k in data if k not in cls.model_fields)
        if unknown:
            raise ValueError(
                f"kubespawner_override may not set {', '.join(unknown)} in nbjobs (notebook "
                f"pods stay CPU-only and hold no credentials); it may set: "
                f"{', '.join(cls.model_fields)}"
            )
        gpu_env = sorted(
            k for k in data.get("environment") or {} if k.startswith(("NVIDIA_", "CUDA_"))
        )
        if gpu_env:
            raise ValueError(_CPU_ONLY.format(key=f"environment {', '.join(gpu_env)}"))
        return data


class Profile(_Model):
    """A CPU-only notebook server size users pick at spawn.

    Either nbjobs' short form (``name``, ``cpu``, ``memory``, ``image``) or
    KubeSpawner's ``profile_list`` form (``slug``, ``display_name``,
    ``description``, ``default``, ``kubespawner_override: {cpu_limit, mem_limit,
    image, ...}``); ``groups`` limits who is offered it in both.
    """

    #: what users choose (KubeSpawner's ``slug``)
    name: str = ""
    #: ``name`` in KubeSpawner's ``profile_list`` form; give either (or both, alike)
    slug: str | None = None
    #: what the spawn page shows (``Small (1 CPU, 2 GiB)``); None: ``name``
    display_name: str | None = None
    #: a sentence the spawn page shows under it
    description: str = ""
    #: the notebook server's CPU limit (KubeSpawner's ``cpu_limit``): ``1``, ``500m``
    cpu: Quantity = "1"
    #: the notebook server's memory limit (KubeSpawner's ``mem_limit``): ``2Gi``, ``512Mi``
    memory: Quantity = "2Gi"
    #: the notebook server's image; None: KubeSpawner's ``image`` (the hub's setting)
    image: str | None = None
    #: the most processes and threads the server, its kernels and terminals may hold at
    #: once, on one machine; None: ``backend.local.tasks``. On Kubernetes the kubelet's
    #: ``podPidsLimit`` sets it for every pod
    tasks: TaskCount = None
    #: JupyterHub groups it is offered to; empty: everyone. JupyterHub admins are offered all
    groups: list[str] = []
    #: preselected on the spawn page (KubeSpawner's ``default``)
    default: bool = False
    #: KubeSpawner settings for it (only those of :class:`ProfileOverride`); they replace what
    #: ``cpu``, ``memory`` and ``image`` give, and may not repeat a key set there
    kubespawner_override: ProfileOverride | None = None

    @model_validator(mode="before")
    @classmethod
    def _cpu_only(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        for key in data:
            if key in _PROFILE_GPU_KEYS:
                raise ValueError(_CPU_ONLY.format(key=key))
        if "profile_options" in data:
            raise ValueError(
                "profile_options is not supported in nbjobs; list each choice as a profile"
            )
        return data

    @model_validator(mode="after")
    def _one_name_one_size(self) -> Profile:
        if self.slug is not None and self.name and self.name != self.slug:
            raise ValueError(
                f"a profile has one name: give name or slug, not {self.name!r} and {self.slug!r}"
            )
        if not self.name:
            if not self.slug:
                raise ValueError("a profile needs a name (or, in profile_list form, a slug)")
            object.__setattr__(self, "name", self.slug)
        override = self.kubespawner_override
        if override is not None:
            for short, long in (("cpu", "cpu_limit"), ("memory", "mem_limit"), ("image", "image")):
                if short in self.model_fields_set and long in override.model_fields_set:
                    raise ValueError(
                        f"profile {self.name!r} sets both {short} and "
                        f"kubespawner_override.{long}; keep one"
                    )
        return self


#: a quota period as people read it: GPU-hours count over a window that slides with the
#: clock (the last 7 days for ``week``), not a calendar week that starts again on Monday
PERIOD_WORDS = {"day": "the last 24 hours", "week": "the last 7 days", "month": "the last 30 days"}
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


class NbjobsConfig(_Model):
    """The whole of ``nbjobs.yaml``."""

    #: users' folders: where they are, and how pods mount them
    storage: StorageConfig = StorageConfig()
    #: where the job service keeps its job records
    database: DatabaseConfig = DatabaseConfig()
    #: where jobs run: on this machine, or as Kubernetes Jobs
    backend: BackendConfig = BackendConfig()
    #: what jobs run on; a list here replaces the built-in one, a CPU-only flavor ``cpu``
    flavors: list[Flavor] = [Flavor(name="cpu", display_name="CPU only", gpus=0)]
    #: notebook server sizes offered at spawn on Kubernetes (KubeSpawner's ``profile_list``); a
    #: list here replaces the built-in ``default`` (1 CPU, 2Gi)
    profiles: list[Profile] = [Profile(name="default", display_name="Default", default=True)]
    #: limits per user: by default, by group and for named users
    quotas: QuotaConfig = QuotaConfig()
    #: classes admins declare (teachers cannot change them; teachers' own classes live in the hub)
    classes: list[ClassConfig] = []
    #: who may provision classes, and what they may give them
    teachers: TeachersConfig = TeachersConfig()
    #: who administers nbjobs besides JupyterHub admins
    admin: AdminConfig = AdminConfig()
    #: how big a request, a notebook and its parameters may be, and the output a job keeps
    limits: LimitsConfig = LimitsConfig()
    #: where executed notebooks are written, and in which forms
    outputs: OutputsConfig = OutputsConfig()
    #: limits of job definitions that run on a schedule
    schedules: SchedulesConfig = SchedulesConfig()
    #: mail and webhooks when jobs end or wait long
    notifications: NotificationsConfig = NotificationsConfig()
    #: what each job's runner samples (GPUs, CPU, memory) and how often
    telemetry: TelemetryConfig = TelemetryConfig()
    #: where jobs and notebook servers may connect to, and people sign in from
    network: NetworkConfig = NetworkConfig()
    #: accounts that pay for jobs on priced flavors
    credits: CreditsConfig = CreditsConfig()
    #: what becomes of a deleted hub user's jobs, definitions, settings, folder and account
    users: UsersConfig = UsersConfig()

    @model_validator(mode="after")
    def _consistent(self) -> NbjobsConfig:
        names = [f.name for f in self.flavors]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"flavor names must be unique; repeated: {', '.join(dupes)}")
        unknown = [f for f in self.teachers.flavors if f not in names]
        if unknown:
            raise ValueError(
                f"teachers.flavors lists unknown flavor(s) {', '.join(unknown)}; "
                f"flavors are: {', '.join(names)}"
            )
        for cls in self.classes:
            unknown = [f for f in cls.flavors if f not in names]
            if unknown:
                raise ValueError(
                    f"class {cls.name!r} lists unknown flavor(s) {', '.join(unknown)}; "
                    f"flavors are: {', '.join(names)}"
                )
        email = self.notifications.email
        if email is not None and email.password_env in self.backend.local.pass_env:
            raise ValueError(
                f"backend.local.pass_env lists {email.password_env}, the mail password "
                "(notifications.email.password_env): every job would get it; remove it"
            )
        if self.backend.kind == "kubernetes" and self.backend.kubernetes.kueue is None:
            self._check_queues_have_an_engine()
        if self.credits.enabled:
            for index, flavor in enumerate(self.flavors):
                if flavor.cost_per_gpu_hour and flavor.gpus and flavor.time_limit is None:
                    _refuse_at(
                        ("flavors", index, "time_limit"),
                        f"flavor {flavor.name!r} has a price and no time limit, so with "
                        "credits on no job of it could be paid for before it runs: give "
                        "it a time_limit",
                    )
        if self.backend.kind == "kubernetes":
            self._check_gangs()
        named = class_group_named(self)
        if named is not None:
            _refuse_at(*named)
        if self.backend.kind == "local":
            for kind in ("jobs", "servers"):
                if getattr(self.network, kind).egress is not None:
                    _refuse_at(
                        ("network", kind, "egress"),
                        f"nbjobs cannot enforce egress rules for {kind} on one machine: its "
                        "processes share the machine's network. Remove network."
                        f"{kind}.egress (a firewall of the machine applies to everyone), or "
                        "run on Kubernetes with a network plugin that enforces "
                        "NetworkPolicies (Calico, Cilium)",
                    )
        return self

    def _check_gangs(self) -> None:
        """A multi-node flavor's pods must start together: Kueue admits a whole Job or
        JobSet, KAI Scheduler gangs a JobSet's pods; Volcano gangs only its own PodGroups,
        which nbjobs does not make, and KAI leaves a plain Job's pods apart."""
        multi_node = self.backend.kubernetes.multi_node
        for index, flavor in enumerate(self.flavors):
            if flavor.nodes < 2:
                continue
            scheduler = scheduler_name(flavor.scheduler)
            if scheduler == SCHEDULERS["volcano"]:
                _refuse_at(
                    ("flavors", index, "nodes"),
                    f"flavor {flavor.name!r} runs on {flavor.nodes} nodes with Volcano, which "
                    "starts pods together only in a PodGroup nbjobs does not make: drop "
                    "scheduler: volcano from it (Kueue, if on, then admits all its pods at "
                    "once) or use scheduler: kai",
                )
            if scheduler == SCHEDULERS["kai"] and multi_node != "jobset":
                _refuse_at(
                    ("flavors", index, "nodes"),
                    f"flavor {flavor.name!r} runs on {flavor.nodes} nodes with KAI Scheduler, "
                    "which starts a JobSet's pods together but schedules an Indexed Job's "
                    "one by one: set backend.kubernetes.multi_node: jobset",
                )

    def _check_queues_have_an_engine(self) -> None:
        """A queue means something only to Kueue, KAI or Volcano: refuse one that would
        be ignored (a flavor for the default scheduler, with Kueue off)."""
        for index, flavor in enumerate(self.flavors):
            if flavor.queue and scheduler_name(flavor.scheduler) is None:
                _refuse_at(
                    ("flavors", index, "queue"),
                    f"queue {flavor.queue} needs a queueing engine: set scheduler: kai or "
                    "volcano, or turn on Kueue (backend.kubernetes.kueue)",
                )
        for index, cls in enumerate(self.classes):
            if not cls.queue:
                continue
            flavors = [f for f in self.flavors if not cls.flavors or f.name in cls.flavors]
            if not any(scheduler_name(f.scheduler) for f in flavors):
                _refuse_at(
                    ("classes", index, "queue"),
                    f"class {cls.name!r}: queue {cls.queue} needs a queueing engine: none of "
                    "its flavors sets scheduler: kai or volcano, and Kueue is off "
                    "(backend.kubernetes.kueue)",
                )

    def flavor(self, name: str) -> Flavor | None:
        """The flavor called ``name``, if any."""
        return next((f for f in self.flavors if f.name == name), None)


def _refuse_at(location: tuple[str | int, ...], message: str) -> None:
    """Refuse the file with ``message`` about the setting at ``location`` (so that the
    error names that setting and its line, not the whole file)."""
    error = PydanticCustomError("value_error", "{message}", {"message": message})
    raise ValidationError.from_exception_data(
        "NbjobsConfig", [InitErrorDetails(type=error, loc=location, input=None)]
    )


def command_config_path(given: str | None) -> str:
    """The nbjobs.yaml an admin's command reads: the one it was given, else
    ``$NBJOBS_CONFIG``, else ``nbjobs.yaml`` in the current folder."""
    return given or os.environ.get("NBJOBS_CONFIG") or "nbjobs.yaml"


def load_config(path: str | Path | None) -> NbjobsConfig:
    """Read and validate ``nbjobs.yaml``; ``None`` gives the defaults.

    Relative paths in the file (storage root, a SQLite database) are taken
    relative to the file's folder. Raises :class:`ConfigError` with the line.
    """
    if path is None:
        return NbjobsConfig()
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the file: {exc.strerror}", path=str(path)) from None
    config = parse_config(text, source=str(path))
    return _anchor_paths(config, path.parent.absolute())


#: libyaml's safe loader where PyYAML was built with it (ten times quicker: the service,
#: every command and every test read nbjobs.yaml), else PyYAML's own
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse_config(text: str, source: str = "nbjobs.yaml") -> NbjobsConfig:
    """Validate YAML text; :class:`ConfigError` names the line of the first problem."""
    try:
        try:
            data = yaml.load(text, Loader=_YAML_LOADER)
        except yaml.MarkedYAMLError:
            # PyYAML's own loader points at the line where the mistake was made (libyaml
            # at where it noticed): its words, for the error
            data = yaml.load(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        raise ConfigError(f"not valid YAML: {exc.problem}", path=source, line=line) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            "the file must be a mapping of sections (storage:, flavors:, ...)", path=source, line=1
        )
    try:
        return NbjobsConfig.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        location = tuple(error["loc"])
        # the nodes, with their lines, only for an error to point at
        line = _line_of(yaml.compose(text, Loader=_YAML_LOADER), location)
        where = ".".join(str(p) for p in location)
        reason = _reason(error)
        message = f"{where}: {reason}" if where else reason
        raise ConfigError(message, path=source, line=line) from None


def _reason(error: Any) -> str:
    message = str(error["msg"])
    message = message.removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        return "unknown setting (check its spelling and indentation)"
    if error["type"] == "missing":
        return "required setting is missing"
    return message


def _line_of(node: yaml.Node | None, location: tuple[Any, ...]) -> int | None:
    """The 1-based line of the YAML node at ``location`` (or its nearest parent)."""
    line = node.start_mark.line + 1 if node is not None else None
    for part in location:
        child = None
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if key.value == str(part):
                    child = value
                    break
        elif (
            isinstance(node, yaml.SequenceNode)
            and isinstance(part, int)
            and 0 <= part < len(node.value)
        ):
            child = node.value[part]
        if child is None:
            break
        node = child
        line = node.start_mark.line + 1
    return line


def _anchor_paths(config: NbjobsConfig, base: Path) -> NbjobsConfig:
    storage = config.storage
    if not storage.root.is_absolute():
        storage = storage.model_copy(update={"root": base / storage.root})
    database = config.database
    prefix = "sqlite:///"
    if database.url.startswith(prefix) and not database.url.startswith(prefix + "/"):
        rest = database.url[len(prefix) :]
        if rest and rest != ":memory:":
            database = database.model_copy(update={"url": prefix + str(base / rest)})
    return config.model_copy(update={"storage": storage, "database": database})

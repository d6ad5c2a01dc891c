"""Where jobs run and what they are given: the shared storage, the database, the
local backend (its accounts, GPUs, slots, the jobs' environment) and the Kubernetes
backend (Kueue)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    Field,
    field_validator,
    model_validator,
)

from .values import Duration, Size, TaskCount, _Model


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
    #: how long a job waits while the cluster refuses to make its pod (a ResourceQuota,
    #: Pod Security admission, a LimitRange, a webhook: the job shows the cluster's
    #: words) before it fails with them; None: it waits, up to its time limit, and then
    #: fails saying the cluster never made its pod (never "timed out")
    fail_refused_after: Duration = None
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

"""The interface every backend implements: start, cancel, follow, logs, capacity.

The service decides *who* runs *what* and *when*; a backend only places a job
that the service hands it and reports what became of it. The local backend
runs jobs as processes here; the Kubernetes backend as ``batch/v1`` Jobs.

A backend whose cluster queues jobs itself (Kubernetes with Kueue) says so with
:attr:`Backend.queues_jobs_itself`: the service then hands it every job its
quotas allow at once, and :meth:`Backend.seen` tells why a handed-over job
still waits (the job shows as ``queued`` with that reason).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from traitlets.config import LoggingConfigurable

from nbjobs.config import Flavor, LimitsConfig, NbjobsConfig, TelemetryConfig
from nbjobs.storage import open_job_dir

#: the runner's option naming its status file: how a runner's process is told apart,
#: and its job found, from its command line alone (:func:`status_file_in`)
STATUS_FILE_OPTION = "--status-file"


def status_file_in(command: Sequence[str]) -> str | None:
    """The status file a command line made by :meth:`LaunchSpec.runner_command` names
    (a sandbox's launcher around the runner names it too); None for any other command."""
    args = list(command)
    if STATUS_FILE_OPTION not in args[:-1]:
        return None
    return args[args.index(STATUS_FILE_OPTION) + 1]


@dataclass(frozen=True)
class JobFilesRoom:
    """The owner's job files when a job starts: the most they may take
    (``storage.max_job_files``), what they took, and where they are (their ``.nbjobs``).
    The runner stops the job when they would pass the limit."""

    limit: int
    used: int
    folder: Path

    def runner_args(self, where: Callable[[Path], str]) -> list[str]:
        """The runner's options for it (``--folder-limit`` and the rest)."""
        return [
            f"--folder-limit={self.limit}",
            f"--folder-used={self.used}",
            "--folder",
            where(self.folder),
        ]


@dataclass
class LaunchSpec:
    """Everything a backend needs to start one job."""

    job_id: str
    user: str
    flavor: Flavor
    snapshot_file: Path
    output_file: Path
    status_file: Path
    log_file: Path
    #: the folder the notebook runs in (the source's folder)
    cwd: Path
    parameters: dict[str, Any] = field(default_factory=dict)
    time_limit: float | None = None
    #: 0 for the first run; n for the n-th re-queue after the cluster disrupted the job
    attempt: int = 0
    #: the queue of the owner's class for this flavor (``classes[].queue``), if any; a
    #: cluster backend hands the job to it instead of the flavor's queue
    queue: str | None = None
    #: the notebook's file name as its user knows it (the runner's log says it, not the
    #: snapshot's); no folder, to keep the command line free of the user's paths
    source_name: str | None = None
    #: the kernel the owner chose at submit instead of the notebook's own
    kernel: str | None = None
    #: also write the result as HTML here (None: no copy asked for)
    html_file: Path | None = None
    #: the output goes into the outputs folder (``outputs.folder``), made when missing
    output_in_folder: bool = False
    #: the snapshot is a script (or a command's ``command.sh``), not a notebook
    script: bool = False
    #: the room for the owner's job files, measured as the job starts (None: no limit)
    job_files: JobFilesRoom | None = None

    def runner_command(
        self,
        python: str,
        where: Callable[[Path], str],
        limits: LimitsConfig,
        telemetry: TelemetryConfig,
        *,
        log_mode: int | None = None,
    ) -> list[str]:
        """The runner's command line for this job, for every backend: paths as ``where``
        says the job sees them, nbjobs.yaml's ``limits`` and ``telemetry``. With
        ``log_mode`` the runner writes the log into the job's folder itself, made with
        that mode (a pod: the log is there when the pod is gone); without, its stdout
        and stderr are the log already (one writer)."""
        command = [python, "-m", "nbjobs.job_runner"]
        command += [where(self.snapshot_file), where(self.output_file)]
        command += [STATUS_FILE_OPTION, where(self.status_file), "--cwd", where(self.cwd)]
        if log_mode is not None:
            command += ["--log-file", where(self.log_file), "--log-file-mode", f"{log_mode:03o}"]
        if self.source_name:
            # one word with '=': a name such as --x.sh is a value, not an option
            command.append(f"--source-name={self.source_name}")
        command += self.choice_args(where)
        if self.parameters:
            # a file in the job's folder, never JSON in argv: every local user reads argv
            # with ps, one argument may not exceed 128 KiB, and a Job's spec holds no
            # user data
            command += ["--parameters", where(self.parameters_file)]
        if self.time_limit:
            command += ["--timeout", f"{self.time_limit:g}"]
        if self.job_files is not None:
            command += self.job_files.runner_args(where)
        return command + limits.runner_args() + telemetry.runner_args()

    def choice_args(self, where: Callable[[Path], str]) -> list[str]:
        """The runner's options for what the owner chose at submit (a kernel, an HTML
        copy, the outputs folder), with paths as ``where`` says the job sees them."""
        args: list[str] = []
        if self.kernel:
            args += ["--kernel", self.kernel]
        if self.html_file is not None:
            args += ["--html", where(self.html_file)]
        if self.output_in_folder:
            args.append("--make-output-folder")
        if self.script:
            args.append("--script")
        return args

    @property
    def job_dir(self) -> Path:
        """The job's own folder (snapshot, status file, log, parameters)."""
        return self.status_file.parent

    @property
    def parameters_file(self) -> Path:
        """Where the runner reads the parameters from (never the command line, which
        every local user can read with ``ps`` and which has a length limit)."""
        return self.job_dir / "parameters.json"


def write_parameters_file(
    spec: LaunchSpec, *, mode: int = 0o600, owner: tuple[int, int] | None = None
) -> Path | None:
    """Write the job's parameters as JSON into its folder; None when it has none.

    The file is made anew, without following links: a ``parameters.json`` the user
    left there (a symlink to someone else's file, say) is removed, never written
    through, and the folder itself must not be a link. ``owner`` (uid, gid) hands
    the file to the account the job runs as (the service must be root for that).
    """
    if not spec.parameters:
        return None
    data = json.dumps(spec.parameters).encode("utf-8")
    folder = open_job_dir(spec.job_dir)  # from the user's folder, through no link
    try:
        name = spec.parameters_file.name
        with contextlib.suppress(FileNotFoundError):  # left by an earlier attempt
            os.unlink(name, dir_fd=folder)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(name, flags, mode, dir_fd=folder)
        try:
            if owner is not None:
                os.fchown(fd, *owner)
            os.fchmod(fd, mode)  # exactly this, whatever the umask
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=folder)  # no half-written parameters (a full disk)
            raise
        finally:
            os.close(fd)
    finally:
        os.close(folder)
    return spec.parameters_file


@dataclass
class Launched:
    """What a backend started: its handle, and the GPUs it gave the job (where it runs is
    the follower's to record, from :meth:`Backend.seen`, as soon as the backend knows)."""

    ref: str
    gpus: list[str] = field(default_factory=list)


@dataclass
class Outcome:
    """How a job ended, as far as the backend can tell."""

    #: the runner's exit code, or None if the backend could not learn it
    exit_code: int | None
    #: a sentence when the backend itself knows more (killed by a signal, evicted)
    message: str | None = None
    #: the final state when the backend knows it better than the runner's status file
    #: (the cluster's deadline: ``timed_out``; out of memory, evicted: ``failed``)
    state: str | None = None
    #: the cluster stopped the job for reasons of its own (evicted, preempted, its node
    #: lost), not the notebook: a flavor with ``requeue_on_eviction`` queues it again
    disrupted: bool = False
    #: the cluster's queue took the job's quota back (Kueue preempted it for a reclaim
    #: or a higher priority): it goes back to nbjobs' queue whatever the flavor's
    #: ``requeue_on_eviction`` says, as Kueue itself requeues what it preempts
    requeue: bool = False
    #: when the job started and ended by the backend's own clock (a cluster's record),
    #: for metering: the service's noticing may be late (a restart, a slow watch)
    started_at: datetime | None = None
    finished_at: datetime | None = None


@dataclass
class Seen:
    """What the backend sees of a job it started, for the job's view."""

    #: why the job, handed over, still waits (no node fits, Kueue has not admitted it)
    waiting: str | None = None
    #: where it runs (a node name), if the backend knows
    node: str | None = None
    #: a running job whose Kueue queue uses GPUs borrowed from its cohort: what it may
    #: mean for the job (they may be taken back)
    borrowing: str | None = None


@dataclass
class QueueUse:
    """A Kueue queue jobs go to: its LocalQueue and the GPU quota of its ClusterQueue
    (GPUs of every flavor), for the admins' overview (see kueue_queues.py)."""

    local_queue: str
    cluster_queue: str
    cohort: str | None
    #: GPUs its ClusterQueue is guaranteed (``nominalQuota``)
    nominal: float
    #: GPUs its admitted jobs use, borrowed ones included
    used: float
    #: of them, GPUs borrowed from the cohort (over its nominal quota)
    borrowed: float
    #: GPUs of its unused quota the cohort's borrowers are using now (an estimate)
    lent: float
    #: the most it may borrow (None: no limit, or no cohort)
    borrowing_limit: float | None
    #: the most of its quota it may lend (None: all of it)
    lending_limit: float | None


@dataclass
class NodeGpus:
    """One kind of GPU on one node, as an admin's overview shows it."""

    node: str
    #: what people call it (``A100``, ``nvidia.com/mig-1g.10gb``)
    gpu_type: str
    #: the resource it is counted in (``nvidia.com/gpu``; ``local`` on one machine)
    resource: str
    total: float
    #: held by jobs now, in GPU-equivalents
    allocated: float
    #: no new job starts here (nbjobs' drain, or a cordoned node)
    drained: bool = False


class Backend(LoggingConfigurable):
    """Base class of job backends (configurable: ``JobService.backend_class``)."""

    #: True: the service hands over every job its quotas allow, without asking free_for()
    #: (the cluster orders and admits them, e.g. Kueue)
    queues_jobs_itself: bool = False
    #: True: the backend stops jobs at their time limit (wait() returns with state
    #: ``timed_out``); the service sets no timer of its own, which would also count the
    #: time a job waits in the cluster
    enforces_time_limit: bool = False
    #: True: starting a job twice makes it once (a Kubernetes Job's name is the job's; a
    #: second create is answered 409 and adopted): a start the service did not record
    #: before it stopped is simply made again at the next start
    idempotent_starts: bool = False

    def __init__(self, config_file: NbjobsConfig, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.nbjobs = config_file
        #: nodes drained by admins (see set_drained)
        self.drained: frozenset[str] = frozenset()
        #: single GPUs drained by admins, ``(node, gpu id)`` (see set_drained)
        self.drained_gpus: frozenset[tuple[str, str]] = frozenset()
        #: this nbjobs's id among others that share a cluster (its database's,
        #: job_service/db.py instance_id), set by the service before its first reconcile;
        #: None: it stops whatever it does not run, as before instance ids
        self.instance: str | None = None

    def can_ever_fit(self, flavor: Flavor) -> str | None:
        """None if this backend could run the flavor at all; else why not, for a person."""
        raise NotImplementedError

    def cannot_run_for(self, user: str) -> str | None:
        """None if this backend can run jobs of ``user`` at all; else why not, for a person
        (the local backend with ``run_as: user`` and no OS account of that name). Default:
        None."""
        return None

    def free_for(self, flavor: Flavor) -> int:
        """How many more jobs of this flavor could start right now."""
        raise NotImplementedError

    def hands_over(self, flavor: Flavor) -> bool:
        """True: a job of ``flavor`` goes to the backend as soon as quotas allow, without
        asking :meth:`free_for` (the cluster queues it: Kueue, KAI Scheduler, Volcano).
        Default: :attr:`queues_jobs_itself`."""
        return self.queues_jobs_itself

    def placement(self, flavor: Flavor, queue: str | None = None) -> str | None:
        """A sentence for people when an engine, not nbjobs, decides where and when jobs
        of ``flavor`` run ("queued by KAI Scheduler, queue physics-101: …"); None when
        the free counts this backend gives are what decides. Default: None."""
        return None

    def free_gpus(self, flavor: Flavor) -> tuple[int, int] | None:
        """``(free, total)`` GPUs of the kind this flavor uses, for people to read
        ("2 of 4 GPUs free"); None when the flavor uses no GPU or the backend
        cannot tell. Default: None."""
        return None

    def set_drained(self, nodes: Collection[str], gpus: Collection[tuple[str, str]] = ()) -> None:
        """The nodes admins drained, and the single GPUs (``(node, gpu id)``, where
        :meth:`gpu_ids` offers them): the service keeps this up to date; no new job may
        start on them; running ones go on."""
        self.drained = frozenset(nodes)
        self.drained_gpus = frozenset(gpus)

    def gpu_ids(self, node: str) -> list[str] | None:
        """The GPUs of ``node`` an admin may drain one at a time, when this backend picks
        a job's GPUs itself (one machine: a drain of the whole machine would take every
        GPU at once); None when it drains whole nodes only (a cluster's scheduler picks
        the GPUs on a node). Default: None."""
        return None

    def maintenance(self, flavor: Flavor) -> str | None:
        """A sentence for the flavor's users when drained nodes take some of its capacity
        ("1 of 3 A100 nodes in maintenance"); None when none does. Default: None."""
        return None

    #: the GPUs are simulated (the demo on a machine without one): flavors say so
    simulates_gpus: bool = False

    def kernels(self, flavor: Flavor) -> list[str] | None:
        """The kernels the flavor's jobs can run, or None when not known here. Default:
        what nbjobs.yaml says the flavor's image has (``flavors[].kernels``)."""
        return sorted(flavor.kernels) if flavor.kernels else None

    def inventory(self) -> list[NodeGpus]:
        """The GPUs this backend sees, per node and kind, with what its jobs hold of them
        now (GPU-equivalents: a 0.25 share counts 0.25), for the admins' overview.
        Default: none known."""
        return []

    def queues(self) -> list[QueueUse]:
        """The cluster queues jobs go to, with their GPU quota, use, and what they
        borrow from and lend to their cohort (Kueue), for the admins' overview. Default:
        none."""
        return []

    def health(self) -> tuple[bool, str]:
        """Whether the backend can do its work now, and a sentence for an admin that says
        so ("following the cluster: 3 nodes, 12 Jobs") or what is wrong. Default: fine."""
        return True, "ready"

    async def start(self, spec: LaunchSpec) -> Launched:
        """Start the job; return with its handle.

        The job's capacity is taken before the first wait (when the coroutine first
        suspends, :meth:`free_for` counts it): the service starts several jobs at once
        and decides each next one from :meth:`free_for`.
        """
        raise NotImplementedError

    async def wait(self, ref: str) -> Outcome:
        """Wait until the job's runner has ended."""
        raise NotImplementedError

    async def cancel(self, ref: str) -> None:
        """Ask the runner to stop (it keeps the partial output); force it after a grace."""
        raise NotImplementedError

    async def reconcile(self, wanted: Collection[str]) -> None:
        """At service start, before any adopt(): catch up with what runs.

        ``wanted`` are the ids of the jobs the database holds queued or active; the
        backend stops anything it started for other jobs. Raise if what runs cannot
        be known (the service must not take running jobs for lost). Default: nothing.
        """

    def adopt(self, ref: str, gpus: list[str], flavor: Flavor) -> bool:
        """After a service restart: take back a job still running; False if it is gone
        (a rank still running without the others stopped; :meth:`lost` follows)."""
        raise NotImplementedError

    def lost(self, job_id: str) -> None:
        """After a restart: a job found ended (or gone) while no service watched, or one
        :meth:`adopt` refused: remove what it left where it ran (processes left over,
        temporary folders), which nobody else ever would. Called on a worker thread, for
        several lost jobs at once (it may wait, as a cancel's grace does): it touches no
        state of the event loop's. Default: nothing (a cluster removes a pod's leftovers
        with it)."""

    def unrecorded_start(self, job_id: str, status_file: Path) -> tuple[str, list[str]] | None:
        """After a restart, for a backend without :attr:`idempotent_starts`: the ref and GPUs
        of a job it started that the service never recorded (it was killed in between),
        still running; None when none runs."""
        return None

    def seen(self, ref: str) -> Seen | None:
        """What the backend sees of a started job now (None: nothing beyond the runner's
        status file)."""
        return None

    def release(self, ref: str) -> None:
        """Forget a finished job (free its GPUs)."""
        raise NotImplementedError

    async def shutdown(self) -> None:
        """The service is stopping; jobs keep running (they are adopted on restart)."""

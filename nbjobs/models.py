"""The job models shared by the job service, the server extension and the CLI.

These are the JSON bodies of the REST API (``api/openapi.yaml`` describes the
same shapes); the service builds them, the clients read them.
"""

from __future__ import annotations

from datetime import date, datetime
from enum import Enum
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from nbjobs.job_runner.status import FINAL_STATES as RUNNER_FINAL_STATES


class JobState(str, Enum):
    """Where a job is.

    ``queued → starting → running → succeeded | failed | cancelled | timed_out``;
    on a flavor that needs approval, ``pending_approval`` comes first: approved, the job
    is ``queued``; rejected or not answered in time, ``cancelled`` (the message says so).
    """

    PENDING_APPROVAL = "pending_approval"
    QUEUED = "queued"
    STARTING = "starting"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"

    @property
    def final(self) -> bool:
        """Whether the job is over."""
        return self in FINAL_STATES

    def __str__(self) -> str:
        return self.value


#: the states a job ends in, as the runner's status file names them
FINAL_STATES = frozenset(JobState(state) for state in RUNNER_FINAL_STATES)
ACTIVE_STATES = frozenset({JobState.STARTING, JobState.RUNNING})

#: Every move a job makes between states, and what makes it: (from, to, why); ``None`` as
#: from is the submission. The documentation's job-state reference is drawn from it.
TRANSITIONS: tuple[tuple[JobState | None, JobState, str], ...] = (
    (None, JobState.QUEUED, "submitted (by a person, a re-run or a schedule)"),
    (None, JobState.PENDING_APPROVAL, "submitted on a flavor with an approval policy"),
    (JobState.PENDING_APPROVAL, JobState.QUEUED, "an admin or the owner's teacher approved it"),
    (
        JobState.PENDING_APPROVAL,
        JobState.CANCELLED,
        "rejected (the reason is its message), unanswered past expires_after, or cancelled",
    ),
    (JobState.QUEUED, JobState.STARTING, "the dispatcher found room and quota: it is launched"),
    (JobState.QUEUED, JobState.CANCELLED, "cancelled while it waited"),
    (JobState.STARTING, JobState.RUNNING, "its process or pod runs the notebook"),
    (JobState.STARTING, JobState.FAILED, "the backend could not start it (the message says why)"),
    (JobState.STARTING, JobState.CANCELLED, "cancelled while it started"),
    (
        JobState.STARTING,
        JobState.QUEUED,
        "its flavor left nbjobs.yaml as it was claimed, or the service restarted before "
        "recording the launch",
    ),
    (
        JobState.STARTING,
        JobState.SUCCEEDED,
        "it ended before the service saw it run (a short job)",
    ),
    (JobState.STARTING, JobState.TIMED_OUT, "it ran out of time before it was seen running"),
    (JobState.RUNNING, JobState.SUCCEEDED, "every cell ran (the runner exited 0)"),
    (
        JobState.RUNNING,
        JobState.FAILED,
        "a cell raised, the kernel died, the input was unusable, or the cluster stopped it",
    ),
    (JobState.RUNNING, JobState.TIMED_OUT, "the flavor's or the job's time limit was reached"),
    (JobState.RUNNING, JobState.CANCELLED, "cancelled by its owner, a teacher or an admin"),
    (
        JobState.RUNNING,
        JobState.QUEUED,
        "the cluster evicted or preempted it and the flavor's requeue_on_eviction allows "
        "another try",
    ),
)


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


# -- a submission's fields, written once: the job's (``POST api/jobs``), a re-run's
# changes, a definition's and its edits' (job_service/schedules/models.py) take them


def _identifiers(value: dict[str, Any]) -> dict[str, Any]:
    bad = [name for name in value if not name.isidentifier()]
    if bad:
        raise ValueError(f"parameter names must be Python identifiers: {', '.join(bad)}")
    return value


#: the notebook (or script, or a command's folder), relative to the user's folder
NotebookPath = Annotated[str, StringConstraints(min_length=1, max_length=4096)]
FlavorName = Annotated[str, StringConstraints(min_length=1, max_length=64)]
#: the notebook's parameters by name (Python identifiers)
Parameters = Annotated[dict[str, Any], AfterValidator(_identifiers)]
#: what the Jobs list calls the job
JobName = Annotated[str, StringConstraints(max_length=255)]
#: a kernel the flavor has, to run on instead of the notebook's own
KernelName = Annotated[str, StringConstraints(min_length=1, max_length=255)]
#: where the executed notebook goes: next to the notebook, or in the outputs folder
OutputsPlace = Literal["beside", "folder"]
#: seconds, shorter than the flavor's time limit
TimeLimit = Annotated[float, Field(gt=0)]
#: a shell command (bash) run instead of a notebook or script
ShellCommand = Annotated[str, StringConstraints(min_length=1, max_length=8192)]


class SubmitRequest(_Body):
    """``POST api/jobs``: run this notebook on this flavor."""

    #: the notebook, relative to the user's folder (as JupyterLab shows it)
    path: NotebookPath
    flavor: FlavorName
    parameters: Parameters = {}
    #: admins only: higher runs first (default 0)
    priority: int | None = Field(default=None, ge=-100, le=100)
    #: a shorter time limit than the flavor's, in seconds
    time_limit: TimeLimit | None = None
    #: what the Jobs list calls the job; the notebook's name when left out
    name: JobName | None = None
    #: the kernel to run it on instead of the notebook's own (one the flavor has)
    kernel: KernelName | None = None
    #: where the executed notebook goes: next to the notebook, or in the outputs folder
    #: next to it (``outputs.folder``); left out: ``outputs.location`` in nbjobs.yaml
    outputs: OutputsPlace | None = None
    #: also write an HTML copy of the result; left out: ``outputs.html`` in nbjobs.yaml
    html: bool | None = None
    #: run this shell command (bash) instead of a notebook or script; ``path`` is then
    #: the folder it runs in (``.``: the user's folder)
    command: ShellCommand | None = None
    #: the nodes the submitter expects the job to span (``nbjobs submit --nodes``): a
    #: flavor spanning another number is refused, saying which flavors span it
    nodes: int | None = Field(default=None, ge=1, le=64)


class RerunChanges(_Body):
    """``POST api/jobs/{id}/rerun``, optionally: what the re-run changes (left out: as the
    job ran). ``parameters`` replaces the job's parameters whole."""

    flavor: FlavorName | None = None
    parameters: Parameters | None = None
    name: JobName | None = None
    kernel: KernelName | None = None
    outputs: OutputsPlace | None = None
    html: bool | None = None


class UpdateRequest(_Body):
    """``PATCH api/jobs/{id}``: admins change a queued job's priority."""

    priority: int = Field(ge=-100, le=100)


class RejectRequest(_Body):
    """``POST api/jobs/{id}/reject``: why (its owner reads it)."""

    reason: str = Field(min_length=1, max_length=500)


class Progress(BaseModel):
    cells_done: int = 0
    cells_total: int = 0
    #: index of the cell running now, in the notebook being executed
    current_cell: int | None = None


class JobEvent(BaseModel):
    """``event: job`` of ``GET api/events``: a job appeared or changed; ask for it again."""

    id: str
    user: str
    state: JobState
    progress: Progress
    #: 1: the next to start; None when not queued
    queue_position: int | None
    waiting_reason: str | None


class JobRemovedEvent(BaseModel):
    """``event: job_removed``: a job went before it ended (deleted)."""

    id: str
    user: str


class DefinitionsEvent(BaseModel):
    """``event: definitions``: a user's definitions or their runs changed."""

    user: str


class JobError(BaseModel):
    cell_index: int | None = None
    ename: str
    evalue: str


#: how a job's ``node`` lists the nodes of a multi-node job ("gpu-0, gpu-1")
NODE_SEPARATOR = ", "


def placed_on(placed: str | None, node: str) -> bool:
    """Whether a job said to run on ``placed`` (its ``node``) runs on ``node``: that one,
    or one of them for a multi-node job."""
    return placed is not None and node in placed.split(NODE_SEPARATOR)


class Job(BaseModel):
    """One job as the API shows it."""

    id: str
    user: str
    name: str
    #: the source notebook and the executed copy, relative to the user's folder
    path: str
    output_path: str
    flavor: str
    state: JobState
    #: 1 = next to start; only while queued
    queue_position: int | None = None
    #: why a queued job is not running yet (a quota, no free GPU)
    waiting_reason: str | None = None
    progress: Progress = Progress()
    parameters: dict[str, Any] = {}
    priority: int = 0
    gpus: list[str] = []
    #: the nodes it spans (a multi-node flavor: ranks 0 to nodes - 1, each with the
    #: flavor's GPUs; its logs per rank: ``logs?rank=N``)
    nodes: int = 1
    submitted_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    exit_code: int | None = None
    #: one line for a person: what happened
    message: str | None = None
    error: JobError | None = None
    rerun_of: str | None = None
    time_limit: float | None = None
    #: where it runs or ran (a Kubernetes node), when the backend knows
    node: str | None = None
    #: times the cluster disrupted it (evicted, preempted) and it went back to the queue
    requeues: int = 0
    #: something its owner should act on while it runs (its GPUs have been idle)
    warning: str | None = None
    #: while it runs on a cluster with Kueue: its queue uses GPUs borrowed from the
    #: cohort, which Kueue may take back (the job would be queued again)
    borrowing: str | None = None
    #: the kernel chosen at submit instead of the notebook's own (None: the notebook's)
    kernel: str | None = None
    #: the HTML copy of the result, relative to the user's folder (None: none asked for)
    html_path: str | None = None
    #: what it runs: a notebook, a script (``.py``, ``.sh``; its output is its log) or a
    #: shell command (``command``, run in the folder ``path``)
    kind: Literal["notebook", "script", "command"] = "notebook"
    command: str | None = None
    #: the GPU-hours it counts for, so far if it runs: GPUs (a slice as its share) x the
    #: time it held them; what quotas, budgets and ``nbjobs usage`` count
    gpu_hours: float = 0.0


class OutputDefaults(BaseModel):
    """Where results go unless a submission says otherwise (``outputs`` in nbjobs.yaml)."""

    location: Literal["beside", "folder"]
    #: the outputs folder's name, made next to the notebook
    folder: str
    html: bool
    #: the caller's folder, where results are written, as people know it: the share on a
    #: cluster (``nfs.example.org:/export/home/ada``), the folder on one machine
    where: str
    #: bytes still free there (None: the service cannot tell)
    free_bytes: int | None


class JobList(BaseModel):
    """One page of a job list, newest first."""

    jobs: list[Job]
    #: every job the list's filters match, on this page or not
    total: int
    limit: int
    offset: int
    #: whether older jobs follow this page (ask for them with ``before`` = the last id)
    more: bool = False


class FlavorInfo(BaseModel):
    """A flavor the caller may use, with live availability."""

    name: str
    display_name: str
    description: str = ""
    gpus: int
    #: the nodes one job spans, each with ``gpus`` GPUs, ``cpu`` and ``memory`` (a
    #: multi-node flavor: they start together)
    nodes: int = 1
    gpu_type: str | None = None
    shared: bool = False
    cpu: str | None = None
    memory: str | None = None
    time_limit: float | None = None
    #: GPUs (or shared slots) free right now for this flavor
    available: int
    #: jobs of this flavor waiting to start
    queued: int
    #: why no job of this flavor could ever start here (None: it can)
    unavailable: str | None = None
    #: GPUs of the kind this flavor uses that are free now (None: no GPU, or unknown);
    #: for a flavor with a ``fraction``, its slices (jobs of it that fit now)
    free_gpus: int | None = None
    #: all GPUs of that kind, or all its slices (None: no GPU, or unknown)
    total_gpus: int | None = None
    #: the share of one GPU a job gets (None: whole GPUs)
    fraction: float | None = None
    #: what an hour of one of its jobs costs in credits (credits on and a priced GPU
    #: flavor; None: it costs none); a job holds this x its time limit until it ends
    credits_per_hour: float | None = None
    #: who decides when its jobs start, where that is not nbjobs' count of free GPUs
    #: ("queued by KAI Scheduler, queue physics-101: it decides when a job starts")
    placement: str | None = None
    #: drained nodes that take part of its capacity ("1 of 3 A100 nodes in maintenance")
    maintenance: str | None = None
    #: its GPUs are simulated (trying nbjobs on a machine without one): nothing computes
    #: on a GPU
    simulated: bool = False
    #: the kernels its jobs can run (None: not known here, e.g. a cluster image that
    #: nbjobs.yaml does not describe; the job then says if the notebook's is missing)
    kernels: list[str] | None = None


class UsageRow(BaseModel):
    """A user's or group's jobs and GPU-hours in a period that ends now (a rolling
    window: ``week`` is the last 7 days), by the one rule every figure counts by: a job
    counts when its run overlaps the period, with the GPU-hours of its run inside it."""

    name: str
    #: the period: a user's budget's, else (groups, users without a budget) the default
    #: quota's
    period: str
    #: jobs whose run overlaps the period (one that never started counts in none)
    jobs: int
    #: jobs running now, and queued now
    running: int
    queued: int
    #: GPU-hours held in the period (what a budget counts, deleted jobs' too)
    gpu_hours: float
    #: a user's GPU-hour budget for the period, with what a teacher granted; None for
    #: groups and users without a budget
    gpu_hours_limit: float | None = None
    #: of the budget, the hours a teacher granted on top of the class's (extensions)
    gpu_hours_granted: float = 0.0


class UsageDay(BaseModel):
    """One UTC day of a usage line."""

    date: date
    gpu_hours_allocated: float
    gpu_hours_busy: float


class UsageLine(BaseModel):
    """One key of a usage breakdown (a user, group, class, flavor or node) over the range."""

    name: str
    #: jobs whose run overlaps the range
    jobs: int
    #: GPUs held times how long (from the cluster's start and end times)
    gpu_hours_allocated: float
    #: what the GPUs did (the jobs' telemetry: seconds sampled times utilisation)
    gpu_hours_busy: float
    #: busy over allocated (None: nothing was allocated)
    busy_percent: float | None = None
    #: GPU-hours allocated times each flavor's cost_per_gpu_hour (None: no flavor has one)
    cost: float | None = None
    #: the days of the range it used, oldest first
    days: list[UsageDay] = []


class Usage(BaseModel):
    """``GET api/usage``: the rows against budgets (each in its period up to now) and a
    breakdown over a range of whole UTC days."""

    #: the start of the default quota's period (``period``), up to now
    since: datetime
    period: str
    #: the users the caller may see with a job in their period or one running or queued
    users: list[UsageRow]
    groups: list[UsageRow]
    #: the caller's own row, there even when they used nothing
    own: UsageRow
    #: the breakdown's range: whole UTC days, from ``range_since`` up to ``range_until``
    range_since: date | None = None
    range_until: date | None = None
    #: what the breakdown is by: user, group, class, flavor or node
    by: str | None = None
    breakdown: list[UsageLine] = []
    #: the whole range, all keys together (a job in two groups counts once)
    total: UsageLine | None = None


class UserStorage(BaseModel):
    """What one user's job files take (``.nbjobs`` in their folder)."""

    user: str
    #: bytes of the inputs, logs, status and telemetry of their jobs
    job_files: int
    #: their jobs listed (each has a folder there)
    jobs: int
    #: their folder, where results are written, as people know it (the share on a cluster)
    folder: str
    #: bytes still free there (None: the service cannot tell)
    free_bytes: int | None


class StorageReport(BaseModel):
    """``GET api/storage``: the space users' job files take, and the rules for it."""

    #: how long an ended job keeps its input (None: for ever)
    retention_seconds: float | None
    #: the most one user's job files may take (None: no limit)
    max_job_files: int | None
    #: the caller alone, or (admins) every user with jobs, most space first
    users: list[UserStorage]


class GpuReading(BaseModel):
    """One GPU in one telemetry sample, as the job's runner read it."""

    #: the GPU as the job sees it (its position in CUDA_VISIBLE_DEVICES), as text
    index: str
    uuid: str | None = None
    name: str | None = None
    utilization_percent: float | None = Field(default=None, ge=0, le=100)
    memory_used_bytes: int | None = Field(default=None, ge=0)
    memory_total_bytes: int | None = Field(default=None, ge=0)
    temperature_celsius: float | None = None
    power_watts: float | None = Field(default=None, ge=0)
    #: why this GPU gave no reading (it stopped answering)
    error: str | None = None


class TelemetrySample(BaseModel):
    """What a job used at one moment: its GPUs together, its CPU and memory."""

    at: datetime
    #: mean over the job's GPUs that answered
    gpu_utilization_percent: float | None = Field(default=None, ge=0, le=100)
    #: sums over the job's GPUs that answered
    gpu_memory_used_bytes: int | None = Field(default=None, ge=0)
    gpu_memory_total_bytes: int | None = Field(default=None, ge=0)
    #: the job's processes together; 100 = one core busy
    cpu_percent: float | None = Field(default=None, ge=0)
    memory_bytes: int | None = Field(default=None, ge=0)
    gpus: list[GpuReading] = []


class GpuSummary(BaseModel):
    """One GPU over the whole run."""

    index: str
    uuid: str | None = None
    name: str | None = None
    utilization_mean_percent: float | None = Field(default=None, ge=0, le=100)
    utilization_peak_percent: float | None = Field(default=None, ge=0, le=100)
    memory_peak_bytes: int | None = Field(default=None, ge=0)
    memory_total_bytes: int | None = Field(default=None, ge=0)
    #: seconds sampled x utilisation: the time this GPU was busy
    busy_seconds: float = Field(default=0.0, ge=0)
    #: seconds the samples cover
    allocated_seconds: float = Field(default=0.0, ge=0)


class TelemetrySummary(BaseModel):
    """What a job used over its run so far (final once it ended)."""

    samples: int = Field(default=0, ge=0)
    since: datetime | None = None
    until: datetime | None = None
    #: GPU-seconds busy and GPU-seconds sampled, over all its GPUs
    gpu_busy_seconds: float | None = Field(default=None, ge=0)
    gpu_allocated_seconds: float | None = Field(default=None, ge=0)
    #: busy over sampled, in percent
    gpu_utilization_mean_percent: float | None = Field(default=None, ge=0, le=100)
    gpu_utilization_peak_percent: float | None = Field(default=None, ge=0, le=100)
    #: the most memory any one of its GPUs held, and that GPU's size
    gpu_memory_peak_bytes: int | None = Field(default=None, ge=0)
    gpu_memory_total_bytes: int | None = Field(default=None, ge=0)
    cpu_mean_percent: float | None = Field(default=None, ge=0)
    cpu_peak_percent: float | None = Field(default=None, ge=0)
    memory_peak_bytes: int | None = Field(default=None, ge=0)
    gpus: list[GpuSummary] = []


class JobMetrics(BaseModel):
    """``GET api/jobs/{id}/metrics``: a job's telemetry series, summary and a hint."""

    job_id: str
    state: JobState
    #: seconds between samples (None: telemetry is off)
    interval_seconds: float | None = None
    #: oldest first; older stretches of a long job are thinned
    samples: list[TelemetrySample] = []
    summary: TelemetrySummary | None = None
    #: a plain word when the job used its GPUs little ("GPU busy 6 % on average: ...")
    hint: str | None = None


#: a response model's ``json_schema_extra`` key: the API sends it without its unset fields
#: (the API's description, job_service/api_spec.py, then lists only the others as required)
SENT_WITHOUT_DEFAULTS = "x-sent-without-defaults"


class ErrorBody(BaseModel):
    """Every error the API returns: a sentence that says what to do."""

    # sent without ``problems`` but where a roster was refused
    model_config = ConfigDict(json_schema_extra={SENT_WITHOUT_DEFAULTS: True})

    message: str
    #: a refused roster's bad entries (each an index into the request's students)
    problems: list[RosterProblem] | None = None


class Health(BaseModel):
    """``GET api/health``: the service is up; who the token belongs to."""

    status: Literal["ok"] = "ok"
    #: the nbjobs release the service runs
    version: str
    #: the token's user
    user: str


#: where the hub makes invitations, under its API root (``/hub/api/``): its nbjobs login
#: serves it (hub_config/first_login.py), the job service calls it (job_service/invitations.py)
HUB_INVITATIONS_PATH = "nbjobs/invitations"


class InvitationInfo(BaseModel):
    """A one-time invitation for a hub user to choose their first password: the only
    time its code is shown (the hub keeps a hash of it)."""

    user: str
    #: 16 letters and digits, grouped by four; typed at the hub's ``/hub/invite`` page
    code: str
    #: the link that opens it: absolute where ``notifications.links_base`` is set, else
    #: the hub's path (``/hub/invite/CODE``)
    url: str
    #: when it stops working
    expires_at: datetime
    #: the address it was mailed to (None: not mailed; hand it over yourself)
    mailed_to: str | None = None


class CreateInvitation(_Body):
    """``POST api/invitations``: a new invitation for a user with no password yet."""

    user: str = Field(min_length=1, max_length=255)


class ClassInfo(BaseModel):
    """A class: a JupyterHub group of students, its teachers, flavors and GPU-hours."""

    name: str
    teachers: list[str] = []
    students: list[str] = []
    #: the flavors its students may use (empty: whatever they could use anyway)
    flavors: list[str] = []
    #: GPU-hours each student may use per period (None: the usual quota)
    gpu_hours: float | None = None
    period: str = "week"
    #: the queue its students' jobs go to on the cluster (set in nbjobs.yaml by an admin:
    #: queues are cluster objects a teacher cannot make); None: their flavors' queues
    queue: str | None = None
    #: "nbjobs.yaml" (an admin's, read-only here) or "hub" (a teacher's)
    source: str = "hub"
    #: GPU-hours granted to single students on top of ``gpu_hours``, counting now
    extra_hours: dict[str, float] = {}
    #: the invitations this change made for the accounts it created (only in the answer
    #: to a create or an add, on a hub whose login uses invitations): hand them out
    invitations: list[InvitationInfo] = []


class CreateClass(_Body):
    """``POST api/classes``: a teacher provisions a class from a roster."""

    name: str = Field(min_length=1, max_length=63)
    students: list[str] = []
    flavors: list[str] = []
    gpu_hours: float | None = Field(default=None, ge=0)
    period: str = Field(default="week", pattern="^(day|week|month)$")
    #: co-teachers besides the caller
    teachers: list[str] = []


class RosterChange(_Body):
    """``POST`` / ``DELETE api/classes/{name}/students``: students to add or remove."""

    students: list[str] = Field(min_length=1)


class BudgetGrant(_Body):
    """``POST api/classes/{name}/students/{student}/budget``: more GPU-hours for one
    student, for one of the class's periods from now."""

    hours: float = Field(gt=0, le=10_000)


class CreditAccount(BaseModel):
    """An account that pays for jobs on priced flavors (``credits`` in nbjobs.yaml)."""

    #: ``user:ada``, ``class:ml101``, ``group:physics``
    account: str
    kind: Literal["user", "class", "group"]
    name: str
    #: credits nbjobs.yaml gives it (``credits.users`` and the like)
    standing: float
    #: credits granted on top (admins, and teachers within their classes), less taken back
    granted: float
    #: what its ended jobs cost
    charged: float
    #: held for its jobs that have not ended: each one's worst case
    held: float
    #: standing + granted - charged
    balance: float
    #: balance - held: the worst case a new job may cost
    available: float
    #: the caller's jobs are paid from it (the first of their own, their classes', their
    #: groups' accounts that exists)
    pays_for_you: bool = False


class CreditEntry(BaseModel):
    """One dated row of an account's statement: a grant or a charge (kept for ever)."""

    at: datetime
    kind: Literal["grant", "charge"]
    #: credits added (a grant; a negative grant takes some back) or taken (a charge: < 0)
    amount: float
    #: the balance once this row counted
    balance: float
    job_id: str | None = None
    #: who granted it (charges: the job's owner)
    by: str
    note: str = ""


class CreditStatement(BaseModel):
    """``GET api/credits/{account}``: the account and every grant and charge, oldest first."""

    account: CreditAccount
    entries: list[CreditEntry]


class CreditGrant(_Body):
    """``POST api/credits/{account}/grants``: credits for an account. Admins may grant
    any account and take credits back (a negative amount); teachers may grant their
    classes' accounts and their students'."""

    amount: float = Field(ge=-1_000_000, le=1_000_000)
    #: why, shown on the statement
    note: str = Field(default="", max_length=200)


class RosterProblem(BaseModel):
    """One bad roster entry: its position in the request's list, the name, why."""

    index: int
    student: str
    reason: str


class RosterCheck(_Body):
    """``POST api/roster-check``: would these students be accepted (nothing changes)?"""

    students: list[str] = Field(max_length=5000)
    #: the class they would join; None: a new class
    class_name: str | None = Field(default=None, max_length=63)


class RosterChecked(BaseModel):
    """What creating the class (or adding the students) would refuse: every bad entry,
    by its place in the list; none: all would be accepted. Of the entries it would take,
    which change nothing and which make an account."""

    problems: list[RosterProblem]
    #: entries already students of the class they would join (adding them changes nothing)
    already: list[int] = []
    #: entries with no hub account yet: the change creates it, with an invitation
    new_accounts: list[int] = []

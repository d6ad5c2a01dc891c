"""What the dashboard's own API resources answer (``api/me``, ``api/dashboard/overview``);
``api/openapi.yaml`` describes them."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from nbjobs.models import OutputDefaults

from ..backends.base import QueueUse


class Me(BaseModel):
    """Who the caller is to nbjobs, so the page offers what the API will let them see."""

    name: str
    admin: bool
    teacher: bool
    groups: list[str]
    #: the classes whose usage they may see: every class for admins, taught ones else
    classes: list[str]
    #: where results go unless a submission says otherwise (the Submit dialog's defaults)
    outputs: OutputDefaults
    #: the channels this service can send messages on (set up in nbjobs.yaml's
    #: notifications): the notification settings offer only these
    notify_channels: list[Literal["email", "webhook"]]
    #: credits are on (nbjobs.yaml ``credits.enabled``): jobs on priced flavors are paid
    #: from an account (the dashboard's Credits view)
    credits: bool = False


class GpuCount(BaseModel):
    """GPUs in GPU-equivalents: all, held by jobs now, and busy by their utilisation."""

    total: float
    allocated: float
    #: sum over the jobs holding them of (latest GPU utilisation x their share); None
    #: where no running job has reported telemetry
    busy: float | None = None


class NodeRow(GpuCount):
    node: str
    gpu_type: str
    resource: str
    drained: bool
    #: its GPUs drained one by one (one machine; all of them when ``drained``): no new
    #: job gets them
    drained_gpus: list[str] = []
    #: ids of the running jobs nbjobs placed there
    jobs: list[str]


class TypeRow(GpuCount):
    gpu_type: str
    nodes: int


class FlavorRow(BaseModel):
    name: str
    display_name: str
    running: int
    queued: int
    #: seconds the oldest queued job of this flavor has waited (None: none waits)
    longest_wait_seconds: float | None


class WaitingJob(BaseModel):
    id: str
    user: str
    flavor: str
    waited_seconds: float
    reason: str | None


class Failure(BaseModel):
    id: str
    user: str
    name: str
    flavor: str
    state: str
    message: str | None
    finished_at: datetime | None


class BackendHealth(BaseModel):
    kind: str
    ok: bool
    detail: str


class Overview(BaseModel):
    generated_at: datetime
    backend: BackendHealth
    gpus: GpuCount
    nodes: list[NodeRow]
    types: list[TypeRow]
    flavors: list[FlavorRow]
    longest_wait: WaitingJob | None
    recent_failures: list[Failure]
    #: Kueue's queues (empty without Kueue, or when the service may not read them), as
    #: the backend sees them
    queues: list[QueueUse] = []
    #: what the admin should know about classes and hub groups: a class moved into its own
    #: group at start, a class named like a group nbjobs.yaml gives meaning to (it grants
    #: nothing of it), an old class group nbjobs does not count
    class_notices: list[str] = []


class QueuedJob(BaseModel):
    """A queued job as the admins' queue shows it, first to start first."""

    id: str
    name: str
    user: str
    flavor: str
    #: 1: the next to start (quotas and capacity may still pass it over); None: it waits
    #: for approval and is not in the queue yet
    place: int | None
    priority: int
    submitted_at: datetime
    waited_seconds: float
    #: why it waits, in the service's words (None: not looked at yet)
    reason: str | None
    #: the admin who last moved it, and when (None: never moved)
    moved_by: str | None
    moved_at: datetime | None


class MoveRequest(BaseModel):
    """``POST api/dashboard/queue/{id}/move``."""

    model_config = ConfigDict(extra="forbid")

    to: Literal["front", "up", "down", "back"]


class NodeGpuRow(BaseModel):
    gpu_type: str
    resource: str
    total: float
    allocated: float


class DrainInfo(BaseModel):
    by: str
    at: datetime
    reason: str


class NodeJob(BaseModel):
    id: str
    user: str
    name: str
    flavor: str


class GpuSlot(BaseModel):
    """One GPU of a node whose GPUs are drained one at a time (one machine)."""

    #: its id as jobs name it (``CUDA_VISIBLE_DEVICES``)
    id: str
    #: no new job gets it (the node's drain or its own)
    drained: bool
    #: an admin's drain of this GPU alone
    drain: DrainInfo | None
    #: ids of the started jobs holding it
    jobs: list[str]


class NodeView(BaseModel):
    """A node as the admins' nodes view shows it."""

    node: str
    gpus: list[NodeGpuRow]
    #: no new job starts there (an admin's drain, nbjobs.yaml, a label, a cordon)
    drained: bool
    #: the admin's drain, if one is the reason
    drain: DrainInfo | None
    #: started jobs placed there, oldest first
    jobs: list[NodeJob]
    #: its GPUs one by one, where an admin may drain each alone (one machine); empty where
    #: a drain takes the whole node (a cluster)
    gpu_slots: list[GpuSlot] = []
    #: the jobs a drain with ``cancel_running`` would cancel: those holding a GPU there
    #: on one machine (CPU jobs go on), every started one on a cluster's node
    cancellable: int = 0


class DrainRequest(BaseModel):
    """``POST api/dashboard/nodes/{node}/drain`` (the whole node) and
    ``POST api/dashboard/nodes/{node}/gpus/{gpu}/drain`` (one GPU, where the node's
    ``gpu_slots`` lists it): no new job starts there; running jobs finish, or are
    cancelled (not re-queued) with ``cancel_running``."""

    model_config = ConfigDict(extra="forbid")

    reason: str = Field(default="", max_length=500)
    #: cancel the jobs running there now (they keep their partial output), else they finish
    cancel_running: bool = False


class DeletedUser(BaseModel):
    """A user the service retired: deleted in the hub, made again under the same name, or
    deleted by an admin through nbjobs; what became of their things."""

    name: str
    noticed_at: datetime
    #: in words: "deleted in the hub", "made again in the hub (made ...)", "deleted by root"
    why: str
    #: ``users.on_delete`` then
    action: Literal["archive", "remove"]
    #: the name their records (archive) or their GPU time (remove) are kept under
    archived_as: str
    jobs: int
    cancelled: int
    definitions: int
    #: notification settings and mail addresses
    settings: int
    #: where their folder went (archive); None: removed, or there was none
    folder: str | None = None
    #: the OS account removed (one machine)
    account: str | None = None
    #: what could not be done, for the admin to finish by hand
    problems: str | None = None


class UsersView(BaseModel):
    """``GET api/dashboard/users``: what becomes of a deleted user's things, and the users
    retired so far (newest first)."""

    #: nbjobs.yaml ``users.on_delete``
    on_delete: Literal["archive", "remove"]
    #: seconds between comparisons with the hub's users (``users.check_every``)
    check_every: float
    #: the service asks a hub (else users are retired only by an admin, here)
    in_hub: bool
    deleted: list[DeletedUser]

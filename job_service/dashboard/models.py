"""What the dashboard's own API resources answer (``api/me``, ``api/dashboard/overview``);
``api/openapi.yaml`` describes them."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel


class Me(BaseModel):
    """Who the caller is to nbjobs, so the page offers what the API will let them see."""

    name: str
    admin: bool
    teacher: bool
    groups: list[str]
    #: the classes whose usage they may see: every class for admins, taught ones else
    classes: list[str]


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

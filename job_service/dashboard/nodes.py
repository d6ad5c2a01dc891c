"""The admins' nodes view: each node's GPUs, the jobs on them, and its drain."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from sqlalchemy import select

from nbjobs.models import placed_on

from ..db import DrainRecord, JobRecord
from ..drains import STARTED, apply, drain, drain_key, jobs_on, undrain
from ..errors import Caller, Forbidden
from .models import DrainInfo, GpuSlot, NodeGpuRow, NodeJob, NodeView

if TYPE_CHECKING:
    from ..context import Context


def nodes_view(ctx: Context, caller: Caller) -> list[NodeView]:
    if not caller.admin:
        raise Forbidden("the nodes view is for nbjobs admins")
    inventory = ctx.backend.inventory()
    with ctx.sessions() as db:
        drains = {d.node: d for d in db.scalars(select(DrainRecord)).all()}
        started = db.execute(
            select(JobRecord.id, JobRecord.user, JobRecord.name, JobRecord.flavor, JobRecord.node)
            .where(JobRecord.state.in_(STARTED))
            .order_by(JobRecord.started_at)
        ).all()
        single = len({n.node for n in inventory}) == 1
        views: dict[str, NodeView] = {}
        for row in inventory:
            view = views.get(row.node)
            if view is None:
                record = drains.get(row.node)
                view = views[row.node] = NodeView(
                    node=row.node,
                    gpus=[],
                    drained=row.drained,
                    drain=DrainInfo(
                        by=record.drained_by, at=record.drained_at, reason=record.reason
                    )
                    if record is not None
                    else None,
                    jobs=[
                        NodeJob(id=j.id, user=j.user, name=j.name, flavor=j.flavor)
                        for j in started
                        if placed_on(j.node, row.node) or (single and not j.node)
                    ],
                )
            view.drained = view.drained or row.drained
            view.gpus.append(
                NodeGpuRow(
                    gpu_type=row.gpu_type,
                    resource=row.resource,
                    total=row.total,
                    allocated=round(row.allocated, 3),
                )
            )
    gpus_only = ctx.config.backend.kind == "local"
    for view in views.values():
        view.gpu_slots = _gpu_slots(ctx, view, drains)
        view.cancellable = len(jobs_on(ctx, view.node, gpus_only=gpus_only))
    return sorted(views.values(), key=lambda v: v.node)


def _gpu_slots(ctx: Context, view: NodeView, drains: dict[str, DrainRecord]) -> list[GpuSlot]:
    """The node's GPUs one by one, where the backend lets admins drain them so."""
    ids = ctx.backend.gpu_ids(view.node)
    if ids is None:
        return []
    slots = []
    for gpu in ids:
        record = drains.get(drain_key(view.node, gpu))
        slots.append(
            GpuSlot(
                id=gpu,
                drained=view.drain is not None or record is not None,
                drain=DrainInfo(by=record.drained_by, at=record.drained_at, reason=record.reason)
                if record is not None
                else None,
                jobs=jobs_on(ctx, view.node, gpus_only=True, gpu=gpu),
            )
        )
    return slots


async def drain_node(
    ctx: Context,
    caller: Caller,
    node: str,
    reason: str,
    cancel_running: bool,
    cancel: Callable[..., Awaitable[object]],
    gpu: str | None = None,
) -> list[NodeView]:
    """Drain ``node`` (or its GPU ``gpu``); with ``cancel_running``, cancel what runs
    there (``cancel``: the service's), saying why."""
    await ctx.in_db(drain, ctx, caller, node, reason, gpu)
    await apply(ctx)
    if cancel_running:
        gpus_only = ctx.config.backend.kind == "local"  # its drain is of the GPUs
        what = f"GPU {gpu} of node {node}" if gpu is not None else f"node {node}"
        why = f"{what} was drained for maintenance" + (f" ({reason})" if reason else "")
        for job_id in await ctx.in_db(jobs_on, ctx, node, gpus_only=gpus_only, gpu=gpu):
            await cancel(caller, job_id, why=why)
    return await ctx.in_db(nodes_view, ctx, caller)


async def undrain_node(
    ctx: Context, caller: Caller, node: str, wake: Callable[[], None], gpu: str | None = None
) -> list[NodeView]:
    await ctx.in_db(undrain, ctx, caller, node, gpu)
    await apply(ctx)
    wake()
    return await ctx.in_db(nodes_view, ctx, caller)

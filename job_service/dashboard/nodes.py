"""The admins' nodes view: each node's GPUs, the jobs on them, and its drain."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from ..db import DrainRecord
from ..drains import (
    apply,
    drain,
    drain_cancels,
    drain_key,
    jobs_on,
    placed,
    started_jobs,
    undrain,
)
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
        started = started_jobs(db)
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
                        for j in placed(started, row.node, single)
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
    for view in views.values():
        on_node = placed(started, view.node, single)
        view.gpu_slots = _gpu_slots(ctx, view, drains, on_node)
        view.cancellable = len(drain_cancels(ctx, on_node))
    return sorted(views.values(), key=lambda v: v.node)


def _gpu_slots(
    ctx: Context, view: NodeView, drains: dict[str, DrainRecord], on_node: list[Any]
) -> list[GpuSlot]:
    """The node's GPUs one by one, where the backend lets admins drain them so, each with
    the started jobs (``on_node``, the node's) holding it."""
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
                jobs=[j.id for j in on_node if gpu in (j.gpus or [])],
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
        what = f"GPU {gpu} of node {node}" if gpu is not None else f"node {node}"
        why = f"{what} was drained for maintenance" + (f" ({reason})" if reason else "")
        for job_id in await ctx.in_db(jobs_on, ctx, node, gpu):
            await cancel(caller, job_id, why=why)
    return await ctx.in_db(nodes_view, ctx, caller)


async def undrain_node(
    ctx: Context, caller: Caller, node: str, wake: Callable[[], None], gpu: str | None = None
) -> list[NodeView]:
    await ctx.in_db(undrain, ctx, caller, node, gpu)
    await apply(ctx)
    wake()
    return await ctx.in_db(nodes_view, ctx, caller)

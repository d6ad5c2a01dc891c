"""Which flavors a caller may use, and what each offers them now.

A flavor is a caller's through one of their groups, a class they teach or take, or
admin; a class that names flavors limits its students to those. Submit, a job
definition's save and the flavors list all ask :func:`may_use`.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from sqlalchemy import select

from nbjobs.config import Flavor
from nbjobs.models import FlavorInfo, JobState

from .db import JobRecord
from .errors import Caller

if TYPE_CHECKING:
    from .classes import ClassRegistry
    from .context import Context


def may_use(classes: ClassRegistry, caller: Caller, flavor: Flavor) -> bool:
    """Whether the caller may run this flavor (its groups, a class, or admin).

    A student of classes that name flavors gets those flavors, and no other
    open flavor (the teacher chose what the class uses); flavors granted to
    one of the caller's groups stay theirs. Teachers get their classes' flavors.
    """
    if caller.admin:
        return True
    if caller.groups & set(flavor.groups):
        return True
    if any(flavor.name in c.flavors for c in classes.taught_by(caller.name)):
        return True
    restricting = [c for c in classes.of_student(caller.name) if c.flavors]
    if restricting:
        return any(flavor.name in c.flavors for c in restricting)
    return not flavor.groups


class Offers:
    """The flavors list: the caller's flavors with free capacity and queue length."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    async def flavors(self, caller: Caller) -> list[FlavorInfo]:
        """Flavors the caller may use, with free capacity and queue length now (the
        queue counted on the database threads, the capacity read on the event loop,
        which keeps the backend's view)."""
        return self.flavors_for(caller, await self.ctx.in_db(self._queued_per_flavor))

    def _queued_per_flavor(self) -> Counter[str]:
        with self.ctx.sessions() as db:
            return Counter(
                db.scalars(
                    select(JobRecord.flavor).where(JobRecord.state == JobState.QUEUED.value)
                ).all()
            )

    def flavors_for(self, caller: Caller, queued: Counter[str] | None = None) -> list[FlavorInfo]:
        """Flavors the caller may use, with free capacity and queue length now."""
        if queued is None:
            queued = self._queued_per_flavor()
        infos = []
        for f in self.ctx.config.flavors:
            if not may_use(self.ctx.classes, caller, f):
                continue
            gpus = self.ctx.backend.free_gpus(f)
            infos.append(
                FlavorInfo(
                    name=f.name,
                    display_name=f.label,
                    description=f.description,
                    gpus=f.gpus,
                    nodes=f.nodes,
                    gpu_type=f.gpu_type,
                    shared=f.shares_a_gpu,
                    cpu=f.cpu,
                    memory=f.memory,
                    time_limit=f.time_limit,
                    available=self.ctx.backend.free_for(f),
                    queued=queued.get(f.name, 0),
                    unavailable=self.ctx.backend.can_ever_fit(f),
                    free_gpus=gpus[0] if gpus else None,
                    total_gpus=gpus[1] if gpus else None,
                    fraction=f.fraction,
                    credits_per_hour=round(f.gpu_equivalents * f.cost_per_gpu_hour, 4)
                    if self.ctx.config.credits.enabled and f.cost_per_gpu_hour and f.gpus
                    else None,
                    maintenance=self.ctx.backend.maintenance(f),
                    simulated=bool(f.gpus) and self.ctx.backend.simulates_gpus,
                    kernels=self.ctx.backend.kernels(f),
                    placement=self.ctx.backend.placement(
                        f, self.ctx.classes.queue_for(caller.name, f.name)
                    ),
                )
            )
        return infos

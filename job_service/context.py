"""What the job service's parts share, handed to each instead of the whole service.

The service builds one :class:`Context` and gives it to its collaborators (budgets,
drains, notifications, the dashboard's views...), with any service operation one of
them needs passed as a callable of its own. So no part imports ``service.py`` or
reaches into it, and each says in its constructor what it uses.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from sqlalchemy.orm import Session, sessionmaker

from nbjobs.config import NbjobsConfig

if TYPE_CHECKING:
    from .backends import Backend
    from .classes import ClassRegistry
    from .counters import ServiceMetrics
    from .live import RunnerStatuses

T = TypeVar("T")


class InDb(Protocol):
    """Runs database work on the service's database threads (``JobService.in_db``)."""

    def __call__(self, func: Callable[..., T], /, *args: Any, **kwargs: Any) -> Awaitable[T]: ...


@dataclass(frozen=True)
class Context:
    """The configuration, the database, the backend and the service's shared state."""

    #: nbjobs.yaml, as the service read it at start
    config: NbjobsConfig
    #: a new database session (``with ctx.sessions() as db:``)
    sessions: sessionmaker[Session]
    #: database work off the event loop: ``await ctx.in_db(func, *args)``
    in_db: InDb
    log: logging.Logger
    backend: Backend
    #: classes from nbjobs.yaml and, in a hub, teachers' groups
    classes: ClassRegistry
    #: what Prometheus scrapes beside the database
    metrics: ServiceMetrics
    #: each started job's status as its runner last wrote it, read once for everyone
    runners: RunnerStatuses

"""What the API's handlers may use of the job service: the operations behind each
endpoint and the parts they reach, as a protocol. The handlers are typed against it
and never import ``service.py``; ``app.py`` checks that ``JobService`` fits it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from nbjobs.config import NbjobsConfig
from nbjobs.models import (
    FlavorInfo,
    Job,
    JobList,
    RerunChanges,
    SubmitRequest,
    UpdateRequest,
    Usage,
)

from .errors import Caller

if TYPE_CHECKING:
    from .approvals import Decisions
    from .audit import Audit
    from .budgets import Budgets
    from .classes import ClassRegistry
    from .context import Context
    from .credits import Credits
    from .deleted_users import Departures
    from .dispatch import Dispatcher
    from .events import ChangeFeed
    from .invitations import Invitations
    from .notifications.outbox import Outbox
    from .notifications.settings import NotifySettingsStore
    from .retention import Retention
    from .schedules.definitions import Definitions
    from .schedules.ticker import Ticker
    from .telemetry import TelemetryCollector

T = TypeVar("T")


class ServiceFacade(Protocol):
    """The job service as its handlers see it."""

    config: NbjobsConfig
    #: set once the service begins to stop (requests still in flight are then 503s)
    stopping: bool
    ctx: Context
    audit: Audit
    classes: ClassRegistry
    budgets: Budgets
    credits: Credits
    decisions: Decisions
    definitions: Definitions
    departures: Departures
    dispatcher: Dispatcher
    feed: ChangeFeed
    invitations: Invitations
    notify_settings: NotifySettingsStore
    outbox: Outbox
    retention: Retention
    telemetry: TelemetryCollector
    ticker: Ticker

    def in_db(self, func: Callable[..., T], /, *args: Any, **kwargs: Any) -> Awaitable[T]: ...

    def read_db(self, func: Callable[..., T], /, *args: Any, **kwargs: Any) -> Awaitable[T]: ...

    def flavors(self, caller: Caller) -> Awaitable[list[FlavorInfo]]: ...

    def submit(
        self,
        caller: Caller,
        request: SubmitRequest,
        rerun_of: str | None = None,
        *,
        definition: tuple[str, str] | None = None,
    ) -> Awaitable[Job]: ...

    def get(self, caller: Caller, job_id: str) -> Job: ...

    def list_jobs(
        self,
        caller: Caller,
        *,
        state: str | None = None,
        flavor: str | None = None,
        user: str | None = None,
        class_name: str | None = None,
        q: str | None = None,
        scope: str | None = None,
        before: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> JobList: ...

    def update(self, caller: Caller, job_id: str, request: UpdateRequest) -> Job: ...

    def cancel(self, caller: Caller, job_id: str, why: str | None = None) -> Awaitable[Job]: ...

    def rerun(
        self,
        caller: Caller,
        job_id: str,
        *,
        as_owner: bool = False,
        changes: RerunChanges | None = None,
    ) -> Awaitable[Job]: ...

    def forget(self, caller: Caller, job_id: str) -> None: ...

    def open_log(self, caller: Caller, job_id: str, note: bool = True) -> int | None: ...

    def is_final(self, job_id: str) -> bool: ...

    def usage(
        self,
        caller: Caller,
        *,
        since: str | None = None,
        until: str | None = None,
        by: str = "user",
    ) -> Usage: ...

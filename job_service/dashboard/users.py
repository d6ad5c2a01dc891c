"""The dashboard's Users view: what becomes of a deleted hub user's things
(``users.on_delete``), the users retired so far, and an admin's deletion of a user
through nbjobs (job_service/deleted_users.py does the work)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tornado import web

from ..api_base import APIHandler
from ..errors import ServiceError
from .models import DeletedUser, UsersView

if TYPE_CHECKING:
    from ..deleted_users import DeletedUserRecord

#: who may see and delete users here
ADMINS_ONLY = (
    "deleting users and seeing who was deleted is for nbjobs admins; ask one to delete the "
    "user in the hub or on the dashboard's Users view"
)


def shown(record: DeletedUserRecord) -> DeletedUser:
    """A retirement as the dashboard shows it."""
    return DeletedUser(
        name=record.name,
        noticed_at=record.noticed_at,
        why=record.why,
        action="remove" if record.action == "remove" else "archive",
        archived_as=record.archived_as,
        jobs=record.jobs,
        cancelled=record.cancelled,
        definitions=record.definitions,
        settings=record.settings,
        folder=record.folder,
        account=record.account,
        problems=record.problems,
    )


class UsersHandler(APIHandler):
    """``GET api/dashboard/users``: the setting and the users retired (admins)."""

    async def get(self) -> None:
        if not self.caller.admin:
            raise web.HTTPError(403, "%s", ADMINS_ONLY)
        departures = self.service.departures
        records = await self._call_sync(departures.deleted)
        config = self.service.config.users
        self.send(
            UsersView(
                on_delete=config.on_delete,
                check_every=config.check_every or 60.0,
                in_hub=self.service.classes.hub is not None,
                deleted=[shown(r) for r in records],
            )
        )


class UserHandler(APIHandler):
    """``DELETE api/dashboard/users/NAME``: an admin deletes a user through nbjobs (in a
    hub, the hub user too); their things are archived or removed as ``users.on_delete``
    says."""

    async def delete(self, name: str) -> None:
        if not self.caller.admin:
            raise web.HTTPError(403, "%s", ADMINS_ONLY)
        try:
            record = await self.service.departures.delete_user(name, self.caller.name)
        except ServiceError as exc:
            raise web.HTTPError(exc.status, "%s", exc.message) from None
        self.send(shown(record))

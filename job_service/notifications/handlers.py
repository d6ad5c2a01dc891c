"""``api/notifications``: what the caller is told and where, and the messages sent."""

from __future__ import annotations

from tornado import web

from ..api_base import APIHandler
from .models import ConfirmAddress, NotifySettings


class NotificationsHandler(APIHandler):
    async def get(self) -> None:
        user = self.get_query_argument("user", None) or None
        limit = self.int_arg("limit", 50, minimum=1, maximum=500)
        outbox = self.service.outbox
        self.send(await self._call_sync(outbox.list, self.caller, user=user, limit=limit))


class NotifySettingsHandler(APIHandler):
    async def get(self) -> None:
        self.send(await self._call_sync(self.service.notify_settings.list, self.caller))

    async def put(self) -> None:
        settings = self.body(NotifySettings)
        store = self.service.notify_settings
        self.send(await self._call_sync(store.put, self.caller, settings))

    async def delete(self) -> None:
        job = self.get_query_argument("job", None) or None
        definition = self.get_query_argument("definition", None) or None
        store = self.service.notify_settings
        await self._call_sync(store.remove, self.caller, job_id=job, definition_id=definition)
        self.set_status(204)
        self.finish()


class ConfirmAddressHandler(APIHandler):
    async def post(self) -> None:
        body = self.body(ConfirmAddress)
        store = self.service.notify_settings
        self.send(await self._call_sync(store.confirm, self.caller, body.code))


def api_routes(api: str) -> list[tuple[str, type[web.RequestHandler]]]:
    return [
        (api + "/notifications/?", NotificationsHandler),
        (api + "/notifications/settings", NotifySettingsHandler),
        (api + "/notifications/confirm", ConfirmAddressHandler),
    ]

"""``api/definitions``: job definitions and their runs over HTTP (every handler is
the API's own: authenticated, JSON, refusals as sentences)."""

from __future__ import annotations

from http import HTTPStatus

from tornado import web

from ..api_base import JOB_ID, APIHandler
from .models import DefinitionRequest, DefinitionUpdate


class DefinitionsHandler(APIHandler):
    async def get(self) -> None:
        user = self.get_query_argument("user", None) or None
        self.send(await self._call_sync(self.service.definitions.list, self.caller, user=user))

    async def post(self) -> None:
        request = self.body(DefinitionRequest)
        definition = await self._call_sync(self.service.definitions.create, self.caller, request)
        self.set_header("Location", self.request.path.rstrip("/") + f"/{definition.id}")
        self.send(definition, status=HTTPStatus.CREATED)


class DefinitionHandler(APIHandler):
    async def get(self, definition_id: str) -> None:
        definitions = self.service.definitions
        self.send(await self._call_sync(definitions.get, self.caller, definition_id))

    async def patch(self, definition_id: str) -> None:
        change = self.body(DefinitionUpdate)
        definitions = self.service.definitions
        self.send(await self._call_sync(definitions.update, self.caller, definition_id, change))

    async def delete(self, definition_id: str) -> None:
        await self._call_sync(self.service.definitions.delete, self.caller, definition_id)
        self.set_status(HTTPStatus.NO_CONTENT)
        self.finish()


class PauseHandler(APIHandler):
    paused = True

    async def post(self, definition_id: str) -> None:
        definitions = self.service.definitions
        self.send(
            await self._call_sync(definitions.set_paused, self.caller, definition_id, self.paused)
        )


class ResumeHandler(PauseHandler):
    paused = False


class RunNowHandler(APIHandler):
    async def post(self, definition_id: str) -> None:
        run = await self._call(self.service.ticker.run_now(self.caller, definition_id))
        self.send(run, status=HTTPStatus.CREATED)


class RunsHandler(APIHandler):
    async def get(self, definition_id: str) -> None:
        limit = self.int_arg("limit", 50, minimum=1, maximum=500)
        definitions = self.service.definitions
        self.send(await self._call_sync(definitions.runs, self.caller, definition_id, limit=limit))


def api_routes(api: str) -> list[tuple[str, type[web.RequestHandler]]]:
    """The routes under ``api`` (the service's ``.../api``)."""
    one = rf"/definitions/(?P<definition_id>{JOB_ID})"
    return [
        (api + "/definitions/?", DefinitionsHandler),
        (api + one + "/?", DefinitionHandler),
        (api + one + "/pause", PauseHandler),
        (api + one + "/resume", ResumeHandler),
        (api + one + "/run", RunNowHandler),
        (api + one + "/runs", RunsHandler),
    ]

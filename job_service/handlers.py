"""The job service's REST API (``api/openapi.yaml`` describes it), as tornado handlers."""

from __future__ import annotations

import asyncio
import json
from http import HTTPStatus
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from tornado import web
from tornado.iostream import StreamClosedError

from nbjobs.models import CreateClass, RosterChange, SubmitRequest, UpdateRequest

from .auth import Authenticator, bearer_token
from .service import Caller, JobService, ServiceError

Body = TypeVar("Body", bound=BaseModel)
LOG_CHUNK = 64 * 1024


class APIHandler(web.RequestHandler):
    """JSON in and out; every request authenticated; errors as ``{"message": ...}``."""

    caller: Caller

    @property
    def service(self) -> JobService:
        service: JobService = self.settings["nbjobs_service"]
        return service

    @property
    def authenticator(self) -> Authenticator:
        auth: Authenticator = self.settings["nbjobs_auth"]
        return auth

    def check_xsrf_cookie(self) -> None:
        """Token-authenticated API: no cookies, so no XSRF to check."""

    async def prepare(self) -> None:
        token = bearer_token(self.request.headers, self.get_query_argument("token", None))
        caller = await self.authenticator.caller_for_token(token) if token else None
        if caller is None:
            self.set_header("WWW-Authenticate", 'token realm="nbjobs"')
            raise web.HTTPError(401, reason="send a JupyterHub API token: Authorization: token …")
        self.caller = caller
        await self.service.classes.refresh()

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        message = self._reason
        exc_info = kwargs.get("exc_info")
        if exc_info is not None:
            exc = exc_info[1]
            if isinstance(exc, web.HTTPError) and exc.log_message:
                message = exc.log_message % exc.args if exc.args else exc.log_message
            elif isinstance(exc, web.HTTPError) and exc.reason:
                message = exc.reason
            problems = getattr(exc, "problems", None)
            if problems:
                self.set_header("Content-Type", "application/json")
                body = {"message": message, "problems": [p.model_dump() for p in problems]}
                self.finish(json.dumps(body))
                return
        if status_code >= 500:
            message = "the job service failed on this request; its log says why"
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"message": message}))

    def send(self, model: BaseModel | list[Any], status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        if isinstance(model, list):
            self.finish(json.dumps([m.model_dump(mode="json") for m in model]))
        else:
            self.finish(model.model_dump_json())

    def body(self, model: type[Body]) -> Body:
        try:
            data = json.loads(self.request.body or b"{}")
        except json.JSONDecodeError as exc:
            raise web.HTTPError(400, "the request body is not JSON: %s", exc.msg) from None
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            msg = str(first["msg"]).removeprefix("Value error, ")
            if first["type"] == "extra_forbidden":
                msg = "is not a field of this request"
            raise web.HTTPError(400, "%s", f"{where}: {msg}" if where else msg) from None

    def int_arg(self, name: str, default: int) -> int:
        value = self.get_query_argument(name, None)
        if value is None:
            return default
        try:
            return int(value)
        except ValueError:
            raise web.HTTPError(400, "%s must be a whole number, not %r", name, value) from None

    async def _call(self, coro: Any) -> Any:
        try:
            return await coro if asyncio.iscoroutine(coro) else coro
        except ServiceError as exc:
            raise _http_error(exc) from None


class HealthHandler(APIHandler):
    async def get(self) -> None:
        from nbjobs.cli import package_version

        self.finish({"status": "ok", "version": package_version(), "user": self.caller.name})


class FlavorsHandler(APIHandler):
    async def get(self) -> None:
        self.send(self.service.flavors_for(self.caller))


class JobsHandler(APIHandler):
    async def get(self) -> None:
        jobs = await self._call_sync(
            self.service.list_jobs,
            self.caller,
            state=self.get_query_argument("state", None),
            flavor=self.get_query_argument("flavor", None),
            user=self.get_query_argument("user", None),
            class_name=self.get_query_argument("class", None),
            limit=self.int_arg("limit", 50),
            offset=self.int_arg("offset", 0),
        )
        self.send(jobs)

    async def post(self) -> None:
        request = self.body(SubmitRequest)
        job = await self._call(self.service.submit(self.caller, request))
        self.set_header("Location", self.request.path.rstrip("/") + f"/{job.id}")
        self.send(job, status=HTTPStatus.CREATED)

    async def _call_sync(self, func: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ServiceError as exc:
            raise web.HTTPError(exc.status, "%s", exc.message) from None


class JobHandler(JobsHandler):
    async def get(self, job_id: str) -> None:  # type: ignore[override]
        self.send(await self._call_sync(self.service.get, self.caller, job_id))

    async def patch(self, job_id: str) -> None:
        request = self.body(UpdateRequest)
        self.send(await self._call_sync(self.service.update, self.caller, job_id, request))

    async def delete(self, job_id: str) -> None:
        await self._call_sync(self.service.forget, self.caller, job_id)
        self.set_status(204)
        self.finish()


class CancelHandler(APIHandler):
    async def post(self, job_id: str) -> None:
        self.send(await self._call(self.service.cancel(self.caller, job_id)))


class RerunHandler(APIHandler):
    async def post(self, job_id: str) -> None:
        job = await self._call(self.service.rerun(self.caller, job_id))
        self.send(job, status=HTTPStatus.CREATED)


class LogsHandler(APIHandler):
    """The job's log as text; ``?follow=1`` streams it until the job ends."""

    async def get(self, job_id: str) -> None:
        try:
            path = self.service.log_file(self.caller, job_id)
        except ServiceError as exc:
            raise web.HTTPError(exc.status, "%s", exc.message) from None
        follow = self.get_query_argument("follow", "0") in ("1", "true", "yes")
        offset = max(0, self.int_arg("offset", 0))
        self.set_header("Content-Type", "text/plain; charset=utf-8")
        self.set_header("Cache-Control", "no-cache")
        self.set_header("X-Accel-Buffering", "no")
        offset = self._send_from(path, offset)
        if not follow:
            self.finish()
            return
        try:
            while True:
                await self.flush()
                done = self.service.is_final(job_id)
                offset = self._send_from(path, offset)
                if done:
                    break
                await asyncio.sleep(0.25)
            await self.flush()
        except StreamClosedError:
            return
        self.finish()

    def _send_from(self, path: Path, offset: int) -> int:
        try:
            with open(path, "rb") as f:
                f.seek(offset)
                while chunk := f.read(LOG_CHUNK):
                    self.write(chunk)
                    offset += len(chunk)
        except FileNotFoundError:
            pass
        return offset


class ClassesHandler(APIHandler):
    """``GET api/classes``: the caller's classes (admins: all); ``POST``: create one."""

    async def get(self) -> None:
        self.send(self.service.classes.visible_to(self.caller))

    async def post(self) -> None:
        request = self.body(CreateClass)
        info = await self._call(self.service.classes.create(self.caller, request))
        self.set_header("Location", self.request.path.rstrip("/") + f"/{info.name}")
        self.send(info, status=HTTPStatus.CREATED)


class ClassHandler(APIHandler):
    """``GET`` / ``DELETE api/classes/{name}``."""

    async def get(self, name: str) -> None:
        info = self.service.classes.get(name)
        if info is None or not (self.caller.admin or self.caller.name in info.teachers):
            raise web.HTTPError(
                404, "no class %r of yours; `nbjobs class list` shows your classes", name
            )
        self.send(info)

    async def delete(self, name: str) -> None:
        await self._call(self.service.classes.delete(self.caller, name))
        self.set_status(204)
        self.finish()


class ClassStudentsHandler(APIHandler):
    """``POST`` adds students to a class, ``DELETE`` removes them (all or none)."""

    async def post(self, name: str) -> None:
        change = self.body(RosterChange)
        classes = self.service.classes
        self.send(await self._call(classes.add_students(self.caller, name, change.students)))

    async def delete(self, name: str) -> None:
        change = self.body(RosterChange)
        classes = self.service.classes
        self.send(await self._call(classes.remove_students(self.caller, name, change.students)))


def _http_error(exc: ServiceError) -> web.HTTPError:
    """The HTTP error for a refusal; a roster's problems ride along for the body."""
    error = web.HTTPError(exc.status, "%s", exc.message)
    error.problems = getattr(exc, "problems", None)  # type: ignore[attr-defined]
    return error


class UsageHandler(APIHandler):
    async def get(self) -> None:
        self.send(self.service.usage(self.caller))


def routes(prefix: str) -> list[tuple[str, type[web.RequestHandler]]]:
    """The API's URL patterns under ``prefix``.

    ``/`` standalone; ``/services/nbjobs/`` under a hub.
    """
    api = prefix.rstrip("/") + "/api"
    job = r"/jobs/(?P<job_id>[0-9a-f]{1,32})"
    return [
        (api + "/health", HealthHandler),
        (api + "/flavors", FlavorsHandler),
        (api + "/jobs/?", JobsHandler),
        (api + job + "/?", JobHandler),
        (api + job + "/cancel", CancelHandler),
        (api + job + "/rerun", RerunHandler),
        (api + job + "/logs", LogsHandler),
        (api + "/usage", UsageHandler),
        (api + "/classes/?", ClassesHandler),
        (api + r"/classes/(?P<name>[^/]+)/?", ClassHandler),
        (api + r"/classes/(?P<name>[^/]+)/students", ClassStudentsHandler),
    ]

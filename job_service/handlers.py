"""The job service's REST API (``api/openapi.yaml`` describes it), as tornado handlers."""

from __future__ import annotations

import asyncio
import json
import os
import re
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
#: the largest number a query argument may carry (offsets): what every database and
#: ``seek`` takes (2**53 - 1, also exact in JavaScript)
MAX_INT_ARG = 2**53 - 1
#: a job id in a URL (the service makes 12 hex digits; up to 32 are accepted)
JOB_ID = "[0-9a-f]{1,32}"


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
        if status_code == 405:
            allowed = self.allowed_methods()
            self.set_header("Allow", ", ".join(allowed))
            message = (
                f"{self.request.method} is not something {self.request.path} answers; "
                f"it answers {', '.join(allowed) or 'nothing'} (see api/openapi.yaml)"
            )
        if status_code >= 500:
            message = "the job service failed on this request; its log says why"
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"message": message}))

    def allowed_methods(self) -> list[str]:
        """The HTTP methods this handler implements (for a 405's message and Allow header)."""
        return [
            m
            for m in self.SUPPORTED_METHODS
            if getattr(type(self), m.lower(), None) is not getattr(web.RequestHandler, m.lower())
        ]

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

    def int_arg(
        self, name: str, default: int, *, minimum: int | None = None, maximum: int = MAX_INT_ARG
    ) -> int:
        """A whole-number query argument; out of ``minimum..maximum`` is a 400 that says so.

        The upper bound keeps numbers a database or ``seek`` cannot take (``10**30``)
        from ever reaching them.
        """
        value = self.get_query_argument(name, None)
        if value is None:
            return default
        try:
            number = int(value)
        except ValueError:
            raise web.HTTPError(400, "%s must be a whole number, not %r", name, value) from None
        if number > maximum or (minimum is not None and number < minimum):
            low = "" if minimum is None else f"from {minimum} "
            raise web.HTTPError(
                400, "%s must be a whole number %sup to %d, not %s", name, low, maximum, value
            )
        return number

    async def _call_sync(self, func: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ServiceError as exc:
            raise web.HTTPError(exc.status, "%s", exc.message) from None

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
            offset=self.int_arg("offset", 0, minimum=0),
        )
        self.send(jobs)

    async def post(self) -> None:
        request = self.body(SubmitRequest)
        job = await self._call(self.service.submit(self.caller, request))
        self.set_header("Location", self.request.path.rstrip("/") + f"/{job.id}")
        self.send(job, status=HTTPStatus.CREATED)


class JobHandler(APIHandler):
    """``GET`` / ``PATCH`` / ``DELETE api/jobs/{job_id}`` (any other method: 405)."""

    async def get(self, job_id: str) -> None:
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
        offset = self.int_arg("offset", 0, minimum=0)
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
                if offset >= os.fstat(f.fileno()).st_size:
                    return offset  # nothing new (and no seek past what a file system takes)
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


class NotFoundHandler(APIHandler):
    """Any path under ``api/`` that is no resource: a JSON 404 (after the token check)."""

    async def prepare(self) -> None:
        await super().prepare()
        path = self.request.path
        job = path.split("/api/jobs/", 1)[1].split("/")[0] if "/api/jobs/" in path else ""
        if job and not re.fullmatch(JOB_ID, job):
            raise web.HTTPError(
                404,
                "%s",
                f"no job {job!r}: a job id is up to 32 hex digits (0-9, a-f); "
                "`nbjobs list` shows your jobs",
            )
        raise web.HTTPError(
            404, "%s", f"no such resource: {path}; api/openapi.yaml lists the job service's API"
        )


def routes(prefix: str) -> list[tuple[str, type[web.RequestHandler]]]:
    """The API's URL patterns under ``prefix``.

    ``/`` standalone; ``/services/nbjobs/`` under a hub.
    """
    api = prefix.rstrip("/") + "/api"
    job = rf"/jobs/(?P<job_id>{JOB_ID})"
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
        # last: every other path under api/ is a JSON 404, never tornado's HTML page
        (api + r"(?:/.*)?", NotFoundHandler),
    ]

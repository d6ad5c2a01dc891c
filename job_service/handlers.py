"""The job service's REST API (``api/openapi.yaml`` describes it), as tornado handlers."""

from __future__ import annotations

import asyncio
import functools
import json
import math
import os
import re
from collections.abc import Awaitable, Callable
from datetime import datetime, timezone
from http import HTTPStatus
from types import TracebackType
from typing import Any, NoReturn, TypeVar

from prometheus_client import CONTENT_TYPE_LATEST as PROMETHEUS_CONTENT_TYPE
from pydantic import BaseModel, ValidationError
from tornado import web
from tornado.iostream import StreamClosedError
from tornado.log import app_log

from nbjobs.models import (
    BudgetGrant,
    CreateClass,
    RejectRequest,
    RerunChanges,
    RosterChange,
    SubmitRequest,
    UpdateRequest,
)

from .approvals import approve, reject
from .auth import Authenticator, bearer_token
from .errors import Caller, ServiceError
from .metrics import render as render_metrics
from .service import JobService

Body = TypeVar("Body", bound=BaseModel)
#: how much of a log one read takes (and a reader of the log costs the service)
LOG_CHUNK = 256 * 1024
#: how deep a request body may nest objects and arrays (the API's own bodies need 3;
#: parameters get the rest). Deeper JSON is a 400, never a parser's RecursionError.
MAX_BODY_DEPTH = 64
#: how far past ``limits.request_body`` a body is still read (and dropped) so that its 413
#: reaches the caller cleanly; a larger one is refused at once and its connection closed
LINGER_BYTES = 64 * 1024**2
#: the most digits a whole number in a request body may have
MAX_DIGITS = 1000
#: a ``token=`` (or ``access_token=``) value in a query string, for redacting it from logs
_QUERY_TOKEN = re.compile(r"((?:^|[?&;])(?:access_)?token=)[^&;#]*", re.IGNORECASE)
#: the largest number a query argument may carry (offsets): what every database and
#: ``seek`` takes (2**53 - 1, also exact in JavaScript)
MAX_INT_ARG = 2**53 - 1
#: a job id in a URL (the service makes 12 hex digits; up to 32 are accepted)
JOB_ID = "[0-9a-f]{1,32}"


def redact_tokens(uri: str) -> str:
    """``uri`` with the value of every ``token=`` query argument replaced by ``[secret]``."""
    return _QUERY_TOKEN.sub(r"\1[secret]", uri)


def size_text(size: int) -> str:
    """A byte count for people: ``900 bytes``, ``64 KiB``, ``5.2 MiB``."""
    if size < 1024:
        return f"{size} bytes"
    value, unit = size / 1024, "KiB"
    for bigger in ("MiB", "GiB"):
        if value < 1024:
            break
        value, unit = value / 1024, bigger
    return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"


def _refusing_large_bodies(
    method: Callable[..., Awaitable[None]],
) -> Callable[..., Awaitable[None]]:
    """``method``, answering 413 instead when the body it was sent was over the limit."""

    @functools.wraps(method)
    async def checked(self: APIHandler, *args: Any, **kwargs: Any) -> None:
        if self._body_received > self.body_limit:
            self._refuse_body(self._body_received)
        await method(self, *args, **kwargs)

    return checked


@web.stream_request_body
class APIHandler(web.RequestHandler):
    """JSON in and out; every request authenticated; errors as ``{"message": ...}``.

    The body is streamed in (``data_received``) rather than read whole by tornado
    first, and kept only up to ``limits.request_body``: past it, it is counted and
    dropped, and the request is a 413 whatever its method. A body whose
    ``Content-Length`` is more than :data:`LINGER_BYTES` over the limit is
    refused before any of it is read. The service never holds more than the limit.
    """

    caller: Caller
    _body_parts: list[bytes]
    _body_received: int = 0

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Every HTTP method of every API handler first refuses a body over the limit."""
        super().__init_subclass__(**kwargs)
        for name in ("get", "post", "put", "patch", "delete"):
            if name in cls.__dict__:
                setattr(cls, name, _refusing_large_bodies(cls.__dict__[name]))

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

    @property
    def body_limit(self) -> int:
        """The largest request body this service reads (``limits.request_body``)."""
        return self.service.config.limits.request_body

    async def prepare(self) -> None:
        self._body_parts, self._body_received = [], 0
        try:
            query_token = self.get_query_argument("token", None)
        except web.HTTPError:  # not decodable: no token anyone could have been given
            query_token = None
        # which hub groups are classes (never counted as the caller's groups), first
        await self.service.classes.refresh()
        await self.authenticate(bearer_token(self.request.headers, query_token))
        declared = self.request.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > self.body_limit + LINGER_BYTES:
            self._refuse_body(int(declared))  # tornado then closes the connection
        if not declared.isdigit() or int(declared) > self.body_limit:
            # Past the limit (or of no stated length) a body is read and dropped
            # (data_received), so that the 413 reaches a client still sending it
            # rather than a reset connection; tornado's own cap is below that.
            connection: Any = self.request.connection
            connection.set_max_body_size(self.body_limit + LINGER_BYTES)

    async def authenticate(self, token: str | None) -> None:
        """Set :attr:`caller` from the request's token; no caller is a 401."""
        caller = await self.authenticator.caller_for_token(token) if token else None
        if caller is None:
            self._unauthenticated()
        if caller.refused:
            raise web.HTTPError(403, "%s", caller.refused)
        self.caller = caller

    def _unauthenticated(self) -> NoReturn:
        self.set_header("WWW-Authenticate", 'token realm="nbjobs"')
        raise web.HTTPError(401, reason="send a JupyterHub API token: Authorization: token …")

    def data_received(self, chunk: bytes) -> None:
        """Keep the body up to the limit; past it, count and drop (:meth:`json_body` refuses)."""
        self._body_received += len(chunk)
        if self._body_received <= self.body_limit:
            self._body_parts.append(chunk)
        else:
            self._body_parts.clear()

    def _refuse_body(self, size: int) -> NoReturn:
        raise web.HTTPError(
            413,
            "%s",
            f"the request body is {size_text(size)}; the job service reads at most "
            f"{size_text(self.body_limit)} (limits.request_body in nbjobs.yaml)",
        )

    def _request_summary(self) -> str:
        # what tornado's warnings and errors name the request by: never with a token
        request = self.request
        return f"{request.method} {redact_tokens(request.uri or '')} ({request.remote_ip})"

    def log_exception(
        self,
        typ: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Like tornado's, but never logs the request's URI (it may carry ``?token=``)."""
        if isinstance(value, web.HTTPError):
            super().log_exception(typ, value, tb)  # through _request_summary, redacted
            return
        app_log.error("Uncaught exception %s", self._request_summary(), exc_info=value)

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
        if status_code >= 500 and not (exc_info and isinstance(exc_info[1], web.HTTPError)):
            # an uncaught exception: its text is for the log, not the caller
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

    def json_body(self) -> dict[str, Any]:
        """The request body as a JSON object (empty: ``{}``); anything else is a 400 or 413.

        Every way a caller's bytes can fail is a sentence: too large, not UTF-8, not
        JSON (``NaN`` and numbers out of a float's range included), nested deeper
        than :data:`MAX_BODY_DEPTH`, or JSON that is not an object.
        """
        if self._body_received > self.body_limit:
            self._refuse_body(self._body_received)
        raw = b"".join(self._body_parts) or b"{}"
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise web.HTTPError(
                400,
                "%s",
                f"the request body is not UTF-8 text (byte 0x{raw[exc.start]:02x} at "
                f"position {exc.start}); send JSON encoded as UTF-8",
            ) from None
        try:
            data = json.loads(
                text, parse_constant=_no_constant, parse_float=_finite_float, parse_int=_whole
            )
        except RecursionError:
            raise web.HTTPError(400, "%s", _too_deep()) from None
        except ValueError as exc:  # JSONDecodeError, or a number Python will not convert
            reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
            raise web.HTTPError(400, "the request body is not JSON: %s", reason) from None
        if not isinstance(data, dict):
            raise web.HTTPError(
                400,
                "%s",
                f"the request body must be a JSON object ({{...}}), not {_json_kind(data)}",
            )
        if _deeper_than(data, MAX_BODY_DEPTH):
            raise web.HTTPError(400, "%s", _too_deep())
        return data

    def body(self, model: type[Body]) -> Body:
        """The request body as ``model``; a body that does not fit is a 400 naming the field."""
        data = self.json_body()
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
        """``func`` (the service's database work) on the service's database threads."""
        try:
            return await self.service.in_db(func, *args, **kwargs)
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
        self.send(await self.service.flavors(self.caller))


class JobsHandler(APIHandler):
    async def get(self) -> None:
        jobs = await self._call_sync(
            self.service.list_jobs,
            self.caller,
            state=self.get_query_argument("state", None),
            flavor=self.get_query_argument("flavor", None),
            user=self.get_query_argument("user", None),
            class_name=self.get_query_argument("class", None),
            # An empty value is no filter, as for state and flavor.
            q=self.get_query_argument("q", None) or None,
            scope=self.get_query_argument("scope", None) or None,
            before=self.get_query_argument("before", None) or None,
            limit=self.int_arg("limit", 50),
            offset=self.int_arg("offset", 0, minimum=0),
        )
        self.send(jobs)

    async def post(self) -> None:
        request = self.body(SubmitRequest)
        self._check_parameters_size(request)
        job = await self._call(self.service.submit(self.caller, request))
        self.set_header("Location", self.request.path.rstrip("/") + f"/{job.id}")
        self.send(job, status=HTTPStatus.CREATED)

    def _check_parameters_size(self, request: SubmitRequest) -> None:
        """Parameters over ``limits.parameters`` (as JSON) are a 400 saying both sizes."""
        limit = self.service.config.limits.parameters
        as_json = json.dumps(request.parameters, ensure_ascii=False, separators=(",", ":"))
        size = len(as_json.encode("utf-8"))
        if size > limit:
            raise web.HTTPError(
                400,
                "%s",
                f"parameters: {size_text(size)} as JSON, over the {size_text(limit)} a job "
                "may be given (limits.parameters in nbjobs.yaml); put large inputs in a file "
                "next to the notebook and pass its name",
            )


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


class ApproveHandler(APIHandler):
    async def post(self, job_id: str) -> None:
        self.send(await self._call_sync(approve, self.service, self.caller, job_id))


class RejectHandler(APIHandler):
    async def post(self, job_id: str) -> None:
        request = self.body(RejectRequest)
        self.send(await self._call_sync(reject, self.service, self.caller, job_id, request.reason))


class RerunHandler(APIHandler):
    async def post(self, job_id: str) -> None:
        on_behalf = self.get_query_argument("as", "")
        if on_behalf not in ("", "owner"):
            raise web.HTTPError(400, "%s", f"as={on_behalf!r}: the only choice is as=owner")
        changes = self.body(RerunChanges) if self._body_received else None
        rerun = self.service.rerun(
            self.caller, job_id, as_owner=on_behalf == "owner", changes=changes
        )
        job = await self._call(rerun)
        self.send(job, status=HTTPStatus.CREATED)


class LogsHandler(APIHandler):
    """``GET api/jobs/{id}/logs``: the job's log as text, streamed.

    ``?offset=N`` starts at byte N, ``?tail=N`` sends the last N bytes (not both);
    ``?follow=1`` goes on sending what the job writes until it ends. The log is read
    in chunks of :data:`LOG_CHUNK` (off the event loop), and each chunk is written and
    flushed before the next is read: a reader costs the service one chunk of memory,
    whatever the log's size and however slowly the reader reads. The log is opened
    without following links (:meth:`~.service.JobService.open_log`): one the user
    replaced with a link is a 409, never the linked file.
    """

    async def get(self, job_id: str) -> None:
        follow = self.get_query_argument("follow", "0") in ("1", "true", "yes")
        if self.get_query_argument("tail", None) is not None:
            if self.get_query_argument("offset", None) is not None:
                raise web.HTTPError(
                    400, "give offset (bytes to skip) or tail (the last bytes), not both"
                )
            tail: int | None = self.int_arg("tail", 0, minimum=0)
        else:
            tail = None
        offset = self.int_arg("offset", 0, minimum=0)
        log = await self._open(job_id)
        try:
            if tail is not None and log is not None:
                offset = max(0, os.fstat(log).st_size - tail)
            # where this answer starts in the log, so a reader of the tail can resume
            self.set_header("X-Log-Offset", str(offset))
            self.set_header("Content-Type", "text/plain; charset=utf-8")
            self.set_header("Cache-Control", "no-cache")
            self.set_header("X-Accel-Buffering", "no")
            if log is not None:
                # without follow: the log as it is now, not what is written meanwhile
                end = None if follow else os.fstat(log).st_size
                offset = await self._send(log, offset, end)
            while follow:
                done = await self.service.in_db(self.service.is_final, job_id)
                # Opened again each time: a queued job's log appears when it starts,
                # and a re-queued job's log starts again.
                if log is not None:
                    os.close(log)
                    log = None
                try:
                    log = await self._open(job_id)
                except web.HTTPError:
                    break  # its files were changed while it ran: the 200 is sent already
                if log is not None:
                    offset = await self._send(log, offset, None)
                if done:
                    break
                await self.flush()
                await asyncio.sleep(0.25)
            self.finish()
        except StreamClosedError:
            return  # the reader went away
        finally:
            if log is not None:
                os.close(log)

    async def _open(self, job_id: str) -> int | None:
        try:
            return await self.service.in_db(self.service.open_log, self.caller, job_id)
        except ServiceError as exc:
            raise web.HTTPError(exc.status, "%s", exc.message) from None

    async def _send(self, log: int, offset: int, end: int | None) -> int:
        """Send the log from ``offset`` to ``end`` (None: its end), a chunk at a time;
        return the offset reached."""
        if end is None:
            end = os.fstat(log).st_size
        while offset < end:
            chunk = await asyncio.to_thread(os.pread, log, min(LOG_CHUNK, end - offset), offset)
            if not chunk:
                break  # cut shorter meanwhile
            self.write(chunk)
            await self.flush()  # the next chunk is read once this one is on its way
            offset += len(chunk)
        return offset


class JobMetricsHandler(APIHandler):
    """``GET api/jobs/{id}/metrics``: the job's telemetry series, summary and hint.

    ``?since=TIME`` (ISO 8601) sends only the samples taken after it, for a reader
    that already has the earlier ones.
    """

    async def get(self, job_id: str) -> None:
        since = self.time_arg("since")
        telemetry = self.service.telemetry
        self.send(await self._call_sync(telemetry.job_metrics, self.caller, job_id, since))

    def time_arg(self, name: str) -> datetime | None:
        """A time query argument (ISO 8601; without a zone: UTC); anything else is a 400."""
        value = self.get_query_argument(name, None)
        if value is None:
            return None
        try:
            when = datetime.fromisoformat(value.strip().upper())
            if when.tzinfo is None:
                when = when.replace(tzinfo=timezone.utc)
            return when.astimezone(timezone.utc)
        except (ValueError, OverflowError):
            raise web.HTTPError(
                400,
                "%s",
                f"{name} must be a time in ISO 8601, like 2025-01-31T12:00:00Z, not {value[:80]!r}",
            ) from None


class PrometheusHandler(APIHandler):
    """``GET {prefix}metrics``: the service's metrics in Prometheus' text format.

    Not part of the jobs API (``api/openapi.yaml``): Prometheus scrapes it with an nbjobs
    admin's token or one granted scraping (:meth:`~.auth.Authenticator.may_scrape`); any
    other user's token is a 403, none a 401.
    """

    async def authenticate(self, token: str | None) -> None:
        allowed = await self.authenticator.may_scrape(token) if token else None
        if allowed is None:
            self._unauthenticated()
        if not allowed:
            raise web.HTTPError(
                403,
                "%s",
                "reading the job service's metrics takes an nbjobs admin's token, or one "
                "granted scraping (the custom:nbjobs:metrics scope in a hub, or "
                "c.Authenticator.metrics_users); ask your admin",
            )

    async def get(self) -> None:
        body = await render_metrics(self.service)
        self.set_header("Content-Type", PROMETHEUS_CONTENT_TYPE)
        self.set_header("Cache-Control", "no-store")
        self.finish(body)


class ClassesHandler(APIHandler):
    """``GET api/classes``: the caller's classes (admins: all); ``POST``: create one."""

    async def get(self) -> None:
        annotate = self.service.budgets.annotate
        self.send([annotate(c) for c in self.service.classes.visible_to(self.caller)])

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
        self.send(self.service.budgets.annotate(info))

    async def delete(self, name: str) -> None:
        await self._call(self.service.classes.delete(self.caller, name))
        self.set_status(204)
        self.finish()


class BudgetHandler(APIHandler):
    """``POST``: more GPU-hours for one student of a class (its teachers, admins)."""

    async def post(self, name: str, student: str) -> None:
        grant = self.body(BudgetGrant)
        budgets = self.service.budgets
        self.send(await self._call_sync(budgets.grant, self.caller, name, student, grant.hours))


class ClassStudentsHandler(APIHandler):
    """``POST`` adds students to a class, ``DELETE`` removes them (all or none)."""

    async def post(self, name: str) -> None:
        change = self.body(RosterChange)
        classes = self.service.classes
        info = await self._call(classes.add_students(self.caller, name, change.students))
        self.send(self.service.budgets.annotate(info))

    async def delete(self, name: str) -> None:
        change = self.body(RosterChange)
        classes = self.service.classes
        info = await self._call(classes.remove_students(self.caller, name, change.students))
        self.send(self.service.budgets.annotate(info))


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _whole(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_DIGITS:
        raise ValueError(f"a number of {digits} digits is longer than the {MAX_DIGITS} it may have")
    return int(text)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is out of range")
    return value


def _json_kind(value: Any) -> str:
    kinds = {list: "an array", str: "a string", bool: "true or false", type(None): "null"}
    return kinds.get(type(value), "a number")


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` nests objects and arrays more than ``limit`` levels (no recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


def _too_deep() -> str:
    return (
        f"the request body nests objects and arrays more than {MAX_BODY_DEPTH} levels deep; "
        "send flatter JSON"
    )


def _http_error(exc: ServiceError) -> web.HTTPError:
    """The HTTP error for a refusal; a roster's problems ride along for the body."""
    error = web.HTTPError(exc.status, "%s", exc.message)
    error.problems = getattr(exc, "problems", None)  # type: ignore[attr-defined]
    return error


class UsageHandler(APIHandler):
    async def get(self) -> None:
        usage = await self._call_sync(
            self.service.usage,
            self.caller,
            since=self.get_query_argument("since", None),
            until=self.get_query_argument("until", None),
            by=self.get_query_argument("by", "user"),
        )
        self.send(usage)


class StorageHandler(APIHandler):
    async def get(self) -> None:
        user = self.get_query_argument("user", None) or None
        self.send(await self._call(self.service.retention.report(self.caller, user)))


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


def scrape_routes(prefix: str) -> list[tuple[str, type[web.RequestHandler]]]:
    """The Prometheus endpoint under ``prefix`` (beside the API, not in it).

    ``/metrics`` standalone; ``/services/nbjobs/metrics`` under a hub.
    """
    return [(prefix.rstrip("/") + "/metrics", PrometheusHandler)]


def routes(prefix: str) -> list[tuple[str, type[web.RequestHandler]]]:
    """The API's URL patterns under ``prefix``.

    ``/`` standalone; ``/services/nbjobs/`` under a hub.
    """
    from .dashboard.handlers import api_routes as dashboard_api_routes  # it imports this
    from .notifications.handlers import api_routes as notification_routes  # it imports this
    from .schedules.handlers import api_routes as definition_routes  # it imports this

    api = prefix.rstrip("/") + "/api"
    job = rf"/jobs/(?P<job_id>{JOB_ID})"
    return [
        (api + "/health", HealthHandler),
        (api + "/flavors", FlavorsHandler),
        (api + "/jobs/?", JobsHandler),
        (api + job + "/?", JobHandler),
        (api + job + "/cancel", CancelHandler),
        (api + job + "/rerun", RerunHandler),
        (api + job + "/approve", ApproveHandler),
        (api + job + "/reject", RejectHandler),
        (api + job + "/logs", LogsHandler),
        (api + job + "/metrics", JobMetricsHandler),
        (api + "/usage", UsageHandler),
        (api + "/storage", StorageHandler),
        (api + "/classes/?", ClassesHandler),
        (api + r"/classes/(?P<name>[^/]+)/?", ClassHandler),
        (api + r"/classes/(?P<name>[^/]+)/students", ClassStudentsHandler),
        (api + r"/classes/(?P<name>[^/]+)/students/(?P<student>[^/]+)/budget", BudgetHandler),
        *dashboard_api_routes(api),
        *definition_routes(api),
        *notification_routes(api),
        # last: every other path under api/ is a JSON 404, never tornado's HTML page
        (api + r"(?:/.*)?", NotFoundHandler),
    ]

"""The base of the job service's API handlers: JSON in and out, every request
authenticated, bodies bounded, errors as sentences. Each part of the API (jobs,
definitions, notifications, the dashboard) has its handlers in a module of its own built
on :class:`APIHandler`; ``app.py`` assembles their routes."""

from __future__ import annotations

import asyncio
import functools
import json
import math
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from pydantic import BaseModel, ValidationError
from sqlalchemy.exc import OperationalError
from tornado import web
from tornado.log import gen_log

from nbjobs.models import ErrorBody
from nbjobs.redaction import NoTokenInLogs

from .auth import Authenticator, bearer_token
from .errors import Caller, ServiceError

if TYPE_CHECKING:
    from .facade import ServiceFacade

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
#: the largest number a query argument may carry (offsets): what every database and
#: ``seek`` takes (2**53 - 1, also exact in JavaScript)
MAX_INT_ARG = 2**53 - 1
#: seconds a caller is asked to wait (Retry-After) when the database is locked or away
DATABASE_RETRY_AFTER = 10
#: seconds a caller is asked to wait (Retry-After) when the service stopped under a request
STOPPING_RETRY_AFTER = 30
#: a job id in a URL (the service makes 12 hex digits; up to 32 are accepted)
JOB_ID = "[0-9a-f]{1,32}"


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
        self._body_unread = False  # tornado calls the method once the body is in
        if self._refusal is not None:
            raise self._refusal
        if self._body_received > self.body_limit:
            self._refuse_body(self._body_received)
        await method(self, *args, **kwargs)

    return checked


@web.stream_request_body
class APIHandler(NoTokenInLogs, web.RequestHandler):
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
    #: the 401 or 403 of a request that sent no body, raised once its (empty) body is
    #: read: tornado closes a connection answered before its request was read, and a
    #: proxy that sends the next request on it (JupyterHub's, keeping connections
    #: alive) answers that one 503 ("socket hang up")
    _refusal: web.HTTPError | None = None
    #: a body was announced and not read yet: an answer now closes the connection, and
    #: says so (``Connection: close``), or the proxy would send someone else's next
    #: request on it and answer them 503
    _body_unread: bool = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Every HTTP method of every API handler first refuses a body over the limit."""
        super().__init_subclass__(**kwargs)
        for name in ("get", "post", "put", "patch", "delete"):
            if name in cls.__dict__:
                setattr(cls, name, _refusing_large_bodies(cls.__dict__[name]))

    @property
    def service(self) -> ServiceFacade:
        service: ServiceFacade = self.settings["nbjobs_service"]
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
        declared = self.request.headers.get("Content-Length", "")
        sends_body = declared not in ("", "0") or "Transfer-Encoding" in self.request.headers
        self._body_unread = sends_body
        # which hub groups are classes (never counted as the caller's groups), first
        await self.service.classes.refresh()
        try:
            await self.authenticate(bearer_token(self.request.headers, query_token))
        except web.HTTPError as refusal:
            if sends_body or self.request.method not in self.allowed_methods():
                raise  # a body nobody may send is not read: the connection closes
            self._refusal = refusal
            return
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
        if caller.created:
            # a user made again under an earlier one's name: the earlier one is retired
            # before this one sees anything (job_service/deleted_users.py)
            try:
                await self.service.departures.admit(caller.name, caller.created)
            except ServiceError as exc:  # a user retired, their token not yet forgotten
                self.set_header("WWW-Authenticate", 'token realm="nbjobs"')
                raise web.HTTPError(exc.status, "%s", exc.message) from None
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

    def _cut_short(self, error: BaseException | None) -> bool:
        """Whether ``error``, which no handler meant (not an HTTPError), came of the
        service stopping under the request (its database threads gone, say); ``None``:
        the request's task was cancelled (the process ending with it in flight)."""
        return self.service.stopping and not isinstance(error, web.HTTPError)

    def log_exception(self, typ: Any, value: BaseException | None, tb: Any) -> None:
        if self._cut_short(value):
            # the service stopped under the request: its 503 says so; no traceback
            gen_log.warning(
                "%s: cut short as the service stopped (%r)", self._request_summary(), value
            )
            return
        super().log_exception(typ, value, tb)

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        if self._body_unread:
            self.set_header("Connection", "close")
        message = self._reason
        exc_info = kwargs.get("exc_info")
        if exc_info is not None and isinstance(exc_info[1], OperationalError):
            # the database is locked past its wait, or unreachable: a busy service, not a
            # broken request (the log has the details)
            status_code = 503
            self.set_status(status_code)
            self.set_header("Retry-After", str(DATABASE_RETRY_AFTER))
            message = (
                "the job service's database is busy or out of reach right now; try again "
                f"in {DATABASE_RETRY_AFTER} s"
            )
            exc_info = None
        if exc_info is not None:
            exc = exc_info[1]
            retry_after = getattr(exc, "retry_after", None)
            if retry_after:
                self.set_header("Retry-After", str(retry_after))
            if isinstance(exc, web.HTTPError) and exc.log_message:
                message = exc.log_message % exc.args if exc.args else exc.log_message
            elif isinstance(exc, web.HTTPError) and exc.reason:
                message = exc.reason
            problems = getattr(exc, "problems", None)
            if problems:
                self.set_header("Content-Type", "application/json")
                self.finish(ErrorBody(message=message, problems=problems).model_dump_json())
                return
        if status_code == 405:
            allowed = self.allowed_methods()
            self.set_header("Allow", ", ".join(allowed))
            message = (
                f"{self.request.method} is not something {self.request.path} answers; "
                f"it answers {', '.join(allowed) or 'nothing'} (see api/openapi.yaml)"
            )
        uncaught = exc_info is not None and not isinstance(exc_info[1], web.HTTPError)
        if status_code >= 500 and self._cut_short(exc_info[1] if exc_info else None):
            # the service stopped under this request (its database threads are gone, or,
            # with no exception, its task was cancelled as the process ends: tornado's
            # plain 500 then): a restart, not a broken request; what it had begun was not
            # recorded
            status_code = 503
            self.set_status(status_code)
            self.set_header("Retry-After", str(STOPPING_RETRY_AFTER))
            message = (
                "the job service is stopping (a restart or an upgrade) and did not finish "
                "this request; send it again in a minute"
            )
        elif status_code >= 500 and uncaught:
            # an uncaught exception: its text is for the log, not the caller
            message = "the job service failed on this request; its log says why"
        self.set_header("Content-Type", "application/json")
        self.finish(ErrorBody(message=message).model_dump_json(exclude_none=True))

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
        """``func`` (the service's database work) on the service's database threads: a
        GET's on those kept for reading, never queued behind writes."""
        run = self.service.read_db if self.request.method in ("GET", "HEAD") else self.service.in_db
        try:
            return await run(func, *args, **kwargs)
        except ServiceError as exc:
            raise _http_error(exc) from None

    async def _call(self, coro: Any) -> Any:
        try:
            return await coro if asyncio.iscoroutine(coro) else coro
        except ServiceError as exc:
            raise _http_error(exc) from None


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
    error.retry_after = getattr(exc, "retry_after", None)  # type: ignore[attr-defined]
    return error


class NotFoundHandler(APIHandler):
    """Any path under ``api/`` that is no resource: a JSON 404 (after the token check)."""

    async def get(self) -> None:
        self._not_found()

    async def post(self) -> None:
        self._not_found()

    async def put(self) -> None:
        self._not_found()

    async def patch(self) -> None:
        self._not_found()

    async def delete(self) -> None:
        self._not_found()

    def _not_found(self) -> NoReturn:
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

"""The job service's REST API for jobs, classes and usage (``api/openapi.yaml`` describes
all of it), as tornado handlers on :class:`~.api_base.APIHandler`."""

from __future__ import annotations

import asyncio
import json
import os
from datetime import datetime, timezone
from http import HTTPStatus

from prometheus_client import CONTENT_TYPE_LATEST as PROMETHEUS_CONTENT_TYPE
from tornado import web
from tornado.iostream import StreamClosedError

from nbjobs.models import (
    BudgetGrant,
    CreateClass,
    CreateInvitation,
    CreditGrant,
    Health,
    RejectRequest,
    RerunChanges,
    RosterChange,
    RosterCheck,
    SubmitRequest,
    UpdateRequest,
)

from .api_base import JOB_ID, LOG_CHUNK, APIHandler, size_text
from .audit import RESULT_HEADERS
from .credits import statement_csv
from .errors import ServiceError
from .events import KEEPALIVE_SECONDS, STREAM_SECONDS, Stream
from .metrics import render as render_metrics


class HealthHandler(APIHandler):
    async def get(self) -> None:
        from nbjobs.version import package_version

        self.send(Health(version=package_version(), user=self.caller.name))


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
        decisions = self.service.decisions
        self.send(await self._call_sync(decisions.approve, self.caller, job_id))


class RejectHandler(APIHandler):
    async def post(self, job_id: str) -> None:
        request = self.body(RejectRequest)
        decisions = self.service.decisions
        self.send(await self._call_sync(decisions.reject, self.caller, job_id, request.reason))


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
    ``?follow=1`` goes on sending what the job writes until it ends; ``?rank=N`` is the
    log of rank N of a multi-node job (0, the default: the job's). The log is read
    in chunks of :data:`LOG_CHUNK` (off the event loop), and each chunk is written and
    flushed before the next is read: a reader costs the service one chunk of memory,
    whatever the log's size and however slowly the reader reads. The log is opened
    without following links (:meth:`~.service.JobService.open_log`): one the user
    replaced with a link is a 409, never the linked file.
    """

    #: the rank whose log is asked for (0: the job's)
    rank = 0

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
        self.rank = self.int_arg("rank", 0, minimum=0)
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
                    log = await self._open(job_id, note=False)
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

    async def _open(self, job_id: str, note: bool = True) -> int | None:
        try:
            return await self.service.in_db(
                self.service.open_log, self.caller, job_id, note, self.rank
            )
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


class EventsHandler(APIHandler):
    """``GET api/events``: what changed among the jobs and definitions the caller may
    see, as server-sent events (see :mod:`.events`), until the service stops, the client
    goes, or :data:`~.events.STREAM_SECONDS` pass (the client then opens another)."""

    _stream: Stream | None = None

    async def get(self) -> None:
        self.set_header("Content-Type", "text/event-stream; charset=utf-8")
        self.set_header("Cache-Control", "no-cache")
        self.set_header("X-Accel-Buffering", "no")  # a proxy passes each event at once
        stream = self._stream = self.service.feed.open(self.caller)
        loop = asyncio.get_running_loop()
        ends = loop.time() + STREAM_SECONDS
        try:
            self.write("retry: 3000\n\n")  # a browser's EventSource reconnects after 3 s
            await self.flush()
            while (left := ends - loop.time()) > 0:
                try:
                    frame = await asyncio.wait_for(stream.queue.get(), min(KEEPALIVE_SECONDS, left))
                except asyncio.TimeoutError:
                    frame = ": still here\n\n"  # a comment: keeps proxies from timing out
                if not frame:
                    break  # ended: the service stops or the client went
                self.write(frame)
                await self.flush()
            self.finish()
        except StreamClosedError:
            pass  # the client went
        finally:
            self.service.feed.close_stream(stream)

    def on_connection_close(self) -> None:
        if self._stream is not None:
            self.service.feed.close_stream(self._stream)


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


class ResultHandler(APIHandler):
    """``GET api/jobs/{id}/result``: the job's output notebook as read-only HTML (see
    :mod:`.audit`): rendered by the service, never the owner's live file, and allowed to
    run nothing in a browser."""

    async def get(self, job_id: str) -> None:
        html = await self._call(self.service.audit.result_html(self.caller, job_id))
        for name, value in RESULT_HEADERS.items():
            self.set_header(name, value)
        self.finish(html)


class ResultLinkHandler(APIHandler):
    """``POST api/jobs/{id}/result/link``: a link that opens the job's result once, within
    a minute, in a frame of the dashboard (see :mod:`.audit`)."""

    async def post(self, job_id: str) -> None:
        prefix = self.settings.get("nbjobs_prefix") or "/"
        link = await self._call(self.service.audit.result_link(self.caller, job_id, prefix))
        self.send(link, 201)


class AuditHandler(APIHandler):
    """``GET api/audit``: who read whose log or result, newest first (admins)."""

    async def get(self) -> None:
        limit = self.int_arg("limit", 100, minimum=1, maximum=1000)
        before = self.get_query_argument("before", None)
        first = self.int_arg("before", 0, minimum=1) if before is not None else None
        self.send(await self._call_sync(self.service.audit.entries, self.caller, limit, first))


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
        body = await render_metrics(self.service.ctx, self.service.telemetry)
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


class RosterCheckHandler(APIHandler):
    """``POST api/roster-check``: what a roster would be refused for, entry by entry."""

    async def post(self) -> None:
        request = self.body(RosterCheck)
        check = self.service.classes.preview_roster
        self.send(await self._call(check(self.caller, request.students, request.class_name)))


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


class InvitationsHandler(APIHandler):
    """``POST api/invitations``: a new one-time invitation for a user with no password
    yet (admins: anyone; teachers: their students)."""

    async def post(self) -> None:
        request = self.body(CreateInvitation)
        made = await self._call(self.service.invitations.invite(self.caller, request.user))
        self.send(made, status=HTTPStatus.CREATED)


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


class CreditsHandler(APIHandler):
    """``GET api/credits``: the accounts the caller may see, with their balances."""

    async def get(self) -> None:
        self.send(await self._call_sync(self.service.credits.accounts, self.caller))


class CreditStatementHandler(APIHandler):
    """``GET api/credits/{account}``: its grants and charges (``?format=csv``: as CSV)."""

    async def get(self, account: str) -> None:
        credits = self.service.credits
        statement = await self._call_sync(credits.statement, self.caller, account)
        if self.get_query_argument("format", "json") == "csv":
            self.set_header("Content-Type", "text/csv; charset=utf-8")
            name = account.replace(":", "-")
            self.set_header("Content-Disposition", f'attachment; filename="credits-{name}.csv"')
            self.finish(statement_csv(statement))
            return
        self.send(statement)


class CreditGrantHandler(APIHandler):
    """``POST api/credits/{account}/grants``: credits for an account."""

    async def post(self, account: str) -> None:
        grant = self.body(CreditGrant)
        credits = self.service.credits
        found = await self._call_sync(credits.grant, self.caller, account, grant.amount, grant.note)
        self.send(found, status=HTTPStatus.CREATED)


class StorageHandler(APIHandler):
    async def get(self) -> None:
        user = self.get_query_argument("user", None) or None
        self.send(await self._call(self.service.retention.report(self.caller, user)))


def scrape_routes(prefix: str) -> list[tuple[str, type[web.RequestHandler]]]:
    """The Prometheus endpoint under ``prefix`` (beside the API, not in it).

    ``/metrics`` standalone; ``/services/nbjobs/metrics`` under a hub.
    """
    return [(prefix.rstrip("/") + "/metrics", PrometheusHandler)]


def api_routes(api: str) -> list[tuple[str, type[web.RequestHandler]]]:
    """The jobs', classes' and usage's URL patterns under ``api`` (``/api``,
    ``/services/nbjobs/api``); ``app.py`` puts them together with the other parts'."""
    job = rf"/jobs/(?P<job_id>{JOB_ID})"
    return [
        (api + "/health", HealthHandler),
        (api + "/flavors", FlavorsHandler),
        (api + "/events", EventsHandler),
        (api + "/jobs/?", JobsHandler),
        (api + job + "/?", JobHandler),
        (api + job + "/cancel", CancelHandler),
        (api + job + "/rerun", RerunHandler),
        (api + job + "/approve", ApproveHandler),
        (api + job + "/reject", RejectHandler),
        (api + job + "/logs", LogsHandler),
        (api + job + "/metrics", JobMetricsHandler),
        (api + job + "/result", ResultHandler),
        (api + job + "/result/link", ResultLinkHandler),
        (api + "/audit", AuditHandler),
        (api + "/usage", UsageHandler),
        (api + "/storage", StorageHandler),
        (api + "/credits/?", CreditsHandler),
        (api + r"/credits/(?P<account>[^/]+)/?", CreditStatementHandler),
        (api + r"/credits/(?P<account>[^/]+)/grants", CreditGrantHandler),
        (api + "/classes/?", ClassesHandler),
        (api + "/roster-check", RosterCheckHandler),
        (api + "/invitations", InvitationsHandler),
        (api + r"/classes/(?P<name>[^/]+)/?", ClassHandler),
        (api + r"/classes/(?P<name>[^/]+)/students", ClassStudentsHandler),
        (api + r"/classes/(?P<name>[^/]+)/students/(?P<student>[^/]+)/budget", BudgetHandler),
    ]

"""HTTP handlers of the server extension: ``{base_url}nbjobs/api/...`` for JupyterLab.

Every request is authenticated by jupyter-server (``@web.authenticated``, its
XSRF checks) and then forwarded to the job service with this server's own
JupyterHub token, which belongs to the server's user: the service sees that
user and nobody else. Without a hub the "job service" is one this server hosts
itself on loopback (see :mod:`.local`); the forwarding is the same.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Awaitable
from importlib.metadata import PackageNotFoundError, version
from typing import Any, NoReturn
from urllib.parse import parse_qsl, urlencode

from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import ensure_async, url_path_join

# both light, as a user's server needs none of the service's dependencies: the job
# states after which a job's output is written (the runner's status file names them
# first), and how tokens are kept out of logs
from nbjobs.job_runner.status import FINAL_STATES
from tornado import web
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest
from tornado.iostream import StreamClosedError
from tornado.log import app_log

from nbjobs.redaction import NoTokenInLogs

#: response headers worth passing back to the browser
PASSED_HEADERS = ("Content-Type", "Location", "Cache-Control", "X-Log-Offset")
#: the largest log passed on (no limit in practice: it is streamed, never held)
MAX_LOG_BYTES = 2**53
#: the most of an error's body kept to answer it (the job service's are a sentence)
MAX_ERROR_BYTES = 64 * 1024


class BrowserWentAway(Exception):
    """Raised from a streamed copy's chunk callback when the browser closed the stream
    (a tab closed): it ends the copy from the job service. tornado logs whatever such a
    callback raises as an uncaught exception, with a traceback; :class:`QuietWhenGone`
    keeps this one out of the log, where the handler has said it in one debug line."""


class QuietWhenGone(logging.Filter):
    """Drops tornado's "Uncaught exception" record of a :class:`BrowserWentAway`."""

    def filter(self, record: logging.LogRecord) -> bool:
        kind = record.exc_info[0] if record.exc_info else None
        return not (kind is not None and issubclass(kind, BrowserWentAway))


def quiet_when_gone(logger: logging.Logger) -> None:
    """Add :class:`QuietWhenGone` to ``logger`` (tornado's application log), once."""
    if not any(isinstance(f, QuietWhenGone) for f in logger.filters):
        logger.addFilter(QuietWhenGone())


def nbjobs_version() -> str:
    """The installed distribution's version (``0+unknown`` in a bare checkout)."""
    try:
        return version("nbjobs")
    except PackageNotFoundError:
        return "0+unknown"


class Upstream:
    """Where the job service is, and the token that speaks for this server's user."""

    def __init__(self, url: str | None, token: str | None, mode: str) -> None:
        self.url = url.rstrip("/") + "/" if url else None
        self.token = token
        self.mode = mode  # "hub" or "local"


class HealthHandler(NoTokenInLogs, APIHandler):
    """``GET nbjobs/api/health``: the extension is loaded; which job service it uses."""

    @web.authenticated
    async def get(self) -> None:
        upstream: Upstream = self.settings["nbjobs_upstream"]
        self.finish(
            {
                "status": "ok",
                "version": nbjobs_version(),
                "mode": upstream.mode,
                "service": upstream.url is not None,
            }
        )


class _ServiceHandler(NoTokenInLogs, APIHandler):
    """What the handlers that call the job service share: finding it, saying in words
    when it is not answering, and errors in the job service's own shape."""

    def _upstream(self) -> Upstream:
        """The job service, or a 503 saying why it is not known."""
        upstream: Upstream = self.settings["nbjobs_upstream"]
        if upstream.url is None or upstream.token is None:
            if upstream.mode == "hub":
                raise web.HTTPError(
                    503, "this server does not know the job service (NBJOBS_URL); ask your admin"
                )
            raise web.HTTPError(
                503, "the nbjobs job service is not running yet; try again in a few seconds"
            )
        return upstream

    def _not_answering(self, upstream: Upstream, cause: object) -> NoReturn:
        """Answer 502 with a sentence for the user; the technical cause goes to the log."""
        self.log.warning("nbjobs: the job service at %s is not answering: %s", upstream.url, cause)
        if upstream.mode == "hub":
            sentence = (
                "the nbjobs job service at %s is not answering; ask your admin to check that "
                "it is running"
            )
        else:
            sentence = (
                "the job service this server hosts (at %s) is not answering; the server's log "
                "says why, and restarting jupyter starts it again"
            )
        raise web.HTTPError(
            502, sentence, upstream.url, reason="Job Service Not Answering"
        ) from None

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        # The job service's shape for errors, so the Lab reads one format.
        exc = kwargs.get("exc_info", (None, None, None))[1]
        message = self._reason
        if isinstance(exc, web.HTTPError) and exc.log_message:
            message = exc.log_message % exc.args if exc.args else exc.log_message
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"message": message}))


class ForwardHandler(_ServiceHandler):
    """Every other ``nbjobs/api/…`` request, passed to the job service unchanged.

    Unchanged but for the credentials: the job service gets this server's hub token,
    never the browser's (a ``?token=`` for this server stays here). Bodies go as
    they came; the job service checks them (its 400 or 413 comes back as it said it).
    """

    async def _forward(self, path: str) -> None:
        upstream = self._upstream()
        url = f"{upstream.url}api/{path}"
        query = _without_token(self.request.query)
        if query:
            url += "?" + query
        body = self.request.body if self.request.method in ("POST", "PATCH", "PUT") else None
        if self.request.method == "DELETE" and self.request.body:
            body = self.request.body  # removing students names them in the body
        # A log (followed or not) is passed on as it comes, a chunk at a time, never
        # held whole: it may be bigger than this server's memory. So is the stream of
        # events (api/events), which stays open for minutes.
        streaming = self.request.method == "GET" and (path.endswith("/logs") or path == "events")
        self._upstream_status: int | None = None
        self._held = bytearray()  # an error's body, answered whole below
        self._streamed = False
        request = HTTPRequest(
            url,
            method=self.request.method or "GET",
            headers={
                "Authorization": f"token {upstream.token}",
                "Content-Type": self.request.headers.get("Content-Type", "application/json"),
            },
            body=body if body is not None else (b"" if self.request.method == "POST" else None),
            allow_nonstandard_methods=True,
            request_timeout=24 * 3600 if streaming else 120,
            header_callback=self._on_header if streaming else None,
            streaming_callback=self._on_chunk if streaming else None,
        )
        # The shared client caps a body at 100 MB, streamed or not: logs get their own.
        client = (
            AsyncHTTPClient(force_instance=True, max_body_size=MAX_LOG_BYTES)
            if streaming
            else AsyncHTTPClient()
        )
        try:
            response = await client.fetch(request, raise_error=False)
        except (OSError, HTTPClientError) as exc:
            if self._streamed:
                return  # cut after part of the log was passed on: nothing more to say
            self._not_answering(upstream, exc)
        except StreamClosedError:
            return  # the browser went away while reading a log
        finally:
            if streaming:
                client.close()
        if self._streamed or (streaming and response.code < 400):
            self.finish()
            return
        answer = bytes(self._held) if streaming else response.body
        if response.code == 599:
            self._not_answering(upstream, response.error)
        if response.code >= 500 and not _is_service_error(answer):
            # Not the job service's own answer: a proxy or the hub saying the
            # service is down (an HTML page the Lab could not show).
            self._not_answering(upstream, f"HTTP {response.code} from {response.effective_url}")
        self.set_status(response.code)
        for name in PASSED_HEADERS:
            if name in response.headers:
                self.set_header(name, response.headers[name])
        self.finish(answer or None)

    def _on_header(self, line: str) -> None:
        if line.startswith("HTTP/"):
            self._upstream_status = int(line.split()[1])
            if self._upstream_status < 400:
                self.set_status(self._upstream_status)
        elif ":" in line and (self._upstream_status or 0) < 400:
            name, _, value = line.partition(":")
            if name.strip().title() in PASSED_HEADERS:
                self.set_header(name.strip(), value.strip())

    def _on_chunk(self, chunk: bytes) -> Awaitable[None] | None:
        if (self._upstream_status or 0) >= 400:  # an error: answered whole, from _forward
            self._held += chunk[: max(0, MAX_ERROR_BYTES - len(self._held))]
            return None
        self._streamed = True
        self.write(chunk)
        # The job service's next chunk is read once this one is on its way to the
        # browser: a slow reader slows the copy, rather than filling this server's memory.
        return self._passed_on()

    async def _passed_on(self) -> None:
        try:
            await self.flush()
        except StreamClosedError:
            # A tab closed while it followed the stream: nothing is wrong, the copy ends.
            self.log.debug(
                "nbjobs: the browser went away from %s: its stream ends", self.request.path
            )
            raise BrowserWentAway(self.request.path) from None

    @web.authenticated
    async def get(self, path: str) -> None:
        await self._forward(path)

    @web.authenticated
    async def post(self, path: str) -> None:
        await self._forward(path)

    @web.authenticated
    async def patch(self, path: str) -> None:
        await self._forward(path)

    @web.authenticated
    async def put(self, path: str) -> None:
        # notifications/settings: where a user is told about their jobs
        await self._forward(path)

    @web.authenticated
    async def delete(self, path: str) -> None:
        await self._forward(path)


class TrustHandler(_ServiceHandler):
    """``POST nbjobs/api/jobs/{id}/trust``: mark a finished job's output notebook
    trusted in this server, so its HTML and JavaScript outputs show when it opens.

    Its owner ran that code (the job ran as them, on their notebook), so the result
    is as trustworthy as what their own kernel printed; this is what JupyterLab's
    "Trust Notebook" does, without the question. Only the output the job service
    names for one of the caller's own finished jobs is signed, in this server's
    notebook-signature store; nothing else can be named.
    """

    @web.authenticated
    async def post(self, path: str) -> None:
        upstream = self._upstream()
        job_id = path
        request = HTTPRequest(
            f"{upstream.url}api/jobs/{job_id}",
            headers={"Authorization": f"token {upstream.token}"},
            request_timeout=60,
        )
        try:
            response = await AsyncHTTPClient().fetch(request, raise_error=False)
        except (OSError, HTTPClientError) as exc:
            self._not_answering(upstream, exc)
        if response.code == 599:
            self._not_answering(upstream, response.error)
        if response.code != 200:
            self.set_status(response.code)
            self.set_header("Content-Type", "application/json")
            self.finish(response.body)
            return
        job = json.loads(response.body)
        # Under a hub an admin's token sees other users' jobs too: their outputs are
        # in their folders, not this server's, and theirs to trust.
        owner = os.environ.get("JUPYTERHUB_USER")
        if owner is not None and job.get("user") != owner:
            raise web.HTTPError(
                403, "job %s is %s's: only its owner may trust its output", job_id, job.get("user")
            )
        if job.get("state") not in FINAL_STATES:
            raise web.HTTPError(
                409, "job %s is %s: its output is written when it ends", job_id, job.get("state")
            )
        output = str(job["output_path"])
        if not output.endswith(".ipynb"):
            # a script's or a command's output is its log: nothing in it runs in the page
            raise web.HTTPError(
                400, "job %s wrote %s, not a notebook: there is nothing to trust", job_id, output
            )
        try:
            await ensure_async(self.contents_manager.trust_notebook(output))
        except web.HTTPError as exc:
            if exc.status_code == 404:
                raise web.HTTPError(
                    404, "%s is not there any more (moved or deleted?)", output
                ) from None
            raise
        self.finish({"trusted": output})


def _without_token(query: str) -> str:
    """``query`` less any ``token`` argument: this server's token is not the job service's."""
    pairs = parse_qsl(query, keep_blank_values=True)
    kept = [(name, value) for name, value in pairs if name != "token"]
    return query if len(kept) == len(pairs) else urlencode(kept)


def _is_service_error(body: bytes | None) -> bool:
    """Whether an error body is the job service's own JSON (``{"message": ...}``)."""
    try:
        parsed = json.loads(body or b"")
    except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested beyond reason
        return False
    return isinstance(parsed, dict) and isinstance(parsed.get("message"), str)


def setup_handlers(web_app: Any, upstream: Upstream) -> None:
    """Mount the handlers under the server's base URL (and keep a closed tab's end of a
    stream out of tornado's log: :class:`QuietWhenGone`)."""
    web_app.settings["nbjobs_upstream"] = upstream
    quiet_when_gone(app_log)
    base = url_path_join(web_app.settings["base_url"], "nbjobs", "api")
    web_app.add_handlers(
        ".*$",
        [
            (url_path_join(base, "health"), HealthHandler),
            (url_path_join(base, "jobs/(?P<path>[0-9a-f]{1,32})/trust"), TrustHandler),
            (url_path_join(base, "(?P<path>(?!health$).+)"), ForwardHandler),
        ],
    )

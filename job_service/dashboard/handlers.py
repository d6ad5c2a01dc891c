"""The dashboard's page, its built script and style, the hub's OAuth callback, and the
two API resources only the dashboard needs (``api/me``, ``api/dashboard/overview``)."""

from __future__ import annotations

import hashlib
import html
from pathlib import Path
from typing import Any

from tornado import web

import nbjobs
from nbjobs.models import OutputDefaults

from ..api_base import JOB_ID, APIHandler
from ..audit import RESULT_HEADERS
from ..errors import ServiceError
from .models import DrainRequest, Me, MoveRequest
from .nodes import drain_node, nodes_view, undrain_node
from .overview import overview
from .queue import move, queue_view
from .users import UserHandler, UsersHandler

#: where ``jlpm build:dashboard`` writes the page's script and style (in the package)
STATIC = Path(nbjobs.__file__).resolve().parent / "dashboard_static"

#: the page allows nothing from elsewhere and no inline script (the token it carries stays
#: in it); frames of other sites may not embed it
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-src 'self'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'self'"
)

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>nbjobs dashboard</title>
<meta name="nbjobs-api" content="{api}">
<meta name="nbjobs-token" content="{token}">
<meta name="nbjobs-hub" content="{hub}">
<link rel="stylesheet" href="{static}dashboard.css?v={css_version}">
</head>
<body>
<noscript>The nbjobs dashboard needs JavaScript.</noscript>
<div id="nbjobs-dashboard"></div>
<script src="{static}dashboard.js?v={js_version}"></script>
</body>
</html>
"""


def _version(name: str) -> str:
    """A short hash of a built file, so a browser never keeps an old build."""
    try:
        return hashlib.sha256((STATIC / name).read_bytes()).hexdigest()[:12]
    except OSError:
        return "missing"


def _page(prefix: str, token: str, hub: str) -> str:
    return PAGE.format(
        api=html.escape(prefix.rstrip("/") + "/api/", quote=True),
        token=html.escape(token, quote=True),
        hub=html.escape(hub, quote=True),
        static=html.escape(prefix.rstrip("/") + "/dashboard/static/", quote=True),
        css_version=_version("dashboard.css"),
        js_version=_version("dashboard.js"),
    )


class _Page(web.RequestHandler):
    def set_default_headers(self) -> None:
        self.set_header("Content-Security-Policy", CSP)
        self.set_header("X-Content-Type-Options", "nosniff")
        self.set_header("Referrer-Policy", "no-referrer")
        # the page under a hub carries the caller's token: no cache may keep it
        self.set_header("Cache-Control", "no-store")

    def check_built(self) -> None:
        if not (STATIC / "dashboard.js").is_file():
            raise web.HTTPError(
                503,
                "the dashboard is not built; run `jlpm build:dashboard` (scripts/install.sh "
                "does) and reload",
            )


class StandalonePage(_Page):
    """Without a hub: the page asks for one of the service's API tokens itself."""

    def get(self) -> None:
        self.check_built()
        self.finish(_page(self.settings["nbjobs_prefix"], "", ""))


def _hub_page_classes() -> tuple[type[web.RequestHandler], type[web.RequestHandler]]:
    """The page and the OAuth callback for a hub (JupyterHub imported only there)."""
    from jupyterhub.services.auth import HubOAuthCallbackHandler, HubOAuthenticated

    class HubPage(HubOAuthenticated, _Page):
        """Under a hub: log in through the hub's OAuth, then carry the token the hub gave
        this service for the caller, for the page's calls to the API."""

        @property
        def hub_auth(self) -> Any:
            return self.settings["nbjobs_hub_oauth"]

        @hub_auth.setter
        def hub_auth(self, value: Any) -> None:  # HubOAuthenticated may set it
            pass

        @web.authenticated
        def get(self) -> None:
            self.check_built()
            token = self.hub_auth.get_token(self) or ""
            hub = self.hub_auth.hub_prefix or "/hub/"
            self.finish(_page(self.settings["nbjobs_prefix"], token, hub))

    class Callback(HubOAuthCallbackHandler):
        @property
        def hub_auth(self) -> Any:
            return self.settings["nbjobs_hub_oauth"]

        @hub_auth.setter
        def hub_auth(self, value: Any) -> None:
            pass

    return HubPage, Callback


#: the key of a link to a result (``secrets.token_urlsafe(32)``)
LINK_KEY = "[A-Za-z0-9_-]{43}"


class ResultPage(web.RequestHandler):
    """``{prefix}dashboard/result/<key>``: a job's rendered result, opened once by the
    link the dashboard asked for (``POST api/jobs/{id}/result/link``); the key is the
    credential. Under the result's own policy: scripts, requests and forms refused."""

    def set_default_headers(self) -> None:
        for name, value in RESULT_HEADERS.items():
            self.set_header(name, value)

    async def get(self, key: str) -> None:
        service = self.settings["nbjobs_service"]
        try:
            page = await service.audit.open_link(key)
        except ServiceError as exc:
            self.set_status(exc.status)
            page = f"<!doctype html><title>nbjobs</title><p>{html.escape(exc.message)}</p>"
        self.finish(page)


class MeHandler(APIHandler):
    """Who the caller is to nbjobs: what the page may offer them (the API still decides)."""

    async def get(self) -> None:
        caller = self.caller
        where, free = await self.service.retention.place(caller.name)
        outputs = self.service.config.outputs.model_dump()
        self.send(
            Me(
                name=caller.name,
                admin=caller.admin,
                teacher=caller.teacher,
                groups=sorted(caller.groups),
                classes=sorted(c.name for c in self.service.classes.visible_to(caller)),
                outputs=OutputDefaults(**outputs, where=where, free_bytes=free),
                notify_channels=[
                    channel
                    for channel in ("email", "webhook")
                    if getattr(self.service.config.notifications, channel) is not None
                ],
                credits=self.service.config.credits.enabled,
            )
        )


class OverviewHandler(APIHandler):
    async def get(self) -> None:
        if not self.caller.admin:
            raise web.HTTPError(
                403,
                "%s",
                "the overview of GPUs and queues is for nbjobs admins; your usage is under "
                "api/usage",
            )
        self.send(await self._call_sync(overview, self.service.ctx))


class QueueHandler(APIHandler):
    async def get(self) -> None:
        self.send(await self._call_sync(queue_view, self.service.ctx, self.caller))


class QueueMoveHandler(APIHandler):
    async def post(self, job_id: str) -> None:
        request = self.body(MoveRequest)
        wake = self.service.dispatcher.wake
        ctx = self.service.ctx
        self.send(await self._call_sync(move, ctx, self.caller, job_id, request.to, wake))


class ApprovalsHandler(APIHandler):
    """The approval requests the caller may decide (admins: all; teachers: their
    students')."""

    async def get(self) -> None:
        self.send(await self._call_sync(self.service.decisions.pending_for, self.caller))


class NodesHandler(APIHandler):
    async def get(self) -> None:
        self.send(await self._call_sync(nodes_view, self.service.ctx, self.caller))


class DrainHandler(APIHandler):
    """``POST`` / ``DELETE api/dashboard/nodes/{node}/drain``, and with ``gpu`` the same
    of one GPU of the node (``…/nodes/{node}/gpus/{gpu}/drain``)."""

    async def post(self, node: str, gpu: str | None = None) -> None:
        request = self.body(DrainRequest)
        try:
            service = self.service
            views = await drain_node(
                service.ctx,
                self.caller,
                node,
                request.reason,
                request.cancel_running,
                service.cancel,
                gpu,
            )
        except ServiceError as exc:
            raise web.HTTPError(exc.status, "%s", exc.message) from None
        self.send(views)

    async def delete(self, node: str, gpu: str | None = None) -> None:
        try:
            wake = self.service.dispatcher.wake
            views = await undrain_node(self.service.ctx, self.caller, node, wake, gpu)
        except ServiceError as exc:
            raise web.HTTPError(exc.status, "%s", exc.message) from None
        self.send(views)


#: a node's name in a URL: a Kubernetes node name (DNS subdomain) or a host name
NODE = "[A-Za-z0-9][A-Za-z0-9._-]{0,252}"
#: a GPU's id in a URL: a device number or an NVML UUID (``GPU-…``, ``MIG-…``)
GPU = "[A-Za-z0-9][A-Za-z0-9._:-]{0,127}"


def dashboard_routes(prefix: str, *, hub: bool) -> list[tuple[str, Any, Any]]:
    """The page at ``prefix`` (and ``prefix/dashboard/``), its built files, and under a
    hub the OAuth callback. (Its API resources are among the API's routes.)"""
    base = prefix.rstrip("/")
    if hub:
        page, callback = _hub_page_classes()
        pages: list[tuple[str, Any, Any]] = [(base + "/oauth_callback", callback, {})]
    else:
        page, pages = StandalonePage, []
    return [
        (base + "/?", page, {}),
        (base + "/dashboard/?", page, {}),
        (base + "/dashboard/static/(.*)", web.StaticFileHandler, {"path": str(STATIC)}),
        (base + f"/dashboard/result/({LINK_KEY})", ResultPage, {}),
        *pages,
    ]


def api_routes(api: str) -> list[tuple[str, type[web.RequestHandler]]]:
    """The dashboard's resources under the API's path ``api``."""
    board = api + "/dashboard"
    return [
        (api + "/me", MeHandler),
        (board + "/overview", OverviewHandler),
        (board + "/queue", QueueHandler),
        (board + rf"/queue/(?P<job_id>{JOB_ID})/move", QueueMoveHandler),
        (board + "/approvals", ApprovalsHandler),
        (board + "/nodes", NodesHandler),
        (board + rf"/nodes/(?P<node>{NODE})/drain", DrainHandler),
        (board + rf"/nodes/(?P<node>{NODE})/gpus/(?P<gpu>{GPU})/drain", DrainHandler),
        (board + "/users", UsersHandler),
        (board + r"/users/(?P<name>[^/]+)", UserHandler),
    ]

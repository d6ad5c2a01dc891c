"""``nbjobs service``: the job service as a process (a JupyterHub service, or standalone).

Under a hub (``JUPYTERHUB_SERVICE_PREFIX`` and ``JUPYTERHUB_API_TOKEN`` in the
environment, as the hub sets them for a managed service) it listens where the
hub says and checks callers' tokens with the hub. Standalone it listens on
``--port`` and accepts the tokens in ``--StaticTokenAuth.tokens``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import re
import signal
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlparse

from tornado import httpserver, web
from traitlets import Bool, Dict, Float, Instance, Integer, Type, Unicode, default
from traitlets.config import Application

from nbjobs.config import ConfigError, NbjobsConfig, load_config

from . import handlers
from .api_base import NotFoundHandler
from .auth import Authenticator, HubTokenAuth, StaticTokenAuth, TokenConfigError
from .backends import Backend
from .backends.local import LocalBackend
from .classes import HubGroups
from .dashboard import dashboard_routes
from .dashboard.handlers import api_routes as dashboard_api_routes
from .db import DatabaseUnusable
from .facade import ServiceFacade
from .handlers import scrape_routes
from .lease import LeaseHeld
from .notifications.handlers import api_routes as notification_routes
from .schedules.handlers import api_routes as definition_routes
from .service import JobService, build


def routes(prefix: str) -> list[tuple[str, type[web.RequestHandler]]]:
    """The API's URL patterns under ``prefix`` (``/`` standalone, ``/services/nbjobs/``
    under a hub): each part's own, then a JSON 404 for every other path under ``api/``."""
    api = prefix.rstrip("/") + "/api"
    return [
        *handlers.api_routes(api),
        *dashboard_api_routes(api),
        *definition_routes(api),
        *notification_routes(api),
        # last: every other path under api/ is a JSON 404, never tornado's HTML page
        (api + r"(?:/.*)?", NotFoundHandler),
    ]


def backend_class_for(kind: str) -> type[Backend]:
    """The backend class for ``backend.kind`` in nbjobs.yaml."""
    if kind == "kubernetes":
        try:
            from .backends.kubernetes import KubernetesBackend
        except ImportError as exc:
            raise ConfigError(
                f"backend kind 'kubernetes' is not available here ({exc}); "
                "install nbjobs[kubernetes]"
            ) from None
        return KubernetesBackend
    return LocalBackend


def api_settings(service: JobService, auth: Authenticator) -> dict[str, Any]:
    """The tornado settings the API's handlers read, with the links between the service
    and its authenticator made: the service's program and the single-user server
    extension serve the API with these alike."""
    # scheduled runs act for their owners as they are at each tick, not as when saved
    # (never as a person made since under the same name: deleted_users.py)
    service.ticker.owner_now = service.departures.vetted(auth.user_now)
    # a teacher's class is a hub group, but never one that grants what nbjobs.yaml gives
    auth.class_groups = service.classes.uncounted_groups
    facade: ServiceFacade = service  # the handlers' view of it: checked here
    return {
        "nbjobs_service": facade,
        "nbjobs_auth": auth,
        # paths outside api/ too get a JSON 404, not tornado's HTML page
        "default_handler_class": NotFoundHandler,
    }


class JobServiceApp(Application):
    """The nbjobs job service."""

    name = "nbjobs-service"
    description = __doc__

    config_file = Unicode(
        os.environ.get("NBJOBS_CONFIG", ""), help="path of nbjobs.yaml (default: built-in)"
    ).tag(config=True)
    ip = Unicode("127.0.0.1", help="address to listen on (standalone)").tag(config=True)
    port = Integer(8787, help="port to listen on (standalone)").tag(config=True)
    prefix = Unicode(help="URL prefix (in a hub: JUPYTERHUB_SERVICE_PREFIX)").tag(config=True)
    backend_class = Type(
        None, klass=Backend, allow_none=True, help="override the backend nbjobs.yaml names"
    ).tag(config=True)
    auth_class = Type(
        None, klass=Authenticator, allow_none=True, help="how callers are authenticated"
    ).tag(config=True)
    tornado_settings = Dict(help="extra tornado settings").tag(config=True)
    standby = Bool(
        True,
        help="""What to do when another job service already uses the same database.

        True: wait as a standby (not listening) and take over when the other stops,
        or ``lease_seconds`` after it dies. False: refuse to start, naming the other.
        Either way two services never both start jobs from one database.
        ``c.JobServiceApp.standby = False``
        """,
    ).tag(config=True)
    lease_seconds = Float(
        15.0,
        min=1.0,
        help="""Seconds the dispatcher lease lasts unrenewed (renewed every third of it).

        How long a standby waits after the active service died before it takes over.
        The machines' clocks must agree to well within it.
        ``c.JobServiceApp.lease_seconds = 30``
        """,
    ).tag(config=True)
    concurrent_starts = Integer(
        8,
        min=1,
        help="""Jobs the dispatcher starts at once at most.

        Each start is one backend call (a Kubernetes Job create, which admission
        webhooks may hold for a second or more); they overlap up to this many, so
        fifty jobs with one-second creates start in about seven seconds, not fifty.
        ``c.JobServiceApp.concurrent_starts = 16``
        """,
    ).tag(config=True)
    database_threads = Integer(
        1,
        min=1,
        help="""Threads that do the service's database work, off the event loop.

        The API keeps answering while a query or a commit waits (on SQLite, on
        another writer; on PostgreSQL, on the network). SQLite writes one at a time
        whatever this is, and the work is mostly Python, which runs one thread at a
        time: each thread more competes for the interpreter with those that answer
        lists. In a burst of 200 submits (bench/dispatch_bench.py) four threads made
        a list take about twice as long as one; on SQLite they started the jobs no
        sooner, on PostgreSQL two threads started them in 15 s where one took 18 to
        19 s (four: 14 s), a list's p99 then about a quarter longer. More help
        against a PostgreSQL server far away on the network.
        ``c.JobServiceApp.database_threads = 2``
        """,
    ).tag(config=True)
    read_threads = Integer(
        2,
        min=1,
        help="""Threads that read the database for the API's GET requests (lists, a
        job's details, usage), apart from ``database_threads``: a burst of submits
        queued there never makes a list wait. While such a read runs, the database
        threads wait (50 ms at most) before they start their next piece of work.
        ``c.JobServiceApp.read_threads = 4``
        """,
    ).tag(config=True)
    metrics_max_jobs = Integer(
        500,
        min=0,
        help="""Running jobs at most that the Prometheus metrics list one by one.

        Each listed job is a few series (its GPU utilisation and memory, labelled job,
        user, flavor and node); those holding the most GPUs come first, and
        ``nbjobs_jobs_unlisted`` counts the rest (their GPUs still count in
        ``nbjobs_gpus_busy``). ``c.JobServiceApp.metrics_max_jobs = 200``
        """,
    ).tag(config=True)

    aliases = {
        "config": "JobServiceApp.config_file",
        "ip": "JobServiceApp.ip",
        "port": "JobServiceApp.port",
        "prefix": "JobServiceApp.prefix",
        "log-level": "Application.log_level",
    }

    nbjobs_config = Instance(NbjobsConfig, allow_none=True)
    service = Instance(JobService, allow_none=True)

    @default("log_level")
    def _default_log_level(self) -> int:
        # what it does (starts, adoptions, stops) at INFO; requests that succeed at DEBUG
        return logging.INFO

    @default("log_format")
    def _default_log_format(self) -> str:
        # when and how bad, like JupyterHub's own lines beside it in the hub's output
        return "[%(levelname)1.1s %(asctime)s.%(msecs).03d %(name)s] %(message)s"

    @default("log_datefmt")
    def _default_log_datefmt(self) -> str:
        return "%Y-%m-%d %H:%M:%S"

    @default("prefix")
    def _prefix(self) -> str:
        return os.environ.get("JUPYTERHUB_SERVICE_PREFIX", "/")

    @property
    def in_hub(self) -> bool:
        return bool(os.environ.get("JUPYTERHUB_API_TOKEN"))

    def initialize(self, argv: Sequence[str] | None = None) -> None:
        super().initialize(list(argv) if argv is not None else None)
        self.nbjobs_config = load_config(self.config_file or None)
        if self.in_hub and (url := os.environ.get("JUPYTERHUB_SERVICE_URL")):
            parsed = urlparse(url)
            self.ip = parsed.hostname or self.ip
            self.port = parsed.port or self.port

    def make_service(self) -> JobService:
        assert self.nbjobs_config is not None
        cls = self.backend_class or backend_class_for(self.nbjobs_config.backend.kind)
        backend = cls(self.nbjobs_config, parent=self, log=self.log)
        hub = None
        if self.in_hub and os.environ.get("JUPYTERHUB_API_URL"):
            hub = HubGroups(os.environ["JUPYTERHUB_API_URL"], os.environ["JUPYTERHUB_API_TOKEN"])
        service = build(
            self.nbjobs_config,
            backend,
            log=self.log,
            hub=hub,
            lease_seconds=self.lease_seconds,
            concurrent_starts=self.concurrent_starts,
            database_threads=self.database_threads,
            read_threads=self.read_threads,
        )
        service.metrics.max_jobs = self.metrics_max_jobs
        return service

    def make_auth(self) -> Authenticator:
        assert self.nbjobs_config is not None
        cls = self.auth_class or (HubTokenAuth if self.in_hub else StaticTokenAuth)
        auth: Authenticator = cls(parent=self, log=self.log)
        auth.admins = self.nbjobs_config.admin
        auth.teachers = self.nbjobs_config.teachers
        return auth

    def make_web_app(self, service: JobService, auth: Authenticator) -> web.Application:
        settings = api_settings(service, auth)
        settings["log_function"] = self._log_request
        settings["nbjobs_prefix"] = self.prefix
        if self.in_hub:
            from jupyterhub.services.auth import HubOAuth

            settings["nbjobs_hub_oauth"] = HubOAuth(parent=self)
            # the OAuth state and token cookies are signed with it; a new one at each start
            # only means a fresh (silent) OAuth round after a restart
            settings["cookie_secret"] = os.urandom(32)
        settings.update(self.tornado_settings)
        api = routes(self.prefix)
        return web.Application(
            [
                *scrape_routes(self.prefix),
                *dashboard_routes(self.prefix, hub=self.in_hub),
                *api,
            ],
            **settings,
        )

    def _log_request(self, handler: web.RequestHandler) -> None:
        status = handler.get_status()
        # the Lab polls every few seconds: answered requests are DEBUG, refusals WARNING
        level = logging.DEBUG if status < 400 else logging.WARNING
        if status >= 500 and status != 503:  # a 503 says to come back (busy, stopping)
            level = logging.ERROR
        if not self.log.isEnabledFor(level):
            return  # every answered request passes here: nothing formatted for nobody
        self.log.log(
            level,
            "%d %s %s %.1fms",
            status,
            handler.request.method,
            # a link to a result carries its credential in the path
            re.sub(r"(/dashboard/result/)[^/]+", r"\1[key]", handler.request.path),
            1000 * handler.request.request_time(),
        )

    async def run(self) -> None:
        """Serve until SIGTERM or SIGINT (or until another service takes the database)."""
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        auth = self.make_auth()  # a bad token file stops the start here
        self.service = self.make_service()
        self.service.on_lease_lost = stop.set
        # Waits here, not listening, while another service holds the database.
        starting = asyncio.ensure_future(self.service.start(standby=self.standby))
        stopped = asyncio.ensure_future(stop.wait())
        await asyncio.wait({starting, stopped}, return_when=asyncio.FIRST_COMPLETED)
        if not starting.done():  # stopped while a standby
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await starting
            await self.service.lease.aclose()
            self.log.info("stopped while waiting as a standby")
            return
        stopped.cancel()
        starting.result()  # LeaseHeld when not a standby
        # which hub groups are classes, with any class from before classes had groups of
        # their own moved into its own, before the first caller's groups are counted
        await self.service.classes.refresh(force=True)
        app = self.make_web_app(self.service, auth)
        # the handlers refuse a body over limits.request_body with a 413 (see APIHandler);
        # tornado's own cap, a little above it, is the backstop
        server = httpserver.HTTPServer(
            app, xheaders=True, max_body_size=self.service.config.limits.request_body + 65536
        )
        server.listen(self.port, self.ip)
        freeze_what_lasts()
        self.log.info(
            "nbjobs job service at http://%s:%s%sapi/ (%s backend)",
            self.ip,
            self.port,
            self.prefix,
            self.service.backend.__class__.__name__,
        )
        await stop.wait()
        self.log.info("stopping; running jobs go on and are adopted at the next start")
        server.stop()
        await self.service.stop()


def freeze_what_lasts() -> None:
    """Leave what the start made (modules, classes, the configuration, the clients: about
    a million objects) out of every later garbage collection. Python's full collection
    walks every object it tracks, and with all of them it held the event loop for about
    170 ms in the middle of a burst of submits (bench/dispatch_bench.py): every request
    then waited. Frozen objects are never freed, which is right for what lives as long as
    the process; cycles made later are collected as before."""
    gc.collect()  # what the start left as garbage is freed, not frozen
    gc.freeze()


def one_log(log: logging.Logger) -> None:
    """What nbjobs' modules and tornado log (a refusal's details, an uncaught exception's
    traceback) goes where the service's own lines go, in their format and at their
    level: Python's last-resort handler printed their warnings bare (no time, no level)
    and dropped the rest. Once per process: the loggers are the process's."""
    for name in ("nbjobs", "tornado"):
        logger = logging.getLogger(name)
        logger.handlers = list(log.handlers)
        logger.setLevel(log.level)
        logger.propagate = False


def main(argv: Sequence[str] | None = None) -> int:
    """``nbjobs service [--config nbjobs.yaml] [--port N]``."""
    app = JobServiceApp()
    try:
        app.initialize(list(argv) if argv is not None else None)
    except ConfigError as exc:
        print(f"nbjobs service: {exc}", flush=True)
        return 2
    one_log(app.log)
    try:
        asyncio.run(app.run())
    except (DatabaseUnusable, TokenConfigError, ConfigError) as exc:
        # ConfigError here: nbjobs.yaml that parsed but does not fit this machine (the
        # backend says so when it is made: run_as: user in a service that is not root)
        print(f"nbjobs service: {exc}", flush=True)
        return 2
    except LeaseHeld as exc:
        print(f"nbjobs service: {exc}", flush=True)
        return 3
    return 0

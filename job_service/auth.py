"""Who is calling the job service: a JupyterHub token, or a configured API token.

In a hub, every request carries a JupyterHub token; the hub says whose it is,
their groups and scopes (``custom:nbjobs:admin`` makes an nbjobs admin, as do
hub admins and the ``admin`` section of ``nbjobs.yaml``). Standalone, the
service accepts the tokens it was configured with (like JupyterHub's own
``api_tokens``); there is no user table of nbjobs' own either way.

Prometheus' scrape of ``{prefix}metrics`` (:meth:`Authenticator.may_scrape`) takes an
nbjobs admin's token, or one the admin granted scraping: a hub user's or service's
token with the ``custom:nbjobs:metrics`` scope, or the token of a user (or a member of
a group) named in :attr:`Authenticator.metrics_users` / :attr:`Authenticator.metrics_groups`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable
from pathlib import Path
from typing import Any

import yaml
from traitlets import Bool, Dict, Float, Integer, List, Unicode
from traitlets.config import LoggingConfigurable

from nbjobs.class_groups import is_class_group
from nbjobs.config import AdminConfig, TeachersConfig

from .errors import Caller

ADMIN_SCOPE = "custom:nbjobs:admin"
SUBMIT_SCOPE = "custom:nbjobs:submit"
TEACH_SCOPE = "custom:nbjobs:teach"
#: may read the service's Prometheus metrics (and nothing else by it)
METRICS_SCOPE = "custom:nbjobs:metrics"
#: the refusal of a hub token that holds none of HubTokenAuth.accepted_scopes
NARROW_TOKEN = (
    "this token may not use nbjobs: it holds neither custom:nbjobs:submit nor "
    "access:services!service=nbjobs; make one with those scopes (the hub's Token page "
    "gives them by default) or use your notebook server's"
)


def bearer_token(headers: Any, query_token: str | None = None) -> str | None:
    """The token of a request: ``Authorization: token X`` / ``Bearer X``, or ``?token=``."""
    header = headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() in ("token", "bearer") and value.strip():
        return value.strip()
    return query_token or None


class Authenticator(LoggingConfigurable):
    """Turns a request's token into a :class:`Caller` (None: not authenticated)."""

    admins = AdminConfig()
    teachers = TeachersConfig()

    metrics_users = List(
        Unicode(),
        help="""Users whose tokens may scrape the Prometheus metrics (``{prefix}metrics``).

        Besides nbjobs admins (who always may). Give Prometheus a token of a user
        named here rather than an admin's: it reads the metrics and nothing else
        (its jobs API is a plain user's). Under a hub, granting the
        ``custom:nbjobs:metrics`` scope to a service or user does the same.
        ``c.Authenticator.metrics_users = ["prometheus"]``
        """,
    ).tag(config=True)
    metrics_groups = List(
        Unicode(),
        help="""Groups whose members' tokens may scrape the Prometheus metrics.

        ``c.Authenticator.metrics_groups = ["monitoring"]``
        """,
    ).tag(config=True)

    #: hub groups outside the classes' namespace that never count either (a class made
    #: before classes had one, not yet moved); set by the app from its class registry.
    #: A class's group never counts as a group nbjobs.yaml gives meaning to: a class named
    #: before its name gained one (an admin later naming it in admins, teachers, a
    #: flavor's groups, a quota) grants nothing of that
    class_groups: Callable[[], Collection[str]]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.class_groups = lambda: ()

    def meaningful(self, groups: Iterable[str] | None) -> frozenset[str]:
        """The groups of a user that count for flavors, quotas, roles and metrics."""
        uncounted = self.class_groups()
        return frozenset(g for g in groups or () if not is_class_group(g) and g not in uncounted)

    async def caller_for_token(self, token: str) -> Caller | None:
        raise NotImplementedError

    async def user_now(self, name: str) -> Caller | None:
        """The user ``name`` as they are now, without a token of theirs (a scheduled run
        acts for its owner): their groups now; None when there is no such user any more."""
        raise NotImplementedError

    async def may_scrape(self, token: str) -> bool | None:
        """Whether ``token`` may read the Prometheus metrics: None when it is nobody's
        (a 401), False for someone not granted it (a 403)."""
        caller = await self.caller_for_token(token)
        if caller is None:
            return None
        return caller.admin or self.grants_scrape(caller.name, caller.groups)

    def grants_scrape(self, name: str, groups: frozenset[str]) -> bool:
        """Whether configuration grants scraping to this user (not counting admins)."""
        return name in self.metrics_users or bool(groups & set(self.metrics_groups))

    def is_admin(self, name: str, groups: frozenset[str], extra: bool = False) -> bool:
        return extra or name in self.admins.users or bool(groups & set(self.admins.groups))

    def is_teacher(self, name: str, groups: frozenset[str], extra: bool = False) -> bool:
        return extra or name in self.teachers.users or bool(groups & set(self.teachers.groups))


class StaticTokenAuth(Authenticator):
    """Tokens from configuration: ``{token: user}`` with ``user_groups`` for their groups.

    Give the tokens in a file (:attr:`tokens_file`) or an environment variable
    (:attr:`tokens_env`), not on the command line, where every local user can read
    them with ``ps``. All three sources add up.
    """

    tokens = Dict(key_trait=Unicode(), value_trait=Unicode(), help="API token -> user name").tag(
        config=True
    )
    tokens_file = Unicode(
        "",
        help="""A YAML or JSON file of ``{token: user name}``, read at start.

        Keep it readable by the service alone (``chmod 600``); the service warns
        when others may read it. ``c.StaticTokenAuth.tokens_file = "/etc/nbjobs/tokens.yaml"``
        """,
    ).tag(config=True)
    tokens_env = Unicode(
        "NBJOBS_SERVICE_TOKENS",
        help="""An environment variable holding ``{token: user name}`` as JSON (if set).""",
    ).tag(config=True)
    user_groups = Dict(help="user name -> list of group names").tag(config=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._known: dict[str, str] = {**self._from_env(), **self._from_file(), **self.tokens}

    def _from_file(self) -> dict[str, str]:
        if not self.tokens_file:
            return {}
        path = Path(self.tokens_file)
        try:
            mode = path.stat().st_mode
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise TokenConfigError(
                f"cannot read the token file {path} ({exc}); give a YAML file of "
                "'token: user name' lines"
            ) from None
        if mode & 0o077:
            self.log.warning(
                "nbjobs: the token file %s may be read by other users (mode %o); chmod 600 it",
                path,
                mode & 0o777,
            )
        return _token_map(data, f"the token file {path}")

    def _from_env(self) -> dict[str, str]:
        raw = os.environ.get(self.tokens_env, "") if self.tokens_env else ""
        if not raw.strip():
            return {}
        try:
            data = json.loads(raw)
        except json.JSONDecodeError:
            raise TokenConfigError(
                f'${self.tokens_env} is not JSON; set it to {{"token": "user name"}}'
            ) from None
        return _token_map(data, f"${self.tokens_env}")

    async def user_now(self, name: str) -> Caller | None:
        if name not in self._known.values():
            return None  # no token names them any more: they are gone from this service
        groups = self.meaningful(self.user_groups.get(name, []))
        return Caller(
            name, groups, self.is_admin(name, groups), teacher=self.is_teacher(name, groups)
        )

    async def caller_for_token(self, token: str) -> Caller | None:
        for known, name in self._known.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                groups = self.meaningful(self.user_groups.get(name, []))
                return Caller(
                    name,
                    groups,
                    self.is_admin(name, groups),
                    teacher=self.is_teacher(name, groups),
                )
        return None


class TokenConfigError(ValueError):
    """Configured tokens that cannot be used; the text says what to fix."""


def _token_map(data: Any, where: str) -> dict[str, str]:
    """``{token: user}`` from parsed configuration, or a :class:`TokenConfigError`."""
    if data is None:
        return {}
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and k and v for k, v in data.items()
    ):
        raise TokenConfigError(
            f"{where} must map each token to a user name (text: text), e.g. "
            "'a-long-random-token: ada'"
        )
    return dict(data)


class HubTokenAuth(Authenticator):
    """Tokens checked with the JupyterHub API (``jupyterhub.services.auth.HubAuth``).

    The hub's answer for a token is kept for :attr:`cache_seconds` only (HubAuth's own
    cache keeps it five minutes, so a revoked or expired token would go on working that
    long): a token the hub revokes or lets expire stops working here within seconds.
    """

    require_submit_scope = Bool(
        False,
        help="only callers holding the custom:nbjobs:submit scope may submit (define the "
        "scope in JupyterHub.custom_scopes and grant it through roles)",
    ).tag(config=True)

    cache_seconds = Float(
        5.0,
        min=0,
        help="""Seconds the hub's answer for a token is reused before the hub is asked again.

        This is as long as a token keeps working here after the hub revoked it or it
        expired. 0 asks the hub on every request (one loopback call, a few
        milliseconds). ``c.HubTokenAuth.cache_seconds = 2``
        """,
    ).tag(config=True)

    cache_size = Integer(
        10_000, min=0, help="most tokens whose answers are kept at once (oldest dropped first)"
    ).tag(config=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        from jupyterhub.services.auth import HubAuth

        self.hub_auth = HubAuth(parent=self)
        #: sha256(token) -> (monotonic time of the hub's answer, the answer)
        self._answers: OrderedDict[str, tuple[float, dict[str, Any]]] = OrderedDict()
        #: sha256(token) -> when the hub made its user: a token dies with its user, so
        #: this never changes while the token works
        self._made: OrderedDict[str, str] = OrderedDict()

    async def _hub_model(self, token: str) -> dict[str, Any] | None:
        """The hub's user model for a token, reused for at most ``cache_seconds``.

        Only answers that name someone are kept: a refused token is asked about again
        (so a token made a moment ago works at once), and nothing is kept past its age.
        """
        key = hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()
        now = time.monotonic()
        cached = self._answers.get(key)
        if cached is not None and now - cached[0] < self.cache_seconds:
            return cached[1]
        self._answers.pop(key, None)
        model = await self.hub_auth.user_for_token(token, use_cache=False, sync=False)
        if model and self.cache_seconds > 0 and self.cache_size > 0:
            self._answers[key] = (now, model)
            while len(self._answers) > self.cache_size:
                self._answers.popitem(last=False)
        return model or None

    async def caller_for_token(self, token: str) -> Caller | None:
        model = await self._hub_model(token)
        if not model or model.get("kind", "user") != "user":
            return None
        name = model["name"]
        groups = self.meaningful(model.get("groups"))
        scopes = set(model.get("scopes") or [])
        if not scopes & self.accepted_scopes():
            # a token made for something else (read:users:name!user=ada) is not a key
            # to nbjobs, whoever's it is
            return Caller(name, groups, refused=NARROW_TOKEN)
        admin = self.is_admin(name, groups, bool(model.get("admin")) or ADMIN_SCOPE in scopes)
        may_submit = admin or not self.require_submit_scope or SUBMIT_SCOPE in scopes
        teacher = self.is_teacher(name, groups, TEACH_SCOPE in scopes)
        created = await self._made_at(token, name, model)
        return Caller(name, groups, admin, may_submit=may_submit, teacher=teacher, created=created)

    async def _made_at(self, token: str, name: str, model: dict[str, Any]) -> str | None:
        """When the hub made the token's user: in the token's answer when its scopes let
        it read that, else asked of the hub with the service's own token (once per token)."""
        if model.get("created"):
            return str(model["created"])
        key = hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()
        if key in self._made:
            self._made.move_to_end(key)
            return self._made[key]
        from .classes import HubError, HubGroups

        hub = HubGroups(self.hub_auth.api_url, self.hub_auth.api_token)
        try:
            user = await hub.user(name)
        except HubError as exc:
            self.log.warning("nbjobs: cannot ask the hub when %s was made: %s", name, exc.message)
            return None
        if user is None or not user.get("created"):
            return None
        self._made[key] = str(user["created"])
        while len(self._made) > max(self.cache_size, 1):
            self._made.popitem(last=False)
        return self._made[key]

    async def user_now(self, name: str) -> Caller | None:
        from .classes import HubGroups

        hub = HubGroups(self.hub_auth.api_url, self.hub_auth.api_token)
        model = await hub.user(name)
        if model is None:
            return None
        groups = self.meaningful(model.get("groups"))
        admin = self.is_admin(name, groups, bool(model.get("admin")))
        teacher = self.is_teacher(name, groups, False)
        return Caller(name, groups, admin, teacher=teacher, created=model.get("created"))

    @staticmethod
    def accepted_scopes() -> set[str]:
        """A token holding any of these may use nbjobs (what it may do is decided after)."""
        service = os.environ.get("JUPYTERHUB_SERVICE_NAME") or "nbjobs"
        return {
            SUBMIT_SCOPE,
            ADMIN_SCOPE,
            TEACH_SCOPE,
            "access:services",
            f"access:services!service={service}",
        }

    async def may_scrape(self, token: str) -> bool | None:
        """An admin's token, or a user's or service's holding ``custom:nbjobs:metrics``
        (a JupyterHub service made for Prometheus, with a role granting the scope)."""
        model = await self._hub_model(token)
        if not model:
            return None
        scopes = set(model.get("scopes") or [])
        if METRICS_SCOPE in scopes or ADMIN_SCOPE in scopes:
            return True
        if model.get("kind", "user") != "user":
            return False
        name = model["name"]
        groups = self.meaningful(model.get("groups"))
        return self.is_admin(name, groups, bool(model.get("admin"))) or self.grants_scrape(
            name, groups
        )

"""Who is calling the job service: a JupyterHub token, or a configured API token.

In a hub, every request carries a JupyterHub token; the hub says whose it is,
their groups and scopes (``custom:nbjobs:admin`` makes an nbjobs admin, as do
hub admins and the ``admin`` section of ``nbjobs.yaml``). Standalone, the
service accepts the tokens it was configured with (like JupyterHub's own
``api_tokens``); there is no user table of nbjobs' own either way.
"""

from __future__ import annotations

import hmac
from typing import Any

from traitlets import Bool, Dict, Unicode
from traitlets.config import LoggingConfigurable

from nbjobs.config import AdminConfig, TeachersConfig

from .service import Caller

ADMIN_SCOPE = "custom:nbjobs:admin"
SUBMIT_SCOPE = "custom:nbjobs:submit"
TEACH_SCOPE = "custom:nbjobs:teach"


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

    async def caller_for_token(self, token: str) -> Caller | None:
        raise NotImplementedError

    def is_admin(self, name: str, groups: frozenset[str], extra: bool = False) -> bool:
        return extra or name in self.admins.users or bool(groups & set(self.admins.groups))

    def is_teacher(self, name: str, groups: frozenset[str], extra: bool = False) -> bool:
        return extra or name in self.teachers.users or bool(groups & set(self.teachers.groups))


class StaticTokenAuth(Authenticator):
    """Tokens from configuration: ``{token: user}`` with ``user_groups`` for their groups."""

    tokens = Dict(key_trait=Unicode(), value_trait=Unicode(), help="API token -> user name").tag(
        config=True
    )
    user_groups = Dict(help="user name -> list of group names").tag(config=True)

    async def caller_for_token(self, token: str) -> Caller | None:
        for known, name in self.tokens.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                groups = frozenset(self.user_groups.get(name, []))
                return Caller(
                    name,
                    groups,
                    self.is_admin(name, groups),
                    teacher=self.is_teacher(name, groups),
                )
        return None


class HubTokenAuth(Authenticator):
    """Tokens checked with the JupyterHub API (``jupyterhub.services.auth.HubAuth``)."""

    require_submit_scope = Bool(
        False,
        help="only callers holding the custom:nbjobs:submit scope may submit (define the "
        "scope in JupyterHub.custom_scopes and grant it through roles)",
    ).tag(config=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        from jupyterhub.services.auth import HubAuth

        self.hub_auth = HubAuth(parent=self)

    async def caller_for_token(self, token: str) -> Caller | None:
        model = await self.hub_auth.user_for_token(token, use_cache=True, sync=False)
        if not model or model.get("kind", "user") != "user":
            return None
        name = model["name"]
        groups = frozenset(model.get("groups") or [])
        scopes = set(model.get("scopes") or [])
        admin = self.is_admin(name, groups, bool(model.get("admin")) or ADMIN_SCOPE in scopes)
        may_submit = admin or not self.require_submit_scope or SUBMIT_SCOPE in scopes
        teacher = self.is_teacher(name, groups, TEACH_SCOPE in scopes)
        return Caller(name, groups, admin, may_submit=may_submit, teacher=teacher)

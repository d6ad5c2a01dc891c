"""Invitations for names a roster (or an admin) added: asked of the hub, shown, mailed.

A hub whose login is ``nbjobs.hub_config.first_login.InvitationAuthenticator`` (what
``nbjobs install`` sets up) gives a name its first password only through an
invitation. The hub makes them (``POST /hub/api/nbjobs/invitations/NAME``, for tokens
with ``admin:users`` on the name, as this service's token has): the code is kept there
as a hash, and the link is known once, in the answer. This service asks for one

- for every account a teacher's roster creates (the answer to the class's create or
  add lists them: the teacher hands them out), and
- on ``POST api/invitations`` (``nbjobs invite NAME``, the dashboard): an admin for
  any user, a teacher for a student of theirs, who has not chosen a password yet.

Where the new user's address is known (hub names that are verified addresses,
``notifications.email.names_are_addresses``), the invitation is mailed there too,
through the outbox. A hub with another login (OAuth, PAM) makes no invitations: then
nothing is shown and nothing is mailed.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import TYPE_CHECKING
from urllib.parse import quote

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

from nbjobs.models import HUB_INVITATIONS_PATH, InvitationInfo

from .classes import HubError
from .db import utcnow
from .errors import Caller, Conflict, Forbidden, NotFound, ServiceError
from .notifications.messages import Message
from .notifications.settings import email_problem
from .notifications.store import notification

if TYPE_CHECKING:
    from .classes import HubGroups
    from .context import Context

#: the outbox's event for an invitation's mail
INVITATION_EVENT = "invitation"


class NoInvitations(ServiceError):
    """The hub's login makes no invitations (not the one ``nbjobs install`` sets up)."""

    status = 409


class Invitations:
    """Invitations asked of the hub for the service's callers."""

    def __init__(self, ctx: Context, hub: HubGroups | None) -> None:
        self.ctx = ctx
        self.hub = hub

    async def invite(self, caller: Caller, user: str) -> InvitationInfo:
        """A new invitation for ``user``, asked by ``caller`` (an admin: anyone; a
        teacher: a student of theirs); an earlier one of ``user``'s stops working."""
        user = user.strip().lower()
        if self.hub is None:
            raise NoInvitations(
                "this job service runs without a hub, so there is no hub login to invite "
                "anyone to; its users are the tokens file's"
            )
        if not caller.admin:
            if not caller.teacher:
                raise Forbidden(
                    "only admins and teachers make invitations; ask whoever added you for one"
                )
            await self.ctx.classes.refresh()
            if not self.ctx.classes.teaches(caller.name, user):
                raise NotFound(
                    f"{user!r} is no student of a class of yours; a teacher invites their own "
                    "students (`nbjobs class list NAME` shows a roster), an admin anyone"
                )
        model = await self.hub.user(user)
        if model is not None and model.get("admin"):
            # whoever held the link would be a hub admin: more than an nbjobs admin is
            raise Forbidden(
                f"{user} is a JupyterHub admin: only another JupyterHub admin invites them, "
                f"with their own token (POST /hub/api/nbjobs/invitations/{user})"
            )
        made = await self._ask_hub(user)
        if made is None:
            raise NoInvitations(
                "this hub's login makes no invitations (users log in as its authenticator "
                "says: PAM, OAuth...); nbjobs install's login (firstuse) makes them"
            )
        self.ctx.log.info("invitation for %s made for %s", user, caller.name)
        return made

    async def for_new_users(self, names: list[str]) -> list[InvitationInfo]:
        """An invitation for each account a roster just created (none where the hub's
        login makes none)."""
        made = []
        for name in names:
            try:
                invitation = await self._ask_hub(name)
            except ServiceError as exc:
                # the roster change stands; the teacher invites again with nbjobs invite
                self.ctx.log.warning("no invitation for %s: %s", name, exc.message)
                continue
            if invitation is None:
                return []
            made.append(invitation)
        return made

    async def _ask_hub(self, user: str) -> InvitationInfo | None:
        """The hub's new invitation for ``user``, mailed where their address is known;
        None when the hub's login makes no invitations."""
        if self.hub is None:
            return None
        request = HTTPRequest(
            f"{self.hub.api_url}{HUB_INVITATIONS_PATH}/{quote(user, safe='')}",
            method="POST",
            headers={"Authorization": f"token {self.hub.token}"},
            body="{}",
            request_timeout=30,
        )
        try:
            response = await AsyncHTTPClient().fetch(request)
        except HTTPClientError as exc:
            message = _hub_message(exc)
            if exc.code == 404 and "no hub user" in message:
                raise NotFound(message) from None
            if exc.code == 404:
                return None  # no such API: another login
            if exc.code == 409:
                raise Conflict(message) from None
            raise HubError(
                f"the hub made no invitation for {user} ({exc.code} {message}); try again, "
                "or see the hub's log"
            ) from None
        body = json.loads(response.body)
        links_base = self.ctx.config.notifications.links_base
        url = f"{links_base.rstrip('/')}{body['path']}" if links_base else body["path"]
        invitation = InvitationInfo(
            user=body["user"],
            code=body["code"],
            url=url,
            expires_at=datetime.fromisoformat(body["expires_at"]),
        )
        mailed = await self.ctx.in_db(self._mail, invitation)
        return invitation.model_copy(update={"mailed_to": mailed})

    def _mail(self, invitation: InvitationInfo) -> str | None:
        """Queue the invitation's mail where the user's address is known; that address."""
        config = self.ctx.config.notifications
        address = invitation.user
        email = config.email
        if email is None or not email.names_are_addresses or email_problem(config, address):
            return None
        with self.ctx.sessions() as db:
            db.add(
                notification(
                    invitation.user,
                    INVITATION_EVENT,
                    f"{INVITATION_EVENT}:{uuid.uuid4().hex}",
                    "email",
                    address,
                    invitation_message(invitation, config.links_base),
                    utcnow(),
                )
            )
            db.commit()
        return address


def invitation_message(invitation: InvitationInfo, links_base: str | None) -> Message:
    """The mail that brings an invitation to its user."""
    expires = f"{invitation.expires_at:%Y-%m-%d %H:%M} UTC"
    if links_base:
        how = f"Open this link to choose your password:\n\n  {invitation.url}\n\n"
    else:
        how = (
            "Open the hub's invitation page (/hub/invite on the hub your teacher or admin "
            f"named) and enter this code:\n\n  {invitation.code}\n\n"
        )
    text = (
        f"You were added to nbjobs as {invitation.user!r}. {how}"
        f"The invitation works once and lasts until {expires}. From then on you log in "
        "with your name and that password.\n\nIf you expected no such mail, ignore it."
    )
    facts = {"user": invitation.user, "expires_at": invitation.expires_at.isoformat()}
    return Message("[nbjobs] choose your password", text, facts)


def _hub_message(exc: HTTPClientError) -> str:
    if exc.response is not None and exc.response.body:
        try:
            return str(json.loads(exc.response.body).get("message", ""))
        except ValueError:
            pass
    return str(exc.message)

"""First logins by invitation: the hub login of ``nbjobs install`` on one machine.

:class:`InvitationAuthenticator` is JupyterHub's first-use authenticator (a password
per user, hashed with bcrypt in a file of the hub's) with one change: a name that has
no password yet gets one only through an invitation (:mod:`.invitations`), never by
logging in with it. Whoever added the name (an admin in the hub's admin page, a
teacher's roster through the job service, ``nbjobs invite NAME``) is given a link; its
holder opens it, chooses the password, and is logged in.

The pages and the API it adds to the hub:

- ``/hub/invite`` and ``/hub/invite/CODE``: enter a code, choose the password.
- ``POST /hub/api/nbjobs/invitations/NAME``: a new invitation for the hub user NAME who
  has no password yet, for tokens holding ``admin:users`` on them (hub admins, the
  nbjobs job service acting for a teacher it checked).

Plain first use (the first login with a name sets its password) stays available as
``c.InvitationAuthenticator.open_first_use = True``, for a hub where that is safe.
"""

from __future__ import annotations

import asyncio
import dbm
from typing import Any
from urllib.parse import quote, urlencode

import bcrypt
from firstuseauthenticator import FirstUseAuthenticator
from jupyterhub.apihandlers.base import APIHandler
from jupyterhub.handlers import BaseHandler
from jupyterhub.scopes import needs_scope
from jupyterhub.utils import url_path_join
from tornado import web
from traitlets import Bool, Float, Unicode

from nbjobs.models import HUB_INVITATIONS_PATH

from .invitations import LIFETIME, InvitationRefused, InvitationStore

#: the API path of invitations, under the hub's base URL
API_PATH = f"api/{HUB_INVITATIONS_PATH}"


class InvitationAuthenticator(FirstUseAuthenticator):
    """Passwords chosen by the holder of an invitation, not by the first to log in."""

    invitations_path = Unicode(
        "invitations.json",
        config=True,
        help="""The file of invitations (hashes of their codes, users, expiry).

        Beside ``dbm_path``, root's alone; ``nbjobs install`` puts it in its state folder.
        ``c.InvitationAuthenticator.invitations_path = "/var/lib/nbjobs/invitations.json"``
        """,
    )
    invitation_lifetime = Float(
        LIFETIME,
        config=True,
        help="""Seconds an invitation lasts (a week by default).

        ``c.InvitationAuthenticator.invitation_lifetime = 3 * 24 * 3600``
        """,
    )
    open_first_use = Bool(
        False,
        config=True,
        help="""Let the first login with a name that has no password choose it.

        That is plain first use: anyone who knows a name an admin or a roster added (a
        classmate) can then take it before its owner. Only for a hub whose users are all
        trusted (``nbjobs install --open-first-login`` sets it, with a warning).
        ``c.InvitationAuthenticator.open_first_use = True``
        """,
    )

    @property
    def invitations(self) -> InvitationStore:
        """The store of this hub's invitations."""
        return InvitationStore(self.invitations_path)

    def _stored(self, name: str) -> bytes | None:
        """The bcrypt hash of ``name``'s password; None: they have not chosen one."""
        with dbm.open(self.dbm_path, "c", 0o600) as db:
            return db.get(name.encode("utf8"))

    def has_password(self, name: str) -> bool:
        """Whether the hub user ``name`` has chosen a password."""
        return self._stored(name) is not None

    async def set_password(self, name: str, password: str) -> None:
        """Keep ``password`` (hashed) as ``name``'s.

        bcrypt takes a quarter second of CPU by design: it runs on a thread, so that a
        class choosing passwords or logging in at once does not stall the hub's other
        requests (the file itself is read and written here, one access at a time)."""
        hashed = await asyncio.to_thread(bcrypt.hashpw, password.encode("utf8"), bcrypt.gensalt())
        with dbm.open(self.dbm_path, "c", 0o600) as db:
            db[name.encode("utf8")] = hashed

    async def authenticate(self, handler: Any, data: dict[str, str]) -> str | None:
        """First use's check (a name's password, or with ``open_first_use`` the first
        login choosing it), bcrypt on a thread as in :meth:`set_password`."""
        name = self.normalize_username(data["username"])
        password = data["password"]
        if not self.create_users and not self._user_exists(name):
            return None
        stored = self._stored(name)
        if stored is not None:
            same = await asyncio.to_thread(bcrypt.checkpw, password.encode("utf8"), stored)
            return name if same else None
        if not self.open_first_use:
            if self._user_exists(name):
                page = url_path_join(handler.hub.base_url, "invite")
                handler.custom_login_error = (
                    f"{name} has no password yet: open the invitation link you were given "
                    f"(or enter its code at {page}) to choose one; whoever added you (a "
                    "teacher or an admin) can make a new one"
                )
            return None
        if not self._validate_password(password):
            handler.custom_login_error = (
                f"choose a password of at least {self.min_password_length} characters"
            )
            return None
        await self.set_password(name, password)
        return name

    def delete_user(self, user: Any) -> None:
        super().delete_user(user)
        # a name deleted and added again starts with no invitation of the old one's
        self.invitations.forget(user.name)

    def get_handlers(self, app: Any) -> list[tuple[str, Any]]:
        handlers: list[tuple[str, Any]] = super().get_handlers(app)
        return [
            *handlers,
            (r"/invite/?", InvitationPage),
            (r"/invite/([^/]+)/?", InvitationPage),
            (rf"/{API_PATH}/(?P<user_name>[^/]+)", InvitationAPIHandler),
        ]


class InvitationAPIHandler(APIHandler):
    """``POST /hub/api/nbjobs/invitations/NAME``: a new invitation for NAME."""

    @needs_scope("admin:users")
    async def post(self, user_name: str) -> None:
        authenticator = self.authenticator
        if not isinstance(authenticator, InvitationAuthenticator):
            raise web.HTTPError(404, "this hub's login does not use invitations")
        user = self.find_user(user_name)
        if user is None:
            raise web.HTTPError(
                404, f"no hub user {user_name!r}: add them first (the admin page, a roster)"
            )
        if authenticator.has_password(user.name):
            raise web.HTTPError(
                409,
                f"{user.name} chose a password already; an invitation would let its holder "
                "replace it (they change it themselves at /hub/auth/change-password)",
            )
        maker = self.current_user
        made_by = getattr(maker, "name", "") or ""
        invitation = authenticator.invitations.make(
            user.name, lifetime=authenticator.invitation_lifetime, made_by=made_by
        )
        self.log.info("invitation for %s made by %s", user.name, made_by)
        path = url_path_join(self.hub.base_url, "invite", invitation.code)
        self.set_status(201)
        self.write(
            {
                "user": user.name,
                "code": invitation.code,
                "path": path,
                "expires_at": invitation.expires,
            }
        )


class InvitationPage(BaseHandler):
    """Enter an invitation's code, then choose the password it invites to choose."""

    def get_template(self, name: str, sync: bool = False) -> Any:
        if name == PAGE_NAME:
            env = self.settings["jinja2_env_sync" if sync else "jinja2_env"]
            return env.from_string(PAGE)
        return super().get_template(name, sync)

    @property
    def store(self) -> InvitationStore:
        authenticator = self.authenticator
        if not isinstance(authenticator, InvitationAuthenticator):
            raise web.HTTPError(404, "this hub's login does not use invitations")
        return authenticator.invitations

    async def page(self, status: int = 200, **values: Any) -> None:
        self.set_status(status)
        defaults = {"code": "", "invited": None, "refusal": None, "problem": None}
        # where the holder goes once logged in (the hub checks it is one of its own pages)
        next_url = self.get_argument("next", "")
        values.setdefault("next_query", f"?{urlencode({'next': next_url})}" if next_url else "")
        html = await self.render_template(
            PAGE_NAME,
            **{**defaults, **values},
            min_length=self.authenticator.min_password_length,
        )
        self.finish(html)

    async def get(self, code: str | None = None) -> None:
        store = self.store
        typed = self.get_argument("code", "").strip()
        if code is None and typed:
            self.redirect(url_path_join(self.hub.base_url, "invite", quote(typed, safe="")))
            return
        if code is None:
            await self.page()
            return
        try:
            user = store.check(code)
        except InvitationRefused as refused:
            await self.page(410, code=code, refusal=str(refused))
            return
        await self.page(code=code, invited=user)

    async def post(self, code: str | None = None) -> None:
        store = self.store
        authenticator = self.authenticator
        assert isinstance(authenticator, InvitationAuthenticator)
        if code is None:
            raise web.HTTPError(405)
        try:
            user = store.check(code)
        except InvitationRefused as refused:
            await self.page(410, code=code, refusal=str(refused))
            return
        password = self.get_body_argument("password", "", strip=False)
        again = self.get_body_argument("password_again", "", strip=False)
        problem = None
        if len(password) < authenticator.min_password_length:
            problem = (
                f"choose a password of at least {authenticator.min_password_length} characters"
            )
        elif password != again:
            problem = "the two passwords differ: type the same one twice"
        if problem:
            await self.page(400, code=code, invited=user, problem=problem)
            return
        try:
            store.use(code)  # spent before the password is set: it works once, whatever follows
        except InvitationRefused as refused:
            await self.page(410, code=code, refusal=str(refused))
            return
        await authenticator.set_password(user, password)
        self.log.info("%s chose their password with an invitation", user)
        logged_in = await self.login_user({"username": user, "password": password})
        if logged_in is None:
            # the password is set; the login itself was refused (network.sign_in, say)
            login = url_path_join(self.hub.base_url, "login")
            await self.page(
                403,
                problem=f"your password is set, but this login was refused; log in at {login}",
            )
            return
        self.redirect(self.get_next_url(logged_in))


PAGE_NAME = "nbjobs-invitation.html"
PAGE = """{% extends "page.html" %}
{% block main %}
<div class="container col-md-6 mt-4" id="nbjobs-invitation">
  <h1 class="h3">Your invitation</h1>
  {% if refusal %}
    <p class="alert alert-danger" role="alert" id="refusal">{{ refusal }}</p>
    <p><a href="{{ base_url }}invite">Enter another code</a> ·
       <a href="{{ base_url }}login">Log in</a></p>
  {% elif invited %}
    <p>Choose the password of <strong id="invited-user">{{ invited }}</strong>. This
       invitation works once; from then on you log in with this name and password.</p>
    {% if problem %}<p class="alert alert-danger" role="alert" id="problem">{{ problem }}</p>
    {% endif %}
    <form method="post" action="{{ base_url }}invite/{{ code }}{{ next_query }}">
      <input type="hidden" name="_xsrf" value="{{ xsrf }}" />
      <label class="form-label" for="password">Password (at least {{ min_length }}
        characters)</label>
      <input class="form-control mb-2" type="password" id="password" name="password"
             autocomplete="new-password" required autofocus />
      <label class="form-label" for="password_again">The same password again</label>
      <input class="form-control mb-3" type="password" id="password_again"
             name="password_again" autocomplete="new-password" required />
      <button class="btn btn-primary" type="submit">Set my password and log in</button>
    </form>
  {% else %}
    {% if problem %}<p class="alert alert-danger" role="alert" id="problem">{{ problem }}</p>
    {% endif %}
    <p>Enter the code of the invitation whoever added you (a teacher or an admin) gave
       you: 16 letters and digits, like ABCD-EFGH-JKMN-PQRS.</p>
    <form method="get" action="{{ base_url }}invite">
      <input class="form-control mb-3" id="code" name="code" required autofocus
             autocomplete="off" spellcheck="false" />
      <button class="btn btn-primary" type="submit">Continue</button>
    </form>
  {% endif %}
</div>
{% endblock main %}
"""

"""Invitations: how a hub user an admin or a teacher added chooses their first password.

With plain first use, a name nobody has logged in with yet belongs to whoever logs in
with it first: a classmate who knew the roster could take it. Here, a name gets its
first password only through an invitation made for it: a random code, shown to whoever
added the name (and mailed where the address is known), that lasts a week, works once,
and is kept here only as a hash.

The store is a small JSON file beside the hub's password file, written under a lock
(the hub and ``nbjobs install``, both root on one machine, write it) and replaced
atomically, root's alone. This module imports nothing of JupyterHub: the installer and
the tests use it as they are.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import secrets
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

#: letters and digits nobody mistakes for one another (no 0/O, 1/I/L, U/V)
CODE_ALPHABET = "ABCDEFGHJKMNPQRSTVWXYZ23456789"
#: 16 of them: about 78 bits, far past guessing through a web form
CODE_LENGTH = 16
#: how long an invitation lasts, unless the hub's configuration says otherwise
LIFETIME = 7 * 24 * 3600.0
#: how long a used, replaced or expired invitation is remembered, so that its holder
#: is told what became of it rather than "not valid"
REMEMBERED = 30 * 24 * 3600.0


class InvitationRefused(Exception):
    """A code that gives no password: unknown, used, replaced or expired. The text says
    which, and what to do."""


@dataclass(frozen=True)
class Invitation:
    """A new invitation, the only time its code is known."""

    user: str
    #: the code, grouped by four (``ABCD-EFGH-JKMN-PQRS``); dashes and case do not matter
    code: str
    #: when it stops working (seconds since the epoch)
    expires_at: float

    @property
    def expires(self) -> str:
        """Its expiry as an ISO 8601 time in UTC."""
        return when(self.expires_at)


def when(seconds: float) -> str:
    """A time as ISO 8601 in UTC, to the second."""
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="seconds")


def _normal(code: str) -> str:
    return "".join(code.split()).replace("-", "").upper()


def code_hash(code: str) -> str:
    """What the store keeps of a code: its SHA-256, however it was typed."""
    return hashlib.sha256(_normal(code).encode()).hexdigest()


class InvitationStore:
    """The invitations of one hub, in the JSON file ``path``."""

    def __init__(self, path: str | Path, clock: Callable[[], float] = time.time) -> None:
        self.path = Path(path)
        self.clock = clock

    def make(self, user: str, *, lifetime: float = LIFETIME, made_by: str = "") -> Invitation:
        """A new invitation for ``user``; an earlier one of theirs stops working."""
        code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
        now = self.clock()
        with self._changing() as records:
            for record in records:
                if record["user"] == user and _live(record, now):
                    record["replaced_at"] = now
            records.append(
                {
                    "hash": code_hash(code),
                    "user": user,
                    "made_at": now,
                    "made_by": made_by,
                    "expires_at": now + lifetime,
                }
            )
        shown = "-".join(code[i : i + 4] for i in range(0, CODE_LENGTH, 4))
        return Invitation(user=user, code=shown, expires_at=now + lifetime)

    def check(self, code: str) -> str:
        """The user ``code`` invites; :class:`InvitationRefused` when it invites nobody."""
        with self._reading() as records:
            return _user_of(records, code, self.clock())

    def use(self, code: str) -> str:
        """Spend ``code`` (once only); the user it invited."""
        now = self.clock()
        with self._changing() as records:
            user = _user_of(records, code, now)
            for record in records:
                if record["hash"] == code_hash(code):
                    record["used_at"] = now
            return user

    def pending(self, user: str) -> float | None:
        """When ``user``'s live invitation expires; None when they have none."""
        now = self.clock()
        with self._reading() as records:
            live = [r["expires_at"] for r in records if r["user"] == user and _live(r, now)]
        return max(live) if live else None

    def forget(self, user: str) -> None:
        """Drop every invitation of ``user`` (their hub user was deleted)."""
        with self._changing() as records:
            records[:] = [r for r in records if r["user"] != user]

    # -- the file ----------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(f"{self.path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _load(self) -> list[dict[str, Any]]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return []
        except ValueError:
            raise InvitationRefused(
                f"the invitations file {self.path} is damaged; move it aside and make new "
                "invitations (nbjobs invite NAME)"
            ) from None
        return list(data.get("invitations", []))

    @contextlib.contextmanager
    def _reading(self) -> Iterator[list[dict[str, Any]]]:
        with self._locked():
            yield self._load()

    @contextlib.contextmanager
    def _changing(self) -> Iterator[list[dict[str, Any]]]:
        with self._locked():
            records = self._load()
            yield records
            now = self.clock()
            kept = [r for r in records if now - r["expires_at"] < REMEMBERED]
            fd, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".invitations-")
            with os.fdopen(fd, "w") as f:
                os.fchmod(f.fileno(), 0o600)
                json.dump({"version": 1, "invitations": kept}, f, indent=1)
            os.replace(temporary, self.path)


def _live(record: dict[str, Any], now: float) -> bool:
    return (
        not record.get("used_at") and not record.get("replaced_at") and record["expires_at"] > now
    )


def _user_of(records: list[dict[str, Any]], code: str, now: float) -> str:
    hashed = code_hash(code)
    record = next((r for r in records if r["hash"] == hashed), None)
    ask = "ask whoever added you (a teacher or an admin) for a new invitation"
    if record is None:
        raise InvitationRefused(
            "this invitation code is not valid: check that you copied all of it (16 letters "
            f"and digits), or {ask}"
        )
    if record.get("used_at"):
        raise InvitationRefused(
            f"this invitation was used on {when(record['used_at'])}: log in with the password "
            f"chosen then; if that was not you, {ask} and tell them"
        )
    if record.get("replaced_at"):
        raise InvitationRefused(
            f"a newer invitation for {record['user']} replaced this one on "
            f"{when(record['replaced_at'])}: use the newest one you were given, or {ask}"
        )
    if record["expires_at"] <= now:
        raise InvitationRefused(f"this invitation expired on {when(record['expires_at'])}: {ask}")
    return str(record["user"])


# -- for nbjobs install ------------------------------------------------------------

#: the hub's login class, as a jupyterhub_config.py names it
AUTHENTICATOR = "nbjobs.hub_config.first_login.InvitationAuthenticator"


def hub_login_lines(state_dir: str | Path, *, open_first_use: bool = False) -> str:
    """The lines of a ``jupyterhub_config.py`` for the login of ``nbjobs install``:
    passwords and invitations in ``state_dir``, only users an admin or a roster added."""
    lines = (
        f'c.JupyterHub.authenticator_class = "{AUTHENTICATOR}"\n'
        "# only users an admin (or a teacher's roster) added; each chooses a password with\n"
        "# the one-time invitation made for them (nbjobs invite NAME makes a new one)\n"
        "c.InvitationAuthenticator.create_users = False\n"
        f'c.InvitationAuthenticator.dbm_path = "{state_dir}/passwords.dbm"\n'
        f'c.InvitationAuthenticator.invitations_path = "{state_dir}/invitations.json"\n'
        "c.Authenticator.allow_existing_users = True\n"
    )
    if open_first_use:
        lines += (
            "# --open-first-login: the first login with a name chooses its password, so\n"
            "# whoever knows a name added before its owner logs in can take it\n"
            "c.InvitationAuthenticator.open_first_use = True\n"
        )
    return lines


def invite_without_password(state_dir: str | Path, names: list[str]) -> list[Invitation]:
    """A new invitation for each of ``names`` with no password in the hub's password
    file in ``state_dir`` yet (the admins ``nbjobs install`` names: nobody else can
    invite them)."""
    import dbm

    try:
        with dbm.open(str(Path(state_dir) / "passwords.dbm"), "r") as db:
            have = {name for name in names if db.get(name.encode("utf8")) is not None}
    except dbm.error:
        have = set()  # no password file yet: nobody has logged in
    store = InvitationStore(Path(state_dir) / "invitations.json")
    return [store.make(name, made_by="nbjobs install") for name in names if name not in have]

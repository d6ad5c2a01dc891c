"""The invitation store as the hub and ``nbjobs install`` use it (a clock of the test's),
and what the installer writes and says about first logins."""

from __future__ import annotations

import dbm
import json
import stat

import pytest
from nbjobs.hub_config.invitations import (
    InvitationRefused,
    InvitationStore,
    hub_login_lines,
    invite_without_password,
)
from nbjobs.programs.install import Installer, install_parser

DAY = 24 * 3600.0


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def test_an_invitation_names_its_user_once_and_is_kept_only_as_a_hash(tmp_path):
    clock = Clock()
    store = InvitationStore(tmp_path / "invitations.json", clock)

    made = store.make("ada", made_by="tess")

    assert store.check(made.code) == "ada"
    assert store.check(made.code.lower().replace("-", " ")) == "ada"  # as typed
    stored = (tmp_path / "invitations.json").read_text()
    assert made.code not in stored
    assert made.code.replace("-", "") not in stored
    assert json.loads(stored)["invitations"][0]["user"] == "ada"
    assert stat.S_IMODE((tmp_path / "invitations.json").stat().st_mode) == 0o600
    assert store.use(made.code) == "ada"
    with pytest.raises(InvitationRefused, match=r"^this invitation was used on 2027-01-15T08:00"):
        store.use(made.code)
    assert store.pending("ada") is None


def test_an_invitation_expires_and_a_newer_one_replaces_it(tmp_path):
    clock = Clock()
    store = InvitationStore(tmp_path / "invitations.json", clock)
    first = store.make("bo", lifetime=7 * DAY)
    second = store.make("bo", lifetime=7 * DAY)

    with pytest.raises(InvitationRefused, match=r"^a newer invitation for bo replaced this one"):
        store.check(first.code)
    assert store.pending("bo") == clock.now + 7 * DAY
    clock.now += 7 * DAY
    with pytest.raises(InvitationRefused, match=r"^this invitation expired on 2027-01-22T08:00"):
        store.use(second.code)
    with pytest.raises(InvitationRefused, match=r"^this invitation code is not valid"):
        store.check("ABCD-EFGH-JKMN-PQRS")


def test_a_deleted_user_s_invitations_are_forgotten(tmp_path):
    store = InvitationStore(tmp_path / "invitations.json", Clock())
    made = store.make("cy")

    store.forget("cy")

    with pytest.raises(InvitationRefused, match="not valid"):
        store.check(made.code)


def test_the_installer_invites_admins_without_a_password(tmp_path):
    with dbm.open(str(tmp_path / "passwords.dbm"), "c") as db:
        db[b"alice"] = b"a bcrypt hash"

    made = invite_without_password(tmp_path, ["alice", "bob"])

    assert [m.user for m in made] == ["bob"]
    assert InvitationStore(tmp_path / "invitations.json").check(made[0].code) == "bob"


def test_plain_first_use_is_an_opt_in_the_installer_warns_about(tmp_path, capsys):
    lines = hub_login_lines("/var/lib/nbjobs")
    assert "InvitationAuthenticator" in lines
    assert "open_first_use" not in lines
    assert "c.InvitationAuthenticator.open_first_use = True" in hub_login_lines(
        "/var/lib/nbjobs", open_first_use=True
    )
    folders = [
        f"--config-dir={tmp_path / 'etc'}",
        f"--state-dir={tmp_path / 'state'}",
        f"--storage={tmp_path / 'srv'}",
    ]
    (tmp_path / "state").mkdir()

    Installer(install_parser().parse_args([*folders, "--admin", "al"])).first_logins("http://h")
    quiet = capsys.readouterr().out
    Installer(
        install_parser().parse_args([*folders, "--admin", "al", "--open-first-login"])
    ).first_logins("http://h")
    warned = capsys.readouterr().out

    assert "WARNING" not in quiet
    assert "al chooses their password at http://h/hub/invite/" in quiet
    assert warned.startswith(
        "nbjobs install: WARNING: --open-first-login: the first login with a name chooses "
        "its password, so anyone who knows a name added before its owner logs in (a "
        "classmate who saw the roster) can take it."
    )


async def test_plain_first_use_sets_a_password_once_without_stalling_the_hub(tmp_path):
    """With ``open_first_use`` the first login with a name chooses its password; from then
    on only that one logs in. bcrypt's quarter second of CPU runs on a thread: the hub's
    event loop goes on turning meanwhile (a class logging in at once stalled it)."""
    import asyncio
    from types import SimpleNamespace

    from nbjobs.hub_config.first_login import InvitationAuthenticator

    auth = InvitationAuthenticator(
        open_first_use=True, dbm_path=str(tmp_path / "passwords.dbm"), min_password_length=8
    )
    handler = SimpleNamespace(custom_login_error="", hub=SimpleNamespace(base_url="/hub/"))

    async def login(name: str, password: str) -> tuple[str | None, int]:
        """The login's answer and how often the loop turned while it was checked."""
        task = asyncio.ensure_future(
            auth.authenticate(handler, {"username": name, "password": password})
        )
        turns = 0
        while not task.done():
            turns += 1
            await asyncio.sleep(0)
        return await task, turns

    assert (await login("ada", "short"))[0] is None  # refused before any hashing
    assert handler.custom_login_error == "choose a password of at least 8 characters"
    assert not auth.has_password("ada")
    answers = [
        await login("ada", "adas-first-choice"),  # chosen here
        await login("ada", "another-guess"),
        await login("ada", "adas-first-choice"),
    ]
    assert [name for name, _ in answers] == ["ada", None, "ada"]
    assert auth.has_password("ada")
    # a thread's quarter second of bcrypt is many turns of the loop; on the loop, one
    assert all(turns > 10 for _, turns in answers), answers

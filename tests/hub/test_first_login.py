"""First logins by invitation, through a real hub with nbjobs install's login.

A name an admin or a teacher's roster adds has no password; logging in with it, with
any password, is refused in words. Its password is chosen by the holder of the
invitation made for it (shown to whoever added the name), once, before it expires.
"""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from email import message_from_bytes
from email.message import EmailMessage
from email.policy import default
from pathlib import Path

import pytest
import requests
import yaml
from aiosmtpd.controller import Controller
from nbjobs.hub_config.invitations import InvitationStore

from tests.machine import this_runs

from .hubproc import basics, free_port, login, nbjobs_here, running_hub

HUB_CONFIG = """
from nbjobs.hub_config import configure
configure(c, {config!r}, service_port={service_port})
c.JupyterHub.authenticator_class = "nbjobs.hub_config.first_login.InvitationAuthenticator"
c.InvitationAuthenticator.create_users = False
c.InvitationAuthenticator.dbm_path = "{folder}/passwords.dbm"
c.InvitationAuthenticator.invitations_path = "{folder}/invitations.json"
c.Authenticator.allow_existing_users = True
c.Authenticator.admin_users = {{"boss"}}
c.JupyterHub.load_users = None
c.JupyterHub.services.append({{"name": "test-admin", "api_token": {admin_token!r}}})
c.JupyterHub.load_roles.append(
    {{"name": "token-maker", "services": ["test-admin"], "scopes": ["tokens", "admin:users"]}}
)
"""


class Inbox:
    """aiosmtpd's handler: every mail the job service sends, kept."""

    def __init__(self) -> None:
        self.mails: list[EmailMessage] = []

    async def handle_DATA(self, server, session, envelope):
        self.mails.append(message_from_bytes(envelope.content, policy=default))
        return "250 OK"


class Hub:
    def __init__(self, url: str, folder: Path, admin_token: str, inbox: Inbox) -> None:
        self.url, self.folder, self.inbox = url, folder, inbox
        self.admin = {"Authorization": f"token {admin_token}"}

    def add_user(self, name: str) -> None:
        r = requests.post(f"{self.url}/hub/api/users/{name}", headers=self.admin, timeout=30)
        assert r.status_code == 201, r.text

    def token(self, name: str) -> str:
        self.add_user_if_missing(name)
        r = requests.post(
            f"{self.url}/hub/api/users/{name}/tokens", headers=self.admin, json={}, timeout=30
        )
        r.raise_for_status()
        return str(r.json()["token"])

    def add_user_if_missing(self, name: str) -> None:
        r = requests.get(f"{self.url}/hub/api/users/{name}", headers=self.admin, timeout=30)
        if r.status_code == 404:
            self.add_user(name)

    def invite(self, name: str, headers: dict[str, str] | None = None) -> requests.Response:
        """The hub's own invitation API, as an admin's token calls it."""
        return requests.post(
            f"{self.url}/hub/api/nbjobs/invitations/{name}",
            headers=headers or self.admin,
            timeout=30,
        )

    def nbjobs(self, token: str, *args: str) -> subprocess.CompletedProcess[str]:
        """The real ``nbjobs`` command's main, run in this process (hubproc.nbjobs_here)."""
        return nbjobs_here(f"{self.url}/services/nbjobs/", token, *args)


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    with invitation_hub(tmp_path_factory.mktemp("first-login")) as running:
        yield running


@contextmanager
def invitation_hub(folder: Path) -> Iterator[Hub]:
    """A real hub with nbjobs install's login (invitations), its job service on the local
    backend, the teacher tess (no password yet), an admin service's token, and mail to
    an SMTP server of the test's for names that are addresses (example.org)."""
    port, hub_port, service_port = free_port(), free_port(), free_port()
    admin_token = secrets.token_hex(16)
    inbox = Inbox()
    smtp = Controller(inbox, hostname="127.0.0.1", port=free_port())
    smtp.start()
    settings = {
        "notifications": {
            "email": {
                "smtp_host": "127.0.0.1",
                "smtp_port": smtp.port,
                "security": "none",
                "from": "nbjobs@example.org",
                "names_are_addresses": True,
                "allowed_domains": ["example.org"],
            },
            "links_base": f"http://127.0.0.1:{port}",
        },
        "storage": {"root": str(folder / "home")},
        "database": {"url": f"sqlite:///{folder}/jobs.sqlite"},
        "backend": {"kind": "local", "local": {"gpus": [], "cpu_slots": 1}},
        "flavors": [{"name": "cpu", "gpus": 0}],
        "teachers": {"users": ["tess"]},
        "admin": {"users": ["nora"]},
    }
    (folder / "nbjobs.yaml").write_text(yaml.safe_dump(this_runs(settings)))
    config = basics(folder, port, hub_port) + HUB_CONFIG.format(
        config=str(folder / "nbjobs.yaml"),
        service_port=service_port,
        folder=folder,
        admin_token=admin_token,
    )
    try:
        with running_hub(folder, config, port) as url:
            yield Hub(url, folder, admin_token, inbox)
    finally:
        smtp.stop()


def try_login(url: str, user: str, password: str) -> requests.Response:
    s = requests.Session()
    s.get(f"{url}/hub/login", timeout=30)
    return s.post(
        f"{url}/hub/login",
        data={"username": user, "password": password, "_xsrf": s.cookies.get("_xsrf")},
        allow_redirects=False,
        timeout=30,
    )


def open_invitation(url: str, link: str) -> tuple[requests.Session, requests.Response]:
    """A browser opening an invitation's link (its path, or the whole link)."""
    s = requests.Session()
    page = s.get(link if link.startswith("http") else f"{url}{link}", timeout=30)
    return s, page


def choose_password(
    url: str, link: str, password: str, again: str | None = None
) -> tuple[requests.Session, requests.Response]:
    s, page = open_invitation(url, link)
    assert page.status_code == 200, page.text
    action = link if link.startswith("http") else f"{url}{link}"
    answer = s.post(
        action,
        data={
            "password": password,
            "password_again": password if again is None else again,
            "_xsrf": s.cookies.get("_xsrf"),
        },
        allow_redirects=False,
        timeout=30,
    )
    return s, answer


def refusal(page: requests.Response) -> str:
    found = re.search(r'id="(?:refusal|problem)">(.*?)</p>', page.text, re.S)
    assert found, page.text
    return " ".join(found.group(1).split()).replace("&#39;", "'")


def test_a_name_an_admin_added_cannot_be_claimed_by_logging_in_with_it(hub):
    hub.add_user("ada")

    for guess in ("claimed-by-mallory", "another-guess-1"):
        tried = try_login(hub.url, "ada", guess)
        assert tried.status_code == 403  # no session, no password set
        assert "ada has no password yet: open the invitation link" in tried.text

    made = hub.invite("ada")
    assert made.status_code == 201, made.text
    _, chosen = choose_password(hub.url, made.json()["path"], "adas-own-secret")
    assert chosen.status_code == 302, chosen.text
    assert try_login(hub.url, "ada", "claimed-by-mallory").status_code == 403
    login(hub.url, "ada", "adas-own-secret")


def test_the_holder_of_the_invitation_chooses_the_password_and_is_logged_in(hub):
    hub.add_user("bo")
    made = hub.invite("bo").json()
    assert re.fullmatch(r"[A-Z2-9]{4}(-[A-Z2-9]{4}){3}", made["code"])
    assert made["path"] == f"/hub/invite/{made['code']}"

    _, page = open_invitation(hub.url, made["path"])
    assert "Choose the password of" in page.text
    assert ">bo</strong>" in page.text
    _, differ = choose_password(hub.url, made["path"], "bos-secret-1", "bos-secret-2")
    assert differ.status_code == 400
    assert refusal(differ) == "the two passwords differ: type the same one twice"
    _, short = choose_password(hub.url, made["path"], "short")
    assert refusal(short) == "choose a password of at least 7 characters"

    s, chosen = choose_password(hub.url, made["path"], "bos-own-secret")

    assert chosen.status_code == 302
    me = s.get(f"{hub.url}/hub/api/user", headers={"X-XSRFToken": s.cookies.get("_xsrf")})
    assert me.json()["name"] == "bo"  # logged in by choosing it
    login(hub.url, "bo", "bos-own-secret")
    # a name with a password gets no invitation: its holder could replace the password
    again = hub.invite("bo")
    assert again.status_code == 409
    assert "bo chose a password already" in again.json()["message"]


def test_an_invitation_works_once(hub):
    hub.add_user("cy")
    link = hub.invite("cy").json()["path"]
    choose_password(hub.url, link, "cys-own-secret")

    _, reopened = open_invitation(hub.url, link)
    s = requests.Session()
    s.get(f"{hub.url}{link}")
    posted = s.post(
        f"{hub.url}{link}",
        data={"password": "mallorys-pick", "password_again": "mallorys-pick"},
        allow_redirects=False,
    )

    assert reopened.status_code == 410
    assert refusal(reopened).startswith("this invitation was used on ")
    assert "log in with the password chosen then" in refusal(reopened)
    assert posted.status_code in (403, 410)  # refused (without the form's XSRF, even sooner)
    login(hub.url, "cy", "cys-own-secret")
    assert try_login(hub.url, "cy", "mallorys-pick").status_code == 403


def test_a_wrong_code_is_refused_in_words(hub):
    s = requests.Session()
    typed = s.get(f"{hub.url}/hub/invite", params={"code": "ABCD-EFGH-JKMN-PQRS"}, timeout=30)

    assert typed.status_code == 410
    assert refusal(typed) == (
        "this invitation code is not valid: check that you copied all of it (16 letters and "
        "digits), or ask whoever added you (a teacher or an admin) for a new invitation"
    )
    form = s.get(f"{hub.url}/hub/invite", timeout=30)
    assert form.status_code == 200
    assert 'name="code"' in form.text


def test_an_invitation_expires(hub):
    hub.add_user("dee")
    week_ago = time.time() - 8 * 24 * 3600
    # made eight days ago (as nbjobs install writes the first admin's, into the hub's file)
    old = InvitationStore(hub.folder / "invitations.json", clock=lambda: week_ago).make("dee")

    _, page = open_invitation(hub.url, f"/hub/invite/{old.code}")

    assert page.status_code == 410
    assert refusal(page).startswith("this invitation expired on ")
    assert "ask whoever added you (a teacher or an admin) for a new invitation" in refusal(page)
    assert try_login(hub.url, "dee", "anything-at-all").status_code == 403


def test_codes_are_kept_only_as_hashes_in_a_file_of_the_hub_s_alone(hub):
    hub.add_user("eli")
    code = hub.invite("eli").json()["code"]

    stored = (hub.folder / "invitations.json").read_text()
    assert code not in stored
    assert code.replace("-", "") not in stored
    assert oct((hub.folder / "invitations.json").stat().st_mode & 0o777) == "0o600"


def test_a_teacher_s_roster_gives_an_invitation_per_new_account(hub):
    tess = hub.token("tess")

    made = hub.nbjobs(tess, "class", "create", "ml101", "fay", "gil")

    assert made.returncode == 0, made.stderr
    links = dict(re.findall(r"^  (\w+): (http://\S+) \(code ", made.stdout, re.M))
    assert sorted(links) == ["fay", "gil"], made.stdout
    assert "give each person their own link" in made.stdout
    assert try_login(hub.url, "fay", "fay-guessed-1").status_code == 403
    _, chosen = choose_password(hub.url, links["fay"], "fays-own-secret")
    assert chosen.status_code == 302
    login(hub.url, "fay", "fays-own-secret")

    added = hub.nbjobs(tess, "class", "add", "ml101", "hal", "--json")
    assert added.returncode == 0, added.stderr
    [invitation] = json.loads(added.stdout)["invitations"]
    assert invitation["user"] == "hal"
    # whole, from notifications.links_base
    assert invitation["url"] == f"{hub.url}/hub/invite/{invitation['code']}"


def test_who_may_make_an_invitation_through_the_service(hub):
    tess, ivy = hub.token("tess"), hub.token("ivy")
    hub.nbjobs(tess, "class", "create", "ml102", "jo")
    first = hub.invite("jo").json()

    again = hub.nbjobs(tess, "invite", "jo")
    student = hub.nbjobs(ivy, "invite", "jo")
    stranger = hub.nbjobs(tess, "invite", "ivy")

    assert again.returncode == 0, again.stderr
    assert re.match(r"^jo: http://\S+/hub/invite/[A-Z2-9-]+ \(code ", again.stdout)
    _, old = open_invitation(hub.url, first["path"])
    assert refusal(old).startswith("a newer invitation for jo replaced this one on ")
    assert student.returncode != 0
    assert "only admins and teachers make invitations" in student.stderr
    assert stranger.returncode != 0
    assert "'ivy' is no student of a class of yours" in stranger.stderr
    # a user's own token cannot ask the hub itself either
    mine = hub.invite("jo", headers={"Authorization": f"token {ivy}"})
    assert mine.status_code == 403


def test_an_invitation_is_mailed_where_the_name_is_an_address(hub):
    tess = hub.token("tess")

    made = hub.nbjobs(tess, "class", "create", "ml104", "kim@example.org", "lou@elsewhere.net")

    assert made.returncode == 0, made.stderr
    assert "mailed to kim@example.org)" in made.stdout
    assert "lou@elsewhere.net: http://" in made.stdout  # shown, not mailed: not an allowed domain
    assert "mailed to lou" not in made.stdout
    deadline = time.monotonic() + 60
    while not hub.inbox.mails:
        assert time.monotonic() < deadline, "no invitation was mailed"
        time.sleep(0.5)
    [mail] = hub.inbox.mails
    assert mail["To"] == "kim@example.org"
    assert mail["Subject"] == "[nbjobs] choose your password"
    [link] = re.findall(r"http://\S+/hub/invite/\S+", mail.get_content())
    assert link.startswith(hub.url)
    _, chosen = choose_password(hub.url, link, "kims-own-secret")
    assert chosen.status_code == 302
    login(hub.url, "kim@example.org", "kims-own-secret")


def test_an_nbjobs_admin_invites_anyone_but_a_hub_admin(hub):
    nora = hub.token("nora")
    hub.add_user("pat")  # added in the hub's admin page

    pat = hub.nbjobs(nora, "invite", "pat")
    boss = hub.nbjobs(nora, "invite", "boss")
    nobody = hub.nbjobs(nora, "invite", "nobody-here")

    assert pat.returncode == 0, pat.stderr
    [link] = re.findall(r"^pat: (http://\S+) \(code ", pat.stdout)
    _, chosen = choose_password(hub.url, link, "pats-own-secret")
    assert chosen.status_code == 302
    # its holder would be a hub admin, more than an nbjobs admin is
    assert boss.returncode != 0
    assert "boss is a JupyterHub admin: only another JupyterHub admin invites them" in boss.stderr
    assert try_login(hub.url, "boss", "noras-pick-1").status_code == 403
    assert nobody.returncode != 0
    assert "no hub user 'nobody-here': add them first" in nobody.stderr

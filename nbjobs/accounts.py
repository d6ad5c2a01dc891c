"""Each hub user's own OS account on one machine (``backend.local.accounts``).

On one machine, users are kept apart the way the operating system keeps anyone
apart: every hub user's notebook server, terminals and jobs run under an OS
account of their own, whose home is their nbjobs folder (mode ``0700``). The
hub's spawner and the job service both find the account with
:func:`account_for`; nothing else maps hub names to accounts, so the two always
agree.

Three modes:

- ``none``: no accounts; servers run as the hub's account and jobs as the
  service's (one trusted person, or a machine that is not shared).
- ``create``: nbjobs makes ``{prefix}{name}`` (``jupyter-ada``) the first time
  it is needed, like The Littlest JupyterHub. It marks what it made in the
  account's comment (``nbjobs user <hub name> <instance>``, the instance being
  ``backend.local.instance``) and never takes over an account it did not make, one
  it made for another hub user, or one another nbjobs on the machine made (a second
  install, the demo). An account made again for a folder whose files keep the uid
  of the one removed gets that uid back, so the files stay its own.
- ``existing``: the admin manages accounts (PAM, LDAP, ``adduser``); nbjobs looks
  up ``{prefix}{name}`` and refuses, in a sentence, when it is missing.

Hub names are free text (``marie.curie@sorbonne.fr``), account names are not
(``[a-z_][a-z0-9_-]*``, 32 characters at most): :func:`account_name` turns one
into the other. Two hub names can meet on one account name; the comment mark
finds that, and the second user is refused rather than handed the first's files.
"""

from __future__ import annotations

import contextlib
import grp
import hashlib
import os
import pwd
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote

from .config import AccountsConfig

#: what the comment (GECOS) of an account nbjobs made starts with; the hub name follows,
#: %-quoted (a comment may hold neither ':' nor ','), then a space and the instance that
#: made it (none on accounts made before instances existed)
MARK = "nbjobs user "
#: the instance of a configuration that names none (``backend.local.instance``)
DEFAULT_INSTANCE = "nbjobs"
#: the longest account name ``useradd`` accepts on Debian and most others
MAX_NAME = 32
_ALLOWED = re.compile(r"[^a-z0-9_-]+")
_VALID = re.compile(r"^[a-z_][a-z0-9_-]*$")


class AccountRefused(RuntimeError):
    """No OS account can be used for this hub user; the message says why and what to do."""


@dataclass(frozen=True)
class Account:
    """An OS account a hub user's processes run as."""

    name: str
    uid: int
    gid: int
    home: str
    #: every group the account is in (its own first), for ``setgroups``
    groups: tuple[int, ...]
    #: its login shell
    shell: str = ""

    @classmethod
    def of(cls, entry: pwd.struct_passwd) -> Account:
        """The account of a ``pwd`` entry, with its groups."""
        groups = os.getgrouplist(entry.pw_name, entry.pw_gid)
        return cls(
            entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir, tuple(groups), entry.pw_shell
        )


def account_name(hub_name: str, prefix: str) -> str:
    """The OS account name of a hub user: ``prefix`` + the name, lowercased, with every
    run of characters an account name cannot hold turned into one ``-``.

    A name that would be longer than 32 characters keeps its start and ends with a short
    hash of the whole hub name, so two long names that share a start still differ.
    """
    body = _ALLOWED.sub("-", hub_name.lower()).strip("-") or "user"
    name = prefix + body
    if not _VALID.match(name):  # starts with a digit or '-', say
        name = f"u{name}" if not prefix else name
    if len(name) > MAX_NAME:
        digest = hashlib.sha256(hub_name.encode("utf-8")).hexdigest()[:7]
        name = f"{name[: MAX_NAME - 8]}-{digest}"
    if not _VALID.match(name):
        raise AccountRefused(
            f"the hub user {hub_name!r} has no usable OS account name ({name!r}); "
            "set backend.local.accounts.prefix to letters, like 'jupyter-'"
        )
    return name


def account_for(
    hub_name: str, settings: AccountsConfig, home: Path, *, instance: str = DEFAULT_INSTANCE
) -> Account | None:
    """The OS account the hub user ``hub_name`` runs as; None when ``mode`` is ``none``.

    ``create`` makes the account (home ``home``, not created here) when it is missing,
    marked as made by ``instance`` (``backend.local.instance``); the caller must be root.
    Raises :class:`AccountRefused` with a sentence when the account is missing
    (``existing``), belongs to someone else (another hub user, another nbjobs instance,
    nobody nbjobs knows), or is a system account.
    """
    if settings.mode == "none":
        return None
    name = account_name(hub_name, settings.prefix)
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        if settings.mode == "existing":
            raise AccountRefused(
                f"this machine has no OS account {name!r} for the hub user {hub_name!r}, and "
                "nbjobs uses existing accounts only (backend.local.accounts.mode: existing); "
                "ask an admin to create it"
            ) from None
        entry = _create(name, hub_name, settings, home, instance)
    _check_owner(entry, hub_name, settings, instance, home)
    if settings.mode == "create" and entry.pw_dir != str(home) and os.geteuid() == 0:
        # nbjobs' own account, its storage moved (a new root in nbjobs.yaml): follow it
        usermod = shutil.which("usermod") or "/usr/sbin/usermod"
        moved = subprocess.run(
            [usermod, "--home", str(home), name], capture_output=True, text=True, check=False
        )
        if moved.returncode != 0:
            # its processes still run from the old home (an earlier demo's servers): a
            # server started now would not find its folder
            raise AccountRefused(
                f"the OS account {name!r} has its home at {entry.pw_dir}, not {home}, and "
                f"cannot be moved: {moved.stderr.strip() or 'usermod failed'}; stop what "
                "runs as it (an earlier nbjobs demo or hub), then start again"
            )
        entry = pwd.getpwnam(name)
    return Account.of(entry)


def _check_owner(
    entry: pwd.struct_passwd, hub_name: str, settings: AccountsConfig, instance: str, home: Path
) -> None:
    if entry.pw_uid == 0 or entry.pw_uid < settings.min_uid:
        raise AccountRefused(
            f"the OS account {entry.pw_name!r} (uid {entry.pw_uid}) is a system account "
            f"(below backend.local.accounts.min_uid, {settings.min_uid}); nbjobs never runs "
            f"the hub user {hub_name!r} as it: give them another name, or another prefix"
        )
    if settings.mode != "create":
        return
    mark = read_mark(entry)
    if mark is None:
        raise AccountRefused(
            f"the OS account {entry.pw_name!r} exists and nbjobs did not make it, so it is not "
            f"handed to the hub user {hub_name!r}; an admin can remove or rename it, or set "
            "backend.local.accounts.mode: existing to use the accounts as they are"
        )
    owner, made_by = mark
    if made_by is not None and made_by != instance:
        raise AccountRefused(
            f"the OS account {entry.pw_name!r} belongs to another nbjobs on this machine "
            f"(backend.local.instance {made_by!r}; this one is {instance!r}), so it is not "
            f"handed to the hub user {hub_name!r}; give this one's accounts a prefix of "
            "their own (backend.local.accounts.prefix, or nbjobs install --prefix)"
        )
    if owner != hub_name:
        raise AccountRefused(
            f"the hub users {owner!r} and {hub_name!r} both become the OS account "
            f"{entry.pw_name!r}, which belongs to {owner!r}; an admin must rename one of them "
            "in the hub"
        )
    if made_by is None and entry.pw_dir != str(home):
        raise AccountRefused(
            f"the OS account {entry.pw_name!r} was made by an older nbjobs for the folder "
            f"{entry.pw_dir}, not {home}, and may be another nbjobs's on this machine; if that "
            f"one is gone, an admin can remove the account (userdel {entry.pw_name}), else "
            "give this one's accounts a prefix of their own (backend.local.accounts.prefix)"
        )
    if made_by is None and os.geteuid() == 0:
        # made before instances were marked, for this very folder: this instance's
        _set_comment(entry.pw_name, _comment(hub_name, instance))


def _create(
    name: str, hub_name: str, settings: AccountsConfig, home: Path, instance: str
) -> pwd.struct_passwd:
    if os.geteuid() != 0:
        raise AccountRefused(
            f"the OS account {name!r} for the hub user {hub_name!r} does not exist, and only "
            "root can create it (backend.local.accounts.mode: create); run the hub as root"
        )
    useradd = shutil.which("useradd") or "/usr/sbin/useradd"
    command = [useradd, "--no-create-home", "--home-dir", str(home)]
    command += _same_ids_as(home, name, hub_name)
    command += ["--shell", settings.shell, "--comment", _comment(hub_name, instance)]
    if settings.groups:
        command += ["--groups", ",".join(settings.groups)]
    done = subprocess.run([*command, name], capture_output=True, text=True)
    if done.returncode != 0:
        try:  # made meanwhile by the other nbjobs process (the hub and the service race)
            return pwd.getpwnam(name)
        except KeyError:
            pass
        raise AccountRefused(
            f"the OS account {name!r} for the hub user {hub_name!r} could not be created: "
            f"{done.stderr.strip() or done.returncode}"
        )
    return pwd.getpwnam(name)


def _same_ids_as(home: Path, name: str, hub_name: str) -> list[str]:
    """useradd's words for the uid (and group) of a new account: those that own its
    folder already, when an earlier account of the same user was removed (an uninstall)
    and left its files; a new uid would own none of them."""
    try:
        found = home.lstat()
    except OSError:
        return ["--user-group"]
    if found.st_uid == 0:  # made by root before the account existed: prepare_home hands it
        return ["--user-group"]
    try:
        holder = pwd.getpwuid(found.st_uid)
    except KeyError:
        pass
    else:
        raise AccountRefused(
            f"the folder {home} of the hub user {hub_name!r} belongs to the OS account "
            f"{holder.pw_name!r} (uid {found.st_uid}), so a new account {name!r} would not own "
            "its files; an admin can move the folder away, or give it to root "
            f"(chown -R root {home}) for nbjobs to hand it over"
        )
    words = ["--uid", str(found.st_uid)]
    try:
        grp.getgrgid(found.st_gid)
    except KeyError:  # its old group is free too: the account's own group gets it back
        groupadd = shutil.which("groupadd") or "/usr/sbin/groupadd"
        subprocess.run(
            [groupadd, "--gid", str(found.st_gid), name], capture_output=True, check=False
        )
    with contextlib.suppress(KeyError):
        if grp.getgrnam(name).gr_gid == found.st_gid:  # made now, or by the other process
            return [*words, "--gid", name]
    return [*words, "--user-group"]


def _comment(hub_name: str, instance: str) -> str:
    return f"{MARK}{quote(hub_name, safe='@.-_+')} {instance}"


def _set_comment(name: str, comment: str) -> None:
    usermod = shutil.which("usermod") or "/usr/sbin/usermod"
    subprocess.run([usermod, "--comment", comment, name], capture_output=True, check=False)


def read_mark(entry: pwd.struct_passwd) -> tuple[str, str | None] | None:
    """Who an account nbjobs made is for, and which instance made it (None: made before
    instances were marked); None when nbjobs did not make it."""
    comment = entry.pw_gecos.split(",", 1)[0]
    if not comment.startswith(MARK):
        return None
    quoted, _, instance = comment[len(MARK) :].partition(" ")
    return unquote(quoted), instance or None


def prepare_home(account: Account, home: Path) -> None:
    """Make the account's home (the user's nbjobs folder) theirs: created when missing,
    and, when someone else owns it (made by root before the account existed), handed to
    the account with mode ``0700``. A home the account owns already is left as it is (its
    owner may have opened it to a group).

    ``home`` is a path nbjobs builds from its own settings; its last part is opened
    without following a link.
    """
    home.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.mkdir(home, 0o700)
    fd = os.open(home, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        if os.fstat(fd).st_uid != account.uid:
            os.fchown(fd, account.uid, account.gid)
            os.fchmod(fd, 0o700)
    finally:
        os.close(fd)


def remove_account(name: str, instance: str | None = None) -> bool:
    """Remove an account nbjobs made (its comment says so), stopping what still runs as
    it (a server or a job left behind); its files stay. With ``instance``, only one that
    instance made (or one made before instances were marked). True if removed."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return False
    mark = read_mark(entry)
    if mark is None or (instance is not None and mark[1] not in (None, instance)):
        return False
    _stop_processes_of(entry.pw_uid)
    userdel = shutil.which("userdel") or "/usr/sbin/userdel"
    subprocess.run([userdel, name], capture_output=True, check=False)
    try:
        grp.getgrnam(name)
    except KeyError:
        pass
    else:
        groupdel = shutil.which("groupdel") or "/usr/sbin/groupdel"
        subprocess.run([groupdel, name], capture_output=True, check=False)
    return True


def _stop_processes_of(uid: int) -> None:
    import psutil

    from .processes import stop_processes

    stop_processes(
        (p for p in psutil.process_iter(["uids"]) if p.info["uids"] and p.info["uids"].real == uid),
        grace=5,
    )


def accounts_made(instance: str | None = None) -> list[str]:
    """The OS accounts nbjobs made on this machine (their comment says so); with
    ``instance``, only those that instance made."""
    found = []
    for entry in pwd.getpwall():
        mark = read_mark(entry)
        if mark is not None and (instance is None or mark[1] == instance):
            found.append(entry.pw_name)
    return sorted(found)


def closed_to_others(path: Path) -> Path | None:
    """The first folder above ``path`` that other accounts cannot pass through (a Python
    or a checkout under ``/root``, mode ``0700``); None when every account can reach it."""
    for folder in reversed(path.parents):
        if not folder.stat().st_mode & 0o001:
            return folder
    return None


def drop_privileges(account: Account) -> None:
    """Become ``account`` for good (in a child, before it runs the user's program):
    groups first, then the group, then the user, so that nothing of root is left."""
    os.setgroups(list(account.groups))
    os.setresgid(account.gid, account.gid, account.gid)
    os.setresuid(account.uid, account.uid, account.uid)

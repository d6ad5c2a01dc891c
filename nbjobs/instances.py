"""Several nbjobs on one machine: which accounts and control groups are whose.

A machine may hold more than one nbjobs: the first install, a second class's install
in folders of its own, a demo. Each has a name, ``backend.local.instance``: it is the
parent of its control groups (``/sys/fs/cgroup/memory/<instance>/...``) and the mark
on the OS accounts it makes (``nbjobs user ada <instance>``). What one instance does
to its own (an uninstall removing its accounts, a sweep of its empty groups) never
reaches another's.

``nbjobs install`` names its instance after its state folder (:func:`instance_for`),
so two installs in different folders never share a name, and refuses a second install
whose account prefix another nbjobs here already uses (:func:`prefix_taken`): two
instances making ``jupyter-ada`` would each refuse the other's.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pwd
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

from .accounts import DEFAULT_INSTANCE, read_mark

#: where the first install keeps its state: its instance is plain ``nbjobs``
DEFAULT_STATE_DIR = Path("/var/lib/nbjobs")


def instance_for(state_dir: Path) -> str:
    """The instance name of an install whose state lies in ``state_dir``: ``nbjobs`` for
    the usual folder, ``nbjobs-<8 hex digits of the folder's path>`` for any other."""
    real = os.path.realpath(state_dir)
    if real == str(DEFAULT_STATE_DIR):
        return DEFAULT_INSTANCE
    return f"{DEFAULT_INSTANCE}-{hashlib.sha256(real.encode()).hexdigest()[:8]}"


@dataclass(frozen=True)
class Settings:
    """What an nbjobs.yaml says of its place on the machine."""

    instance: str
    #: the account prefix, when nbjobs makes the accounts (``accounts.mode: create``)
    prefix: str | None
    #: the users' folders
    storage: str


def read_settings(config: Path) -> Settings | None:
    """:class:`Settings` from an nbjobs.yaml as written (not validated: an uninstall
    must work on a file the admin broke); None when it cannot be read."""
    try:
        settings = yaml.safe_load(config.read_text()) or {}
        local = (settings.get("backend") or {}).get("local") or {}
        accounts = local.get("accounts") or {}
        storage = str((settings.get("storage") or {}).get("root", ""))
        if storage and not os.path.isabs(storage):
            storage = str(config.parent / storage)
        prefix = str(accounts.get("prefix", "jupyter-"))
        return Settings(
            instance=str(local.get("instance", DEFAULT_INSTANCE)),
            prefix=prefix if accounts.get("mode") == "create" else None,
            storage=storage,
        )
    except (OSError, yaml.YAMLError, AttributeError):
        return None


def prefix_argument(value: str) -> str:
    """An account prefix given on a command line (``--prefix``), refused as
    ``backend.local.accounts.prefix`` would be."""
    import argparse

    from pydantic import ValidationError

    from .config import AccountsConfig

    try:
        AccountsConfig(prefix=value)
    except ValidationError as exc:
        message = exc.errors()[0]["msg"].removeprefix("Value error, ")
        raise argparse.ArgumentTypeError(message) from None
    return value


def prefix_taken(prefix: str, instance: str, storage: Path) -> str | None:
    """Why ``prefix`` cannot be this instance's account prefix (another nbjobs here makes
    accounts named so: its running job service says so, or accounts it made do, or
    unmarked ones of an older nbjobs whose homes are not in ``storage``); None when no
    other uses it."""
    for config, other in running_services():
        if other.instance != instance and other.prefix == prefix:
            return (
                f"another nbjobs on this machine (instance {other.instance!r}, its settings "
                f"{config}) makes the OS accounts {prefix}NAME"
            )
    ours = str(storage).rstrip("/") + "/"
    theirs = []
    for entry in pwd.getpwall():
        mark = read_mark(entry) if entry.pw_name.startswith(prefix) else None
        if mark is None or mark[1] == instance:
            continue
        if mark[1] is not None or not entry.pw_dir.startswith(ours):
            theirs.append(entry)
    if theirs:
        names = ", ".join(e.pw_name for e in theirs[:3]) + (", ..." if len(theirs) > 3 else "")
        return (
            f"the OS accounts {names} belong to another nbjobs on this machine (their "
            f"homes are in {os.path.dirname(theirs[0].pw_dir)})"
        )
    return None


def running_services() -> Iterator[tuple[Path, Settings]]:
    """The settings of every nbjobs job service running on this machine (the hub starts
    it as ``... nbjobs.cli service --config FILE``; the installer's commands as
    ``nbjobs service --config FILE``)."""
    import psutil

    for process in psutil.process_iter(["cmdline", "cwd"]):
        words = process.info["cmdline"] or []
        if "service" not in words or "--config" not in words[:-1]:
            continue
        if not any("nbjobs" in word for word in words[: words.index("service")]):
            continue
        config = Path(process.info["cwd"] or "/") / words[words.index("--config") + 1]
        found = read_settings(config)
        if found is not None:
            yield config, found


def accounts_of(settings: Settings) -> list[str]:
    """The OS accounts this instance made: marked with its name, or (made before
    instances were marked) named with its prefix, their home in its storage."""
    found = []
    storage = settings.storage.rstrip("/") + "/"
    for entry in pwd.getpwall():
        mark = read_mark(entry)
        if mark is None:
            continue
        if mark[1] == settings.instance or (
            mark[1] is None
            and settings.prefix is not None
            and entry.pw_name.startswith(settings.prefix)
            and entry.pw_dir.startswith(storage)
        ):
            found.append(entry.pw_name)
    return sorted(found)


def remove_control_groups(instance: str) -> None:
    """This instance's control groups, once empty (their jobs and servers are gone), and
    their parent; another instance's stay as they are."""
    from .cgroups import Cgroups

    cgroups = Cgroups(parent=instance)
    cgroups.sweep("", older_than=0)
    for folder in cgroups.parent_folders():
        with contextlib.suppress(OSError):
            folder.rmdir()

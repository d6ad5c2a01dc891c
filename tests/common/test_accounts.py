"""Hub users' own OS accounts: names, creation on first use, and refusals in sentences.

Real accounts (``useradd``; CI runs as root), each test with a prefix of its own, all
removed afterwards.
"""

from __future__ import annotations

import os
import pwd
import stat
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from nbjobs.accounts import (
    AccountRefused,
    account_for,
    account_name,
    accounts_made,
    prepare_home,
    remove_account,
)
from nbjobs.config import AccountsConfig, ConfigError, parse_config

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="creating OS accounts needs root")


def test_account_names_are_what_useradd_accepts():
    assert account_name("ada", "jupyter-") == "jupyter-ada"
    assert account_name("Marie.Curie@Sorbonne.fr", "jupyter-") == "jupyter-marie-curie-sorbonne-fr"
    assert account_name("42", "") == "u42"  # an account name cannot start with a digit
    long = account_name("a" * 40, "jupyter-")
    other = account_name("a" * 39 + "b", "jupyter-")
    assert len(long) == len(other) == 32
    assert long != other  # the same start, told apart by the hash of the whole name


def test_a_prefix_that_cannot_start_an_account_name_is_refused_when_read():
    with pytest.raises(ConfigError, match="'Jupyter ' cannot start an OS account name"):
        parse_config('{"backend": {"local": {"accounts": {"prefix": "Jupyter "}}}}')
    with pytest.raises(ConfigError, match="remove run_as: service"):
        parse_config(
            '{"backend": {"local": {"accounts": {"mode": "create"}, "run_as": "service"}}}'
        )
    on = parse_config('{"backend": {"local": {"accounts": {"mode": "existing"}}}}')
    assert on.backend.local.jobs_run_as == "user"
    assert parse_config("{}").backend.local.jobs_run_as == "service"


@pytest.fixture
def prefix() -> Iterator[str]:
    mine = f"t{uuid.uuid4().hex[:6]}-"
    yield mine
    for name in accounts_made():
        if name.startswith(mine):
            remove_account(name)
    for entry in pwd.getpwall():  # the one a test made by hand
        if entry.pw_name.startswith(mine):
            subprocess.run(["userdel", entry.pw_name], capture_output=True, check=False)


@as_root
def test_create_makes_the_account_once_with_the_folder_as_its_home(prefix, tmp_path):
    settings = AccountsConfig(mode="create", prefix=prefix)
    home = tmp_path / "home" / "ada"

    first = account_for("ada", settings, home)
    again = account_for("ada", settings, home)

    assert first is not None
    assert first == again
    entry = pwd.getpwnam(f"{prefix}ada")
    assert (entry.pw_uid, entry.pw_dir) == (first.uid, str(home))
    assert entry.pw_uid >= 1000
    prepare_home(first, home)
    assert (home.stat().st_uid, stat.S_IMODE(home.stat().st_mode)) == (first.uid, 0o700)
    assert f"{prefix}ada" in accounts_made()


@as_root
def test_a_home_moved_follows_unless_the_account_still_runs_from_the_old_one(prefix, tmp_path):
    settings = AccountsConfig(mode="create", prefix=prefix)
    old, new, newer = tmp_path / "old", tmp_path / "new", tmp_path / "newer"
    account_for("ada", settings, old)
    moved = account_for("ada", settings, new)  # storage moved: the account follows
    assert moved is not None
    assert pwd.getpwnam(f"{prefix}ada").pw_dir == str(new)

    # a process of the account still runs (an earlier demo's server): no half-moved start
    sleeper = subprocess.Popen(["runuser", "-u", f"{prefix}ada", "--", "sleep", "30"])
    try:
        time.sleep(0.3)
        with pytest.raises(AccountRefused, match=r"cannot be moved: .*stop what runs as it"):
            account_for("ada", settings, newer)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert pwd.getpwnam(f"{prefix}ada").pw_dir == str(new)


@as_root
def test_two_hub_names_on_one_account_name_are_told_apart(prefix, tmp_path):
    settings = AccountsConfig(mode="create", prefix=prefix)
    account_for("marie.curie", settings, tmp_path / "m1")

    with pytest.raises(AccountRefused) as refused:
        account_for("marie-curie", settings, tmp_path / "m2")

    assert str(refused.value) == (
        f"the hub users 'marie.curie' and 'marie-curie' both become the OS account "
        f"'{prefix}marie-curie', which belongs to 'marie.curie'; an admin must rename one of "
        "them in the hub"
    )


@as_root
def test_an_account_nbjobs_did_not_make_is_not_handed_over(prefix, tmp_path):
    subprocess.run(["useradd", "--no-create-home", f"{prefix}eve"], check=True)
    settings = AccountsConfig(mode="create", prefix=prefix)

    with pytest.raises(AccountRefused, match="exists and nbjobs did not make it"):
        account_for("eve", settings, tmp_path / "eve")
    # ... but an admin who manages accounts may name it
    existing = AccountsConfig(mode="existing", prefix=prefix)
    assert account_for("eve", existing, tmp_path / "eve") is not None


def test_existing_mode_refuses_a_missing_or_system_account(tmp_path):
    existing = AccountsConfig(mode="existing", prefix="")
    with pytest.raises(AccountRefused) as missing:
        account_for("nobody-here-at-all", existing, tmp_path)
    assert str(missing.value) == (
        "this machine has no OS account 'nobody-here-at-all' for the hub user "
        "'nobody-here-at-all', and nbjobs uses existing accounts only "
        "(backend.local.accounts.mode: existing); ask an admin to create it"
    )
    with pytest.raises(AccountRefused, match=r"'root' \(uid 0\) is a system account"):
        account_for("root", existing, tmp_path)
    with pytest.raises(AccountRefused, match=r"'daemon' \(uid 1\) is a system account"):
        account_for("daemon", existing, tmp_path)


def test_none_means_no_account(tmp_path):
    assert account_for("ada", AccountsConfig(), Path(tmp_path)) is None


@as_root
def test_an_account_another_nbjobs_made_is_neither_handed_over_nor_removed(prefix, tmp_path):
    """Two nbjobs on one machine (a second install, a demo) with one account prefix: the
    first to make ada's account keeps it."""
    mine = AccountsConfig(mode="create", prefix=prefix)
    first = account_for("ada", mine, tmp_path / "a" / "ada", instance="nbjobs-first")
    assert first is not None

    with pytest.raises(AccountRefused) as refused:
        account_for("ada", mine, tmp_path / "b" / "ada", instance="nbjobs-second")

    assert str(refused.value) == (
        f"the OS account '{prefix}ada' belongs to another nbjobs on this machine "
        "(backend.local.instance 'nbjobs-first'; this one is 'nbjobs-second'), so it is not "
        "handed to the hub user 'ada'; give this one's accounts a prefix of their own "
        "(backend.local.accounts.prefix, or nbjobs install --prefix)"
    )
    assert pwd.getpwnam(f"{prefix}ada").pw_dir == str(tmp_path / "a" / "ada")  # not moved
    assert f"{prefix}ada" not in accounts_made("nbjobs-second")
    assert not remove_account(f"{prefix}ada", "nbjobs-second")
    assert pwd.getpwnam(f"{prefix}ada").pw_uid == first.uid
    assert f"{prefix}ada" in accounts_made("nbjobs-first")


@as_root
def test_an_account_made_again_gets_back_the_uid_that_owns_its_folder(prefix, tmp_path):
    """An uninstall removed ada's account and kept her folder: made again, the account
    owns her files again (a new uid would own none of them: her server could not start)."""
    settings = AccountsConfig(mode="create", prefix=prefix)
    home = tmp_path / "ada"
    before = account_for("ada", settings, home)
    assert before is not None
    prepare_home(before, home)
    (home / "train.ipynb").write_text("{}")
    os.chown(home / "train.ipynb", before.uid, before.gid)
    account_for("bob", settings, tmp_path / "bob")  # takes the next uid meanwhile
    assert remove_account(f"{prefix}ada")

    again = account_for("ada", settings, home)

    assert again is not None
    assert (again.uid, again.gid) == (before.uid, before.gid)
    assert home.stat().st_uid == again.uid


@as_root
def test_a_folder_another_account_owns_gets_no_new_account(prefix, tmp_path):
    settings = AccountsConfig(mode="create", prefix=prefix)
    bob = account_for("bob", settings, tmp_path / "bob")
    assert bob is not None
    home = tmp_path / "ada"
    home.mkdir()
    os.chown(home, bob.uid, bob.gid)

    with pytest.raises(AccountRefused) as refused:
        account_for("ada", settings, home)

    assert str(refused.value) == (
        f"the folder {home} of the hub user 'ada' belongs to the OS account '{prefix}bob' "
        f"(uid {bob.uid}), so a new account '{prefix}ada' would not own its files; an admin "
        f"can move the folder away, or give it to root (chown -R root {home}) for nbjobs to "
        "hand it over"
    )
    with pytest.raises(KeyError):
        pwd.getpwnam(f"{prefix}ada")


@as_root
def test_an_account_an_older_nbjobs_made_is_kept_for_its_own_folder_only(prefix, tmp_path):
    """Accounts made before instances were marked: the nbjobs whose folder is its home
    takes it over; another (its storage elsewhere) is refused."""
    home = tmp_path / "ada"
    useradd = ["useradd", "--no-create-home", "--home-dir", str(home), "--user-group"]
    subprocess.run([*useradd, "--comment", "nbjobs user ada", f"{prefix}ada"], check=True)
    settings = AccountsConfig(mode="create", prefix=prefix)
    # instances of this test's own: a copy of it running beside marks accounts too
    mine, other = f"nbjobs-{prefix}a", f"nbjobs-{prefix}b"

    with pytest.raises(AccountRefused, match="was made by an older nbjobs for the folder"):
        account_for("ada", settings, tmp_path / "elsewhere" / "ada", instance=other)
    assert account_for("ada", settings, home, instance=mine) is not None

    assert pwd.getpwnam(f"{prefix}ada").pw_gecos == f"nbjobs user ada {mine}"
    assert accounts_made(mine) == [f"{prefix}ada"]

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

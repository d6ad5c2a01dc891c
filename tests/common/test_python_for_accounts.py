"""scripts/python_for_accounts.sh: which Python a root install makes its .venv with.

Jobs and notebook servers run under users' own OS accounts and start the venv's
interpreter; one under a folder only root may enter (pyenv's under /root) failed 21 tests
of a fresh clone, though the install's old check, starting it as nobody with setpriv,
passed (setpriv keeps root's capabilities until its exec reaches the binary, and the
Python then ran on the system's library of the same version).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "python_for_accounts.sh"

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="the choice is made only as root (CI runs as root), with setpriv",
)


def choose(python: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), str(python)], capture_output=True, text=True, check=True, timeout=60
    )


def test_a_python_in_a_folder_only_root_may_enter_is_passed_over(tmp_path):
    closed = tmp_path / "closed"
    (closed / "bin").mkdir(parents=True)
    closed.chmod(0o700)
    python = closed / "bin" / "python3"
    python.symlink_to("/usr/bin/python3")
    # the old check: started as nobody, it runs
    old = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", str(python), "-c", ""],
        capture_output=True,
        timeout=60,
    )
    assert old.returncode == 0, "setpriv no longer reaches it: the old check would do"

    chosen = choose(python)
    assert chosen.stdout.strip() == "/usr/bin/python3"
    assert f"{python} lies where users' accounts cannot start it" in chosen.stderr


def test_a_python_every_account_may_start_is_kept(tmp_path):
    chosen = choose("/usr/bin/python3")
    assert chosen.stdout.strip() == "/usr/bin/python3"
    assert chosen.stderr == ""

"""A job's namespaces (nbjobs.sandbox_init) and a server's private runtime folder, as
root with real processes: the job's command ends as it would without them (its exit
code, its signal, a cancel it handles), sees only its own processes, takes whatever it
started with it, and never gets a folder of the user's choosing mounted over."""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

from nbjobs import sandbox
from nbjobs.accounts import Account

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or sandbox.jobs_can_have_namespaces() is not None,
    reason="namespaces need root (CI runs as root)",
)

NOBODY = Account("nobody", 65534, 65534, "/nonexistent", (65534,))


def run_boxed(
    script: str, *hide: Path, tmp: Path | None = None, timeout: float = 30
) -> subprocess.CompletedProcess:
    command = sandbox.job_command(NOBODY, [sys.executable, "-c", script], hide=hide, tmp=tmp)
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd="/")


def test_the_command_ends_as_it_would_alone():
    assert run_boxed("import sys; sys.exit(3)").returncode == 3
    killed = run_boxed("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    assert killed.returncode == -signal.SIGKILL
    said = run_boxed("import os; print(os.getuid(), os.getgid(), os.getgroups())")
    assert said.stdout.split() == ["65534", "65534", "[65534]"], said.stderr


def test_it_sees_its_own_processes_only_and_they_end_with_it(tmp_path):
    mark = f"nbjobs-left-{uuid.uuid4().hex[:8]}"
    script = (
        "import os, subprocess\n"
        f"subprocess.Popen(['sleep', '600', '{mark}'], start_new_session=True)\n"
        "print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))\n"
    )
    done = run_boxed(script)
    pids = eval(done.stdout)  # a list of numbers, printed by the job
    # its namespace's first process, itself, and the daemon it started: not the machine's
    assert max(pids) < 10, pids
    assert os.getpid() not in pids
    time.sleep(0.2)
    left = [p for p in psutil.process_iter(["cmdline"]) if mark in (p.info["cmdline"] or [])]
    assert left == []


def test_a_cancel_reaches_the_command_which_saves_and_leaves():
    script = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: (print('saved', flush=True), sys.exit(4)))\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    command = sandbox.job_command(NOBODY, [sys.executable, "-c", script])
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd="/") as process:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "ready"
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 4
        assert process.stdout.read().strip() == "saved"


def test_a_hidden_folder_is_empty_inside_and_a_link_is_never_mounted_over(tmp_path):
    hidden = Path(f"/run/nbjobs-test-{uuid.uuid4().hex[:8]}")
    hidden.mkdir()
    try:
        (hidden / "token").write_text("secret")
        done = run_boxed(f"import os; print(os.listdir({str(hidden)!r}))", hidden)
        assert done.stdout.strip() == "[]", done.stderr
        assert (hidden / "token").read_text() == "secret"  # the machine's is untouched

        link = tmp_path / "runtime"
        link.symlink_to(hidden)
        refused = run_boxed("print('ran')", link)
        assert refused.returncode == 71
        assert "ran" not in refused.stdout
        assert "is not a folder of root's" in refused.stderr
    finally:
        (hidden / "token").unlink()
        hidden.rmdir()


def test_a_temporary_folder_is_the_jobs_own_and_only_ever_made_in_a_hidden_one(tmp_path):
    hidden = Path(f"/run/nbjobs-test-{uuid.uuid4().hex[:8]}")
    hidden.mkdir()
    try:
        tmp = hidden / "tmp"
        script = (
            "import os\n"
            f"open({str(tmp / 'scratch')!r}, 'w').write('x')\n"
            f"st = os.stat({str(tmp)!r})\n"
            "print(st.st_uid, oct(st.st_mode & 0o777), end=' ')\n"
            f"try: open({str(hidden / 'beside')!r}, 'w')\n"
            "except OSError as exc: print(exc.strerror)\n"
        )
        done = run_boxed(script, hidden, tmp=tmp)
        assert done.stdout.split(maxsplit=2) == ["65534", "0o700", "Read-only file system\n"]
        assert os.listdir(hidden) == []  # made in the job's namespace, gone with it

        outside = tmp_path / "tmp"  # a folder of the machine's: never made nor mounted on
        refused = run_boxed("print('ran')", hidden, tmp=outside)
        assert refused.returncode == 71
        assert "ran" not in refused.stdout
        assert f"{outside} is not in a folder hidden from the job" in refused.stderr
        assert not outside.exists()
    finally:
        hidden.rmdir()


def test_a_servers_runtime_folder_is_its_accounts_alone(tmp_path):
    root = tmp_path / "run" / "servers"
    folder = sandbox.server_runtime_folder(NOBODY, root)
    info = folder.lstat()
    assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (65534, 0o700)
    assert folder.parent == root
    assert stat.S_IMODE(root.lstat().st_mode) == 0o711
    # the longest kernel socket path a server's folder gives fits in sun_path (107 bytes)
    longest = sandbox.SERVERS_RUNTIME / f"{2**32}-abcdefgh" / f"kernel-{uuid.uuid4()}-ipc-99999"
    assert len(str(longest)) < 107
    sandbox.remove_server_runtime(folder, root)
    assert not folder.exists()

    # a parent someone else could change is refused in a sentence
    other = tmp_path / "other" / "servers"
    other.parent.mkdir()
    other.mkdir(mode=0o777)
    os.chmod(other, 0o777)
    with pytest.raises(sandbox.SandboxUnavailable, match="only root may change"):
        sandbox.server_runtime_folder(NOBODY, other)


def test_the_runtime_folders_keep_their_modes_whatever_the_umask():
    """A root service started with ``umask 077`` (the installed one, the demo) made
    /run/nbjobs 0700 on a fresh machine: no account's notebook server could enter its
    own runtime folder below it, and none started. The folders get their modes exactly
    (made in a process with that umask), and one left without them gets them again."""
    base = Path(f"/run/nbjobs-test-{uuid.uuid4().hex[:8]}")
    root = base / "servers"
    make = (
        "import os\n"
        "from pathlib import Path\n"
        "os.umask(0o077)\n"
        "from nbjobs import sandbox\n"
        "from nbjobs.accounts import Account\n"
        f"nobody = Account(*{dataclasses.astuple(NOBODY)!r})\n"
        f"print(sandbox.server_runtime_folder(nobody, Path({str(root)!r})))\n"
    )
    try:
        made = subprocess.run([sys.executable, "-c", make], capture_output=True, text=True)
        assert made.returncode == 0, made.stderr
        folder = Path(made.stdout.strip())
        assert stat.S_IMODE(base.lstat().st_mode) == 0o755
        assert stat.S_IMODE(root.lstat().st_mode) == 0o711
        # the account reaches its own folder through them
        write = ["/bin/sh", "-c", f"echo in > {folder / 'token'} && cat {folder / 'token'}"]
        entered = subprocess.run(
            write, user=65534, group=65534, extra_groups=[], capture_output=True, text=True
        )
        assert entered.stdout.strip() == "in", entered.stderr

        os.chmod(base, 0o700)  # as a start under umask 077 left it before
        again = sandbox.server_runtime_folder(NOBODY, root)
        assert stat.S_IMODE(base.lstat().st_mode) == 0o755
        assert again.parent == root
    finally:
        shutil.rmtree(base, ignore_errors=True)

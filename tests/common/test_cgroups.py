"""What nbjobs asks of the kernel's control groups, on each kind of machine.

cgroup v1 is what CI has: its groups are made for real (and the hub and job-service
tests run servers and jobs in them). cgroup v2 is what today's servers have: without
systemd its files are written into a folder laid out like one (the kernel would
check the values; the names and values are what is tested); under systemd the
``systemd-run`` words are checked, since no systemd runs here.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from nbjobs.job_service.backends.local_job_setup import start_runner

from nbjobs.cgroups import CgroupError, Cgroups, Limits, gpu_minors, human_bytes
from tests.loops import FORK_LOOP

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="control groups need root")


@pytest.fixture
def cgroups() -> Iterator[Cgroups]:
    """This machine's control groups under a parent of this test's own (an install's
    ``nbjobs`` or a demo's groups are never touched), removed afterwards."""
    mine = Cgroups(parent=f"nbjobs-test-{uuid.uuid4().hex[:8]}")
    yield mine
    mine.sweep("", older_than=0)
    for folder in mine.parent_folders():
        folder.rmdir()


@pytest.fixture
def v2_root(tmp_path):
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (tmp_path / "cgroup.subtree_control").write_text("")
    return tmp_path


def made_like_the_kernel(folder):
    """mkdir in cgroupfs brings the control files with it; in a plain folder, make them."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("cgroup.subtree_control", "memory.max", "memory.swap.max", "cpu.max", "pids.max"):
        (folder / name).touch()


@as_root
def test_v2_without_systemd_limits_memory_cpu_and_tasks_and_says_devices_are_not(v2_root):
    cgroups = Cgroups(v2_root, systemd=False)
    made_like_the_kernel(v2_root / "nbjobs")
    made_like_the_kernel(v2_root / "nbjobs" / "job-abc")
    group = cgroups.group("job-abc")

    group.create(Limits(memory=8 * 2**30, cpus=1.5, gpu_minors=(0,), tasks=2048))

    folder = v2_root / "nbjobs" / "job-abc"
    assert (folder / "memory.max").read_text() == str(8 * 2**30)
    assert (folder / "memory.swap.max").read_text() == "0"
    assert (folder / "cpu.max").read_text() == "150000 100000"
    assert (folder / "pids.max").read_text() == "2048"
    assert (v2_root / "nbjobs" / "cgroup.subtree_control").read_text() == "+memory +cpu +pids"
    assert cgroups.unenforced() == ["devices"]
    assert cgroups.summary() == (
        "memory, CPU, tasks enforced (cgroup v2); not enforced: GPU devices (cgroup v2 "
        "without systemd has no device files)"
    )
    # v2 counts the refusals in pids.events as v1 does ("max N")
    (folder / "pids.events").write_text("max 7\n")
    assert (group.task_limit(), group.task_limit_hits()) == (2048, 7)


@as_root
def test_v2_under_systemd_starts_each_in_a_scope_with_its_devices(v2_root):
    cgroups = Cgroups(v2_root, systemd=True)
    group = cgroups.group("job-abc")
    limits = Limits(memory=2**30, cpus=2, gpu_minors=(1, 3), tasks=4096)

    words = group.command_prefix(limits, uid=1001, gid=1001)

    assert cgroups.summary() == (
        "GPU devices, memory, CPU, tasks enforced (cgroup v2 through systemd)"
    )
    assert words[:6] == [
        "systemd-run",
        "--scope",
        "--quiet",
        "--collect",
        "--unit=nbjobs-job-abc.scope",
        "--slice=nbjobs.slice",
    ]
    props = [words[i + 1] for i, w in enumerate(words) if w == "-p"]
    assert "DevicePolicy=closed" in props
    gpus = [p for p in props if p.startswith("DeviceAllow=/dev/nvidia") and p[-4].isdigit()]
    assert gpus == ["DeviceAllow=/dev/nvidia1 rw", "DeviceAllow=/dev/nvidia3 rw"]
    assert "DeviceAllow=/dev/nvidiactl rw" in props
    assert {"MemoryMax=1073741824", "MemorySwapMax=0", "CPUQuota=200%"} <= set(props)
    assert "TasksMax=4096" in props
    assert words[-3:] == ["--uid=1001", "--gid=1001", "--"]
    # a notebook server: no NVIDIA device at all, terminals still work
    server = group.command_prefix(Limits(gpu_minors=()), uid=None, gid=None)
    assert not [w for w in server if "nvidia" in w]
    assert "DeviceAllow=char-pts rw" in server
    assert group.paths()["memory"] == v2_root / "nbjobs.slice" / "nbjobs-job-abc.scope"


def test_off_and_required():
    off = Cgroups(mode="off")
    assert off.enforced == ()
    assert (
        off.summary()
        == "GPU devices, memory, CPU and tasks are not enforced (backend.local.cgroups is off)"
    )
    with pytest.raises(CgroupError, match=r"backend\.local\.cgroups is required"):
        Cgroups(Path("/nowhere"), mode="required")


OPEN = """
import errno, os, sys
for path in sys.argv[1:]:
    try:
        os.close(os.open(path, os.O_RDWR))
        print("opened")
    except OSError as exc:
        print(errno.errorcode[exc.errno])
"""


@as_root
def test_v1_a_group_opens_only_its_gpu_limits_memory_and_cleans_up(tmp_path, cgroups):
    if cgroups.version != "v1":
        pytest.skip("this machine has no cgroup v1 (CI has)")
    for minor in (2, 3):  # stand-in GPUs: no driver behind them, so an allowed open is ENXIO
        os.mknod(tmp_path / f"nvidia{minor}", 0o666 | stat.S_IFCHR, os.makedev(195, minor))
    group = cgroups.group(f"test-{os.getpid()}")
    group.create(Limits(memory=300 * 2**20, cpus=0.25, gpu_minors=(2,)))
    try:
        paths = group.paths()
        assert group.memory_limit() == 300 * 2**20
        assert (paths["cpu"] / "cpu.cfs_quota_us").read_text().strip() == "25000"
        assert group.pids() == []
        opened = subprocess.run(
            [sys.executable, "-c", OPEN, str(tmp_path / "nvidia2"), str(tmp_path / "nvidia3")],
            preexec_fn=group.join,
            capture_output=True,
            text=True,
            check=True,
        )
        outside = subprocess.run(
            [sys.executable, "-c", OPEN, str(tmp_path / "nvidia3")],
            capture_output=True,
            text=True,
            check=True,
        )
        assert opened.stdout.split() == ["ENXIO", "EPERM"]
        assert outside.stdout.split() == ["ENXIO"]
        assert group.oom_kills() == 0
    finally:
        group.remove()
    assert not any(p.exists() for p in group.paths().values())


def test_gpu_minors_and_sizes_in_words():
    assert gpu_minors(["1", "0"]) == (0, 1)
    assert gpu_minors(["0"], {"0": 4}) == (4,)
    assert human_bytes(8 * 2**30) == "8 GiB"
    assert human_bytes(200 * 2**20) == "200 MiB"
    assert Limits(memory=2**30, cpus=0.5, gpu_minors=(), tasks=512).describe() == (
        "no GPU device, memory 1 GiB, 0.5 CPU, 512 tasks"
    )


@as_root
def test_a_sweep_removes_the_empty_groups_of_jobs_and_keeps_a_busy_one(cgroups):
    if cgroups.version != "v1":
        pytest.skip("this machine has no cgroup v1 (CI has)")
    ended, busy = cgroups.group(f"job-ended{os.getpid()}"), cgroups.group(f"job-busy{os.getpid()}")
    # another nbjobs on the machine (another parent): its ended job's group is its own
    neighbour = Cgroups(parent=f"{cgroups.parent}-other")
    theirs = neighbour.group(f"job-ended{os.getpid()}")
    for group in (ended, busy, theirs):
        group.create(Limits(memory=2**30))
    sleeper = subprocess.Popen(["sleep", "30"], preexec_fn=busy.join)
    try:
        cgroups.sweep("job-")  # both new: another service may be starting them
        assert all(p.exists() for p in ended.paths().values())
        cgroups.sweep("job-", older_than=0)
        assert not any(p.exists() for p in ended.paths().values())
        assert all(p.exists() for p in busy.paths().values())
        assert all(p.exists() for p in theirs.paths().values())
    finally:
        sleeper.kill()
        sleeper.wait()
        busy.remove()
        theirs.remove()
        for folder in neighbour.parent_folders():
            folder.rmdir()


THREAD_LOOP = """
import sys, threading
stop, started = threading.Event(), 0
try:
    while started < int(sys.argv[1]):  # bounded: without a limit it stops by itself
        threading.Thread(target=stop.wait, daemon=True).start()
        started += 1
    print("started", started)
except RuntimeError as exc:
    print("refused after", started, exc)
stop.set()
"""


@as_root
@pytest.mark.parametrize("loop", [FORK_LOOP, THREAD_LOOP], ids=["forks", "threads"])
def test_v1_a_fork_or_thread_loop_stops_at_the_groups_tasks(loop, cgroups):
    if cgroups.version != "v1":
        pytest.skip("this machine has no cgroup v1 (CI has)")
    group = cgroups.group(f"test-tasks-{os.getpid()}")
    group.create(Limits(tasks=40))
    try:
        assert group.task_limit() == 40
        inside = subprocess.run(
            [sys.executable, "-c", loop, "400"],
            preexec_fn=group.join,
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        hits = group.task_limit_hits()
    finally:
        group.kill_all()
        group.remove()
    # the loop itself is one task of the 40: it got no more than the rest
    said = inside.stdout.split()
    assert said[:2] == ["refused", "after"], inside.stdout
    assert int(said[2]) < 40, inside.stdout
    assert hits >= 1
    # the rest of the machine is unaffected: this process still forks, and one past 40
    outside = subprocess.run(
        [sys.executable, "-c", loop, "60"], capture_output=True, text=True, check=True
    )
    assert outside.stdout.split()[:2] in (["forked", "60"], ["started", "60"]), outside.stdout


@pytest.fixture
def job_group(cgroups):
    """A job's control group under this test's parent (cgroup v1, as CI has), removed after."""
    if cgroups.version != "v1":
        pytest.skip("this machine has no cgroup v1 (CI has)")
    group = cgroups.group(f"job-{uuid.uuid4().hex[:8]}")
    group.create(Limits(memory=2**30))
    yield group
    group.remove()


def start_in(group, folder, command=None, env=None):
    """start_runner as the local backend calls it, the log ``folder/log.txt``; by default
    of a command that leaves ``folder/ran`` behind if it runs at all."""
    command = command or [sys.executable, "-c", f"open({str(folder / 'ran')!r}, 'w')"]
    log = os.open(folder / "log.txt", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        return start_runner(command, log, folder, env or {"PATH": os.environ["PATH"]}, group, None)
    finally:
        os.close(log)


FIRST_LOOK = """
import os, sys
print(os.getpid(), sys.stdin.read() == "", sorted(os.environ))
print(open("/proc/self/cgroup").read())
"""


@as_root
def test_a_runner_is_in_its_group_from_its_first_line_and_reads_nothing_of_the_gate(
    tmp_path, cgroups, job_group
):
    # a locale given: Python would otherwise add LC_CTYPE itself (PEP 538)
    env = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8", "BASH_ENV": str(tmp_path / "rc")}
    env["KEPT"] = "yes"
    process = start_in(job_group, tmp_path, [sys.executable, "-c", FIRST_LOOK], env)
    assert process.wait(timeout=60) == 0
    said, *lines = (tmp_path / "log.txt").read_text().splitlines()
    # the runner is the process the service started (the gate became it), its stdin
    # empty (not the gate's pipe), its environment what was given, less a shell's startup
    # file and with nothing a shell adds
    assert said == f"{process.pid} True ['KEPT', 'LANG', 'PATH']"
    memory = next(line for line in lines if ":memory:" in line)
    assert memory.endswith(f"/{cgroups.parent}/{job_group.name}"), lines


@as_root
def test_a_runner_that_cannot_be_put_in_its_group_runs_nothing_and_says_so(tmp_path, job_group):
    job_group.remove()  # as if swept away between its making and the start
    with pytest.raises(CgroupError, match="could not be put in its control group"):
        start_in(job_group, tmp_path)
    job_group.create(Limits(memory=2**30))
    with pytest.raises(FileNotFoundError):
        start_in(job_group, tmp_path, [str(tmp_path / "no-python"), "-V"])
    assert not (tmp_path / "ran").exists()
    assert (tmp_path / "log.txt").read_text() == ""


@as_root
def test_a_gate_killed_as_it_waits_is_a_start_that_failed(tmp_path, job_group):
    join = job_group.join

    def join_then_killed(pid=None):  # killed by someone between its join and its "go"
        join(pid)
        os.kill(pid, signal.SIGKILL)
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # dead, not yet reaped

    job_group.join = join_then_killed
    with pytest.raises(subprocess.SubprocessError, match="ended before it began"):
        start_in(job_group, tmp_path)
    assert not (tmp_path / "ran").exists()

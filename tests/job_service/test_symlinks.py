"""No link a user plants in their folder makes the service read or write someone else's files.

The attacks are those found when issue 14 was filed (ada against bob on one service):
a finished job's ``log.txt`` replaced with a link to bob's file and read back through
``GET logs``; a queued job's files or folders replaced with links so that the runner's
log went into bob's notebook or the service made folders in bob's home; ``.nbjobs/jobs``
linked to bob's home at submit; a link swapped under a notebook between the service's
check and its copy. Real service, real runner processes, real links.

The first tests are of :mod:`nbjobs.storage`'s API on its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import json
import os
import shutil
import stat
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbjobs.job_runner import RunStatus, StatusFileError, parse_status

from nbjobs.storage import (
    FilesChanged,
    NotebookTooLarge,
    PathRefused,
    job_folder,
    make_job_dir,
    open_job_dir,
    read_file_at,
    read_notebook,
)

from .conftest import start_service, stop_all

#: a job that holds the only slot until the test creates ``go`` in the user's folder
WAIT_FOR_GO = "import os, time\nwhile not os.path.exists('go'):\n    time.sleep(0.05)"
ONE_SLOT = {"backend": {"kind": "local", "local": {"gpus": [], "cpu_slots": 1}}}


def tree(folder: Path) -> list[str]:
    """Everything under ``folder``, as sorted relative paths (links not followed)."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def bobs_files(svc: Any) -> tuple[Path, bytes]:
    """Bob's home with a notebook and a secret in it; what the home looks like."""
    bob = svc.home("bob")
    svc.write("bob", "secret.ipynb", "print('bob only')")
    (bob / "secret.txt").write_text("bob's secret\n")
    return bob, (bob / "secret.ipynb").read_bytes()


# -- the storage API ----------------------------------------------------------------------


def test_a_job_folder_is_made_owner_only_with_exactly_the_files_given(tmp_path):
    home = tmp_path / "ada"
    home.mkdir()
    job_dir = job_folder(home, "abc123")

    make_job_dir(job_dir, {"input.ipynb": b"the bytes"})

    for folder in (home / ".nbjobs", home / ".nbjobs" / "jobs", job_dir):
        assert stat.S_IMODE(folder.lstat().st_mode) == 0o700, folder
    snapshot = job_dir / "input.ipynb"
    assert stat.S_IMODE(snapshot.lstat().st_mode) == 0o600
    assert snapshot.read_bytes() == b"the bytes"
    with pytest.raises(FileExistsError):  # a job folder is always new
        make_job_dir(job_dir, {})


@pytest.mark.parametrize("linked", [".nbjobs", ".nbjobs/jobs"])
def test_a_link_on_the_way_to_a_job_folder_is_refused_and_nothing_made_beyond(tmp_path, linked):
    home, elsewhere = tmp_path / "ada", tmp_path / "bob"
    (home / linked).parent.mkdir(parents=True)
    elsewhere.mkdir()
    (home / linked).symlink_to(elsewhere)

    with pytest.raises(FilesChanged) as made:
        make_job_dir(job_folder(home, "abc123"), {"input.ipynb": b"x"})
    with pytest.raises(FilesChanged) as opened:
        open_job_dir(job_folder(home, "abc123"))

    assert tree(elsewhere) == []
    assert made.value.filename == opened.value.filename == linked
    assert str(made.value) == f"{linked} is a link, not a folder"


def test_a_file_where_a_job_folder_belongs_is_refused(tmp_path):
    home = tmp_path / "ada"
    (home / ".nbjobs").mkdir(parents=True)
    (home / ".nbjobs" / "jobs").write_text("")

    with pytest.raises(FilesChanged, match=r"^\.nbjobs/jobs is not a folder$"):
        make_job_dir(job_folder(home, "abc123"), {})


def test_a_link_or_a_fifo_in_a_job_folder_is_never_read(tmp_path):
    job_dir = job_folder(tmp_path / "ada", "abc123")
    job_dir.parent.parent.parent.mkdir()
    make_job_dir(job_dir, {})
    (tmp_path / "bob.txt").write_text("bob")
    (job_dir / "status.json").symlink_to(tmp_path / "bob.txt")
    os.mkfifo(job_dir / "log.txt")  # opening it for reading would block a plain open()

    fd = open_job_dir(job_dir)
    try:
        with pytest.raises(FilesChanged, match=r"status\.json is a link"):
            read_file_at(fd, "status.json", limit=100)
        with pytest.raises(FilesChanged, match=r"log\.txt is not a regular file"):
            read_file_at(fd, "log.txt", limit=100)
        assert read_file_at(fd, "missing.json", limit=100) is None
    finally:
        os.close(fd)


def test_notebooks_are_read_through_links_that_stay_inside_the_folder(tmp_path):
    home = tmp_path / "ada"
    (home / "work" / "deep").mkdir(parents=True)
    (home / "work" / "deep" / "real.ipynb").write_bytes(b"ada's")
    (home / "short").symlink_to("work/deep")  # a relative link to a folder
    (home / "work" / "nb.ipynb").symlink_to("deep/../deep/real.ipynb")
    (home / "abs.ipynb").symlink_to(home / "work" / "nb.ipynb")  # absolute, inside

    for path in ["work/deep/real.ipynb", "short/real.ipynb", "work/nb.ipynb", "/abs.ipynb"]:
        found = read_notebook(home, path, limit=100)
        assert found.data == b"ada's", path
        assert found.path == home / "work" / "deep" / "real.ipynb", path


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("out.ipynb", "'out.ipynb' leads outside your folder (through a link)"),
        ("outdir/b.ipynb", "'outdir/b.ipynb' leads outside your folder (through a link)"),
        ("up.ipynb", "'up.ipynb' leads outside your folder (through a link)"),
        ("loop.ipynb", "'loop.ipynb' goes through too many links"),
        ("../bob/b.ipynb", "'../bob/b.ipynb' leaves your folder ('..' is not allowed)"),
        ("fifo.ipynb", "'fifo.ipynb' is not a file"),
        ("folder.ipynb", "'folder.ipynb' is not a file"),
        ("missing.ipynb", "'missing.ipynb' does not exist in your folder"),
        ("notes.txt/x.ipynb", "'notes.txt/x.ipynb' does not exist in your folder"),
        ("notes.txt", "'notes.txt' is not a notebook (.ipynb)"),
        (".nbjobs/jobs/x/input.ipynb", "notebooks inside .nbjobs/ are nbjobs' own copies"),
        ("sneaky.ipynb", "notebooks inside .nbjobs/ are nbjobs' own copies"),
    ],
)
def test_notebook_paths_that_leave_the_folder_or_are_no_file_are_refused(tmp_path, path, expected):
    home, bob = tmp_path / "ada", tmp_path / "bob"
    home.mkdir()
    bob.mkdir()
    (bob / "b.ipynb").write_text("bob's")
    (home / "out.ipynb").symlink_to(bob / "b.ipynb")
    (home / "outdir").symlink_to(bob)
    (home / "up.ipynb").symlink_to("../bob/b.ipynb")
    (home / "loop.ipynb").symlink_to("loop.ipynb")
    os.mkfifo(home / "fifo.ipynb")
    (home / "folder.ipynb").mkdir()
    (home / "notes.txt").write_text("hi")
    (home / ".nbjobs" / "jobs" / "x").mkdir(parents=True)
    (home / ".nbjobs" / "jobs" / "x" / "input.ipynb").write_text("{}")
    (home / "sneaky.ipynb").symlink_to(".nbjobs/jobs/x/input.ipynb")

    with pytest.raises(PathRefused) as refused:
        read_notebook(home, path, limit=100)

    assert str(refused.value).startswith(expected)


def test_a_notebook_over_the_limit_is_refused_with_its_size(tmp_path):
    (tmp_path / "big.ipynb").write_bytes(b"x" * 101)

    with pytest.raises(NotebookTooLarge) as refused:
        read_notebook(tmp_path, "big.ipynb", limit=100)
    assert read_notebook(tmp_path, "big.ipynb", limit=101).data == b"x" * 101

    assert (refused.value.size, refused.value.limit) == (101, 100)


def test_the_status_file_format_is_parsed_from_bytes():
    status = RunStatus(state="running", cells_total=3, cells_done=1)

    assert parse_status(json.dumps(status.to_dict()).encode()) == status
    with pytest.raises(StatusFileError):
        parse_status(b"\xff not json")
    with pytest.raises(StatusFileError):
        parse_status(b'{"state": "sleeping"}')


# -- attack 1: a finished job's log replaced by a link --------------------------------------


@pytest.mark.parametrize("planted", ["log.txt", "job folder", ".nbjobs", ".nbjobs/jobs"])
@pytest.mark.parametrize("query", [{}, {"follow": "1"}, {"tail": "100"}, {"offset": "3"}])
async def test_a_link_planted_in_a_finished_jobs_files_never_serves_bobs_data(svc, planted, query):
    bob, _ = bobs_files(svc)
    svc.script("ada", "a.py", "print('ada')")  # the subject is its log, not a kernel's run
    job = await svc.submit("ada", "a.py")
    await svc.wait("ada", job["id"])
    home = svc.home("ada")
    folder = job_folder(home, job["id"])
    # Bob's side of the trick: a folder of his that holds what ada's link names.
    if planted == "log.txt":
        (folder / "log.txt").unlink()
        (folder / "log.txt").symlink_to(bob / "secret.txt")
    else:
        (bob / ".nbjobs" / "jobs" / job["id"]).mkdir(parents=True)
        (bob / ".nbjobs" / "jobs" / job["id"] / "log.txt").write_text("bob's secret\n")
        linked = {"job folder": folder, ".nbjobs": home / ".nbjobs"}.get(
            planted, home / ".nbjobs" / "jobs"
        )
        shutil.rmtree(linked)
        target = bob / linked.relative_to(home)
        linked.symlink_to(target)

    async with svc.client("ada") as c:
        r = await c.get(f"jobs/{job['id']}/logs", params=query)

    assert r.status_code == 409, r.text
    assert "secret" not in r.text
    what = {"job folder": f".nbjobs/jobs/{job['id']}"}.get(planted, planted)
    assert r.json()["message"] == (
        f"the files of job {job['id']} were changed: {what} is a link, not a "
        f"{'file' if planted == 'log.txt' else 'folder'}; nbjobs reads no log through a "
        "link. Remove the link; re-run the job for a new log"
    )


# -- attack 2: a queued job's files replaced by links ----------------------------------------


@pytest.mark.parametrize("planted", ["log.txt", "job folder", ".nbjobs", ".nbjobs/jobs"])
async def test_a_link_planted_in_a_queued_jobs_files_never_writes_to_bobs(tmp_path, planted):
    svc = await start_service(tmp_path, ONE_SLOT)
    try:
        bob, bobs_notebook = bobs_files(svc)
        before = tree(bob)
        home = svc.home("ada")
        svc.script("ada", "wait.py", WAIT_FOR_GO)  # holds the slot: a script, no kernel
        svc.script("ada", "b.py", "print('a line for the log')")
        first = await svc.submit("ada", "wait.py")
        job = await svc.submit("ada", "b.py")
        await svc.wait("ada", first["id"], until=lambda j: j["state"] == "running")
        folder = job_folder(home, job["id"])
        if planted == "log.txt":
            (folder / "log.txt").symlink_to(bob / "secret.ipynb")
            what = "log.txt"
        elif planted == "job folder":
            shutil.rmtree(folder)
            folder.symlink_to(bob)
            what = f".nbjobs/jobs/{job['id']}"
        else:
            # Moved aside, so that the running job keeps its files; a link takes its place.
            (home / planted).rename(home / "moved-aside")
            (home / planted).symlink_to(bob)
            what = planted
        (home / "go").touch()
        done = await svc.wait("ada", job["id"])
    finally:
        await stop_all(svc)

    assert tree(bob) == before  # nothing made in bob's home, nothing written there
    assert (bob / "secret.ipynb").read_bytes() == bobs_notebook
    assert done["state"] == "failed"
    kind = "file" if planted == "log.txt" else "folder"
    assert done["message"] == (
        f"the backend could not start the job: the job's folder {folder} could not be "
        f"prepared (a link, not a {kind}: {what}); it and its files must be real files, "
        "not links: re-submit the notebook"
    )


async def test_a_status_file_replaced_by_a_link_is_never_read(tmp_path):
    svc = await start_service(tmp_path, ONE_SLOT)
    try:
        bob = svc.home("bob")
        # what bob's own job wrote, with something of his in it
        bobs_status = RunStatus(state="running", cells_total=42, cells_done=41, message="bob's")
        (bob / "status.json").write_text(json.dumps(bobs_status.to_dict()))
        before = (bob / "status.json").read_bytes()
        home = svc.home("ada")
        svc.write("ada", "wait.ipynb", WAIT_FOR_GO)
        job = await svc.submit("ada", "wait.ipynb")
        running = await svc.wait("ada", job["id"], until=lambda j: j["state"] == "running")
        status = job_folder(home, job["id"]) / "status.json"
        status.unlink()
        status.symlink_to(bob / "status.json")
        seen = await svc.job("ada", job["id"])
        async with svc.client("ada") as c:
            listed = (await c.get("jobs", params={"state": "running"})).json()
        (home / "go").touch()
        done = await svc.wait("ada", job["id"])
    finally:
        await stop_all(svc)

    assert running["progress"]["cells_total"] == 1
    assert seen["progress"]["cells_total"] != 42  # not bob's
    assert [j["progress"]["cells_total"] for j in listed["jobs"]] != [42]
    assert done["state"] == "succeeded"
    assert done["message"] != "bob's"
    assert (bob / "status.json").read_bytes() == before  # the runner replaced the link


async def test_a_link_planted_at_the_output_path_is_replaced_not_written_through(tmp_path):
    svc = await start_service(tmp_path, ONE_SLOT)
    try:
        bob, bobs_notebook = bobs_files(svc)
        home = svc.home("ada")
        svc.write("ada", "wait.ipynb", WAIT_FOR_GO)
        job = await svc.submit("ada", "wait.ipynb")
        await svc.wait("ada", job["id"], until=lambda j: j["state"] == "running")
        output = home / job["output_path"]
        output.symlink_to(bob / "secret.ipynb")
        # ... and at the temp file the runner writes first (its name has the runner's pid)
        live = json.loads((job_folder(home, job["id"]) / "status.json").read_text())
        temp = output.with_name(f".{output.name}.{live['pid']}.tmp")
        temp.symlink_to(bob / "secret.ipynb")
        (home / "go").touch()
        done = await svc.wait("ada", job["id"])
    finally:
        await stop_all(svc)

    assert done["state"] == "succeeded", done
    assert (bob / "secret.ipynb").read_bytes() == bobs_notebook
    assert not output.is_symlink()
    assert nbformat.read(output, as_version=4).metadata["nbjobs"]["state"] == "succeeded"
    assert not temp.exists()
    assert not temp.is_symlink()


# -- attack 3: the job folders' parents linked to bob's home at submit -----------------------


@pytest.mark.parametrize("linked", [".nbjobs", ".nbjobs/jobs"])
async def test_a_link_where_job_folders_go_refuses_the_submit_and_makes_nothing(svc, linked):
    bob, _ = bobs_files(svc)
    before = tree(bob)
    home = svc.home("ada")
    svc.write("ada", "a.ipynb", "1")
    if linked == ".nbjobs/jobs":
        (home / ".nbjobs").mkdir()
    (home / linked).symlink_to(bob)

    async with svc.client("ada") as c:
        r = await c.post("jobs", json={"path": "a.ipynb", "flavor": "cpu"})
        listed = (await c.get("jobs")).json()

    assert r.status_code == 409, r.text
    assert r.json()["message"] == (
        f"{linked} in your folder is a link, not a folder; nbjobs keeps its job files "
        f"there and follows no links: remove the link ({linked}) and submit again"
    )
    assert tree(bob) == before
    assert listed["total"] == 0


# -- the submit race: a link swapped between the check and the copy -------------------------


def exchange(a: Path, b: Path) -> None:
    """Swap two names at once (Linux renameat2 with RENAME_EXCHANGE)."""
    libc = ctypes.CDLL(None, use_errno=True)
    at_fdcwd, rename_exchange = -100, 2
    if libc.renameat2(at_fdcwd, bytes(a), at_fdcwd, bytes(b), rename_exchange) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), str(a))


async def test_a_link_swapped_during_submits_never_snapshots_bobs_notebook(tmp_path):
    svc = await start_service(tmp_path, ONE_SLOT)
    try:
        bob = svc.home("bob")
        home = svc.home("ada")
        # Large notebooks, so that reading one takes a while: room for a swap.
        big = "x = '" + "a" * 3_000_000 + "'"
        svc.write("bob", "d/nb.ipynb", big.replace("a", "b"), "print('bob')")
        svc.write("ada", "d/nb.ipynb", big, "print('ada')")
        adas = (home / "d" / "nb.ipynb").read_bytes()
        svc.script("ada", "wait.py", WAIT_FOR_GO)
        waiting = await svc.submit("ada", "wait.py")  # holds the slot: nothing else runs
        stop = threading.Event()

        (home / "d.link").symlink_to(bob / "d")

        def swap() -> None:
            # ada's real folder d and a link d -> bob's folder take turns, atomically
            while not stop.is_set():
                exchange(home / "d", home / "d.link")
                time.sleep(0.0005)

        swapper = threading.Thread(target=swap)
        swapper.start()
        answers = []
        try:
            async with svc.client("ada") as c:
                for _ in range(30):
                    r = await c.post("jobs", json={"path": "d/nb.ipynb", "flavor": "cpu"})
                    answers.append((r.status_code, r.json().get("message")))
        finally:
            stop.set()
            swapper.join()
        snapshots = {
            j.name: (j / "input.ipynb").read_bytes() if (j / "input.ipynb").exists() else None
            for j in (home / ".nbjobs" / "jobs").iterdir()
            if j.name != waiting["id"]
        }
        (home / "go").touch()
    finally:
        await stop_all(svc)

    bobs = [job for job, data in snapshots.items() if data is not None and b"bob" in data[-300:]]
    assert bobs == []
    assert [job for job, data in snapshots.items() if data != adas] == []  # none half-made
    statuses = [status for status, _ in answers]
    assert statuses.count(201) >= 1, answers  # the race was run, not only refused
    assert len(snapshots) == statuses.count(201)
    refusals = {message for status, message in answers if status != 201}
    assert refusals <= {
        "'d/nb.ipynb' leads outside your folder (through a link); copy the notebook into "
        "your folder and submit that copy",
        "'d/nb.ipynb' does not exist in your folder; save it first",
    }, answers


# -- what submit does before and around the copy --------------------------------------------


async def test_a_notebook_over_the_limit_is_a_413_saying_how_big(tmp_path):
    svc = await start_service(tmp_path, {"limits": {"notebook": "1MiB"}})
    try:
        svc.write("ada", "big.ipynb", "x = '" + "a" * 2_500_000 + "'")
        async with svc.client("ada") as c:
            r = await c.post("jobs", json={"path": "big.ipynb", "flavor": "cpu"})
    finally:
        await stop_all(svc)

    assert r.status_code == 413, r.text
    assert r.json()["message"] == (
        "the notebook 'big.ipynb' is 2.4 MiB, more than the 1 MiB this service takes; clear "
        "its outputs (Edit > Clear Outputs of All Cells) and save it, or ask your admin to "
        "raise limits.notebook"
    )
    assert not (svc.home("ada") / ".nbjobs").exists()


async def test_the_quota_is_checked_before_the_notebook_is_read(tmp_path):
    overrides = {"quotas": {"default": {"max_queued_jobs": 0}}}
    svc = await start_service(tmp_path, overrides)
    try:
        # A notebook that cannot be read without blocking: reading it first would hang.
        os.mkfifo(svc.home("ada") / "pipe.ipynb")
        async with svc.client("ada") as c:
            r = await c.post("jobs", json={"path": "pipe.ipynb", "flavor": "cpu"})
    finally:
        await stop_all(svc)

    assert r.status_code == 429, r.text


@contextlib.contextmanager
def small_disk(folder: Path, *, read_only: bool = False) -> Iterator[None]:
    """A 64 KiB file system of its own mounted on ``folder`` (root only)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    folder.mkdir(parents=True)
    options = "size=64k,mode=0700" + (",ro" if read_only else "")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


@pytest.fixture
def full_nbjobs_folder(tmp_path: Path) -> Iterator[Path]:
    """ada's .nbjobs on a disk with room for no notebook of 200 KB."""
    folder = tmp_path / "home" / "ada" / ".nbjobs"
    with small_disk(folder):
        yield folder


@pytest.fixture
def read_only_nbjobs_folder(tmp_path: Path) -> Iterator[Path]:
    """ada's .nbjobs on a read-only disk."""
    folder = tmp_path / "home" / "ada" / ".nbjobs"
    with small_disk(folder, read_only=True):
        yield folder


async def test_a_full_disk_at_submit_is_a_507_and_leaves_no_job_folder(
    tmp_path, full_nbjobs_folder
):
    svc = await start_service(tmp_path)
    try:
        svc.write("ada", "a.ipynb", "x = '" + "a" * 200_000 + "'")
        async with svc.client("ada") as c:
            r = await c.post("jobs", json={"path": "a.ipynb", "flavor": "cpu"})
            listed = (await c.get("jobs")).json()
    finally:
        await stop_all(svc)

    assert r.status_code == 507, r.text
    assert r.json()["message"] == (
        "your folder has no room for the job's copy of 'a.ipynb' (no space left on device); "
        "free some space (old outputs, .nbjobs/jobs of old jobs) and submit again"
    )
    assert tree(full_nbjobs_folder) == ["jobs"]  # and no half-made job folder in it
    assert listed["total"] == 0


async def test_a_read_only_folder_at_submit_is_a_403_with_a_sentence(
    tmp_path, read_only_nbjobs_folder
):
    svc = await start_service(tmp_path)
    try:
        svc.write("ada", "a.ipynb", "1")
        async with svc.client("ada") as c:
            r = await c.post("jobs", json={"path": "a.ipynb", "flavor": "cpu"})
    finally:
        await stop_all(svc)

    assert r.status_code == 403, r.text
    assert r.json()["message"] == (
        "the job service may not write in your folder (.nbjobs/jobs: read-only file system); "
        "ask your admin to check the storage"
    )


@pytest.mark.parametrize(
    ("code", "status", "words"),
    [
        (errno.ENOSPC, 507, "no room"),
        (errno.EDQUOT, 507, "no room"),
        (errno.EACCES, 403, "may not write in your folder"),
        (errno.EPERM, 403, "may not write in your folder"),
        (errno.EIO, 500, "could not write the job's files"),
    ],
)
def test_every_write_error_at_submit_is_a_sentence(code, status, words):
    from nbjobs.job_service.submit import snapshot_failed

    error = snapshot_failed(OSError(code, os.strerror(code), ".nbjobs/jobs/x"), "a.ipynb")

    assert error.status == status
    assert words in error.message
    assert os.strerror(code).lower() in error.message


async def test_submits_parse_big_notebooks_off_the_event_loop(tmp_path):
    svc = await start_service(tmp_path)
    try:
        cells = [f"x{i} = '{'a' * 20_000}'" for i in range(1_000)]  # ~20 MB, 1000 cells
        svc.write("ada", "big.ipynb", *cells)
        async with svc.client("ada") as c:
            submit = asyncio.ensure_future(
                c.post("jobs", json={"path": "big.ipynb", "flavor": "cpu"})
            )
            answered = 0
            while not submit.done():
                await c.get("health")
                answered += 1
            r = await submit
    finally:
        await stop_all(svc)

    assert r.status_code == 201, r.text
    assert answered >= 3  # the service answered others while it read and checked the notebook

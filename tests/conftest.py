"""What every test shares."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from typing import Any

import pytest
from nbjobs.job_runner.lean_imports import decline_format_checkers

# the test workers too: 1.5 s of CPU each for format checks (lean_imports.py), all but
# date-time's, with which schemathesis checks the API's answers against api/openapi.yaml
decline_format_checkers(keep=("rfc3339_validator",))


@pytest.fixture(autouse=True, scope="session")
def _control_groups_of_this_run() -> Iterator[None]:
    """The control groups this run's hubs and services made under its own parent
    (:data:`tests.machine.INSTANCE`), removed with it at the end, with what still runs
    in them (a job a stopped service left running, as it leaves one for the next to
    adopt): the machine keeps no trace of the run, and an install's or a demo's groups
    are never touched."""
    yield
    from tests.machine import INSTANCE, end_instance

    end_instance(INSTANCE)


@pytest.fixture(autouse=True, scope="module")
def _collect_what_the_module_left(request: pytest.FixtureRequest) -> Iterator[None]:
    """What a test file's module fixtures held (a hub, a service) becomes garbage as the
    file ends: collected then, everything it left included, before the next file's tests
    are again collected only among what they make themselves (below). A file without such
    fixtures left nothing that outlived its test (each test's garbage was collected as it
    ended): it is spared the full collection, a third of a second over everything a worker
    holds (130 of the 160 files)."""
    yield
    if not _holds_fixtures_beyond_a_test(request):
        return
    gc.unfreeze()
    gc.collect()
    gc.freeze()


def _holds_fixtures_beyond_a_test(request: pytest.FixtureRequest) -> bool:
    """Whether a test of this module used a fixture that lives longer than the test (a
    module's, a class's, a package's); a session's lives as long as the worker anyway."""
    for item in request.session.items:
        if getattr(item, "module", None) is not request.module:
            continue
        info = getattr(item, "_fixtureinfo", None)
        for name, defs in info.name2fixturedefs.items() if info else ():
            if name != "_collect_what_the_module_left" and any(
                d.scope in ("module", "class", "package") for d in defs
            ):
                return True
    return False


@pytest.fixture(autouse=True)
def _collect_what_the_test_left() -> Iterator[None]:
    """Collect garbage as each test ends, so that a socket or process a test forgot to
    close warns (an error here) in that test's teardown, not in whichever test happens
    to be running when the collector next runs. What survives is frozen: the next
    test's collection looks only at what that test makes (a full collection over
    everything a worker holds took 50 ms a test, a minute of CPU a run)."""
    yield
    gc.collect()
    gc.freeze()


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection imported (JupyterHub, nbformat, Playwright: some 300 000 objects)
    lives as long as the run: frozen, the collector skips it, and the collection after
    each test looks only at what tests made (0.15 s a test before, at load)."""
    gc.collect()
    gc.freeze()


#: test files that measure a CPU share against the clock: under pytest-xdist they run in
#: one worker, one after the other, so that neither's spinners take the other's CPU. The
#: rest need no such worker: their OS accounts, control-group parents and demos are named
#: per run (a prefix of their own, tests.machine.INSTANCE), and useradd, userdel and
#: groupadd wait their turn for /etc/passwd (glibc's lckpwdf, up to 15 s) instead of failing
MACHINE_WIDE = (
    "tests/job_service/test_job_cpu_share.py",  # spins on one CPU beside its jobs
    "tests/job_service/test_job_limits.py",  # a job's share under its flavor's CPU limit
)

#: folders whose test files share one hub and one browser (fixtures of package scope,
#: tests/lab/one_hub.py): one worker runs each folder whole, its files one after the other
ONE_HUB_FOLDERS = (
    "tests/lab/hub_notifications/",
    "tests/lab/hub_student/",
    "tests/lab/hub_telemetry/",
)


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``--dist loadgroup`` each test file runs whole in one worker (its module
    fixtures, a hub, the demo or a browser, start once), the files of each folder of
    :data:`ONE_HUB_FOLDERS` in one worker (their package fixtures start once), and the
    files in :data:`MACHINE_WIDE` all in one worker, one after the other.

    A scheduler of our own rather than ``xdist_group`` marks: pytest-xdist 3.8 groups
    marked tests by renaming their node ids, which pytest 9 ignores (its ids are
    structured), so every test went to either worker and a file's module fixtures
    started once in each: two demos at once on one set of OS accounts.
    """
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    # the files in the order pytest_collection_modifyitems put them: longest first
    config.option.loadscopereorder = False

    class FileOrMachineWide(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            if path in MACHINE_WIDE:
                return "machine-wide"
            return next((f for f in ONE_HUB_FOLDERS if path.startswith(f)), path)

    return FileOrMachineWide(config, log)


#: how long a test file takes, roughly, by where it is: the guides' commands (a demo's hub
#: and some forty jobs, one after the other: the run's longest file), then the files that
#: start a browser and a hub, then those that start a hub or a service's jobs (the
#: machine-wide files among them)
_LONGEST_FIRST = (
    "tests/docs/test_guide_commands.py",
    "tests/lab/",
    "tests/hub/",
    "tests/kubernetes/",
    "tests/job_service/",
)


def _expected_length(path: str) -> int:
    return next(
        (rank for rank, where in enumerate(_LONGEST_FIRST, 1) if path.startswith(where)),
        len(_LONGEST_FIRST) + 1,
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist the workers take files in this order: the longest first, so that
    none is left to start at the end while the other workers stand idle (the order of the
    tests within a file does not change)."""
    # a worker's own dist is "no" (pytest-xdist sets it so); it keeps loadgroup apart
    if config.getvalue("dist") != "loadgroup" and not getattr(config.option, "loadgroup", False):
        return
    items.sort(key=lambda item: _expected_length(item.nodeid.split("::", 1)[0]))


#: this process hands the tests to pytest-xdist workers and runs none itself
_HANDS_OUT = False


@pytest.hookimpl(trylast=True)  # after pytest-xdist's, which registers its session
def pytest_configure(config: pytest.Config) -> None:
    global _HANDS_OUT
    _HANDS_OUT = config.pluginmanager.hasplugin("dsession")


def pytest_runtest_logstart(nodeid: str, location: tuple[str, int | None, str]) -> None:
    """For ``scripts/suite_cpu.py --by-file``: this worker's current test file, in a file
    named by its pid, so that the CPU of every process under it is put to that file (not
    in the process handing out the tests, which hears of every test's start too); with
    ``--by-test`` there, the test it is on."""
    folder = os.environ.get("NBJOBS_SUITE_CPU_DIR")
    if folder and not _HANDS_OUT:
        with open(os.path.join(folder, str(os.getpid())), "w", encoding="utf-8") as f:
            f.write(nodeid if os.environ.get("NBJOBS_SUITE_CPU_BY_TEST") else location[0])

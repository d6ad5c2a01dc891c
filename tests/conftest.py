"""What every test shares."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _collect_what_the_test_left() -> Iterator[None]:
    """Collect garbage as each test ends, so that a socket or process a test forgot to
    close warns (an error here) in that test's teardown, not in whichever test happens
    to be running when the collector next runs."""
    yield
    gc.collect()


#: test files that change the machine itself (OS accounts: useradd locks /etc/passwd;
#: control groups; a CPU share measured against wall time): under pytest-xdist they all
#: run in one worker, one after the other
MACHINE_WIDE = (
    "tests/common/test_accounts.py",
    "tests/common/test_cgroups.py",
    "tests/docs/test_guide_commands.py",  # the demo's accounts (demo-ada, ...)
    "tests/hub/test_accounts_hub.py",
    "tests/hub/test_demo.py",
    "tests/hub/test_install.py",
    "tests/job_service/test_job_environment.py",
    "tests/job_service/test_job_limits.py",
    "tests/lab/test_lab_newcomer.py",  # runs `nbjobs demo`: its accounts too
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``--dist loadgroup`` each test file runs whole in one worker (its module
    fixtures, a hub or a browser, start once), and the files in :data:`MACHINE_WIDE`
    share one worker."""
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        path = item.nodeid.split("::", 1)[0]
        group = "machine-wide" if path in MACHINE_WIDE else path
        item.add_marker(pytest.mark.xdist_group(group))

"""One hub and one browser for the Lab tests of a student's day (the panel, the dialog,
her jobs and their lists), as `nbjobs demo` runs the hub: the two files share them, as
the one file they came from did (tests/conftest.py sends the folder whole to one worker).

No `starts_afresh` here: each test sets up the jobs it needs itself, and the lists'
tests look through the jobs their first test made.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ..conftest import HUB_JOBS_CONFIG, Hub, run_hub
from ..one_hub import browser, chromium, lab, playwright  # noqa: F401


@pytest.fixture(scope="package")
def hub(tmp_path_factory) -> Iterator[Hub]:
    """A JupyterHub with the local spawner and the nbjobs service, as `nbjobs demo` runs it."""
    yield from run_hub(tmp_path_factory.mktemp("hub"), HUB_JOBS_CONFIG)

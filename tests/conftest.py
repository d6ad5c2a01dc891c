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

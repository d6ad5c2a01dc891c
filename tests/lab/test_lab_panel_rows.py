"""The Jobs panel over a long list, in chromium without a server: the real ``JobsPanel``
and ``JobsModel`` over a stand-in API (the page ``bench/panel_bench_page.ts`` that
``bench/panel_bench.py`` measures). A page of a hundred jobs shows its first screen in
its first frame and every row, newest first, right after."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, sync_playwright

from .conftest import CHROMIUM, CHROMIUM_FLAGS, ROOT

sys.path.insert(0, str(ROOT / "bench"))
import panel_bench

#: labextension/src/panel.ts FIRST_ROWS
FIRST_ROWS = 15


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Page]:
    html = panel_bench.build_page(Path(tmp_path_factory.mktemp("panel-page")))
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1360, "height": 860})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(html.as_uri())
        page.wait_for_function("window.nbjobsBench !== undefined")
        yield page
        browser.close()
    assert not errors


def call(page: Page, name: str, *args: object) -> object:
    return page.evaluate(f"([a]) => window.nbjobsBench.{name}(...a)", [list(args)])


def test_a_long_list_shows_its_first_screen_at_once_then_every_row_in_order(page: Page):
    call(page, "mountPanel", 120, False)
    first_frame = call(page, "firstFrameRows")
    call(page, "allRows")
    ids = call(page, "rowIds")
    # the stand-in numbers jobs 120 down to 1 (hex ids), newest first, 100 a page
    newest_first = [f"{i:012x}" for i in range(120, 20, -1)]
    assert first_frame == FIRST_ROWS  # the rows a screen shows, not the whole page
    assert ids == newest_first  # then every row of the page, in order, each once

    # a poll redraws in place: the same rows, the same order
    call(page, "poll")
    assert call(page, "rowIds") == newest_first
    # the next page of older jobs joins below, in order
    call(page, "unmount")
    call(page, "mountPanel", 120, True)
    call(page, "allRows")
    assert call(page, "rowIds") == [f"{i:012x}" for i in range(120, 0, -1)]


def test_a_short_list_is_drawn_whole_in_its_first_frame(page: Page):
    call(page, "mountPanel", 9, False)
    assert call(page, "firstFrameRows") == 9
    assert call(page, "rowIds") == [f"{i:012x}" for i in range(9, 0, -1)]

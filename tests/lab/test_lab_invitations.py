"""Invitations in a browser, through a real hub with nbjobs install's login: the teacher
chooses her password with the invitation an admin made, creates a class on the
dashboard and is shown one link per new student; a student opens hers and chooses her
password; the teacher makes a new one for another."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests
from playwright.sync_api import Browser, Page, expect

from tests.hub.test_first_login import Hub, invitation_hub, try_login

from .conftest import ARTIFACTS, start_limit, user_context
from .steps import DASHBOARD, at_path


@pytest.fixture(scope="module")
def hub(tmp_path_factory) -> Iterator[Hub]:
    with invitation_hub(tmp_path_factory.mktemp("invitations")) as running:
        yield running


def choose_password(browser: Browser, link: str, user: str, password: str, then: str) -> Page:
    """A new browser of ``user``'s opens their invitation ``link`` and chooses the
    password; the page, logged in, at ``then``."""
    page = user_context(browser, height=1000).new_page()
    page.goto(f"{link}?next={then}")
    expect(page.locator("#invited-user")).to_have_text(user)
    page.fill("#password", password)
    page.fill("#password_again", password)
    page.screenshot(path=str(ARTIFACTS / f"52-invitation-page-{user}.png"))
    page.click("button[type='submit']", no_wait_after=True)
    # the whole way there (a password set, a login, the hub's OAuth for the dashboard),
    # with the limit of a login at the hub's own page (steps.user_logged_in)
    page.wait_for_url(at_path(then), timeout=start_limit())
    return page


def test_the_dashboard_shows_a_new_class_s_invitations_and_a_student_uses_hers(
    hub: Hub, chromium: Browser
):
    hub.add_user_if_missing("tess")  # named a teacher (the hub made her); the admin invites
    tess_link = hub.url + hub.invite("tess").json()["path"]
    teacher = choose_password(chromium, tess_link, "tess", "tess-own-secret", DASHBOARD)
    teacher.goto(hub.url + DASHBOARD + "#classes")
    expect(teacher.locator(".nbjobs-Who")).to_contain_text("tess (teacher)")

    form = teacher.locator("form[aria-label='Create a class']")
    form.locator("#nbjobs-class-name").fill("ml201")
    form.locator("textarea").fill("una\nvic\n")
    form.locator("button[type='submit']").click()

    expect(teacher.locator(".nbjobs-Status")).to_have_text("Created class ml201 with 2 student(s).")
    panel = teacher.locator("section[aria-label='Invitations to hand out']")
    expect(panel).to_contain_text("whoever opens it first chooses that account's password")
    rows = panel.locator("tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_contain_text("not mailed")
    teacher.screenshot(path=str(ARTIFACTS / "51-dashboard-invitations.png"), full_page=True)
    links = {
        rows.nth(i).locator("td").first.inner_text(): rows.nth(i).locator("a").get_attribute("href")
        for i in range(2)
    }
    assert sorted(links) == ["una", "vic"]
    assert try_login(hub.url, "una", "guessed-by-vic").status_code == 403

    una = choose_password(chromium, str(links["una"]), "una", "unas-own-secret", "/hub/home")
    expect(una.locator("body")).to_contain_text("una")
    assert try_login(hub.url, "una", "unas-own-secret").status_code == 302
    reopened = requests.get(str(links["una"]), timeout=30)
    assert "this invitation was used on" in reopened.text

    students = teacher.locator("section[aria-label='Class ml201'] table tbody tr")
    students.filter(has_text="vic").locator("button[data-action='invite']").click()
    expect(teacher.locator(".nbjobs-Status")).to_have_text(
        "A new invitation for vic; an earlier one stops working."
    )
    expect(panel.locator("tbody tr")).to_have_count(1)
    expect(panel.locator("tbody tr")).to_contain_text("vic")
    old = requests.get(str(links["vic"]), timeout=30)
    assert "a newer invitation for vic replaced this one" in old.text
    students.filter(has_text="una").locator("button[data-action='invite']").click()
    expect(teacher.locator(".nbjobs-Error")).to_contain_text("una chose a password already")

"""The dashboard's Users view in a real browser: the admin reads what becomes of a deleted
user's things, deletes one, and sees what was done; the user's schedule and settings are
gone from what the next person of the name sees.

The standalone job service (no hub: users are deleted only here), its dashboard behind
an admin's token.
"""

from __future__ import annotations

import nbformat
import requests
from playwright.sync_api import Playwright, expect

from nbjobs.storage import escape_username

from .conftest import ARTIFACTS, CHROMIUM, CHROMIUM_FLAGS, standalone_service


def test_the_admin_deletes_a_user_on_the_users_view_and_sees_what_was_done(
    playwright: Playwright, tmp_path
):
    folder = tmp_path / "home" / escape_username("ada")
    folder.mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(), folder / "nightly.ipynb")
    ada = {"Authorization": "token adas-token"}
    with standalone_service(
        tmp_path,
        {"the-admins-token": "root", "adas-token": "ada"},
        notifications={"webhook": {"allowed_hosts": ["hooks.example.org"]}},
    ) as url:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS
        )
        try:
            made = requests.post(
                url + "api/definitions",
                headers=ada,
                json={"path": "nightly.ipynb", "flavor": "cpu", "schedule": {"cron": "0 3 * * *"}},
                timeout=30,
            )
            assert made.status_code == 201, made.text
            saved = requests.put(
                url + "api/notifications/settings",
                headers=ada,
                json={"webhook": "https://hooks.example.org/ada", "on": ["failed"]},
                timeout=30,
            )
            assert saved.status_code == 200, saved.text

            page = browser.new_page(viewport={"width": 1360, "height": 900})
            page.goto(url)
            page.fill("#nbjobs-token", "the-admins-token")
            page.locator("button[type='submit']").click()
            page.locator("[data-view='users']").click()
            expect(page.locator(".nbjobs-Hint").first).to_contain_text(
                "users.on_delete: archive in nbjobs.yaml"
            )
            expect(page.locator("main")).to_contain_text("No user has been deleted.")
            page.fill("#nbjobs-delete-user", "ada")
            page.once("dialog", lambda dialog: dialog.accept())
            page.locator("[data-action='delete-user']").click()

            status = page.locator(".nbjobs-Status")
            expect(status).to_contain_text(
                "Deleted ada: 0 job(s), 1 definition(s), 1 notification setting(s) archived as "
                "ada/deleted-"
            )
            expect(status).to_contain_text("folder moved to")
            row = page.locator("table[aria-label='Deleted users'] tbody tr")
            expect(row).to_have_count(1)
            expect(row).to_contain_text("deleted by root through nbjobs")
            page.screenshot(path=str(ARTIFACTS / "60-admin-deletes-a-user.png"))

            # whoever is ada now finds no schedule, no settings, no file of hers
            listed = requests.get(url + "api/definitions", headers=ada, timeout=30).json()
            assert listed["definitions"] == []
            settings = requests.get(url + "api/notifications/settings", headers=ada, timeout=30)
            assert settings.json()["settings"] == []
            assert not (folder / "nightly.ipynb").exists()
        finally:
            browser.close()

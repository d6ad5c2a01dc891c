"""``nbjobs schedule``: job definitions from a terminal, against a real service process."""

from __future__ import annotations

import json

from . import test_cli

#: test_cli's module fixture: a real ``nbjobs service`` process and ada's folder
service = test_cli.service


def test_create_list_run_pause_and_delete_a_definition(service):
    test_cli.write(service, "daily.ipynb", "print(n)")

    made = test_cli.cli(
        service,
        *("schedule", "create", "daily.ipynb", "-f", "cpu", "--every", "weekday"),
        *("--at", "02:30", "--timezone", "Europe/Paris", "-p", "n", "3", "--json"),
    )
    assert made.returncode == 0, made.stderr
    definition = json.loads(made.stdout)
    assert definition["schedule"]["cron"] == "30 2 * * 1-5"
    assert definition["schedule"]["description"] == (
        "At 02:30 on Monday through Friday (Europe/Paris)"
    )
    assert definition["parameters"] == {"n": 3}

    listed = test_cli.cli(service, "schedule", "list")
    assert listed.returncode == 0, listed.stderr
    assert definition["id"] in listed.stdout
    assert "30 2 * * 1-5 Europe/Paris" in listed.stdout

    ran = test_cli.cli(service, "schedule", "run", definition["id"], "--json")
    assert ran.returncode == 0, ran.stderr
    run = json.loads(ran.stdout)
    assert (run["kind"], run["state"]) == ("manual", "submitted")
    waited = test_cli.cli(service, "status", run["job_id"], "--json")
    assert json.loads(waited.stdout)["parameters"] == {"n": 3}

    paused = test_cli.cli(service, "schedule", "pause", definition["id"])
    assert "paused" in paused.stdout
    runs = test_cli.cli(service, "schedule", "runs", definition["id"])
    assert run["job_id"] in runs.stdout
    assert "manual" in runs.stdout
    assert test_cli.cli(service, "schedule", "delete", definition["id"]).returncode == 0
    assert definition["id"] not in test_cli.cli(service, "schedule", "list").stdout


def test_bad_schedules_and_unknown_actions_are_refused_in_words(service):
    test_cli.write(service, "x.ipynb", "1")

    bad = test_cli.cli(service, "schedule", "create", "x.ipynb", "-f", "cpu", "--cron", "0 2 * *")
    zone = test_cli.cli(
        service,
        *("schedule", "create", "x.ipynb", "-f", "cpu", "--cron", "0 2 * * *"),
        *("--timezone", "Mars/Olympus"),
    )
    unknown = test_cli.cli(service, "schedule", "explode")
    both = test_cli.cli(
        service,
        *("schedule", "create", "x.ipynb", "-f", "cpu", "--cron", "0 2 * * *"),
        "--json",
        *("--every", "day"),
    )
    at = test_cli.cli(
        service, "schedule", "create", "x.ipynb", "-f", "cpu", "--every", "day", "--at", "noon"
    )

    assert bad.returncode == 5
    assert "has 4 field(s); a schedule has five" in bad.stderr
    assert zone.returncode == 5
    assert "'Mars/Olympus' is not an IANA time zone" in zone.stderr
    assert unknown.returncode == 2
    assert "unknown action 'explode'" in unknown.stderr
    # usage errors: exit 2 like every other nbjobs command, JSON when --json asked for it
    assert both.returncode == 2
    assert json.loads(both.stderr)["error"] == "give --cron or --every, not both"
    assert at.returncode == 2
    assert "--at 'noon' is not a time as HH:MM" in at.stderr


def test_a_schedule_starts_and_ends_when_asked(service):
    test_cli.write(service, "later.ipynb", "1")

    made = test_cli.cli(
        service,
        *("schedule", "create", "later.ipynb", "-f", "cpu", "--every", "day", "--at", "06:00"),
        *("--timezone", "UTC", "--start", "2031-01-10T00:00Z", "--end", "2031-02-01T00:00Z"),
        "--json",
    )
    ended = test_cli.cli(
        service,
        *("schedule", "create", "later.ipynb", "-f", "cpu", "--every", "day"),
        *("--end", "2020-01-01T00:00Z", "--json"),
    )

    assert made.returncode == 0, made.stderr
    definition = json.loads(made.stdout)
    assert definition["next_run_at"].startswith("2031-01-10T06:00:00")
    assert definition["schedule"]["end_at"].startswith("2031-02-01T00:00:00")
    assert json.loads(ended.stdout)["next_run_at"] is None  # over before it began


def test_notify_says_what_is_set_and_refuses_mail_the_service_cannot_send(service):
    shown = test_cli.cli(service, "notify")
    refused = test_cli.cli(service, "notify", "--email", "ada@uni.example")

    assert shown.returncode == 0, shown.stderr
    assert "nothing set: `nbjobs notify --email you@example.org`" in shown.stdout
    assert refused.returncode == 5
    assert "this service sends no mail (notifications.email is not set" in refused.stderr


def test_notify_reset_hands_a_definition_back_to_the_users_own_setting(service):
    test_cli.write(service, "told.ipynb", "1")
    made = test_cli.cli(service, "schedule", "create", "told.ipynb", "-f", "cpu", "--json")
    assert made.returncode == 0, made.stderr
    definition = json.loads(made.stdout)["id"]
    own = test_cli.cli(service, "notify", "--definition", definition, "--on", "succeeded")
    assert own.returncode == 0, own.stderr
    assert f"definition {definition}: succeeded -> nowhere" in own.stdout

    reset = test_cli.cli(service, "notify", "--definition", definition, "--reset")
    shown = test_cli.cli(service, "notify", "--json")
    again = test_cli.cli(service, "notify", "--definition", definition, "--reset")
    mixed = test_cli.cli(service, "notify", "--reset", "--on", "failed")

    assert reset.returncode == 0, reset.stderr
    assert reset.stdout.strip() == f"definition {definition} now follows your own setting"
    assert definition not in [s["definition_id"] for s in json.loads(shown.stdout)["settings"]]
    assert again.returncode == 5
    assert f"you have no notification setting for job definition '{definition}'" in again.stderr
    assert mixed.returncode == 2
    assert "--reset removes a setting" in mixed.stderr

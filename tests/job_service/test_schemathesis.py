"""schemathesis over the whole API of a real standalone job service.

Every operation in api/openapi.yaml gets generated requests, valid ones and
invalid ones (wrong types, missing fields, values out of range), first with an
admin's token and then with none. It fails on any 5xx, any status the spec does
not list for that operation, and any response whose body or content type is not
what the spec says. Bounded: a fixed number of examples per operation, derandomized
(the same requests every run), no shrinking.

Generating a request costs more CPU than sending it, so each operation's requests are
generated once per kind (positive, negative) and sent by every test that asks for that
kind: derandomized, hypothesis would draw the very same ones again for each user.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import http.cookiejar
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core import NOT_SET
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from .conftest import TOKENS, Service, start_service, stop_all

SPEC_FILE = Path(__file__).resolve().parents[2] / "api" / "openapi.yaml"
TOKEN = {v: k for k, v in TOKENS.items()}
ROOT = TOKEN["root"]
#: a class from nbjobs.yaml, for the class operations to find
CLASS = {"name": "ml101", "teachers": ["root", "ada"], "students": ["bob"]}
#: examples per operation and generation mode: 12 in every run (about 2 400 requests in
#: all; at 25 the file took a twentieth of the suite's CPU); NBJOBS_FUZZ_EXAMPLES=200
#: digs deeper, after a change to the API or before a release (docs/development.md)
EXAMPLES = int(os.environ.get("NBJOBS_FUZZ_EXAMPLES", "12"))
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    response_schema_conformance,
    content_type_conformance,
]


def bounded(examples: int) -> settings:
    return settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],  # no shrinking: report what failed, fast
        suppress_health_check=list(HealthCheck),
    )


class ServiceThread:
    """A job service (as in conftest) on an event loop of its own, for synchronous tests."""

    def __init__(self, root: Path, overrides: dict[str, Any]) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.svc: Service = self.run(start_service(root, overrides))

    def run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=120)

    def close(self) -> None:
        self.run(stop_all(self.svc))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=30)
        self.loop.close()


@pytest.fixture(scope="module")
def service(tmp_path_factory) -> Iterator[tuple[Service, list[str]]]:
    """The service, and the ids of finished jobs that generated requests may name."""
    running = ServiceThread(tmp_path_factory.mktemp("schemathesis"), {"classes": [CLASS]})
    svc = running.svc
    for user in ("root", "ada"):
        svc.write(user, "nb.ipynb")  # for generated submissions that name it
    svc.write("ada", "a.ipynb", "1")
    svc.write("ada", "fails.ipynb", "raise ValueError('on purpose')")
    ids = []
    with httpx.Client(base_url=svc.url + "api/", headers={"Authorization": f"token {ROOT}"}) as c:
        for path in ("a.ipynb", "fails.ipynb"):
            r = c.post("jobs", json={"path": path, "flavor": "cpu"}, params={"user": "ada"})
            if r.status_code != 201:  # root has no such notebook: submit as ada
                ada = {"Authorization": f"token {next(k for k, v in TOKENS.items() if v == 'ada')}"}
                r = c.post("jobs", json={"path": path, "flavor": "cpu"}, headers=ada)
            assert r.status_code == 201, r.text
            ids.append(r.json()["id"])
        deadline = time.monotonic() + 90
        while any(
            c.get(f"jobs/{i}").json()["state"] in ("queued", "starting", "running") for i in ids
        ):
            assert time.monotonic() < deadline
            time.sleep(0.2)
    # the notebook gone, a re-run of its job is refused (400) rather than run again
    (svc.home("ada") / "a.ipynb").unlink()
    (svc.home("ada") / "fails.ipynb").unlink()
    try:
        yield svc, ids
    finally:
        cancel_every_job(svc)
        running.close()


def cancel_every_job(svc: Service) -> None:
    """Cancel what generated submissions started, and wait until their processes are gone."""
    active = "queued,starting,running"
    with httpx.Client(base_url=svc.url + "api/", headers={"Authorization": f"token {ROOT}"}) as c:
        deadline = time.monotonic() + 60
        while jobs := c.get("jobs", params={"state": active, "limit": 500}).json()["jobs"]:
            for job in jobs:
                c.post(f"jobs/{job['id']}/cancel")
            assert time.monotonic() < deadline, jobs
            time.sleep(0.2)


#: operations that answer with a stream that stays open (server-sent events)
STREAMS = {"GET /events"}


@functools.cache
def generated(
    mode: GenerationMode, examples: int, only: frozenset[str] | None = None
) -> dict[str, list[tuple[Any, int]]]:
    """Every operation's (or those labelled in ``only``) ``examples`` generated requests,
    each with a number 0-3 that ``prepare`` picks by; drawn once per process and kind:
    the tests copy them before they change one."""
    schema = schemathesis.openapi.from_path(str(SPEC_FILE))
    found: dict[str, list[tuple[Any, int]]] = {}
    for result in schema.get_all_operations():
        operation = result.ok()
        if only is not None and operation.label not in only:
            continue
        if operation.label in STREAMS:
            continue  # open for minutes by design: tests/job_service/test_events.py
        found[operation.label] = _drawn(operation, mode, examples)
    return found


def _drawn(operation: Any, mode: GenerationMode, examples: int) -> list[tuple[Any, int]]:
    drawn: list[tuple[Any, int]] = []

    @bounded(examples)
    @given(case=operation.as_strategy(generation_mode=mode), pick=st.integers(0, 3))
    def draw(case: Any, pick: int) -> None:
        drawn.append((case, pick))

    draw()
    return drawn


def run_operations(
    base_url: str,
    mode: GenerationMode,
    examples: int,
    prepare: Callable[[Any, Any], None],
    checks: list[Any],
    only: set[str] | None = None,
    sent: int | None = None,
) -> tuple[list[str], Counter[int]]:
    """Every operation (or those labelled in ``only``), ``examples`` generated requests
    each (the first ``sent`` of them), sent as hypothesis would without shrinking (an
    operation's first failure ends its requests); the failures, and how many requests
    got each status."""
    cases = generated(mode, examples, None if only is None else frozenset(only))
    failures: list[str] = []
    statuses: Counter[int] = Counter()
    with requests.Session() as session:
        # one connection for all (kept alive), and no cookie carried from one to the next
        session.cookies.set_policy(http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))
        for label, drawn in cases.items():
            for case, pick in drawn[:sent]:
                case = fresh(case)
                try:
                    prepare(case, pick)
                    response = case.call_and_validate(
                        base_url=base_url, session=session, checks=checks, timeout=30
                    )
                # every operation is tried and all failures reported (schemathesis reports
                # its findings as a FailureGroup, a BaseExceptionGroup: not an Exception)
                except (KeyboardInterrupt, SystemExit):
                    raise
                except BaseException as exc:
                    failures.append(f"{label} ({mode.value}): {_described(exc)}")
                    break
                statuses[response.status_code] += 1
    return failures, statuses


def fresh(case: Any) -> Any:
    """A copy of a generated request, for ``prepare`` to change."""
    parts = {
        "path_parameters": case.path_parameters,
        "headers": case.headers,
        "cookies": case.cookies,
        "query": case.query,
        "meta": case._meta,  # schemathesis' record of what it generated, checks read it
    }
    if case.body is not NOT_SET:
        parts["body"] = case.body
    return type(case)(
        case.operation,
        case.method,
        case.path,
        media_type=case.media_type,
        multipart_content_types=case.multipart_content_types,
        **copy.deepcopy(parts),
    )


def _described(exc: BaseException) -> str:
    group = getattr(exc, "exceptions", None)  # an exception group: each of its findings
    return "; ".join(_described(e) for e in group) if group else str(exc)


@pytest.mark.parametrize(
    ("user", "mode"),
    [
        ("root", GenerationMode.POSITIVE),
        ("root", GenerationMode.NEGATIVE),
        ("ada", GenerationMode.POSITIVE),  # not an admin: the 403s
    ],
)
def test_no_request_gets_a_5xx_or_an_answer_the_spec_does_not_describe(service, user, mode):
    svc, ids = service

    def prepare(case: Any, pick: int) -> None:
        case.headers = {**(case.headers or {}), "Authorization": f"token {TOKEN[user]}"}
        # now and then a real job, class or notebook, so that requests get past the 404s
        # and 403s to what lies behind them (the jobs are never deleted: later operations
        # still find them)
        path = case.path_parameters or {}
        if "job_id" in path and pick < len(ids) and case.method != "DELETE":
            path["job_id"] = ids[pick]
        if "name" in path and pick == 0:
            path["name"] = CLASS["name"]
        if case.query and "class" in case.query and pick == 0:
            case.query["class"] = CLASS["name"]
        if case.operation.label == "POST /jobs" and isinstance(case.body, dict) and pick < 2:
            case.body["flavor"] = "cpu"
            if pick == 0:
                case.body["path"] = "nb.ipynb"

    failures, statuses = run_operations(svc.url + "api", mode, EXAMPLES, prepare, CHECKS)

    assert failures == [], "\n\n".join(failures)
    assert statuses.total() >= EXAMPLES * 15  # every operation was exercised
    if mode is GenerationMode.POSITIVE:  # and far enough to get every kind of answer
        assert {200, 201, 400, 404, 409} <= set(statuses), statuses
        assert user == "root" or 403 in statuses, statuses


def test_without_a_token_every_request_is_a_401(service):
    svc, _ = service

    def only_401(ctx: Any, response: Any, case: Any) -> bool:
        assert response.status_code == 401, f"{case.method} {case.path}: {response.status_code}"
        return True

    def prepare(case: Any, pick: int) -> None:
        headers = {k: v for k, v in (case.headers or {}).items() if k.lower() != "authorization"}
        case.headers = headers
        if case.query:
            case.query.pop("token", None)

    # the first five of the requests the admin's and ada's test sent, without a token
    failures, statuses = run_operations(
        svc.url + "api",
        GenerationMode.POSITIVE,
        EXAMPLES,
        prepare,
        [*CHECKS, schemathesis.check(only_401)],
        sent=5,
    )

    assert failures == [], "\n\n".join(failures)
    assert set(statuses) == {401}
    assert statuses.total() >= 5 * 15  # every operation, several times


#: dates at the ends of what a date-time can say, and past them: each must be a 400 or
#: taken, never a 500 (an OverflowError when a zone's offset is applied, say)
FAR_DATES = [
    "9999-12-31T23:59:59-14:00",
    "9999-12-01T00:00:00Z",
    "9999-12-31T23:59:59.999999+00:00",
    "0001-01-01T00:00:00+14:00",
    "0001-01-01T00:00:00Z",
    "1970-01-01T00:00:00Z",
    "2026-02-30T00:00:00Z",
    "2026-11-27T25:00:00Z",
]


def test_schedules_with_dates_at_the_ends_of_time_get_no_5xx(service):
    """The definitions' date fields (schedule.start_at, end_at) over generated requests,
    with dates at the edges of the calendar put in, on a valid path and flavor so that
    the dates are what is judged."""
    svc, _ = service
    with httpx.Client(base_url=svc.url + "api/", headers={"Authorization": f"token {ROOT}"}) as c:
        made = c.post(
            "definitions",
            json={"path": "nb.ipynb", "flavor": "cpu", "schedule": {"cron": "0 2 * * *"}},
        )
    assert made.status_code == 201, made.text
    definition = made.json()["id"]
    dates = iter(FAR_DATES * 100)

    def prepare(case: Any, pick: int) -> None:
        case.headers = {**(case.headers or {}), "Authorization": f"token {ROOT}"}
        if case.path_parameters and "definition_id" in case.path_parameters and pick < 3:
            case.path_parameters["definition_id"] = definition
        if not isinstance(case.body, dict):
            return
        if case.method == "POST" and pick < 3:
            case.body.update(path="nb.ipynb", flavor="cpu")
        schedule = case.body.get("schedule")
        if isinstance(schedule, dict) and pick < 3:
            schedule["cron"] = "0 2 * * *"
            schedule["start_at" if pick % 2 else "end_at"] = next(dates)
            if pick == 2:
                schedule["start_at"], schedule["end_at"] = next(dates), next(dates)

    failures, statuses = run_operations(
        svc.url + "api",
        GenerationMode.POSITIVE,
        60,
        prepare,
        CHECKS,
        only={"POST /definitions", "PATCH /definitions/{definition_id}"},
    )

    assert failures == [], "\n\n".join(failures)
    assert {200, 201, 400} <= set(statuses), statuses

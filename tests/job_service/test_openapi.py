"""api/openapi.yaml is the API's one description: the handlers must match it, both ways."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import jsonschema
import pytest
import requests
import yaml
from nbjobs.job_service.handlers import NotFoundHandler, routes
from openapi_core import OpenAPI
from openapi_core.contrib.requests import RequestsOpenAPIRequest, RequestsOpenAPIResponse

from nbjobs.config import Quota

from .conftest import TOKENS

SPEC_FILE = Path(__file__).resolve().parents[2] / "api" / "openapi.yaml"


@pytest.fixture(scope="module")
def spec() -> OpenAPI:
    return OpenAPI.from_file_path(str(SPEC_FILE))


def test_every_route_is_described_and_every_description_is_served(spec):
    served = set()
    for pattern, handler in routes("/"):
        if handler is NotFoundHandler:
            continue  # the JSON 404 for every other path: no resource to describe
        path = pattern.removeprefix("/api").rstrip("?").rstrip("/")
        served.add(re.sub(r"\(\?P<(\w+)>[^)]*\)", r"{\1}", path))
    described = set(yaml.safe_load(SPEC_FILE.read_text())["paths"])
    assert served == described


async def test_responses_match_the_spec(svc, spec):
    token = {v: k for k, v in TOKENS.items()}
    svc.write("ada", "a.ipynb", "print('hi')")
    svc.write("ada", "slow.ipynb", "import time; time.sleep(30)")
    checked: list[str] = []

    def call(user: str | None, method: str, path: str, **kwargs) -> requests.Response:
        headers = {"Authorization": f"token {token[user]}"} if user else {}
        request = requests.Request(method, svc.url + "api/" + path, headers=headers, **kwargs)
        prepared = request.prepare()
        with requests.Session() as s:
            response = s.send(prepared, timeout=60)
        openapi_request = RequestsOpenAPIRequest(prepared)
        if response.status_code < 400:
            spec.validate_request(openapi_request)
        spec.validate_response(openapi_request, RequestsOpenAPIResponse(response))
        checked.append(f"{method} {path} {response.status_code}")
        return response

    async def do(*args, **kwargs) -> requests.Response:
        return await asyncio.to_thread(call, *args, **kwargs)

    assert (await do("ada", "GET", "health")).status_code == 200
    assert (await do(None, "GET", "health")).status_code == 401
    assert (await do("ada", "GET", "flavors")).status_code == 200
    job = (await do("ada", "POST", "jobs", json={"path": "a.ipynb", "flavor": "cpu"})).json()
    assert (
        await do("ada", "POST", "jobs", json={"path": "../x.ipynb", "flavor": "cpu"})
    ).status_code == 400
    assert (
        await do("ada", "POST", "jobs", json={"path": "a.ipynb", "flavor": "staff-only"})
    ).status_code == 403
    await svc.wait("ada", job["id"])
    assert (await do("ada", "GET", f"jobs/{job['id']}")).status_code == 200
    assert (await do("bob", "GET", f"jobs/{job['id']}")).status_code == 404
    assert (await do("ada", "GET", "jobs", params={"state": "succeeded"})).status_code == 200
    assert (await do("ada", "GET", "jobs", params={"state": "nope"})).status_code == 400
    assert (await do("ada", "GET", f"jobs/{job['id']}/logs")).status_code == 200
    assert (await do("ada", "POST", f"jobs/{job['id']}/cancel")).status_code == 409
    rerun = await do("ada", "POST", f"jobs/{job['id']}/rerun")
    assert rerun.status_code == 201
    slow = (await do("ada", "POST", "jobs", json={"path": "slow.ipynb", "flavor": "cpu"})).json()
    assert (await do("ada", "PATCH", f"jobs/{slow['id']}", json={"priority": 1})).status_code == 403
    assert (await do("ada", "DELETE", f"jobs/{slow['id']}")).status_code == 409
    assert (await do("ada", "POST", f"jobs/{slow['id']}/cancel")).status_code == 200
    assert (await do("ada", "DELETE", f"jobs/{slow['id']}")).status_code == 204
    assert (await do("root", "GET", "usage")).status_code == 200
    assert (await do("ada", "GET", "jobs", params={"offset": 10**30})).status_code == 400
    assert (
        await do("ada", "GET", f"jobs/{job['id']}/logs", params={"offset": -1})
    ).status_code == 400
    # a re-run is checked like a submission: the notebook gone (400), over the GPU quota (403)
    svc.write("ada", "gone.ipynb", "1")
    gone = await svc.wait("ada", (await svc.submit("ada", "gone.ipynb", "gpu"))["id"])
    (svc.home("ada") / "gone.ipynb").unlink()
    assert (await do("ada", "POST", f"jobs/{gone['id']}/rerun")).status_code == 400
    svc.write("ada", "gone.ipynb", "1")
    config = svc.service.config
    no_gpus = config.quotas.model_copy(update={"default": Quota(max_running_gpus=0)})
    svc.service.config = config.model_copy(update={"quotas": no_gpus})
    assert (await do("ada", "POST", f"jobs/{gone['id']}/rerun")).status_code == 403
    svc.service.config = config
    assert len(checked) == 23


async def test_errors_off_the_described_paths_are_the_described_error(svc, spec):
    error = yaml.safe_load(SPEC_FILE.read_text())["components"]["schemas"]["Error"]
    svc.write("ada", "a.ipynb", "1")
    job = await svc.submit("ada", "a.ipynb")

    async with svc.client("ada") as c:
        not_allowed = await c.post(f"jobs/{job['id']}")
        not_found = await c.get("jobs/not-hex")

    assert not_allowed.status_code == 405
    assert not_allowed.headers["allow"] == "GET, DELETE, PATCH"
    assert not_found.status_code == 404
    for r in (not_allowed, not_found):
        assert r.headers["content-type"] == "application/json"
        jsonschema.validate(r.json(), error)

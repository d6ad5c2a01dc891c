"""api/openapi.yaml is the API's one description: the handlers must match it, both ways."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import jsonschema
import pytest
import requests
import yaml
from nbjobs.job_service import api_spec
from nbjobs.job_service.api_base import NotFoundHandler
from nbjobs.job_service.app import routes
from openapi_core import OpenAPI
from openapi_core.contrib.requests import RequestsOpenAPIRequest, RequestsOpenAPIResponse
from tornado.web import RequestHandler

from nbjobs import models

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


METHODS = ("get", "put", "post", "delete", "patch", "head", "options")


def operations(document: dict) -> list[tuple[str, str, dict, dict]]:
    """(path, method, the operation, the path's own entry) for every described operation."""
    return [
        (path, method, entry[method], entry)
        for path, entry in document["paths"].items()
        for method in METHODS
        if method in entry
    ]


def test_every_operation_lists_what_every_handler_can_answer():
    document = yaml.safe_load(SPEC_FILE.read_text())
    responses = document["components"]["responses"]
    missing = []
    for path, method, operation, entry in operations(document):
        codes = set(operation["responses"])
        # every request: the token first (401); any body over limits.request_body (413)
        wanted = {"401", "413"}
        if "requestBody" in operation:
            wanted.add("400")  # not UTF-8, not JSON, too deep, not an object, a bad field
        parameters = [*entry.get("parameters", []), *operation.get("parameters", [])]
        if any(p["in"] == "path" for p in parameters):
            wanted.add("404")  # no such job or class of the caller's
        if any(p["in"] == "query" and "minimum" in p["schema"] for p in parameters):
            wanted.add("400")  # a number out of range
        missing += [f"{method.upper()} {path}: {code}" for code in sorted(wanted - codes)]
        # every error is the one JSON shape
        for code, response in operation["responses"].items():
            if int(code) >= 400:
                assert set(response) == {"$ref"}, (path, method, code)
                shared = responses[response["$ref"].rsplit("/", 1)[1]]
                schema = shared["content"]["application/json"]["schema"]
                assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (path, method, code)
    assert missing == []


def test_every_path_offers_exactly_the_methods_its_handler_implements():
    document = yaml.safe_load(SPEC_FILE.read_text())
    for pattern, handler in routes("/"):
        if handler is NotFoundHandler:
            continue
        path = pattern.removeprefix("/api").rstrip("?").rstrip("/")
        path = re.sub(r"\(\?P<(\w+)>[^)]*\)", r"{\1}", path)
        described = {m.upper() for m in METHODS if m in document["paths"][path]}
        implemented = {
            m
            for m in handler.SUPPORTED_METHODS
            if getattr(handler, m.lower()) is not getattr(RequestHandler, m.lower())
        }
        assert described == implemented, path


def test_the_committed_file_is_what_the_operations_and_the_models_make():
    """api/openapi.yaml is generated (job_service/api_spec.py): the bodies' schemas come
    from the models the handlers read and send, the rest from api/operations.yaml."""
    assert api_spec.write(check=True) is True


def test_a_body_is_the_model_as_read_or_as_sent():
    schemas = yaml.safe_load(SPEC_FILE.read_text())["components"]["schemas"]
    # read: its limits, what may be left out, nothing else taken
    submit = schemas["SubmitRequest"]
    assert submit["required"] == ["path", "flavor"]
    assert submit["additionalProperties"] is False
    assert submit["properties"]["path"]["maxLength"] == 4096
    # sent: every field always there, its #: comment its description
    job = schemas["Job"]
    assert set(job["required"]) == set(models.Job.model_fields)
    assert job["properties"]["waiting_reason"]["description"].startswith("why a queued job")
    # an error carries problems only for a refused roster
    assert schemas["ErrorBody"]["required"] == ["message"]
    # every body the API reads takes no field it does not know
    document = yaml.safe_load(SPEC_FILE.read_text())
    read = {
        ref["$ref"].rsplit("/", 1)[1]
        for _, _, operation, _ in operations(document)
        if "requestBody" in operation
        for ref in [operation["requestBody"]["content"]["application/json"]["schema"]]
    }
    assert len(read) > 10
    assert {
        name for name in read if schemas[name].get("additionalProperties") is not False
    } == set()


def test_an_operation_naming_a_body_no_model_defines_is_refused(tmp_path, monkeypatch):
    operations = yaml.safe_load(api_spec.OPERATIONS.read_text())
    operations["paths"]["/health"]["get"]["responses"]["200"]["content"]["application/json"][
        "schema"
    ] = {"$ref": "#/components/schemas/Healthy"}
    source = tmp_path / "operations.yaml"
    source.write_text(yaml.safe_dump(operations))
    monkeypatch.setattr(api_spec, "OPERATIONS", source)
    with pytest.raises(ValueError, match="names bodies no API model defines: Healthy"):
        api_spec.build()


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
    # a search, a scope and the page after a job the client has; an admin's scope refused
    page = {"q": "a", "scope": "mine", "before": job["id"]}
    assert (await do("ada", "GET", "jobs", params=page)).status_code == 200
    assert (await do("ada", "GET", "jobs", params={"scope": "all"})).status_code == 403
    assert (await do("ada", "GET", "jobs", params={"q": "x" * 201})).status_code == 400
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
    # a re-run is checked like a submission: the notebook gone (400), a flavor not hers (403)
    svc.write("ada", "gone.ipynb", "1")
    gone = await svc.wait("ada", (await svc.submit("ada", "gone.ipynb", "gpu"))["id"])
    (svc.home("ada") / "gone.ipynb").unlink()
    assert (await do("ada", "POST", f"jobs/{gone['id']}/rerun")).status_code == 400
    svc.write("ada", "gone.ipynb", "1")
    staff_only = {"flavor": "staff-only"}
    assert (await do("ada", "POST", f"jobs/{gone['id']}/rerun", json=staff_only)).status_code == 403
    # classes: none here but nbjobs.yaml's, and this service runs without a hub
    assert (await do("ada", "GET", "classes")).status_code == 200
    assert (await do("ada", "GET", "jobs", params={"class": "ml101"})).status_code == 404
    assert (await do("ada", "GET", "classes/ml101")).status_code == 404
    assert (await do("ada", "POST", "classes", json={"name": "ml101"})).status_code == 403
    assert (await do("root", "POST", "classes", json={"name": "ml101"})).status_code == 409
    assert (await do("root", "DELETE", "classes/ml101")).status_code == 409
    roster = {"students": ["ada"]}
    assert (await do("root", "POST", "classes/ml101/students", json=roster)).status_code == 409
    assert (await do("root", "DELETE", "classes/ml101/students", json=roster)).status_code == 409
    # bad bytes and sizes
    assert (await do("ada", "POST", "jobs", data=b"\xff\xfe")).status_code == 400
    assert (await do("ada", "POST", "jobs", json=[1])).status_code == 400
    too_big = b"{" + b" " * svc.service.config.limits.request_body + b"}"
    assert (await do("ada", "POST", "jobs", data=too_big)).status_code == 413
    assert (await do("ada", "GET", "usage", data=too_big)).status_code == 413
    assert (await do("ada", "PATCH", f"jobs/{job['id']}", data=too_big)).status_code == 413
    assert len(checked) == 39


async def test_errors_off_the_described_paths_are_the_described_error(svc, spec):
    error = yaml.safe_load(SPEC_FILE.read_text())["components"]["schemas"]["ErrorBody"]
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


async def test_every_method_a_path_does_not_offer_is_a_405_naming_those_it_does(svc):
    document = yaml.safe_load(SPEC_FILE.read_text())
    error = document["components"]["schemas"]["ErrorBody"]
    svc.write("ada", "a.ipynb", "1")
    job = await svc.submit("ada", "a.ipynb")
    async with svc.client("ada") as c:
        made = await c.post("definitions", json={"path": "a.ipynb", "flavor": "cpu"})
    values = {
        "job_id": job["id"],
        "name": "ml101",
        "node": "gpu-0",
        "gpu": "0",
        "student": "ada",
        "definition_id": made.json()["id"],
        "account": "user:ada",
    }
    answered = []

    async with svc.client("ada") as c:
        for path, entry in document["paths"].items():
            offered = {m.upper() for m in METHODS if m in entry}
            url = path.lstrip("/").format(**values)
            for method in sorted({"GET", "POST", "PUT", "PATCH", "DELETE"} - offered):
                r = await c.request(method, url)
                assert r.status_code == 405, (method, path, r.text)
                assert set(r.headers["allow"].split(", ")) == offered, (method, path)
                jsonschema.validate(r.json(), error)
                answered.append(f"{method} {path}")

    assert len(answered) == 5 * len(document["paths"]) - len(operations(document))

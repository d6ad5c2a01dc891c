"""The shell commands the guides show run, as shown, against a real hub.

Every ```bash (sh, shell) block of a guide page either runs here or says, on the line
above it, why it cannot (``% not-run: needs a Kubernetes cluster``). The hub is the one
``nbjobs demo`` starts (its nbjobs.yaml, its users and their hello.ipynb), with a test
service that hands out the users' API tokens; docs/README.md says what a block may
assume and how ``% run-as:`` and ``% run-in:`` change who runs it and where.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests
import yaml
from nbjobs.programs.demo import Ports, demo_instance, prepare

from nbjobs.models import JobState
from nbjobs.storage import escape_username

from ..hub.hubproc import free_port, running_hub
from ..machine import end_instance

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SHELLS = {"bash", "sh", "shell"}
FENCE = re.compile(r"^(`{3,}|~{3,})\s*\{?([\w-]*)\}?\s*$")
MARKER = re.compile(r"^%\s*(not-run|run-as|run-in):\s*(.*?)\s*$")
USERS = ("ada", "bob", "tess", "admin")
#: the admin's class of the guides, beside the demo's (which is the hub's, tess's)
ADMIN_CLASS = {"name": "physics", "teachers": ["tess"], "students": ["frank"], "flavors": ["cpu"]}

ADMIN_SERVICE = """
c.JupyterHub.services.append({{"name": "docs-test", "api_token": {token!r}}})
c.JupyterHub.load_roles.append(
    {{"name": "docs-test-tokens", "services": ["docs-test"], "scopes": ["tokens", "admin:users"]}}
)
for entry in c.JupyterHub.services:
    if entry["name"] == "nbjobs":
        entry["command"] = [*entry["command"], "--JobServiceApp.lease_seconds={lease}"]
"""
#: how long the job service's dispatcher lease lasts unrenewed: the rehearsal of
#: docs/admin/database.md copies a backup made while the service runs and waits, as the
#: page says, for the backup's copy of the service's claim to run out (10 to 15 s at the
#: default 15 s, 2 to 3 s here)
LEASE_SECONDS = 3


@dataclass
class Block:
    page: Path
    line: int
    code: str
    markers: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def guide_pages() -> list[Path]:
    return sorted(
        p for p in DOCS.rglob("*.md") if "_build" not in p.parts and p.name != "README.md"
    )


def shell_blocks(page: Path) -> list[Block]:
    """The page's shell blocks with the markers on the lines just above each."""
    lines = page.read_text().splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence, lang = opening.groups()
        end = i + 1
        while end < len(lines) and not lines[end].startswith(fence):
            end += 1
        if lang in SHELLS:
            markers = {}
            above = i - 1
            while above >= 0 and MARKER.match(lines[above]):
                name, value = MARKER.match(lines[above]).groups()  # type: ignore[union-attr]
                markers[name] = value
                above -= 1
            blocks.append(Block(page, i + 1, "\n".join(lines[i + 1 : end]), markers))
        i = end + 1
    return blocks


def all_blocks() -> list[Block]:
    return [b for page in guide_pages() for b in shell_blocks(page)]


def test_the_guides_have_shell_blocks_and_each_runs_or_says_why():
    blocks = all_blocks()
    assert len(blocks) > 20
    unexplained = [str(b) for b in blocks if "not-run" in b.markers and not b.markers["not-run"]]
    assert unexplained == []
    unknown = [
        str(b)
        for b in blocks
        if b.markers.get("run-as", "ada") not in USERS
        or b.markers.get("run-in", "home") not in ("home", "service")
    ]
    assert unknown == []
    runnable = [b for b in blocks if "not-run" not in b.markers]
    assert len(runnable) > 10


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    folder = tmp_path_factory.mktemp("docs-hub")
    ports = Ports(*(free_port() for _ in range(6)))
    port = ports.port
    # accounts of this run's own, where it makes any: a demo running beside keeps its own
    prefix = f"g{uuid.uuid4().hex[:6]}-"
    config = prepare(folder, "127.0.0.1", ports, prefix=prefix)
    # a class an admin wrote into nbjobs.yaml, as docs/teacher/classes.md shows one
    settings = yaml.safe_load((folder / "nbjobs.yaml").read_text())
    settings["classes"] = [ADMIN_CLASS]
    (folder / "nbjobs.yaml").write_text(yaml.safe_dump(settings, sort_keys=False))
    token = os.urandom(16).hex()
    text = config.read_text() + ADMIN_SERVICE.format(token=token, lease=LEASE_SECONDS)
    try:
        with running_hub(folder, text, port) as url:
            tokens = {}
            for user in USERS:
                answer = requests.post(
                    f"{url}/hub/api/users/{user}/tokens",
                    headers={"Authorization": f"token {token}"},
                    json={"note": "docs test"},
                    timeout=30,
                )
                answer.raise_for_status()
                tokens[user] = answer.json()["token"]
            service = f"{url}/services/nbjobs/"
            job = finished_job(service, tokens["ada"])
            # a guide's `mktemp -d` makes its folder in the test's (TMPDIR), which goes with it
            (folder / "tmp").mkdir()
            yield Hub(folder, service, tokens, job)
    finally:
        # the control groups of its servers and jobs (its own instance, as a demo has)
        end_instance(demo_instance(prefix))


def finished_job(service: str, token: str) -> str:
    """A job of ada's that has succeeded: the guides' ``$JOB``."""
    headers = {"Authorization": f"token {token}"}
    body = {"path": "hello.ipynb", "flavor": "cpu", "parameters": {"steps": 20}}
    job = requests.post(service + "api/jobs", json=body, headers=headers, timeout=60).json()
    deadline = time.monotonic() + 180
    while job["state"] != "succeeded":
        assert job["state"] in ("queued", "starting", "running"), job
        assert time.monotonic() < deadline, job
        time.sleep(0.2)  # a look costs the service a millisecond; the job, seconds
        job = requests.get(service + f"api/jobs/{job['id']}", headers=headers, timeout=30).json()
    return str(job["id"])


@dataclass
class Hub:
    folder: Path
    service: str
    tokens: dict[str, str]
    job: str

    def run(self, block: Block) -> subprocess.CompletedProcess[str]:
        user = block.markers.get("run-as", "ada")
        home = self.folder / "home" / escape_username(user)
        cwd = self.folder if block.markers.get("run-in") == "service" else home
        env = {
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            "HOME": str(home),
            "LANG": "C.UTF-8",
            "NBJOBS_URL": self.service,
            "NBJOBS_TOKEN": self.tokens[user],
            "NBJOBS_ROOT": str(home),
            "JOB": self.job,
            "TMPDIR": str(self.folder / "tmp"),
        }
        return subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", block.code],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )

    def cancel_what_a_page_left(self) -> None:
        """Cancel the jobs a page's blocks submitted and left unfinished (its "to cancel"
        of 2000 steps, its three learning rates), so that the next page's ``--wait``
        does not queue behind them nor the run pay for them; ``$JOB`` has ended."""
        unfinished = ",".join(state.value for state in JobState if not state.final)
        for user, token in self.tokens.items():
            headers = {"Authorization": f"token {token}"}
            mine = requests.get(
                self.service + "api/jobs",
                params={"state": unfinished, "limit": 200},
                headers=headers,
                timeout=30,
            )
            assert mine.status_code == 200, mine.text
            for job in mine.json()["jobs"]:
                if job["user"] != user:  # an admin's list holds everyone's
                    continue
                cancelled = requests.post(
                    self.service + f"api/jobs/{job['id']}/cancel", headers=headers, timeout=30
                )
                # 409: it ended meanwhile
                assert cancelled.status_code in (200, 409), cancelled.text


RUNNABLE_PAGES = [
    page for page in guide_pages() if any("not-run" not in b.markers for b in shell_blocks(page))
]


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("page", RUNNABLE_PAGES, ids=lambda p: str(p.relative_to(DOCS)))
def test_a_guide_page_s_commands_run_as_shown(hub, page):
    for block in shell_blocks(page):
        if "not-run" in block.markers:
            continue
        done = hub.run(block)
        assert done.returncode == 0, (
            f"{block} ran as {block.markers.get('run-as', 'ada')} and exited "
            f"{done.returncode}:\n{block.code}\n"
            f"--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
        )
    hub.cancel_what_a_page_left()

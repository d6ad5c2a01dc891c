"""The chart, end to end: Helm installs it into the test API server; the job service runs
as its Deployment says (command, environment, nbjobs.yaml from its ConfigMap, the token
from its Secret); a real JupyterHub runs the hub config `nbjobs z2jh-values` prints; a
user submits a notebook through the hub, and the Job the service makes runs the real
runner, its command and environment as the pod would have them.

A cluster's networking is played by the test: the job service's Service name
(``nbjobs-job-service.nbjobs.svc:8787``) leads to a free port on loopback, and the hub's
to the hub's. The kubelet is played too: the pod's container runs here, with the pod's
folder (the user's, mounted at ``storage.mount_path``) as the user's folder on disk."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import nbformat
import pytest
import requests
import yaml

from tests.hub.hubproc import basics, free_port, running_hub

from .fake_apiserver import FakeApiServer
from .test_chart import CHART, DRIVER, HELM_PYTHON

T = TypeVar("T")
NAMESPACE, JOBS = "nbjobs", "gpu-jobs"


class FakeInThread:
    """The test API server on an event loop of its own, so that this test may block
    (on Helm, the hub, the runner) while it answers."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.fake = FakeApiServer()
        self.call(self.fake.start)

    def call(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``func`` run on the server's loop (a coroutine function awaited there)."""

        async def run() -> Any:
            result = func(*args, **kwargs)
            return await result if asyncio.iscoroutine(result) else result

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(60)

    def stop(self) -> None:
        self.call(self.fake.stop)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[FakeInThread]:
    server = FakeInThread()
    yield server
    server.stop()


def helm(kubeconfig: Path, verb: str, values: dict[str, Any]) -> Any:
    argv = [str(kubeconfig), NAMESPACE, verb, "nbjobs", str(CHART), json.dumps(values)]
    done = subprocess.run(
        [str(HELM_PYTHON), str(DRIVER), *argv],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def resolved_env(container: dict[str, Any], secret: Callable[[str, str], str]) -> dict[str, str]:
    """A container's environment as the kubelet gives it: values, and Secrets' keys."""
    env = {}
    for item in container.get("env") or []:
        if "value" in item:
            env[item["name"]] = item["value"]
        else:
            ref = item["valueFrom"]["secretKeyRef"]
            env[item["name"]] = secret(ref["name"], ref["key"])
    return env


def eventually(check: Callable[[], T], timeout: float = 60, what: str = "") -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.2)


def test_the_installed_service_runs_a_job_submitted_through_the_hub(cluster, tmp_path):
    fake = cluster.fake
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(fake.kubeconfig()))
    shared = tmp_path / "shared"  # the users' folders, as the service's volume holds them
    port, hub_port, service_port = free_port(), free_port(), free_port()
    values = {
        "config": {
            "storage": {
                "root": str(shared),
                "user_dir": "home/{username}",
                "volume": {"persistentVolumeClaim": {"claimName": "nbjobs-home"}},
            },
            "database": {"url": f"sqlite:///{tmp_path / 'jobs.sqlite'}"},
            "backend": {
                "kind": "kubernetes",
                "kubernetes": {"namespace": JOBS, "default_image": "example.org/nbjobs-job:1"},
            },
            "flavors": [{"name": "cpu", "gpus": 0, "cpu": "1", "time_limit": "10m"}],
        },
        "hub": {"apiUrl": f"http://127.0.0.1:{hub_port}/hub/api"},
    }
    helm(kubeconfig, "install", values)
    cluster.call(fake.add_node, "node-0", {}, {"cpu": "8", "memory": "32Gi", "pods": "110"})

    def secret(name: str, key: str) -> str:
        return base64.b64decode(fake.get("secrets", NAMESPACE, name)["data"][key]).decode()

    # the job service, as its Deployment runs it
    deployment = fake.get("deployments", NAMESPACE, "nbjobs-job-service")
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    [config_mount] = [m for m in container["volumeMounts"] if m["name"] == "config"]
    etc = tmp_path / "etc"
    etc.mkdir()
    config_map = fake.get("configmaps", NAMESPACE, "nbjobs-config")
    (etc / "nbjobs.yaml").write_text(config_map["data"]["nbjobs.yaml"])
    command = [str(etc / Path(a).name) if a.startswith(config_mount["mountPath"]) else a
               for a in container["command"]]  # fmt: skip
    assert command[:2] == ["nbjobs", "service"]
    env = resolved_env(container, secret)
    assert env["JUPYTERHUB_SERVICE_URL"] == "http://0.0.0.0:8787"
    env["JUPYTERHUB_SERVICE_URL"] = f"http://127.0.0.1:{service_port}"  # the pod's port
    service_log = (tmp_path / "service.log").open("w")
    service = subprocess.Popen(
        [sys.executable, "-m", "nbjobs.cli", *command[1:]],
        env={"PATH": os.environ["PATH"], "KUBECONFIG": str(kubeconfig), **env},
        stdout=service_log,
        stderr=subprocess.STDOUT,
    )
    try:
        # the hub, with what z2jh-values prints for these values
        given = tmp_path / "values.yaml"
        given.write_text(yaml.safe_dump(values))
        printed = subprocess.run(
            [sys.executable, "-m", "nbjobs.cli", "z2jh-values", "--release", "nbjobs", "-f",
             str(given)],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        z2jh = yaml.safe_load(printed)["hub"]
        hub_env = {
            name: value if isinstance(value, str) else secret(**value["valueFrom"]["secretKeyRef"])
            for name, value in z2jh["extraEnv"].items()
        }
        hub_env["NBJOBS_CONFIG"] = str(etc / "nbjobs.yaml")  # the ConfigMap, mounted
        assert hub_env["NBJOBS_SERVICE_URL_EXTERNAL"] == "http://nbjobs-job-service.nbjobs.svc:8787"
        hub_env["NBJOBS_SERVICE_URL_EXTERNAL"] = f"http://127.0.0.1:{service_port}"
        hub_env["KUBECONFIG"] = str(kubeconfig)
        admin_token = secrets.token_hex(16)
        config = basics(tmp_path, port, hub_port) + "\nimport os\n"
        config += "".join(f"os.environ[{k!r}] = {v!r}\n" for k, v in hub_env.items())
        config += z2jh["extraConfig"]["nbjobs"]
        config += f"""
c.Authenticator.allowed_users = {{"ada"}}
c.JupyterHub.services.append({{"name": "test-admin", "api_token": "{admin_token}"}})
c.JupyterHub.load_roles.append(
    {{"name": "token-maker", "services": ["test-admin"], "scopes": ["tokens", "admin:users"]}}
)
"""
        with running_hub(tmp_path, config, port) as url:
            admin = {"Authorization": f"token {admin_token}"}
            requests.post(f"{url}/hub/api/users/ada", headers=admin, timeout=30)
            made = requests.post(
                f"{url}/hub/api/users/ada/tokens", headers=admin, json={"note": "t"}, timeout=30
            )
            made.raise_for_status()
            ada = {"Authorization": f"token {made.json()['token']}"}
            api = f"{url}/services/nbjobs/api/"
            home = shared / "home" / "ada"
            home.mkdir(parents=True)
            nb = nbformat.v4.new_notebook()
            nb.cells = [nbformat.v4.new_code_cell("print(6 * 7)")]
            nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
            nbformat.write(nb, home / "answer.ipynb")

            submitted = requests.post(
                api + "jobs",
                headers=ada,
                json={"path": "answer.ipynb", "flavor": "cpu"},
                timeout=60,
            )
            assert submitted.status_code == 201, submitted.text
            job = submitted.json()
            name = f"nbjobs-{job['id']}"
            made_job = eventually(lambda: fake.get("jobs", JOBS, name), what="the Job")

            # the kubelet: the pod's container, its folder mapped to the user's
            spec = made_job["spec"]["template"]["spec"]
            [job_container] = spec["containers"]
            [mount] = job_container["volumeMounts"][:1]
            inside, outside = mount["mountPath"], str(shared / mount.get("subPath", ""))
            argv = [a.replace(inside, outside) for a in job_container["command"]]
            argv[0] = sys.executable
            pod_name = cluster.call(fake.start_pod, name, JOBS, "node-0")["metadata"]["name"]
            cluster.call(fake.run_pod, pod_name, JOBS)
            job_env = {
                e["name"]: e["value"] for e in job_container.get("env") or [] if "value" in e
            }
            ran = subprocess.run(
                argv,
                env={"PATH": os.environ["PATH"], "HOME": outside, **job_env},
                capture_output=True,
                text=True,
                timeout=120,
            )
            cluster.call(fake.finish_pod, pod_name, JOBS, exit_code=ran.returncode)

            def ended() -> dict[str, Any] | None:
                now = requests.get(api + f"jobs/{job['id']}", headers=ada, timeout=30).json()
                return now if now["state"] in ("succeeded", "failed") else None

            done = eventually(ended, what="the job's end")
            assert done["state"] == "succeeded", (done, ran.stdout, ran.stderr)
            result = nbformat.read(home / done["output_path"], as_version=4)
            assert result.cells[0].outputs[0]["text"] == "42\n"
    finally:
        service.terminate()
        service.wait(30)
        service_log.close()

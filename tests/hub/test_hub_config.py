"""hub_config: what one nbjobs.yaml turns into, and the ready examples admins start from."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from nbjobs.hub_config import CONFIG_FILE, configure
from traitlets.config import Config

EXAMPLES = Path(__file__).resolve().parents[2] / "hub_config" / "examples"


def roles(c: Config) -> dict[str, dict]:
    return {r["name"]: r for r in c.JupyterHub.load_roles}


def test_the_kubernetes_example_makes_a_hub_of_cpu_only_pods_and_the_job_service(monkeypatch):
    monkeypatch.delenv("NBJOBS_SERVICE_URL_EXTERNAL", raising=False)
    c = Config()

    configure(c, str(EXAMPLES / "kubernetes.yaml"))

    assert c.JupyterHub.spawner_class == "nbjobs.spawner.kubernetes.NbjobsKubeSpawner"
    assert c.NbjobsKubeSpawner.nbjobs_config_file == str(EXAMPLES / "kubernetes.yaml")
    assert c.NbjobsKubeSpawner.nbjobs_service_url.endswith("/services/nbjobs/")
    [service] = c.JupyterHub.services
    assert service["name"] == "nbjobs"
    assert service["command"][-2:] == ["--config", str(EXAMPLES / "kubernetes.yaml")]
    assert set(c.JupyterHub.custom_scopes) == {
        "custom:nbjobs:submit",
        "custom:nbjobs:admin",
        "custom:nbjobs:teach",
    }
    by_name = roles(c)
    assert by_name["nbjobs-teachers"]["groups"] == ["teachers"]
    assert "custom:nbjobs:teach" in by_name["nbjobs-teachers"]["scopes"]
    assert by_name["nbjobs-admins"]["groups"] == ["platform-admins"]
    # The service manages class groups; it gets no server access and no tokens of others.
    service_scopes = set(by_name["nbjobs-service"]["scopes"])
    assert {"admin:groups", "groups", "read:groups"} <= service_scopes
    assert not {"admin:servers", "servers", "tokens", "admin-ui"} & service_scopes


def test_the_service_may_run_outside_the_hub_with_its_own_token(monkeypatch):
    monkeypatch.setenv("NBJOBS_SERVICE_URL_EXTERNAL", "http://nbjobs-job-service:8787")
    monkeypatch.setenv("NBJOBS_SERVICE_API_TOKEN", "s3cret")
    c = Config()

    configure(c, str(EXAMPLES / "kubernetes.yaml"))

    [service] = c.JupyterHub.services
    assert service == {
        "name": "nbjobs",
        "display": False,
        "url": "http://nbjobs-job-service:8787",
        "api_token": "s3cret",
    }

    monkeypatch.delenv("NBJOBS_SERVICE_API_TOKEN")
    with pytest.raises(SystemExit, match="NBJOBS_SERVICE_API_TOKEN is not"):
        configure(Config(), str(EXAMPLES / "kubernetes.yaml"))


def test_a_bad_nbjobs_yaml_stops_the_real_hub_with_the_line_and_reason(tmp_path):
    bad = tmp_path / "nbjobs.yaml"
    bad.write_text("flavors:\n  - name: gpu\n    gpus: two\n")
    env = dict(os.environ, NBJOBS_CONFIG=str(bad))

    done = subprocess.run(
        [sys.executable, "-m", "jupyterhub", "-f", str(CONFIG_FILE)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode != 0
    assert f"{bad}, line 3: flavors.0.gpus" in done.stdout + done.stderr
    # nothing was started or half-written: no hub database, no cookie secret
    assert not (tmp_path / "jupyterhub.sqlite").exists()
    assert not (tmp_path / "jupyterhub_cookie_secret").exists()


def test_the_zero_to_jupyterhub_values_hand_the_hub_to_nbjobs(monkeypatch):
    values = yaml.safe_load((EXAMPLES / "kubernetes" / "values.yaml").read_text())
    for name, value in values["hub"]["extraEnv"].items():
        if isinstance(value, str):
            monkeypatch.setenv(name, value)
    monkeypatch.setenv("NBJOBS_CONFIG", str(EXAMPLES / "kubernetes.yaml"))
    monkeypatch.setenv("NBJOBS_SERVICE_API_TOKEN", "from-the-secret")
    c = Config()

    exec(values["hub"]["extraConfig"]["nbjobs"], {"c": c})  # what z2jh does with it

    assert c.JupyterHub.spawner_class == "nbjobs.spawner.kubernetes.NbjobsKubeSpawner"
    assert c.NbjobsKubeSpawner.nbjobs_service_url == "http://proxy-public/services/nbjobs/"
    assert c.JupyterHub.services[0]["url"] == "http://nbjobs-job-service:8787"
    singleuser = values["singleuser"]
    assert singleuser["extraPodConfig"]["automountServiceAccountToken"] is False
    assert "extraResource" not in singleuser


def test_the_job_service_manifests_are_valid_kubernetes():
    docs = list(yaml.safe_load_all((EXAMPLES / "kubernetes" / "job-service.yaml").read_text()))

    for doc in docs:
        kubernetes_validate.validate(doc, "1.37.0", strict=True)

    deployment = next(d for d in docs if d["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    rbac = yaml.safe_load_all((EXAMPLES / "kubernetes" / "rbac.yaml").read_text())
    accounts = [d["metadata"]["name"] for d in rbac if d and d["kind"] == "ServiceAccount"]
    assert pod["serviceAccountName"] in accounts  # the one rbac.yaml gives rights
    assert pod["securityContext"]["runAsNonRoot"] is True
    env = {e["name"] for e in pod["containers"][0]["env"]}
    assert {"JUPYTERHUB_API_URL", "JUPYTERHUB_API_TOKEN", "JUPYTERHUB_SERVICE_PREFIX"} <= env

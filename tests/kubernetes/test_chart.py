"""The Helm chart (charts/nbjobs), driven by Helm's own code (helm-sdkpy, in .venv/helm)
against the test API server, which holds every object it is sent to Kubernetes' schemas."""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from traitlets.config import Config

from nbjobs.chart import CHART, merged, values_schema
from nbjobs.config import parse_config

from .conftest import allowed_by_rbac
from .fake_apiserver import FakeApiServer

ROOT = Path(__file__).resolve().parents[2]
HELM_PYTHON = ROOT / ".venv" / "helm" / "bin" / "python"
DRIVER = Path(__file__).with_name("helm_driver.py")

#: values that use every part of the chart: Kueue, a flavor on two nodes (a JobSet),
#: metrics for the Prometheus operator and Grafana's sidecar
EVERYTHING = {
    "config": {
        "backend": {
            "kind": "kubernetes",
            "kubernetes": {
                "namespace": "gpu-jobs",
                "default_image": "registry.example.org/nbjobs-job:0.1.0",
                "kueue": {"queue_name": "gpu-jobs"},
                "multi_node": "jobset",
            },
        },
        "flavors": [
            {"name": "cpu", "gpus": 0},
            {"name": "a100-8x2", "gpus": 8, "nodes": 2, "gpu_type": "A100"},
        ],
    },
    "metrics": {"serviceMonitor": {"enabled": True}, "grafanaDashboard": {"enabled": True}},
    "jobService": {"extraArgs": ["--KubernetesBackend.api_connections=40"]},
}


class Helm:
    """Helm's actions on the chart, for a release in ``namespace`` of ``fake``'s cluster."""

    def __init__(self, fake: FakeApiServer, tmp: Path, namespace: str = "nbjobs") -> None:
        assert HELM_PYTHON.exists(), "run scripts/install.sh --dev (it makes .venv/helm)"
        self.kubeconfig = tmp / "kubeconfig"
        self.kubeconfig.write_text(yaml.safe_dump(fake.kubeconfig()))
        self.namespace = namespace

    async def __call__(
        self, verb: str, release: str = "nbjobs", values: dict[str, Any] | None = None
    ) -> tuple[int, Any, str]:
        """(exit status, the result, Helm's message): Helm runs in its own process while
        this test's event loop goes on serving the API server it calls."""
        argv = [str(self.kubeconfig), self.namespace, verb, release, str(CHART)]
        proc = await asyncio.create_subprocess_exec(
            str(HELM_PYTHON),
            str(DRIVER),
            *argv,
            json.dumps(values or {}),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 120)
        result = json.loads(out) if proc.returncode == 0 else None
        return proc.returncode or 0, result, err.decode()


@pytest.fixture
async def cluster(tmp_path: Path):
    fake = FakeApiServer()
    await fake.start()
    yield fake, Helm(fake, tmp_path)
    await fake.stop()


def of_release(
    fake: FakeApiServer, release: str = "nbjobs"
) -> dict[tuple[str, str | None, str], Any]:
    return {
        key: obj
        for key, obj in fake.objects.items()
        if (obj["metadata"].get("labels") or {}).get("app.kubernetes.io/instance") == release
    }


def rules(role: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {
        (verb, group, resource)
        for rule in role.get("rules") or []
        for group in rule.get("apiGroups") or []
        for resource in rule.get("resources") or []
        for verb in rule.get("verbs") or []
    }


#: the rule a multi-node Indexed Job needs for its headless Service (a JobSet's controller
#: makes its own)
RANKS_SERVICE = ("create", "", "services")
JOBSETS = {
    (verb, "jobset.x-k8s.io", "jobsets") for verb in ("create", "get", "list", "watch", "delete")
}


@pytest.mark.parametrize("multi_node", ["jobset", "indexed-job", None])
async def test_the_roles_grant_what_the_configuration_uses_and_no_more(cluster, multi_node):
    fake, helm = cluster
    kubernetes = {"namespace": "gpu-jobs", "multi_node": multi_node or "jobset"}
    flavors = [{"name": "cpu", "gpus": 0}]
    if multi_node:
        flavors.append({"name": "two-nodes", "gpus": 1, "nodes": 2})
    values = {
        "config": {"backend": {"kind": "kubernetes", "kubernetes": kubernetes}, "flavors": flavors},
        "rbac": {"readNodes": False},
    }
    status, _, said = await helm("install", values=values)
    assert status == 0, said

    role = rules(fake.get("roles", "gpu-jobs", "nbjobs-service"))
    assert (RANKS_SERVICE in role) == (multi_node == "indexed-job")
    assert (role >= JOBSETS) == (multi_node == "jobset")
    # neither nodes to read nor Kueue: no cluster-wide right at all
    assert [k for k in fake.objects if k[0] in ("clusterroles", "clusterrolebindings")] == []


async def test_the_guides_example_configuration_installs(cluster):
    """The Kubernetes guide's nbjobs.yaml (hub_config/examples/kubernetes.yaml) as the
    chart's config: installed, every object held to Kubernetes' schemas."""
    fake, helm = cluster
    example = yaml.safe_load((ROOT / "hub_config" / "examples" / "kubernetes.yaml").read_text())
    status, _, said = await helm("install", values={"config": example})
    assert status == 0, said
    stored = fake.get("configmaps", "nbjobs", "nbjobs-config")
    # Helm's merge of the chart's few defaults with it, key by key
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())["config"]
    assert yaml.safe_load(stored["data"]["nbjobs.yaml"]) == merged(defaults, example)
    deployment = fake.get("deployments", "nbjobs", "nbjobs-job-service")
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert (
        volumes["shared"]["persistentVolumeClaim"]
        == example["storage"]["volume"]["persistentVolumeClaim"]
    )


def test_the_values_schema_is_the_models(tmp_path):
    """values.schema.json is made from nbjobs.chart (config: nbjobs.yaml's own models);
    after a change to either, scripts/update_schema.py makes it again."""
    published = json.loads((CHART / "values.schema.json").read_text())
    assert published == values_schema(), "run python scripts/update_schema.py"
    assert published["$defs"]["NbjobsConfig"]["additionalProperties"] is False


async def test_the_chart_lints_without_a_warning(cluster):
    _, helm = cluster
    status, result, said = await helm("lint")
    assert status == 0, said
    assert result["Errors"] is None
    # Helm's severities: 1 information (an icon is recommended), 2 warning, 3 error
    assert [m for m in result["Messages"] if m["Severity"] > 1] == []


async def test_a_key_the_chart_does_not_know_fails_the_install_with_its_name(cluster):
    fake, helm = cluster
    wrong = {"config": {"flavours": []}, "jobService": {"replica": 2}}

    status, _, said = await helm("install", values=wrong)

    assert status == 1
    assert "at '/config': additional properties 'flavours' not allowed" in said
    assert "at '/jobService': additional properties 'replica' not allowed" in said
    assert of_release(fake) == {}  # nothing half-installed


async def test_install_upgrade_and_uninstall_keep_the_token_and_leave_nothing(cluster):
    fake, helm = cluster
    status, result, said = await helm("install", values=EVERYTHING)
    assert status == 0, said
    assert result["info"]["status"] == "deployed"
    assert "nbjobs z2jh-values --release nbjobs" in result["info"]["notes"]
    made = of_release(fake)
    kinds = sorted({kind for kind, _, _ in made})
    assert kinds == [
        "clusterrolebindings", "clusterroles", "configmaps", "deployments", "namespaces",
        "rolebindings", "roles", "secrets", "serviceaccounts", "servicemonitors", "services",
    ]  # fmt: skip

    # nbjobs.yaml in its ConfigMap is the config given, and loads as the service loads it
    stored = fake.get("configmaps", "nbjobs", "nbjobs-config")
    config = parse_config(stored["data"]["nbjobs.yaml"])
    assert [f.name for f in config.flavors] == ["cpu", "a100-8x2"]
    # the jobs' namespace enforces the restricted Pod Security level
    jobs_namespace = fake.get("namespaces", None, "gpu-jobs")
    assert (
        jobs_namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    )
    # the Role grants the calls the backend makes with JobSet and Kueue (rbac.yaml, which
    # the backend's tests hold to what it sends), in the jobs' namespace only
    role = rules(fake.get("roles", "gpu-jobs", "nbjobs-service"))
    needed_role, needed_cluster = allowed_by_rbac()
    assert needed_role - {RANKS_SERVICE} <= role, needed_role - role
    assert needed_cluster <= rules(fake.get("clusterroles", None, "nbjobs-nbjobs-read"))
    binding = fake.get("rolebindings", "gpu-jobs", "nbjobs-service")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "nbjobs-service", "namespace": "nbjobs"}
    ]
    # the service's pod: the ServiceAccount, the label z2jh's network policy wants, the token
    deployment = fake.get("deployments", "nbjobs", "nbjobs-job-service")
    pod = deployment["spec"]["template"]
    assert pod["metadata"]["labels"]["hub.jupyter.org/network-access-hub"] == "true"
    assert pod["spec"]["serviceAccountName"] == "nbjobs-service"
    assert deployment["spec"]["strategy"]["type"] == "Recreate"
    [container] = pod["spec"]["containers"]
    assert container["command"][-1] == "--KubernetesBackend.api_connections=40"
    token = fake.get("secrets", "nbjobs", "nbjobs-service-token")["data"]["token"]
    assert len(base64.b64decode(token)) == 64
    dashboard = fake.get("configmaps", "nbjobs", "nbjobs-grafana-dashboard")
    assert json.loads(dashboard["data"]["nbjobs.json"])["title"]

    # an upgrade to two replicas: a standby, rolled one at a time; the same token
    status, result, said = await helm(
        "upgrade", values={**EVERYTHING, "jobService": {"replicas": 2}}
    )
    assert status == 0, said
    assert result["version"] == 2
    deployment = fake.get("deployments", "nbjobs", "nbjobs-job-service")
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    assert fake.get("secrets", "nbjobs", "nbjobs-service-token")["data"]["token"] == token

    status, _, said = await helm("uninstall")
    assert status == 0, said
    assert of_release(fake) == {}
    assert fake.get("roles", "gpu-jobs", "nbjobs-service") is None
    releases = [k for k in fake.objects if k[0] == "secrets" and "sh.helm.release" in k[2]]
    assert releases == []


async def test_the_printed_z2jh_values_fit_the_release_without_an_edit(
    cluster, tmp_path, monkeypatch
):
    """nbjobs z2jh-values, given the files the release was installed with, names the
    release's own Secret, ConfigMap, Service and pods; the hub config it prints, run as
    z2jh runs it, makes the job service an external service with the release's token."""
    fake, helm = cluster
    status, _, said = await helm("install", values=EVERYTHING)
    assert status == 0, said
    given = tmp_path / "my-values.yaml"
    given.write_text(yaml.safe_dump(EVERYTHING))

    command = ["z2jh-values", "--release", "nbjobs", "-f", str(given)]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "nbjobs.cli", *command, stdout=asyncio.subprocess.PIPE
    )
    printed, _ = await proc.communicate()
    assert proc.returncode == 0
    z2jh = yaml.safe_load(printed)

    env = z2jh["hub"]["extraEnv"]
    secret_of = {
        name: fake.get("secrets", "nbjobs", value["valueFrom"]["secretKeyRef"]["name"])
        for name, value in env.items()
        if isinstance(value, dict)
    }
    assert set(secret_of) == {"NBJOBS_SERVICE_API_TOKEN", "NBJOBS_METRICS_TOKEN"}
    assert None not in secret_of.values()
    [volume] = z2jh["hub"]["extraVolumes"]
    config_map = fake.get("configmaps", "nbjobs", volume["configMap"]["name"])
    service = fake.get("services", "nbjobs", "nbjobs-job-service")
    port = service["spec"]["ports"][0]["port"]
    assert env["NBJOBS_SERVICE_URL_EXTERNAL"] == f"http://nbjobs-job-service.nbjobs.svc:{port}"
    deployment = fake.get("deployments", "nbjobs", "nbjobs-job-service")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    [egress] = z2jh["proxy"]["chp"]["networkPolicy"]["egress"]
    assert egress["to"][0]["podSelector"]["matchLabels"].items() <= pod_labels.items()
    assert egress["ports"] == [{"port": port}]

    # the hub's side, as z2jh starts it: the env from the Secrets, nbjobs.yaml mounted
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "nbjobs.yaml").write_text(config_map["data"]["nbjobs.yaml"])
    tokens = {
        name: base64.b64decode(secret["data"]["token"]).decode()
        for name, secret in secret_of.items()
    }
    for name, value in {**env, **tokens}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("NBJOBS_CONFIG", str(tmp_path / "etc" / "nbjobs.yaml"))
    c = Config()
    exec(z2jh["hub"]["extraConfig"]["nbjobs"], {"c": c})

    services = {s["name"]: s for s in c.JupyterHub.services}
    assert services["nbjobs"]["url"] == env["NBJOBS_SERVICE_URL_EXTERNAL"]
    # the hub knows the service by the token the service's pod is given
    service_env = {
        e["name"]: e for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    ref = service_env["JUPYTERHUB_API_TOKEN"]["valueFrom"]["secretKeyRef"]
    assert ref["name"] == env["NBJOBS_SERVICE_API_TOKEN"]["valueFrom"]["secretKeyRef"]["name"]
    assert services["nbjobs"]["api_token"] == tokens["NBJOBS_SERVICE_API_TOKEN"]
    assert service_env["JUPYTERHUB_SERVICE_PREFIX"]["value"] == "/services/nbjobs/"
    # Prometheus' token reads metrics and nothing else
    assert services["nbjobs-metrics"]["api_token"] == tokens["NBJOBS_METRICS_TOKEN"]
    [metrics_role] = [r for r in c.JupyterHub.load_roles if r["name"] == "nbjobs-metrics"]
    assert metrics_role["scopes"] == ["custom:nbjobs:metrics"]


@pytest.mark.parametrize("image", ["hub", "notebook", "job"])
def test_each_images_dockerfile_passes_hadolint(image):
    """No image can be built here (no registry of base images): each Dockerfile passes
    hadolint at its strictest, and names the nbjobs release it installs."""
    dockerfile = ROOT / "images" / image / "Dockerfile"
    hadolint = ROOT / ".venv" / "helm" / "bin" / "hadolint"
    assert hadolint.exists(), "run scripts/install.sh --dev (it installs hadolint)"
    linted = subprocess.run(
        [str(hadolint), "--failure-threshold", "info", "--no-color", str(dockerfile)],
        capture_output=True,
        text=True,
    )
    assert linted.returncode == 0, linted.stdout + linted.stderr
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert f"ARG NBJOBS_VERSION={chart['appVersion']}" in dockerfile.read_text()


def test_the_servers_network_rules_become_z2jhs_policy_of_the_notebook_pods():
    """A policy only ever allows: z2jh's own policy of the notebook pods lets the
    internet in unless its allow-rules are off, so z2jh-values turns them off and gives
    it nbjobs.yaml's network.servers rules (what nbjobs network-policies prints)."""
    from nbjobs.chart import ChartValues, release_values
    from nbjobs.network import servers_policy
    from nbjobs.z2jh import z2jh_values

    plain = ChartValues.model_validate(release_values([]))
    assert "networkPolicy" not in z2jh_values(plain, "nbjobs", "nbjobs", "0.1.0")["singleuser"]

    rules = {"servers": {"egress": [{"cidr": "10.20.0.0/16", "ports": [443]}]}}
    values = release_values([])
    values["config"]["network"] = rules
    fenced = ChartValues.model_validate(values)
    policy = z2jh_values(fenced, "nbjobs", "nbjobs", "0.1.0")["singleuser"]["networkPolicy"]
    assert policy["enabled"] is True
    assert set(policy["egressAllowRules"].values()) == {False}
    assert policy["egress"] == servers_policy(fenced.config, "nbjobs")["spec"]["egress"]
    assert {
        "to": [{"ipBlock": {"cidr": "10.20.0.0/16"}}],
        "ports": [{"protocol": "TCP", "port": 443}],
    } in policy["egress"]


async def test_the_example_manifests_are_what_the_chart_makes(cluster):
    """hub_config/examples/kubernetes/job-service.yaml (the guide's "without Helm") is
    the chart's job service for the guide's configuration, field for field where it
    matters: the container, its environment, ports, probes, security and volumes."""
    fake, helm = cluster
    example = yaml.safe_load((ROOT / "hub_config" / "examples" / "kubernetes.yaml").read_text())
    status, _, said = await helm("install", values={"config": example})
    assert status == 0, said
    by_hand = {
        d["kind"]: d
        for d in yaml.safe_load_all(
            (ROOT / "hub_config" / "examples" / "kubernetes" / "job-service.yaml").read_text()
        )
        if d
    }
    made = fake.get("deployments", "nbjobs", "nbjobs-job-service")["spec"]["template"]
    hand = by_hand["Deployment"]["spec"]["template"]
    [container], [hand_container] = made["spec"]["containers"], hand["spec"]["containers"]
    for key in ("command", "env", "ports", "readinessProbe", "livenessProbe", "resources",
                "securityContext", "volumeMounts"):  # fmt: skip
        assert hand_container.get(key) == container.get(key), (key, container.get(key))
    for key in ("serviceAccountName", "securityContext", "volumes"):
        assert hand["spec"].get(key) == made["spec"].get(key), (key, made["spec"].get(key))
    network = "hub.jupyter.org/network-access-hub"
    assert hand["metadata"]["labels"][network] == made["metadata"]["labels"][network]
    service = fake.get("services", "nbjobs", "nbjobs-job-service")
    assert by_hand["Service"]["spec"]["ports"] == service["spec"]["ports"]


def test_the_example_z2jh_values_hold_what_z2jh_values_prints():
    """hub_config/examples/kubernetes/values.yaml (z2jh's values, without Helm's nbjobs
    chart or with it) holds every value `nbjobs z2jh-values` prints for the release
    "nbjobs" of the guide's configuration (and more of the admin's own: the notebook
    image, its size, the user scheduler)."""
    from nbjobs.chart import ChartValues, release_values
    from nbjobs.z2jh import z2jh_values

    values = release_values([])
    values["config"] = yaml.safe_load(
        (ROOT / "hub_config" / "examples" / "kubernetes.yaml").read_text()
    )
    values["image"] = {**values["image"], "repository": "registry.example.org/nbjobs-hub"}
    printed = z2jh_values(ChartValues.model_validate(values), "nbjobs", "nbjobs", "0.1.0")
    example = yaml.safe_load(
        (ROOT / "hub_config" / "examples" / "kubernetes" / "values.yaml").read_text()
    )

    def held(part: Any, whole: Any, where: str) -> None:
        if isinstance(part, dict):
            assert isinstance(whole, dict), where
            for key, value in part.items():
                assert key in whole, f"{where}.{key}"
                held(value, whole[key], f"{where}.{key}")
        else:
            assert part == whole, where

    held(printed, example, "values")

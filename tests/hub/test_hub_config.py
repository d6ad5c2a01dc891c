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
    assert c.NbjobsKubeSpawner.nbjobs_service_url.endswith("{base_url}services/nbjobs/")
    [service] = c.JupyterHub.services
    assert service["name"] == "nbjobs"
    assert service["command"][-2:] == ["--config", str(EXAMPLES / "kubernetes.yaml")]
    assert set(c.JupyterHub.custom_scopes) == {
        "custom:nbjobs:submit",
        "custom:nbjobs:admin",
        "custom:nbjobs:teach",
    }
    by_name = roles(c)
    # teachers.groups and admin.groups are the job service's to read (it never counts a
    # class's group): the hub gives nbjobs' roles to named users only, none here
    assert "nbjobs-teachers" not in by_name
    assert "nbjobs-admins" not in by_name
    # The service manages class groups; it gets no server access and no tokens of others.
    service_scopes = set(by_name["nbjobs-service"]["scopes"])
    assert {"admin:groups", "groups", "read:groups"} <= service_scopes
    assert not {"admin:servers", "servers", "tokens", "admin-ui"} & service_scopes


def test_a_user_role_the_admin_defined_gains_the_nbjobs_scopes(monkeypatch):
    """z2jh's hub.loadRoles may define "user" before configure() runs: JupyterHub refuses a
    role defined twice, so nbjobs adds its scopes to the admin's role."""
    monkeypatch.delenv("NBJOBS_SERVICE_URL_EXTERNAL", raising=False)
    c = Config()
    c.JupyterHub.load_roles = [{"name": "user", "scopes": ["self", "read:groups"]}]

    configure(c, str(EXAMPLES / "kubernetes.yaml"))

    users = [r for r in c.JupyterHub.load_roles if r["name"] == "user"]
    assert len(users) == 1
    assert users[0]["scopes"] == [
        "self",
        "read:groups",
        "custom:nbjobs:submit",
        "access:services!service=nbjobs",
    ]


def test_the_hub_gives_no_role_to_a_group_and_classes_get_groups_of_their_own(
    monkeypatch, tmp_path
):
    """A hub role listing a group is granted by JupyterHub to whatever hub group carries
    that name, a class's too: nbjobs' roles list named users only (and an empty group
    list, so that a hub started before drops the groups it had), classes become groups in
    their own namespace, and a role defined before configure() that names a class's group
    stops the hub with a sentence."""
    monkeypatch.delenv("NBJOBS_SERVICE_URL_EXTERNAL", raising=False)
    path = tmp_path / "nbjobs.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "admin": {"users": ["ada"], "groups": ["staff"]},
                "teachers": {"groups": ["teachers"]},
                "classes": [{"name": "ml101", "teachers": ["tess"], "students": ["stu"]}],
            }
        )
    )
    c = Config()

    configure(c, str(path))

    by_name = roles(c)
    assert by_name["nbjobs-admins"]["users"] == ["ada"]
    assert by_name["nbjobs-admins"]["groups"] == []
    assert by_name["nbjobs-teachers"]["users"] == ["tess"]
    assert by_name["nbjobs-teachers"]["groups"] == []
    assert c.JupyterHub.load_groups == {"nbjobs-class-ml101": {"users": ["stu", "tess"]}}

    c = Config()
    c.JupyterHub.load_roles = [
        {"name": "graders", "groups": ["nbjobs-class-ml101"], "scopes": ["admin:users"]}
    ]
    with pytest.raises(SystemExit) as stopped:
        configure(c, str(path))
    assert str(stopped.value) == (
        "nbjobs: the hub role 'graders' names group 'nbjobs-class-ml101', the hub group of "
        "class 'ml101'; a class grants nothing, so no role may be given to it. Give the role "
        "to a group of your own (not starting with 'nbjobs-class-') or to named users"
    )


def test_the_service_may_run_outside_the_hub_with_its_own_token(monkeypatch):
    monkeypatch.setenv("NBJOBS_SERVICE_URL_EXTERNAL", "http://nbjobs-job-service.nbjobs.svc:8787")
    monkeypatch.setenv("NBJOBS_SERVICE_API_TOKEN", "s3cret")
    c = Config()

    configure(c, str(EXAMPLES / "kubernetes.yaml"))

    [service] = c.JupyterHub.services
    assert service == {
        "name": "nbjobs",
        "display": True,  # its page is the dashboard, in the hub's Services menu
        "oauth_no_confirm": True,
        "oauth_client_allowed_scopes": [
            "custom:nbjobs:submit",
            "custom:nbjobs:admin",
            "custom:nbjobs:teach",
        ],
        "url": "http://nbjobs-job-service.nbjobs.svc:8787",
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
    assert c.NbjobsKubeSpawner.nbjobs_service_url == "http://proxy-public{base_url}services/nbjobs/"
    assert c.JupyterHub.services[0]["url"] == "http://nbjobs-job-service.nbjobs.svc:8787"
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
    # z2jh's hub NetworkPolicy admits only pods labelled so: without it no token checks out
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert labels["hub.jupyter.org/network-access-hub"] == "true"


def _kubectl_lines(*files: Path) -> list[str]:
    """The kubectl commands the example files tell an admin to run (their comments)."""
    return [
        line.lstrip("# ").strip()
        for file in files
        for line in file.read_text().splitlines()
        if line.lstrip().startswith("#") and "kubectl " in line
    ]


def test_the_kubernetes_examples_fit_together():
    """The ServiceAccount lives where the job service's Deployment runs; its Role and
    RoleBinding where nbjobs.yaml sends the Jobs; the binding names that account."""
    k8s = EXAMPLES / "kubernetes"
    rbac = [d for d in yaml.safe_load_all((k8s / "rbac.yaml").read_text()) if d]
    service = [d for d in yaml.safe_load_all((k8s / "job-service.yaml").read_text()) if d]
    nbjobs = yaml.safe_load((EXAMPLES / "kubernetes.yaml").read_text())
    for doc in rbac:
        kubernetes_validate.validate(doc, "1.37.0", strict=True)

    def one(docs: list[dict], kind: str) -> dict:
        [found] = [d for d in docs if d["kind"] == kind]
        return found

    deployment = one(service, "Deployment")
    account = one(rbac, "ServiceAccount")
    role, binding = one(rbac, "Role"), one(rbac, "RoleBinding")
    home = deployment["metadata"]["namespace"]
    jobs = nbjobs["backend"]["kubernetes"]["namespace"]

    assert account["metadata"]["namespace"] == home
    assert (
        deployment["spec"]["template"]["spec"]["serviceAccountName"] == account["metadata"]["name"]
    )
    assert one(service, "Service")["metadata"]["namespace"] == home
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == jobs
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    subject = {
        "kind": "ServiceAccount",
        **{k: account["metadata"][k] for k in ("name", "namespace")},
    }
    assert binding["subjects"] == [subject]
    assert one(rbac, "ClusterRoleBinding")["subjects"] == [subject]
    assert (
        one(rbac, "ClusterRoleBinding")["roleRef"]["name"]
        == one(rbac, "ClusterRole")["metadata"]["name"]
    )

    # The commands in the comments work as written: rbac.yaml spans two namespaces, so it
    # is applied without -n (kubectl refuses a -n that differs from an object's own);
    # what the Deployment mounts is created in the Deployment's namespace.
    commands = _kubectl_lines(
        k8s / "rbac.yaml", k8s / "job-service.yaml", EXAMPLES / "kubernetes.yaml"
    )
    applies = [c for c in commands if " apply " in c and "rbac.yaml" in c]
    assert applies
    assert not [c for c in applies if " -n " in f" {c} " or "--namespace" in c]
    assert f"kubectl create namespace {jobs}" in commands
    pod = deployment["spec"]["template"]["spec"]
    secret = next(
        e["valueFrom"]["secretKeyRef"]["name"]
        for e in pod["containers"][0]["env"]
        if e["name"] == "JUPYTERHUB_API_TOKEN"
    )
    config_map = next(v["configMap"]["name"] for v in pod["volumes"] if "configMap" in v)
    for made in (f"create secret generic {secret} ", f"create configmap {config_map} "):
        [command] = [c for c in commands if made in c]
        assert command.startswith(f"kubectl -n {home} ")

"""The Kubernetes spawner's pods, checked as manifests against Kubernetes' own schema."""

from __future__ import annotations

from types import SimpleNamespace

import kubernetes_validate
import pytest
import yaml
from kubernetes_asyncio.client import ApiClient
from nbjobs.spawner.kubernetes import NbjobsKubeSpawner, gpu_requests
from tornado import web

NBJOBS_YAML = {
    "storage": {
        "root": "/srv/home",
        "user_dir": "home/{username}",
        "mount_path": "/home/jovyan",
        "volume": {"nfs": {"server": "nfs.example.org", "path": "/export"}},
        "uid": 1000,
        "gid": 100,
    },
    "profiles": [
        {"name": "small", "display_name": "Small", "cpu": "1", "memory": "2Gi", "default": True},
        {"name": "large", "cpu": "4", "memory": "16Gi", "groups": ["staff"]},
    ],
}


@pytest.fixture
async def make_spawner(tmp_path):
    config = tmp_path / "nbjobs.yaml"
    config.write_text(yaml.safe_dump(NBJOBS_YAML))
    made = []

    def make(name="ada.lovelace", groups=(), **traits):
        user = SimpleNamespace(
            name=name,
            id=1,
            url=f"/user/{name}/",
            admin=False,
            groups=[SimpleNamespace(name=g) for g in groups],
        )
        spawner = NbjobsKubeSpawner(
            _mock=True,
            user=user,
            nbjobs_config_file=str(config),
            nbjobs_service_url="http://nbjobs.nbjobs.svc:8787/services/nbjobs/",
            **traits,
        )
        made.append(spawner)
        return spawner

    yield make
    for spawner in made:  # KubeSpawner opens an API client at once; close it
        await spawner.api.api_client.close()


async def as_dict(pod):
    async with ApiClient() as client:
        return client.sanitize_for_serialization(pod)


async def test_the_pod_is_cpu_only_and_mounts_the_users_folder(make_spawner):
    spawner = make_spawner()

    manifest = await as_dict(await spawner.get_pod_manifest())

    kubernetes_validate.validate(manifest, "1.37.0", strict=True)
    container = manifest["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"] == "void"
    assert env["CUDA_VISIBLE_DEVICES"] == ""
    assert env["NBJOBS_URL"] == "http://nbjobs.nbjobs.svc:8787/services/nbjobs/"
    assert env["NBJOBS_ROOT"] == "/home/jovyan"
    limits = container.get("resources", {}).get("limits", {})
    assert not [r for r in limits if r not in ("cpu", "memory", "ephemeral-storage")]
    mount = next(m for m in container["volumeMounts"] if m["name"] == "nbjobs-home")
    assert mount == {
        "name": "nbjobs-home",
        "mountPath": "/home/jovyan",
        "subPath": "home/ada-2elovelace",
    }
    volume = next(v for v in manifest["spec"]["volumes"] if v["name"] == "nbjobs-home")
    assert volume["nfs"] == {"server": "nfs.example.org", "path": "/export"}
    assert manifest["spec"]["securityContext"]["fsGroup"] == 100
    assert container["securityContext"]["runAsUser"] == 1000
    assert manifest["spec"]["automountServiceAccountToken"] is False


async def test_notebook_pods_never_get_a_service_account_token(make_spawner):
    named = make_spawner(service_account="builder")
    mounting = make_spawner(automount_service_account_token=True)

    manifest = await as_dict(await named.get_pod_manifest())
    with pytest.raises(web.HTTPError) as info:
        await mounting.get_pod_manifest()

    # KubeSpawner alone would mount the named account's token; nbjobs does not.
    assert manifest["spec"]["automountServiceAccountToken"] is False
    assert not any(
        "serviceaccount" in m["mountPath"]
        for m in manifest["spec"]["containers"][0]["volumeMounts"]
    )
    assert info.value.status_code == 400
    assert "hold no cluster credentials" in info.value.log_message


@pytest.mark.parametrize(
    "traits",
    [
        {"extra_resource_limits": {"nvidia.com/gpu": "1"}},
        {"extra_resource_guarantees": {"nvidia.com/mig-1g.10gb": "1"}},
        {"extra_resource_limits": {"amd.com/gpu": "1"}},
    ],
)
async def test_gpu_limits_are_refused_with_a_reason(make_spawner, traits):
    spawner = make_spawner(**traits)

    with pytest.raises(web.HTTPError) as info:
        await spawner.get_pod_manifest()

    assert info.value.status_code == 400
    assert "notebook servers are CPU-only in nbjobs" in info.value.log_message
    assert "submit GPU work as a job" in info.value.log_message


def test_only_cpu_memory_and_disk_are_allowed():
    assert gpu_requests({"extra_resource_limits": {"ephemeral-storage": "1Gi"}}) == []
    assert gpu_requests({"extra_resource_limits": {"example.com/fpga": "1"}}) == [
        "example.com/fpga"
    ]


async def test_profiles_are_filtered_by_group(make_spawner):
    student = make_spawner()
    staff = make_spawner(name="bob", groups=["staff"])

    assert [p["slug"] for p in student.profile_list(student)] == ["small"]
    assert [p["slug"] for p in staff.profile_list(staff)] == ["small", "large"]
    large = staff.profile_list(staff)[1]
    assert large["kubespawner_override"] == {"cpu_limit": 4.0, "mem_limit": "16Gi"}


async def test_a_profile_that_was_not_offered_is_a_400(make_spawner):
    spawner = make_spawner()
    spawner.user_options = {"profile": "large"}

    with pytest.raises(web.HTTPError) as info:
        await spawner.load_user_options()

    assert info.value.status_code == 400
    assert "the profiles you may choose are: small" in info.value.log_message

"""The Kubernetes spawner's pods, checked as manifests against Kubernetes' own schema."""

from __future__ import annotations

from types import SimpleNamespace

import kubernetes_validate
import pytest
import yaml
from jupyterhub.objects import Hub
from kubernetes_asyncio.client import ApiClient
from nbjobs.spawner.kubernetes import NbjobsKubeSpawner, gpu_requests, gpu_uses
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
        # KubeSpawner's profile_list form, as admins know it from zero-to-jupyterhub
        {
            "display_name": "Data science (8 CPU, 32 GiB)",
            "slug": "datascience",
            "description": "The scipy stack",
            "groups": ["staff"],
            "kubespawner_override": {
                "cpu_limit": 8,
                "mem_limit": "32Gi",
                "image": "quay.io/jupyter/scipy-notebook:2025-01-06",
                "environment": {"STACK": "scipy"},
            },
        },
    ],
}


@pytest.fixture
async def make_spawner(tmp_path):
    config = tmp_path / "nbjobs.yaml"
    config.write_text(yaml.safe_dump(NBJOBS_YAML))
    made = []

    def make(name="ada.lovelace", groups=(), admin=False, **traits):
        user = SimpleNamespace(
            name=name,
            id=1,
            url=f"/user/{name}/",
            admin=admin,
            groups=[SimpleNamespace(name=g) for g in groups],
        )
        traits.setdefault("nbjobs_service_url", "http://nbjobs.nbjobs.svc:8787/services/nbjobs/")
        spawner = NbjobsKubeSpawner(_mock=True, user=user, nbjobs_config_file=str(config), **traits)
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


async def test_pods_reach_the_job_service_under_the_hubs_base_url(make_spawner):
    # a hub served under /jupyter/ routes its services under /jupyter/services/
    spawner = make_spawner(
        nbjobs_service_url="http://proxy-public{base_url}services/nbjobs/",
        hub=Hub(base_url="/jupyter/hub/"),
    )

    env = spawner.get_env()

    assert env["NBJOBS_URL"] == "http://proxy-public/jupyter/services/nbjobs/"


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


GPU = {"limits": {"nvidia.com/gpu": "1"}}


@pytest.mark.parametrize(
    ("traits", "where"),
    [
        ({"extra_container_config": {"resources": GPU}}, "container 'notebook' limits"),
        (
            {"extra_container_config": {"resources": {"requests": {"nvidia.com/gpu": "1"}}}},
            "container 'notebook' requests",
        ),
        (
            {"extra_containers": [{"name": "helper", "image": "busybox", "resources": GPU}]},
            "container 'helper' limits",
        ),
        (
            {"init_containers": [{"name": "warm", "image": "busybox", "resources": GPU}]},
            "init container 'warm' limits",
        ),
        (
            {"extra_pod_config": {"resources": {"limits": {"amd.com/gpu": "1"}}}},
            "amd.com/gpu (pod limits)",
        ),
        (
            {
                "extra_container_config": {
                    "resources": {"claims": [{"name": "gpu"}]},
                },
                "extra_pod_config": {
                    "resourceClaims": [{"name": "gpu", "resourceClaimName": "a100"}]
                },
            },
            "resource claim 'gpu' (container 'notebook')",
        ),
        (
            {
                "extra_container_config": {
                    "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
                }
            },
            "NVIDIA_VISIBLE_DEVICES=all (container 'notebook')",
        ),
    ],
)
async def test_gpus_through_any_other_setting_are_refused(make_spawner, traits, where):
    spawner = make_spawner(**traits)

    with pytest.raises(web.HTTPError) as info:
        await spawner.get_pod_manifest()

    assert info.value.status_code == 400
    message = info.value.log_message
    assert message.startswith("notebook servers are CPU-only in nbjobs, but this one asks for")
    assert where in message
    for setting in traits:
        assert setting in message  # the admin learns which setting to fix
    assert "submit GPU work as a job" in message


async def test_every_container_of_the_pod_hides_the_gpus(make_spawner):
    spawner = make_spawner(
        extra_containers=[{"name": "helper", "image": "busybox"}],
        init_containers=[{"name": "warm", "image": "busybox"}],
    )

    manifest = await as_dict(await spawner.get_pod_manifest())

    kubernetes_validate.validate(manifest, "1.37.0", strict=True)
    spec = manifest["spec"]
    for container in [*spec["containers"], *spec["initContainers"]]:
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["NVIDIA_VISIBLE_DEVICES"] == "void", container["name"]
    assert gpu_uses(manifest) == []


def test_only_cpu_memory_and_disk_are_allowed():
    assert gpu_requests({"extra_resource_limits": {"ephemeral-storage": "1Gi"}}) == []
    assert gpu_requests({"extra_resource_limits": {"example.com/fpga": "1"}}) == [
        "example.com/fpga"
    ]


async def test_profiles_are_filtered_by_group(make_spawner):
    student = make_spawner()
    staff = make_spawner(name="bob", groups=["staff"])
    admin = make_spawner(name="root", admin=True)

    assert [p["slug"] for p in student.profile_list(student)] == ["small"]
    assert [p["slug"] for p in staff.profile_list(staff)] == ["small", "large", "datascience"]
    # admins see every profile, whatever its groups
    assert [p["slug"] for p in admin.profile_list(admin)] == ["small", "large", "datascience"]
    large = staff.profile_list(staff)[1]
    # memory goes to KubeSpawner in bytes: its own byte settings know no "Gi"
    assert large["kubespawner_override"] == {"cpu_limit": 4.0, "mem_limit": 16 * 2**30}
    datascience = staff.profile_list(staff)[2]
    assert datascience["display_name"] == "Data science (8 CPU, 32 GiB)"
    assert datascience["description"] == "The scipy stack"
    assert datascience["kubespawner_override"] == {
        "cpu_limit": 8.0,
        "mem_limit": 32 * 2**30,
        "image": "quay.io/jupyter/scipy-notebook:2025-01-06",
        "environment": {"STACK": "scipy"},
    }


@pytest.mark.parametrize(
    ("slug", "cpu", "memory", "image"),
    [
        ("large", "4", "16Gi", None),
        ("datascience", "8", "32Gi", "quay.io/jupyter/scipy-notebook:2025-01-06"),
    ],
)
async def test_the_chosen_profile_sizes_the_pod(make_spawner, slug, cpu, memory, image):
    default = make_spawner(name="bob", groups=["staff"])
    chosen = make_spawner(name="bob", groups=["staff"])
    default.user_options = {}
    chosen.user_options = {"profile": slug}

    await default.load_user_options()
    await chosen.load_user_options()
    small = (await as_dict(await default.get_pod_manifest()))["spec"]["containers"][0]
    manifest = await as_dict(await chosen.get_pod_manifest())

    kubernetes_validate.validate(manifest, "1.37.0", strict=True)
    container = manifest["spec"]["containers"][0]
    assert small["resources"]["limits"] == {"cpu": 1.0, "memory": 2 * 2**30}
    assert container["resources"]["limits"] == {
        "cpu": float(cpu),
        "memory": int(memory[:-2]) * 2**30,
    }
    assert container["image"] == (image or small["image"])
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"] == "void"
    if slug == "datascience":
        assert env["STACK"] == "scipy"


async def test_a_profile_that_was_not_offered_is_a_400(make_spawner):
    spawner = make_spawner()
    spawner.user_options = {"profile": "large"}

    with pytest.raises(web.HTTPError) as info:
        await spawner.load_user_options()

    assert info.value.status_code == 400
    assert "the profiles you may choose are: small" in info.value.log_message

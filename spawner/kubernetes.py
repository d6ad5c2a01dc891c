"""The Kubernetes spawner: KubeSpawner, with notebook pods that are CPU-only for real.

- A GPU or any other extended-resource limit (``nvidia.com/gpu``, a MIG slice,
  ``amd.com/gpu``) or resource claim is refused when the server starts, with a
  sentence saying why and which setting asked; the built pod is checked, so
  ``extra_container_config``, ``extra_containers``, ``init_containers`` and
  ``extra_pod_config`` cannot slip one in. ``NVIDIA_VISIBLE_DEVICES=void`` in
  every container keeps the NVIDIA runtime from mounting GPUs into the pod anyway.
- The user's folder on the shared volume is mounted at the path job pods use
  (:func:`nbjobs.storage.user_subpath` builds it for both).
- Profiles come from nbjobs.yaml, filtered by the user's groups; a profile
  choice that was not offered is a 400.
- No cluster credentials: the service account token is never mounted.
"""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio.client import V1EnvVar
from kubespawner import KubeSpawner
from tornado import web
from traitlets import Unicode

from nbjobs.config import NbjobsConfig, StorageConfig, load_config
from nbjobs.storage import user_subpath

from .common import SERVER_TOKEN_SCOPES, cpu_only_env, profile_list, service_url_for

#: resources a notebook pod may ask for; anything else is an accelerator or device
ALLOWED_RESOURCES = {"cpu", "memory", "ephemeral-storage"}
VOLUME_NAME = "nbjobs-home"


def storage_volume(storage: StorageConfig, username: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The shared volume and the mount of the user's folder, as KubeSpawner takes them."""
    if storage.volume is None:
        raise ValueError(
            "nbjobs.yaml storage.volume is not set; give the shared volume, e.g. "
            "{nfs: {server: nfs.example.org, path: /export/home}}"
        )
    volume = {"name": VOLUME_NAME, **storage.volume}
    mount = {
        "name": VOLUME_NAME,
        "mountPath": storage.mount_path,
        "subPath": user_subpath(storage, username),
    }
    return volume, mount


def gpu_requests(settings: dict[str, Any]) -> list[str]:
    """Extended resources asked for in KubeSpawner settings (limits and guarantees)."""
    found = []
    for key in ("extra_resource_limits", "extra_resource_guarantees"):
        for name in settings.get(key) or {}:
            if name not in ALLOWED_RESOURCES:
                found.append(name)
    return sorted(set(found))


def gpu_uses(manifest: dict[str, Any]) -> list[str]:
    """Every way a built pod manifest (a plain dict) would get a GPU or another device.

    Each entry names the resource and where it is: container and init container
    limits and requests, the pod-level ``resources``, dynamic resource claims,
    and an ``NVIDIA_VISIBLE_DEVICES`` other than ``void``. Empty: CPU-only.
    """
    spec = manifest.get("spec") or {}
    found = []
    places = [("container", c) for c in spec.get("containers") or []]
    places += [("init container", c) for c in spec.get("initContainers") or []]
    for kind, container in places:
        where = f"{kind} {container.get('name')!r}"
        resources = container.get("resources") or {}
        for section in ("limits", "requests"):
            for name in resources.get(section) or {}:
                if name not in ALLOWED_RESOURCES:
                    found.append(f"{name} ({where} {section})")
        for claim in resources.get("claims") or []:
            found.append(f"resource claim {claim.get('name')!r} ({where})")
        for var in container.get("env") or []:
            if var.get("name") == "NVIDIA_VISIBLE_DEVICES" and var.get("value") != "void":
                found.append(f"NVIDIA_VISIBLE_DEVICES={var.get('value')} ({where})")
    pod_resources = spec.get("resources") or {}
    for section in ("limits", "requests"):
        for name in pod_resources.get(section) or {}:
            if name not in ALLOWED_RESOURCES:
                found.append(f"{name} (pod {section})")
    for claim in spec.get("resourceClaims") or []:
        found.append(f"resource claim {claim.get('name')!r} (pod)")
    return found


class NbjobsKubeSpawner(KubeSpawner):
    """KubeSpawner for nbjobs' CPU-only notebook pods."""

    nbjobs_config_file = Unicode("", help="nbjobs.yaml (storage, profiles)").tag(config=True)
    nbjobs_service_url = Unicode(
        "",
        help="the job service's API root, seen from pods; '{base_url}' becomes the hub's base URL",
    ).tag(config=True)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not self.server_token_scopes:  # type: ignore[has-type]
            self.server_token_scopes = list(SERVER_TOKEN_SCOPES)
        self.profile_list = self._profiles_for_user

    @property
    def nbjobs(self) -> NbjobsConfig:
        if not hasattr(self, "_nbjobs_config"):
            self._nbjobs_config = load_config(self.nbjobs_config_file or None)
        return self._nbjobs_config

    def _profiles_for_user(self, spawner: KubeSpawner) -> list[dict[str, Any]]:
        groups = {
            g.name if hasattr(g, "name") else str(g) for g in getattr(self.user, "groups", [])
        }
        return profile_list(self.nbjobs, groups, bool(getattr(self.user, "admin", False)))

    def get_env(self) -> dict[str, str]:
        env = super().get_env()
        url = service_url_for(self.nbjobs_service_url, env.get("JUPYTERHUB_BASE_URL", "/"))
        env.update(cpu_only_env(url or None, self.nbjobs.storage.mount_path))
        return env

    async def load_user_options(self) -> None:
        try:
            await super().load_user_options()
        except ValueError as exc:  # KubeSpawner's words for a profile it does not know
            offered = ", ".join(p["slug"] for p in self._profiles_for_user(self))
            raise web.HTTPError(
                400, f"{exc}; the profiles you may choose are: {offered or 'none'}"
            ) from None

    async def get_pod_manifest(self) -> Any:
        asked = gpu_requests(
            {
                "extra_resource_limits": self.extra_resource_limits,
                "extra_resource_guarantees": self.extra_resource_guarantees,
            }
        )
        if asked:
            raise web.HTTPError(
                400,
                f"notebook servers are CPU-only in nbjobs, but this one asks for "
                f"{', '.join(asked)}; remove it from the profile and submit GPU work as a job",
            )
        if self.automount_service_account_token:  # type: ignore[has-type]
            raise web.HTTPError(
                400,
                "notebook servers hold no cluster credentials in nbjobs, but this one would "
                "mount a service account token; remove automount_service_account_token (jobs "
                "reach the cluster through the job service)",
            )
        # KubeSpawner mounts the token when a service account is named; never here.
        self.automount_service_account_token = False
        storage = self.nbjobs.storage
        volume, mount = storage_volume(storage, self.user.name)
        self.volumes = _with(self.volumes, volume)  # type: ignore[has-type]
        self.volume_mounts = _with(self.volume_mounts, mount)  # type: ignore[has-type]
        if storage.uid is not None:
            self.uid = storage.uid
        if storage.gid is not None:
            self.gid = self.fs_gid = storage.gid
        self.notebook_dir = storage.mount_path
        pod = await super().get_pod_manifest()
        # Containers other than the notebook's (extra_containers, init_containers) do not
        # get get_env(): keep the NVIDIA runtime from giving them every GPU either.
        for container in [*pod.spec.containers, *(pod.spec.init_containers or [])]:
            _hide_gpus(container)
        # The settings above are not the only way in: extra_container_config,
        # extra_containers, init_containers and extra_pod_config reach the pod too.
        # Check what was built.
        found = gpu_uses(self.api.api_client.sanitize_for_serialization(pod))
        if found:
            raise web.HTTPError(
                400,
                f"notebook servers are CPU-only in nbjobs, but this one asks for "
                f"{'; '.join(found)}, set by {self._gpu_setting()}; remove it and submit GPU "
                "work as a job",
            )
        return pod

    def _gpu_setting(self) -> str:
        """The KubeSpawner settings that can add resources to the pod and are set."""
        names = ("extra_container_config", "extra_containers", "init_containers")
        given = [n for n in names if getattr(self, n)]
        if self.extra_pod_config:
            given.append("extra_pod_config")
        return " or ".join(given) or "the spawner's settings"


def _hide_gpus(container: Any) -> None:
    """Give a container ``NVIDIA_VISIBLE_DEVICES=void`` unless it sets the variable itself.

    A container that sets another value is left so: :func:`gpu_uses` refuses it.
    """
    env = container.env if container.env is not None else []
    for var in env:
        name = var.get("name") if isinstance(var, dict) else var.name
        if name == "NVIDIA_VISIBLE_DEVICES":
            return
    container.env = [*env, V1EnvVar(name="NVIDIA_VISIBLE_DEVICES", value="void")]


def _with(items: Any, item: dict[str, Any]) -> Any:
    """Add our volume (or mount) to KubeSpawner's list-or-dict setting, replacing ours."""
    if isinstance(items, dict):
        return {**items, VOLUME_NAME: item}
    return [i for i in items if i.get("name") != VOLUME_NAME] + [item]

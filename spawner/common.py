"""What both spawners give every notebook server, built by pure functions."""

from __future__ import annotations

from typing import Any

from nbjobs.config import NbjobsConfig, quantity_bytes, quantity_cpus

#: what a notebook server's JUPYTERHUB_API_TOKEN may do, besides what JupyterHub gives
#: every server: tell the job service who its user is (name, groups), submit for them and,
#: for teachers, provision their classes.
#: JupyterHub grants only the subset the user holds.
SERVER_TOKEN_SCOPES = [
    "access:servers!server",
    "users:activity!user",
    "read:users:name!user",
    "read:users:groups!user",
    "custom:nbjobs:submit",
    "custom:nbjobs:teach",
]


def service_url_for(template: str, hub_base_url: str) -> str:
    """The job service's API root, with ``{base_url}`` replaced by the hub's base URL.

    A hub-managed service listens under ``<base_url>services/<name>/``, so a hub
    served under ``/jupyter/`` puts the job service under
    ``/jupyter/services/nbjobs/``. The spawners learn the base URL at spawn time
    (JupyterHub passes it as ``JUPYTERHUB_BASE_URL``), so the template is filled
    then and not when the config file is read.
    """
    base = "/" + hub_base_url.strip("/") + "/" if hub_base_url.strip("/") else "/"
    return template.replace("{base_url}", base)


def cpu_only_env(service_url: str | None, user_folder: str) -> dict[str, str]:
    """Environment of a CPU-only notebook server.

    ``CUDA_VISIBLE_DEVICES=""`` hides GPUs from CUDA programs started in it, and
    ``NVIDIA_VISIBLE_DEVICES=void`` stops the NVIDIA container runtime from
    mounting any GPU into it. ``NBJOBS_URL`` tells the server extension (and the
    ``nbjobs`` CLI in its terminals) where the job service is; ``NBJOBS_ROOT`` is
    the user's folder, the root that notebook paths are relative to.
    """
    env = {
        "CUDA_VISIBLE_DEVICES": "",
        "NVIDIA_VISIBLE_DEVICES": "void",
        "NBJOBS_ROOT": user_folder,
    }
    if service_url:
        env["NBJOBS_URL"] = service_url
    return env


def profile_list(config: NbjobsConfig, groups: set[str], admin: bool) -> list[dict[str, Any]]:
    """Profiles this user may pick, in KubeSpawner's ``profile_list`` shape."""
    out = []
    for profile in config.profiles:
        if profile.groups and not admin and not groups & set(profile.groups):
            continue
        override: dict[str, Any] = {
            "cpu_limit": quantity_cpus(profile.cpu),
            "mem_limit": quantity_bytes(profile.memory),
        }
        if profile.image:
            override["image"] = profile.image
        if profile.kubespawner_override is not None:
            # the profile_list form: what the admin wrote wins over the short form's defaults
            given = profile.kubespawner_override.model_dump(
                exclude_unset=True, exclude_none=True, mode="json"
            )
            for key in ("mem_limit", "mem_guarantee"):
                if key in given:
                    given[key] = quantity_bytes(given[key])
            override.update(given)
        out.append(
            {
                "display_name": profile.display_name or profile.name,
                "slug": profile.name,
                "description": profile.description,
                "default": profile.default,
                "kubespawner_override": override,
            }
        )
    return out

"""Turn ``nbjobs.yaml`` into JupyterHub configuration."""

from __future__ import annotations

import os
import sys
from typing import Any

from nbjobs.class_groups import CLASS_GROUP_PREFIX, class_group, class_of_group
from nbjobs.config import ConfigError, NbjobsConfig, load_config
from nbjobs.network import SignInCheck

SERVICE_NAME = "nbjobs"
CUSTOM_SCOPES = {
    "custom:nbjobs:submit": {"description": "Submit notebooks as nbjobs jobs."},
    "custom:nbjobs:admin": {"description": "See and manage everyone's nbjobs jobs."},
    "custom:nbjobs:teach": {
        "description": "Provision nbjobs classes (rosters, flavors, GPU-hours) and see their jobs."
    },
}
#: what the job service itself may do in the hub: learn who callers are (their
#: tokens, names and groups) and, for teachers, keep class groups and create the
#: accounts a roster names. Nothing else: no servers, no tokens of others.
SERVICE_SCOPES = [
    "list:users",
    "read:users:name",
    "read:users:groups",
    "admin:users",
    "list:groups",
    "read:groups",
    "admin:groups",
    "groups",
    "delete:groups",
]


def local_hub_lines(
    folder: object, *, ip: str, port: int, hub_port: int, proxy_api_port: int
) -> str:
    """The lines of a ``jupyterhub_config.py`` that place a hub on one machine: its
    addresses, and its database, cookie secret and proxy pid file in ``folder`` (a folder
    only root reads, for the demo as root and for ``nbjobs install``)."""
    return (
        f"c.JupyterHub.ip = {ip!r}\n"
        f"c.JupyterHub.port = {port}\n"
        f"c.JupyterHub.hub_port = {hub_port}\n"
        f'c.JupyterHub.db_url = "sqlite:///{folder}/jupyterhub.sqlite"\n'
        f'c.JupyterHub.cookie_secret_file = "{folder}/jupyterhub_cookie_secret"\n'
        f'c.ConfigurableHTTPProxy.pid_file = "{folder}/proxy.pid"\n'
        f'c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_api_port}"\n'
    )


def grant_every_user(c: Any, scopes: list[str]) -> None:
    """Give JupyterHub's ``user`` role (every user's) ``scopes`` in the config ``c``: a
    ``user`` role already defined (z2jh's hub.loadRoles, or an earlier call) gains those
    it lacks, rather than meeting a second definition, which JupyterHub refuses."""
    roles = list(c.JupyterHub.get("load_roles", []))
    defined = next((i for i, role in enumerate(roles) if role.get("name") == "user"), None)
    if defined is not None:
        have = list(roles[defined].get("scopes", ["self"]))
        have += [scope for scope in scopes if scope not in have]
        roles[defined] = {**roles[defined], "scopes": have}
    else:
        roles.append({"name": "user", "scopes": list(scopes)})
    c.JupyterHub.load_roles = roles


def refuse_class_groups_in_roles(roles: list[dict[str, Any]]) -> None:
    """Stop the hub if a role defined before ``configure()`` (z2jh's ``hub.loadRoles``, an
    earlier ``load_roles``) gives itself to a class's group: a class grants nothing."""
    for role in roles:
        for group in role.get("groups") or []:
            cls = class_of_group(group)
            if cls is not None:
                raise SystemExit(
                    f"nbjobs: the hub role {role.get('name')!r} names group {group!r}, the "
                    f"hub group of class {cls!r}; a class grants nothing, so no role may be "
                    f"given to it. Give the role to a group of your own (not starting with "
                    f"{CLASS_GROUP_PREFIX!r}) or to named users"
                )


def configure(
    c: Any, config_path: str | None = None, service_port: int | None = None
) -> NbjobsConfig:
    """Fill JupyterHub's config object ``c`` from nbjobs.yaml.

    The job service becomes a hub-managed service; every user may submit (the
    ``user`` role gets ``custom:nbjobs:submit``); the ``admin`` section of
    nbjobs.yaml gets ``custom:nbjobs:admin``; classes become groups. A bad
    nbjobs.yaml stops the hub with the line and the reason.
    """
    path = config_path or os.environ.get("NBJOBS_CONFIG")
    try:
        config = load_config(path)
    except ConfigError as exc:
        raise SystemExit(f"nbjobs: {exc}") from None
    service, service_url = _service_entry(path, service_port)
    c.JupyterHub.services = [
        *list(c.JupyterHub.get("services", [])),
        # listed in the hub's Services menu: its page is the admins' and teachers'
        # dashboard (login through the hub's OAuth, without a confirmation page)
        {
            "name": SERVICE_NAME,
            "display": True,
            "oauth_no_confirm": True,
            "oauth_client_allowed_scopes": [*CUSTOM_SCOPES],
            **service,
        },
    ]
    c.JupyterHub.custom_scopes = {**dict(c.JupyterHub.get("custom_scopes", {})), **CUSTOM_SCOPES}
    # every user may submit and open the dashboard (it shows each what the API lets them
    # see)
    grant_every_user(c, ["self", "custom:nbjobs:submit", f"access:services!service={SERVICE_NAME}"])
    c.JupyterHub.load_roles = _roles(c, config)
    groups = dict(c.JupyterHub.get("load_groups", {}))
    for cls in config.classes:
        groups[class_group(cls.name)] = {"users": sorted(set(cls.students) | set(cls.teachers))}
    c.JupyterHub.load_groups = groups

    if config.network.sign_in.allow:
        # each login's client address against network.sign_in.allow (nbjobs/network.py)
        c.Authenticator.post_auth_hook = SignInCheck(config)

    _spawner(c, config, path, service_url)
    return config


def _service_entry(path: str | None, port: int | None) -> tuple[dict[str, Any], str]:
    """The job service's entry in the hub's services (managed by the hub, or elsewhere
    with ``NBJOBS_SERVICE_URL_EXTERNAL``) and the address the hub reaches it at."""
    port = port or int(os.environ.get("NBJOBS_SERVICE_PORT", "8787"))
    service_url = f"http://127.0.0.1:{port}"

    external = os.environ.get("NBJOBS_SERVICE_URL_EXTERNAL")
    if external:
        # The service runs elsewhere (its own Deployment on Kubernetes, with its own
        # ServiceAccount); the hub only routes to it and knows its token.
        token = os.environ.get("NBJOBS_SERVICE_API_TOKEN")
        if not token:
            raise SystemExit(
                "nbjobs: NBJOBS_SERVICE_URL_EXTERNAL is set but NBJOBS_SERVICE_API_TOKEN is "
                "not; give the hub the job service's API token (the same secret both read)"
            )
        service: dict[str, Any] = {"url": external, "api_token": token}
        service_url = external.rstrip("/")
    else:
        command = [sys.executable, "-m", "nbjobs.cli", "service"]
        if path:
            command += ["--config", os.path.abspath(path)]
        service = {
            "url": service_url,
            "command": command,
            "environment": {"NBJOBS_CONFIG": os.path.abspath(path) if path else ""},
        }
    return service, service_url


def _roles(c: Any, config: NbjobsConfig) -> list[dict[str, Any]]:
    """The hub's roles with nbjobs' own: the service's, the teachers', the admins'."""
    roles = list(c.JupyterHub.get("load_roles", []))
    refuse_class_groups_in_roles(roles)
    roles.append({"name": "nbjobs-service", "services": [SERVICE_NAME], "scopes": SERVICE_SCOPES})
    # The hub grants nbjobs' roles to named users only. Members of admin.groups and
    # teachers.groups are admins and teachers by the job service's own reading of
    # nbjobs.yaml, which never counts a class's group: listed here, a group would be given
    # the role by JupyterHub itself, whatever hub group (a class made before the name
    # meant anything, say) happens to carry that name.
    teachers = set(config.teachers.users) | {t for cls in config.classes for t in cls.teachers}
    if teachers:
        roles.append(
            {
                "name": "nbjobs-teachers",
                "users": sorted(teachers),
                # an empty list, not none: JupyterHub keeps the groups a role had when its
                # definition leaves them out (a hub that listed teachers.groups before)
                "groups": [],
                "scopes": ["custom:nbjobs:teach", "custom:nbjobs:submit"],
            }
        )
    if config.admin.users:
        roles.append(
            {
                "name": "nbjobs-admins",
                "users": list(config.admin.users),
                "groups": [],
                "scopes": ["custom:nbjobs:admin", "custom:nbjobs:submit"],
            }
        )
    return roles


def _spawner(c: Any, config: NbjobsConfig, path: str | None, service_url: str) -> None:
    """The CPU-only spawner for the backend, told nbjobs.yaml and the service's address."""
    if config.backend.kind == "local":
        c.JupyterHub.spawner_class = "nbjobs.spawner.local.LocalCPUSpawner"
        c.LocalCPUSpawner.nbjobs_config_file = os.path.abspath(path) if path else ""
        # the service listens under its hub prefix, also on its own address
        # (under the hub's base_url, which the spawner fills in at spawn time)
        c.LocalCPUSpawner.nbjobs_service_url = f"{service_url}{{base_url}}services/{SERVICE_NAME}/"
    else:
        c.JupyterHub.spawner_class = "nbjobs.spawner.kubernetes.NbjobsKubeSpawner"
        c.NbjobsKubeSpawner.nbjobs_config_file = os.path.abspath(path) if path else ""
        # pods reach the service through the hub's proxy, never with credentials of their own
        c.NbjobsKubeSpawner.nbjobs_service_url = os.environ.get(
            "NBJOBS_PUBLIC_SERVICE_URL", f"http://proxy-public{{base_url}}services/{SERVICE_NAME}/"
        )

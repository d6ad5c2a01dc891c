"""nbjobs inside JupyterHub's own test hub (``MockHub``), with JupyterHub's test fixtures.

JupyterHub ships the fixtures its own tests use (``app``, ``user``,
``cleanup_after``, ...). They cannot share a pytest process with the rest of
our suite, so these tests run in a pytest invocation of their own (see
scripts/test.sh and this folder's pytest.ini).

``app`` is JupyterHub's module-scoped ``MockHub``, but configured the way a real
deployment is: by hub_config's ``configure(c)`` on the module's ``nbjobs.yaml``
(the ``nbjobs_yaml`` fixture). Everything else (MockHub's proxy and
authenticator, its cleanup of users, groups, servers and services after each
test) is JupyterHub's.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import yaml
from traitlets.config import Config

# kubernetes_asyncio reads $KUBECONFIG when kubespawner is imported; point it at a
# cluster that is not there (no test here talks to a Kubernetes API server).
from tests.machine import INSTANCE, end_instance, kubeconfig_to_no_cluster

kubeconfig_to_no_cluster()

# as every hub nbjobs starts (hub_config/run.py): jsonschema's optional format checkers
# declined before JupyterHub imports it (the IRI grammar alone is 6 s of this run's CPU)
from nbjobs.job_runner.lean_imports import decline_format_checkers  # noqa: E402

decline_format_checkers()

from jupyterhub.tests.mocking import MockHub  # noqa: E402
from nbjobs.hub_config import configure  # noqa: E402

from tests.ports import free_port  # noqa: E402

pytest_plugins = ["jupyterhub.tests.conftest"]


@pytest.fixture(autouse=True, scope="session")
def _control_groups_of_this_run() -> Iterator[None]:
    """As tests/conftest.py's (which this pytest process does not read): the control
    groups of this run's instance (its spawners' servers) go with it at the end."""
    yield
    end_instance(INSTANCE)


@pytest.fixture(scope="module")
def hub_env() -> dict[str, str]:
    """Environment variables hub_config reads while ``configure(c)`` runs; override per module."""
    return {}


@pytest.fixture(scope="module")
def hub_settings() -> Config:
    """Hub settings a module adds after ``configure(c)`` (as an admin would below it)."""
    return Config()


@pytest.fixture(scope="module")
def nbjobs_files(tmp_path_factory, nbjobs_yaml, hub_env, hub_settings) -> tuple[Path, Config]:
    """The module's nbjobs.yaml written to disk, and the hub config ``configure(c)`` makes of it.

    Storage and the job database go to a fresh folder of the module's.
    """
    folder = tmp_path_factory.mktemp("nbjobs")
    settings: dict[str, Any] = {
        "storage": {"root": str(folder / "shared")},
        "database": {"url": f"sqlite:///{folder}/jobs.sqlite"},
        **nbjobs_yaml,
    }
    path = folder / "nbjobs.yaml"
    path.write_text(yaml.safe_dump(settings))
    c = Config()
    with mock.patch.dict(os.environ, hub_env):
        configure(c, str(path), service_port=free_port())
    # Single-user servers run as the hub's user, which is root here.
    c.Spawner.cmd = [sys.executable, "-m", "jupyterhub.singleuser"]
    if os.geteuid() == 0:
        c.Spawner.args = ["--allow-root"]
    c.merge(hub_settings)
    return path, c


@pytest.fixture(scope="module")
async def app(nbjobs_files):
    """JupyterHub's ``app`` fixture (a started ``MockHub``), configured by nbjobs' hub_config."""
    _, config = nbjobs_files
    hub = MockHub.instance(config=config)
    await hub.initialize([])
    await hub.start()
    yield hub
    # as JupyterHub's own fixture stops it
    hub.log.handlers = []
    MockHub.clear_instance()
    try:
        await hub.stop()
    except Exception as exc:
        print(f"Error stopping Hub: {exc}", file=sys.stderr)


@pytest.fixture(autouse=True)
async def stop_managed_services():
    """Stop the services the hub started (the job service) after each test, and wait for them.

    JupyterHub 6.1's ``cleanup_after`` calls the coroutine ``Service.stop()``
    without awaiting it, which would leave the job service's process running.
    This runs before it and takes the stopped services out of its way.
    """
    yield
    if not MockHub.initialized():
        return
    hub = MockHub.instance()
    for name, service in list(hub._service_map.items()):
        if service.managed:
            await service.stop()
            del hub._service_map[name]

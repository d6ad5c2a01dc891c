"""The monitoring guide's recipe for Prometheus under a real JupyterHub: a hub service
holding the ``custom:nbjobs:metrics`` scope scrapes ``/services/nbjobs/metrics``; a plain
user may not.

The hub is configured by hub_config's ``configure()``, as the demo runs it, and then by
the lines docs/admin/monitoring.md gives admins.
"""

from __future__ import annotations

import secrets
from pathlib import Path

import requests
from prometheus_client.parser import text_string_to_metric_families

from tests.hub.hubproc import basics, free_port, local_nbjobs_yaml, running_hub

HUB_CONFIG = """
from nbjobs.hub_config import configure
configure(c, {config!r}, service_port={service_port})
c.Authenticator.allow_all = True
c.JupyterHub.services.append({{"name": "tester", "api_token": {tester!r}}})
c.JupyterHub.load_roles.append(
    {{"name": "tester", "services": ["tester"], "scopes": ["tokens", "admin:users"]}}
)
# the monitoring guide's lines (docs/admin/monitoring.md)
c.JupyterHub.custom_scopes["custom:nbjobs:metrics"] = {{"description": "Read nbjobs' metrics."}}
c.JupyterHub.services.append({{"name": "prometheus", "api_token": {scraper!r}}})
c.JupyterHub.load_roles.append(
    {{"name": "nbjobs-metrics", "services": ["prometheus"], "scopes": ["custom:nbjobs:metrics"]}}
)
"""


def test_a_hub_service_granted_the_metrics_scope_scrapes_and_a_user_may_not(tmp_path):
    port, hub_port, service_port = free_port(), free_port(), free_port()
    tester, scraper = secrets.token_hex(16), secrets.token_hex(16)
    nbjobs_yaml = local_nbjobs_yaml(tmp_path, flavors=[{"name": "cpu", "gpus": 0}])
    config = basics(tmp_path, port, hub_port) + HUB_CONFIG.format(
        config=str(nbjobs_yaml), service_port=service_port, tester=tester, scraper=scraper
    )

    with running_hub(tmp_path, config, port) as url:
        admin = {"Authorization": f"token {tester}"}
        assert requests.post(f"{url}/hub/api/users/ada", headers=admin, timeout=30).ok
        made = requests.post(
            f"{url}/hub/api/users/ada/tokens", headers=admin, json={"note": "t"}, timeout=30
        )
        made.raise_for_status()
        metrics = f"{url}/services/nbjobs/metrics"

        def scrape(token: str | None) -> requests.Response:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            return requests.get(metrics, headers=headers, timeout=30)

        granted = scrape(scraper)
        plain = scrape(made.json()["token"])
        nobody = scrape(None)

    assert granted.status_code == 200, granted.text
    families = {f.name for f in text_string_to_metric_families(granted.text)}
    assert {"nbjobs_jobs", "nbjobs_queue_length", "nbjobs_gpus_busy"} <= families
    assert plain.status_code == 403
    assert nobody.status_code == 401


def test_the_monitoring_guide_gives_these_lines():
    guide = (Path(__file__).resolve().parents[2] / "docs" / "admin" / "monitoring.md").read_text()
    recipe = HUB_CONFIG.split("(docs/admin/monitoring.md)\n", 1)[1].replace("{{", "{")
    for line in recipe.replace("}}", "}").splitlines():
        if "api_token" not in line:  # the guide's token is its own
            assert line.strip() in guide

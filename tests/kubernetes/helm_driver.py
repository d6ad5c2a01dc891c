"""Helm's own code on a chart, for tests/kubernetes/test_chart.py: run by the Python of
.venv/helm (3.12 or newer, helm-sdkpy; scripts/install.sh --dev makes it), never by the
project's own.

    python helm_driver.py KUBECONFIG NAMESPACE VERB RELEASE CHART VALUES_JSON

VERB: lint, install, upgrade, uninstall. Prints the action's result as JSON; on a
failure, Helm's message on stderr and exit status 1.
"""

import asyncio
import json
import sys

import helm_sdkpy as helm


async def main(
    kubeconfig: str, namespace: str, verb: str, release: str, chart: str, values: str
) -> object:
    config = helm.Configuration(namespace=namespace, kubeconfig=kubeconfig)
    given = json.loads(values)
    if verb == "lint":
        return await helm.Lint(config).run(chart)
    if verb == "install":
        return await helm.Install(config).run(
            release, chart, values=given, create_namespace=True, wait=False, timeout=60
        )
    if verb == "upgrade":
        return await helm.Upgrade(config).run(release, chart, values=given, wait=False, timeout=60)
    if verb == "uninstall":
        return await helm.Uninstall(config).run(release, wait=False, timeout=60)
    raise SystemExit(f"unknown verb {verb}")


if __name__ == "__main__":
    try:
        result = asyncio.run(main(*sys.argv[1:7]))
    except helm.HelmError as exc:
        print(str(exc), file=sys.stderr)
        sys.exit(1)
    print(json.dumps(result, default=str))

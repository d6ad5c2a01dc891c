"""KubeSpawner loads a kube config when it is created; give it one that points nowhere
(the manifest tests never talk to an API server). kubernetes_asyncio reads
$KUBECONFIG when it is imported, so this is set before the tests import it."""

from __future__ import annotations

from tests.machine import kubeconfig_to_no_cluster

kubeconfig_to_no_cluster()

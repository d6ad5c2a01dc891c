"""KubeSpawner loads a kube config when it is created; give it one that points nowhere
(the manifest tests never talk to an API server). kubernetes_asyncio reads
$KUBECONFIG when it is imported, so this is set before the tests import it."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import yaml

KUBECONFIG = {
    "apiVersion": "v1",
    "kind": "Config",
    "clusters": [{"name": "none", "cluster": {"server": "https://127.0.0.1:9"}}],
    "users": [{"name": "none", "user": {"token": "unused"}}],
    "contexts": [{"name": "none", "context": {"cluster": "none", "user": "none"}}],
    "current-context": "none",
}

_folder = tempfile.mkdtemp(prefix="nbjobs-kube-")
atexit.register(shutil.rmtree, _folder, ignore_errors=True)
os.environ["KUBECONFIG"] = os.path.join(_folder, "config")
with open(os.environ["KUBECONFIG"], "w") as _f:
    yaml.safe_dump(KUBECONFIG, _f)

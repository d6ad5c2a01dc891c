"""A notebook server as ``jupyterhub-singleuser`` starts it, 2 s of CPU sooner.

The local spawner's command (``python -m nbjobs.spawner.singleuser``): the server
declines jsonschema's optional IRI grammar (:mod:`nbjobs.job_runner.lean_imports`),
spares JupyterLab its question to yarn (:func:`skip_yarn_registry_lookup`), and then runs
JupyterHub's own single-user entry point with the same arguments. On a shared machine
where a class logs in at once, that is 2 s of CPU less for each student's server.
"""

from __future__ import annotations

import sys
from typing import Any

from nbjobs.job_runner.lean_imports import decline_format_checkers


def skip_yarn_registry_lookup() -> None:
    """Importing JupyterLab's application asks yarn for its configuration (``node yarn.js
    config --json``: yarn's 5 MB script parsed, 0.7 s of CPU and 1.5 to 3 s of a server's
    start on a loaded machine) only to learn which npm registry to build source extensions
    from, which a notebook server never does at start. Answered without yarn: no registry
    of the user's, so yarn's default, as on a machine without node. A JupyterLab that has
    no such lookup any more is left as it is."""
    from jupyterlab import commands

    if callable(getattr(commands, "_yarn_config", None)):

        def no_yarn(logger: Any) -> dict[str, dict[str, str]]:
            return {"yarn config": {}, "npm config": {}}  # as when yarn names nothing

        commands._yarn_config = no_yarn


def main() -> int | None:
    decline_format_checkers()
    skip_yarn_registry_lookup()
    from jupyterhub.singleuser import main as singleuser_main

    return singleuser_main()


if __name__ == "__main__":
    sys.exit(main())

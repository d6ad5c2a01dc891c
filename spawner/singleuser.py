"""A notebook server as ``jupyterhub-singleuser`` starts it, 1.4 s of CPU sooner.

The local spawner's command (``python -m nbjobs.spawner.singleuser``): the server
declines jsonschema's optional IRI grammar (:mod:`nbjobs.job_runner.lean_imports`) and then runs
JupyterHub's own single-user entry point with the same arguments. On a shared machine
where a class logs in at once, that is 1.4 s of CPU less for each student's server.
"""

from __future__ import annotations

import sys

from nbjobs.job_runner.lean_imports import decline_format_checkers


def main() -> int | None:
    decline_format_checkers()
    from jupyterhub.singleuser import main as singleuser_main

    return singleuser_main()


if __name__ == "__main__":
    sys.exit(main())

"""``python -m nbjobs.hub_config.run -f jupyterhub_config.py``: JupyterHub as nbjobs
starts it (the demo, an install's unit), 1.4 s of CPU sooner.

The same as the ``jupyterhub`` command with the same arguments, except that the hub
declines jsonschema's optional IRI grammar first (:mod:`nbjobs.job_runner.lean_imports`):
a hub restarted in the middle of a class's jobs answers that much sooner.
"""

from __future__ import annotations

import sys

from nbjobs.job_runner.lean_imports import decline_format_checkers


def main() -> int | None:
    decline_format_checkers()
    from jupyterhub.app import main as hub_main

    return hub_main()


if __name__ == "__main__":
    sys.exit(main())

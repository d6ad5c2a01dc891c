"""nbjobs: run Jupyter notebooks as GPU jobs from CPU-only JupyterHub servers.

The parts live in top-level folders of the source tree (``job_runner/``,
``job_service/``, ...). A built wheel places them inside this package; in a
source checkout (editable install, tests) the checkout's root is added to this
package's search path instead, so ``nbjobs.job_runner`` resolves the same way in
both cases. This module must stay free of imports: the runner is imported
through it inside minimal GPU images.
"""

import os as _os

_checkout_root = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if _os.path.isfile(_os.path.join(_checkout_root, "job_runner", "__init__.py")) and (
    _checkout_root not in __path__
):
    __path__.append(_checkout_root)


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where JupyterLab finds the built extension (``jupyter labextension develop``)."""
    return [{"src": "labextension", "dest": "nbjobs"}]


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    """``jupyter server extension enable nbjobs`` means the server extension module."""
    return [{"module": "nbjobs.server_extension"}]

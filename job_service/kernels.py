"""Which kernels a flavor's jobs can run, and the refusals at submit when a notebook's
kernel is not one of them.

A notebook names its kernel (``metadata.kernelspec.name``); the job's side must have
it, or the job fails on its first line. Where nbjobs knows the kernels a flavor has
(``flavors[].kernels`` in nbjobs.yaml, or on one machine the kernels installed where
the runner runs), the service refuses such a submit at once, and the Submit dialog
offers the kernels there are. Kernel names compare as Jupyter compares them: without
regard to case.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from nbjobs.config import Flavor

from .errors import Invalid

#: how long a discovered list of kernels is used before looking again (installing a
#: kernel on the service's machine shows within this)
DISCOVERY_TTL = 60.0


class InstalledKernels:
    """The kernels installed for this Python (``jupyter kernelspec list``), looked up
    again at most every :data:`DISCOVERY_TTL` seconds."""

    def __init__(self) -> None:
        self._names: list[str] = []
        self._at = float("-inf")

    def names(self) -> list[str]:
        now = time.monotonic()
        if now - self._at > DISCOVERY_TTL:
            from jupyter_client.kernelspec import KernelSpecManager

            self._names = sorted(KernelSpecManager().find_kernel_specs())
            self._at = now
        return self._names


def _has(kernels: Iterable[str], name: str) -> bool:
    return name.lower() in {k.lower() for k in kernels}


def check_chosen_kernel(kernel: str | None, kernels: list[str] | None, flavor: Flavor) -> None:
    """Refuse a kernel chosen at submit that the flavor's jobs do not have."""
    if kernel is None or kernels is None or _has(kernels, kernel):
        return
    raise Invalid(
        f"kernel {kernel!r} is not available on flavor {flavor.name!r}; it has: "
        f"{', '.join(kernels) or 'none'}. Pick one of those"
    )


def check_notebook_kernel(name: str, path: str, kernels: list[str] | None, flavor: Flavor) -> None:
    """Refuse a notebook whose own kernel (``name``) the flavor's jobs do not have
    (when known)."""
    if kernels is None or _has(kernels, name):
        return
    raise Invalid(
        f"{path!r} runs on kernel {name!r}, which flavor {flavor.name!r} does not have (it "
        f"has: {', '.join(kernels) or 'none'}). Pick one of those as the job's kernel (the "
        "Submit dialog's Kernel field; `nbjobs submit --kernel NAME`), or ask your admin to "
        "add the kernel to the job image"
    )

"""The job's kernel, launched as soon as the runner knows which one.

A kernel takes about half a second to answer its first request, most of it its own
interpreter and ipykernel starting. The runner needs about a fifth of that to import
nbformat and nbclient, read and check the notebook and write the first status: so it
launches the kernel first (:meth:`EarlyStart.begin`, with nothing but jupyter_client
imported) and does all that while the kernel boots. A job whose checks then fail kills
the kernel, which has run nothing.

The kernel's manager is jupyter_client's, with one change: a killed kernel is looked
at every few milliseconds until it is gone, not every tenth of a second
(:class:`KernelManager`). Its sockets are Unix sockets in a folder only this user can
open (:func:`use_private_sockets`). Kernels are looked up where jupyter_client looks
(:func:`kernel_specs`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
from jupyter_client.manager import AsyncKernelManager
from jupyter_client.manager import KernelManager as AnyKernelManager
from jupyter_core.paths import jupyter_path
from jupyter_core.utils import ensure_async

from .errors import BadInput

#: how often a killed kernel is looked at until it is gone (jupyter_client: every 0.1 s,
#: a tenth of a second added to every job's end)
KERNEL_GONE_POLL = 0.005
#: a notebook larger than this is not read twice to learn its kernel early: its kernel
#: is launched after the checks
PEEK_MAX_BYTES = 4 * 1024 * 1024
#: what nbclient gives an IPython kernel too: a history kept in memory, not in a file
#: of the user's home that jobs running at once would share
IPYTHON_ARGUMENTS = ["--HistoryManager.hist_file=:memory:"]


def kernel_specs() -> KernelSpecManager:
    """jupyter_client's kernel spec lookup over the folders of its default: Jupyter's
    ``kernels`` folders, then IPython's old ``~/.ipython/kernels`` (or under
    ``$IPYTHONDIR``). Named here because jupyter_client's default imports IPython to name
    that last one, 36 ms of every job's start before its kernel can launch."""
    ipython_dir = os.environ.get("IPYTHONDIR") or os.path.join("~", ".ipython")
    old = os.path.join(os.path.normpath(os.path.expanduser(ipython_dir)), "kernels")
    return KernelSpecManager(kernel_dirs=[*jupyter_path("kernels"), old])


def find_kernel_language(name: str) -> str:
    """The language of an installed kernel, or :class:`BadInput` listing what is installed."""
    manager = kernel_specs()
    try:
        spec = manager.get_kernel_spec(name)
    except NoSuchKernel:
        installed = ", ".join(sorted(manager.find_kernel_specs())) or "none"
        raise BadInput(
            f"the notebook's kernel {name!r} is not installed where jobs run (there: "
            f"{installed}); switch the notebook to one of those (in JupyterLab: Kernel > Change "
            "Kernel, then save) and submit again, or ask your admin to add it to the job image"
        ) from None
    return str(spec.language).lower()


class KernelManager(AsyncKernelManager):
    """jupyter_client's manager, but a killed kernel is seen gone within milliseconds."""

    async def _async_wait(self, pollinterval: float = KERNEL_GONE_POLL) -> None:
        await super()._async_wait(min(pollinterval, KERNEL_GONE_POLL))


async def kill_now(km: AnyKernelManager) -> None:
    """Kill the kernel outright, wait until it is gone and clean up after it: a job's
    kernel that will not run (its checks failed, the job was cancelled as it started).
    Not ``shutdown_kernel(now=True)`` alone: that interrupts the kernel first, and one
    still importing turns the SIGINT into a KeyboardInterrupt whose traceback lands in
    the job's log (under the runner's one line saying why the job did not run)."""
    with contextlib.suppress(Exception):  # already gone: the shutdown below copes
        await ensure_async(km.signal_kernel(signal.SIGKILL))
    await ensure_async(km.shutdown_kernel(now=True))


def use_private_sockets(km: Any) -> str | None:
    """Talk to the kernel over Unix sockets in a folder only this user can open; the
    folder (to remove when the kernel is gone), or None where none could be made.

    On a shared machine, TCP ports on loopback are open to every local user
    (messages are signed, but outputs can be read); sockets in a 0700 folder
    are not, and the kernel has no reason to warn about plain-text TCP.
    Where no short private path can be had, TCP on loopback it stays.
    """
    # sun_path holds about 100 bytes, and ports add "-NNNNN": the temporary folder
    # (TMPDIR) first, /tmp where that path is too long
    for base in dict.fromkeys([tempfile.gettempdir(), "/tmp"]):
        if len(os.path.join(base, "nbjobs-kernel-XXXXXXXX", "k")) > 90:
            continue
        try:
            folder = tempfile.mkdtemp(prefix="nbjobs-kernel-", dir=base)
        except OSError:
            continue
        km.transport = "ipc"
        km.ip = os.path.join(folder, "k")
        return folder
    return None


def peek_kernel_name(path: Path) -> str | None:
    """The kernel a notebook names, read before its checks; None when that is not plain
    (too big, unreadable, not JSON, no name): the run learns it after the checks."""
    try:
        if path.stat().st_size > PEEK_MAX_BYTES:
            return None
        name = json.loads(path.read_bytes())["metadata"]["kernelspec"]["name"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return name if isinstance(name, str) and name else None


@dataclass
class LaunchedKernel:
    """A kernel process started, not yet answering: its manager and its sockets' folder."""

    kernel_name: str
    cwd: Path
    km: KernelManager
    socket_dir: str | None

    @classmethod
    async def launch(cls, kernel_name: str, cwd: Path) -> LaunchedKernel:
        """Start the kernel's process in ``cwd`` (raises what jupyter_client raises: no
        such kernel, a kernel spec that does not start)."""
        km = KernelManager(kernel_name=kernel_name, kernel_spec_manager=kernel_specs())
        socket_dir = use_private_sockets(km)
        try:
            extra = IPYTHON_ARGUMENTS if km.ipykernel else []
            await km.start_kernel(extra_arguments=list(extra), cwd=str(cwd))
        except BaseException:
            if socket_dir is not None:
                shutil.rmtree(socket_dir, ignore_errors=True)
            raise
        return cls(kernel_name, cwd, km, socket_dir)

    async def discard(self) -> None:
        """Kill it and remove its sockets' folder."""
        with contextlib.suppress(Exception):
            await kill_now(self.km)
        if self.socket_dir is not None:
            shutil.rmtree(self.socket_dir, ignore_errors=True)


@dataclass
class EarlyStart:
    """What the runner did before the job was checked: the kernel it launched (None when
    it could not know which, or the launch failed: the run starts it and says why) and
    the SIGTERM or SIGINT that came meanwhile (each cancels the job as one in the run)."""

    kernel: LaunchedKernel | None = None
    signals: list[int] = field(default_factory=list)

    @classmethod
    async def for_job(
        cls, input_path: str | os.PathLike[str], kernel_name: str | None, cwd: Any
    ) -> EarlyStart:
        """:meth:`begin` with what the runner is given: the kernel asked for, else the
        one the notebook names; the working folder, else the notebook's."""
        folder = Path(cwd) if cwd is not None else Path(input_path).parent
        guess = kernel_name or peek_kernel_name(Path(input_path))
        return await cls.begin(guess, folder.absolute())

    @classmethod
    async def begin(cls, kernel_name: str | None, cwd: Path) -> EarlyStart:
        start = cls()
        loop = asyncio.get_running_loop()
        with contextlib.suppress(RuntimeError, ValueError):  # not the main thread: none
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, start.signals.append, sig)
        if kernel_name:
            # a folder that is not there, say, fails here: the checks then say so
            with contextlib.suppress(Exception):
                start.kernel = await LaunchedKernel.launch(kernel_name, cwd)
        return start

    async def discard(self) -> None:
        """The job will not run: its kernel goes."""
        if self.kernel is not None:
            await self.kernel.discard()
            self.kernel = None

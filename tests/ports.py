"""Ports for the servers the tests start (hubs, job services, notebook servers, the
demo), chosen where nothing else on the machine picks one by chance.

A port the kernel hands out for ``bind(("127.0.0.1", 0))`` comes from its ephemeral
range (``/proc/sys/net/ipv4/ip_local_port_range``, 32768-60999 by default), the range
every outgoing connection and every kernel's five ZMQ ports (jupyter_client finds them
the same way) also draw from. A server given such a port a second later can find it
taken: "Address already in use", one run in a few on a machine running a second suite.
So the tests' ports lie below that range, and each process that hands them out (a
pytest-xdist worker, a second suite's worker) first claims a block of them of its own:
a name in the abstract socket namespace (``\0nbjobs-test-ports-<first port>``), bound
while the process lives and gone with it, which no other process can bind meanwhile.
Within its block a process hands out each port that binds now, in turn.

Before the blocks, ports were drawn at random from the whole range, each checked free
at the moment it was drawn: two workers drew the same one for two job services a
second apart; each hub's readiness check was answered by the other's service, and a
token was refused by a service of another hub (CI, 2026-11-30).
"""

from __future__ import annotations

import socket

#: the lowest port handed out (below it: well-known and registered services)
LOWEST = 15000
#: how many ports a process claims at once (the busiest worker of a run starts about
#: 300 servers; past its block's end it goes round again, skipping what still binds)
BLOCK = 500
_block: range | None = None
#: the claim on the block: bound as long as this process lives
_claim: socket.socket | None = None
#: where in the block the next port is looked for: each is handed out in turn
_next = 0


def _ephemeral_range() -> tuple[int, int]:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as f:
            low, high = (int(word) for word in f.read().split())
    except (OSError, ValueError):
        return 32768, 60999
    return low, high


def _candidates() -> range:
    low, high = _ephemeral_range()
    if low - LOWEST >= 2000:
        return range(LOWEST, low)
    return range(high + 1, 65536)  # an ephemeral range reaching down low: above it


def claimed_block() -> range:
    """This process's own block of ports, claimed at its first call."""
    global _block, _claim
    if _block is not None:
        return _block
    candidates = _candidates()
    for start in range(candidates.start, candidates.stop - BLOCK + 1, BLOCK):
        claim = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            claim.bind(f"\0nbjobs-test-ports-{start}")
        except OSError:  # another process's
            claim.close()
            continue
        _claim, _block = claim, range(start, start + BLOCK)
        return _block
    raise RuntimeError(
        f"every block of {BLOCK} ports in {candidates} is claimed by another process: "
        "are that many test suites running on this machine?"
    )


def free_port() -> int:
    """A TCP port of 127.0.0.1 free now, from this process's own block."""
    global _next
    block = claimed_block()
    for _ in range(len(block)):
        port = block[_next % len(block)]
        _next += 1
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError(f"no port of {block} binds: servers of earlier tests still hold them")

"""Ports for the servers the tests start (hubs, job services, notebook servers, the
demo), chosen where nothing else on the machine picks one by chance.

A port the kernel hands out for ``bind(("127.0.0.1", 0))`` comes from its ephemeral
range (``/proc/sys/net/ipv4/ip_local_port_range``, 32768-60999 by default), the range
every outgoing connection and every kernel's five ZMQ ports (jupyter_client finds them
the same way) also draw from. A server given such a port a second later can find it
taken: "Address already in use", one run in a few on a machine running a second suite.
:func:`free_port` picks, at random, a port below that range that binds now and that
this process has not handed out before; only another process choosing the same port
by the same method in the same moment can still take it.
"""

from __future__ import annotations

import random
import socket

#: the lowest port handed out (below it: well-known and registered services)
LOWEST = 15000
_handed_out: set[int] = set()
#: its own generator: a test that seeds the random module makes no two workers alike
_random = random.SystemRandom()


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


def free_port() -> int:
    """A TCP port of 127.0.0.1 free now, outside the kernel's ephemeral range."""
    candidates = _candidates()
    for _ in range(200):
        port = _random.choice(candidates)
        if port in _handed_out:
            continue
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free port among 200 tries in {candidates}")

"""The tests' ports: each process hands out only ports of its own block, so two workers
(or two suites) never give one port to two servers."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

from tests import ports

ROOT = Path(__file__).resolve().parents[2]

#: another process that hands out ports while it lives, as a second worker does
OTHER = """
import json, sys
sys.path.insert(0, sys.argv[1])
from tests import ports
block = ports.claimed_block()
print(json.dumps([block.start, block.stop, [ports.free_port() for _ in range(20)]]), flush=True)
sys.stdin.read()  # holds its block until told to go
"""


def test_two_processes_hand_out_ports_from_blocks_of_their_own():
    mine = ports.claimed_block()
    handed = [ports.free_port() for _ in range(20)]
    other = subprocess.Popen(
        [sys.executable, "-c", OTHER, str(ROOT)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert other.stdout is not None
        start, stop, theirs = json.loads(other.stdout.readline())
        assert set(range(start, stop)).isdisjoint(mine)
        assert all(start <= port < stop for port in theirs)
        assert all(port in mine for port in handed)
        assert len(set(handed)) == len(handed)
        # while it lives, its block is its own: a third process is given yet another
        third = subprocess.run(
            [sys.executable, "-c", OTHER, str(ROOT)],
            input="",
            capture_output=True,
            text=True,
            check=True,
        )
        third_start, _, _ = json.loads(third.stdout)
        assert third_start not in (start, mine.start)
    finally:
        assert other.stdin is not None
        other.stdin.close()
        other.wait(timeout=30)
        assert other.stdout is not None
        other.stdout.close()


def test_a_port_a_server_holds_is_not_handed_out():
    block = ports.claimed_block()
    upcoming = [block[(ports._next + step) % len(block)] for step in range(len(block))]
    with socket.socket() as server:
        # the next port it would hand out (free now): a server takes it
        for port in upcoming:
            try:
                server.bind(("127.0.0.1", port))
                break
            except OSError:  # held by a server of an earlier test
                continue
        server.listen()
        handed = ports.free_port()
    assert handed != port
    assert handed in block

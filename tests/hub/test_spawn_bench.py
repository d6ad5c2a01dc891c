"""bench/spawn_bench.py's own bookkeeping: fair order, and no hub left behind.

The hubs are stand-ins here (the benchmark itself starts real ones); what is
tested is the order of the rounds and that a hub that started is stopped
when the other does not.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "spawn_bench.py"


@pytest.fixture
def bench(monkeypatch):
    spec = importlib.util.spec_from_file_location("spawn_bench", BENCH)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    events: list[tuple[str, ...]] = []

    class FakeHub:
        fail: set[str] = set()

        def __init__(self, work: Path, spawner: str, accounts: bool = False) -> None:
            if spawner in self.fail:
                raise SystemExit(f"hub with {spawner} did not start")
            self.spawner = spawner + (" (accounts)" if accounts else "")
            events.append(("start", self.spawner))

        def spawn_to_ready(self, user: str) -> float:
            events.append(("spawn", self.spawner, user))
            return 1.0

        def stop(self) -> None:
            events.append(("stop", self.spawner))

    monkeypatch.setattr(module, "Hub", FakeHub)
    monkeypatch.setattr(module.shutil, "which", lambda *a, **k: "/usr/bin/true")
    monkeypatch.setattr(module.os, "geteuid", lambda: 1000)  # two hubs: no accounts
    return module, FakeHub, events


def test_rounds_alternate_which_spawner_goes_first(bench, monkeypatch, capsys):
    module, _, events = bench
    monkeypatch.setattr(sys, "argv", ["spawn_bench.py", "--rounds", "4"])

    assert module.main() == 0

    simple, ours = module.SPAWNERS.values()
    spawns = [(e[1], e[2]) for e in events if e[0] == "spawn"]
    assert spawns == [
        (simple, "user0"),
        (ours, "user0"),
        (ours, "user1"),
        (simple, "user1"),
        (simple, "user2"),
        (ours, "user2"),
        (ours, "user3"),
        (simple, "user3"),
    ]
    assert "median of 4 rounds" in capsys.readouterr().out


def test_the_first_hub_is_stopped_when_the_second_does_not_start(bench, monkeypatch):
    module, fake, events = bench
    simple, ours = module.SPAWNERS.values()
    fake.fail = {ours}
    monkeypatch.setattr(sys, "argv", ["spawn_bench.py", "--rounds", "1"])

    with pytest.raises(SystemExit, match="did not start"):
        module.main()

    assert events == [("start", simple), ("stop", simple)]

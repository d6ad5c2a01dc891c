"""Server-sent events as a client reads them: ``GET api/events`` line by line, an event
at each blank line (the tests, and the benches that watch the stream, read it so)."""

from __future__ import annotations

import json
from typing import Any


class EventLines:
    """Feed it a stream's lines one at a time; it gives each event the blank line ends."""

    def __init__(self) -> None:
        self.event, self.data = "message", ""

    def feed(self, line: str) -> tuple[str, dict[str, Any]] | None:
        """The event (its name and its data) this line ends, or None."""
        if line.startswith("event:"):
            self.event = line[6:].strip()
        elif line.startswith("data:"):
            self.data = line[5:].strip()
        elif not line and self.data:
            done = (self.event, json.loads(self.data))
            self.event, self.data = "message", ""
            return done
        return None

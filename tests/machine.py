"""What this test run names on the machine itself, so that an install or a demo running
beside it (its ``nbjobs`` or ``nbjobs-demo`` control groups) is never touched."""

from __future__ import annotations

import uuid

#: this test process's nbjobs instance (``backend.local.instance``): the parent of the
#: control groups its hubs' servers and its services' jobs run in; removed at the end
INSTANCE = f"nbjobs-test-{uuid.uuid4().hex[:8]}"

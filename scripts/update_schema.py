"""Regenerate the schemas made from the loader's models: hub_config/nbjobs.schema.json
(nbjobs.config) and the Helm chart's charts/nbjobs/values.schema.json (nbjobs.chart,
whose ``config`` is nbjobs.yaml's schema again).

    python scripts/update_schema.py

tests/common/test_config.py and tests/kubernetes/test_chart.py fail when one is stale.
"""

import json
from pathlib import Path

from nbjobs.chart import values_schema
from nbjobs.config import NbjobsConfig

root = Path(__file__).resolve().parent.parent
schema = NbjobsConfig.model_json_schema()
schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
schema["title"] = "nbjobs.yaml"
for target, content in [
    (root / "hub_config" / "nbjobs.schema.json", schema),
    (root / "charts" / "nbjobs" / "values.schema.json", values_schema()),
]:
    target.write_text(json.dumps(content, indent=2, sort_keys=True) + "\n")
    print(f"wrote {target}")

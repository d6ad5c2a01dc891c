"""Regenerate hub_config/nbjobs.schema.json from the loader's models (nbjobs.config).

    python scripts/update_schema.py

tests/common/test_config.py fails when the published schema is stale.
"""

import json
from pathlib import Path

from nbjobs.config import NbjobsConfig

schema = NbjobsConfig.model_json_schema()
schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
schema["title"] = "nbjobs.yaml"
target = Path(__file__).resolve().parent.parent / "hub_config" / "nbjobs.schema.json"
target.write_text(json.dumps(schema, indent=2, sort_keys=True) + "\n")
print(f"wrote {target}")

"""Write api/openapi.yaml from api/operations.yaml and the API's pydantic models.

    python scripts/update_openapi.py           write it
    python scripts/update_openapi.py --check   only say whether it is current (exit 1 if not)

Then `jlpm build:types` makes the TypeScript types from it (api/openapi.d.ts).
"""

from __future__ import annotations

import sys

from nbjobs.job_service.api_spec import write


def main() -> int:
    said = write(check="--check" in sys.argv[1:])
    if said is True:
        print("api/openapi.yaml is current")
        return 0
    print(said)
    return 1 if "--check" in sys.argv[1:] else 0


if __name__ == "__main__":
    sys.exit(main())

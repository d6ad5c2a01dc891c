#!/usr/bin/env bash
# Every static check the project has, in one command: ruff (lint and format)
# and mypy on the Python parts; the TypeScript compiler's checks on the Lab
# extension.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC1091
[ -x .venv/bin/python ] && . .venv/bin/activate
echo "==> ruff check"
ruff check .
echo "==> ruff format --check"
ruff format --check .
echo "==> mypy"
# Type-check the package as the wheel lays it out (parts inside nbjobs/), so
# that mypy sees the same module names the code imports.
stage=build/typecheck/nbjobs
rm -rf build/typecheck && mkdir -p "$stage"
for f in nbjobs/*.py nbjobs/client; do ln -s "$PWD/$f" "$stage/"; done
for part in job_runner job_service server_extension spawner hub_config programs; do
    [ -f "$part/__init__.py" ] && ln -s "$PWD/$part" "$stage/$part"
done
(cd build/typecheck && mypy --config-file ../../pyproject.toml -p nbjobs)
if [ -f package.json ] && grep -q '"lint:check"' package.json; then
    echo "==> TypeScript checks"
    jlpm run lint:check
fi

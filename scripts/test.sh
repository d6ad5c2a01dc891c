#!/usr/bin/env bash
# Installs everything the tests need, then runs the lint and every test group.
# This is the README's test command and exactly what CI runs.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh --dev || exit 1
# shellcheck disable=SC1091
. .venv/bin/activate

failed=()
scripts/lint.sh || failed+=("lint")

echo "==> pytest"
python -m pytest tests "$@" || failed+=("pytest")

if [ ${#failed[@]} -ne 0 ]; then
    echo "FAILED: ${failed[*]}"
    exit 1
fi
echo "all checks passed"

#!/usr/bin/env bash
# Installs everything the tests need, then runs the lint and every test group.
# This is the README's test command and exactly what CI runs.
#
# The groups run as separate pytest processes: JupyterHub's fixtures and
# pytest-jupyter's server fixtures cannot share one process.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh --dev || exit 1
# shellcheck disable=SC1091
. .venv/bin/activate

failed=()
scripts/lint.sh || failed+=("lint")

groups=(
    "tests/job_runner tests/common tests/job_service tests/kubernetes"
    "tests/hub"
    "tests/server_extension"
    "tests/browser"
)
for group in "${groups[@]}"; do
    dirs=()
    for d in $group; do [ -d "$d" ] && dirs+=("$d"); done
    [ ${#dirs[@]} -eq 0 ] && continue
    echo "==> pytest ${dirs[*]}"
    python -m pytest "${dirs[@]}" "$@" || failed+=("${dirs[*]}")
done

if [ ${#failed[@]} -ne 0 ]; then
    echo "FAILED: ${failed[*]}"
    exit 1
fi
echo "all checks passed"

#!/usr/bin/env bash
# Installs everything the tests need, then runs the lint and every test group.
# This is the README's test command and exactly what CI runs.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh --dev || exit 1
# shellcheck disable=SC1091
. .venv/bin/activate
# Every process a test starts (hubs, services, job runners, the CLI) imports nbjobs from
# this checkout: with bytecode cached (in its gitignored __pycache__ folders) it does not
# compile the same modules again each time, 0.2 s of CPU a service. An environment that
# turns the cache off (some images set PYTHONDONTWRITEBYTECODE) would cost minutes a run.
unset PYTHONDONTWRITEBYTECODE

failed=()
scripts/lint.sh || failed+=("lint")

# tests/hub_mock runs JupyterHub's own test fixtures (MockHub), which cannot share a pytest
# process with the other groups: it gets an invocation (and pytest.ini) of its own, run
# beside the rest (it waits on its hubs and servers most of its minute) with its output
# kept until both have ended.
hub_mock_log=$(mktemp)
python -m pytest tests/hub_mock "$@" >"$hub_mock_log" 2>&1 &
hub_mock=$!
# a run stopped early (Ctrl-C) stops it too: a job started with & ignores the interrupt
trap 'kill "$hub_mock" 2>/dev/null; rm -f "$hub_mock_log"' EXIT

echo "==> pytest"
# Four pytest-xdist workers by default (NBJOBS_TEST_WORKERS=0: all in this process): each
# test file runs whole in one worker, and the files that change the machine all in one
# (tests/conftest.py's scheduler). Most tests wait on real processes (kernels, hubs, a
# browser), so four keep two cores busier than two did (docs/development.md: the
# figures, and where the CPU of a run goes).
workers=(-n "${NBJOBS_TEST_WORKERS:-4}" --dist loadgroup)
# --durations: the slowest tests, named at the end of every run (docs/development.md)
python -m pytest tests --ignore=tests/hub_mock "${workers[@]}" --durations=20 "$@" ||
    failed+=("pytest")

echo "==> pytest tests/hub_mock (ran beside the rest)"
wait "$hub_mock" || failed+=("pytest tests/hub_mock")
cat "$hub_mock_log"

if [ ${#failed[@]} -ne 0 ]; then
    echo "FAILED: ${failed[*]}"
    exit 1
fi
echo "all checks passed"

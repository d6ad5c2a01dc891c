#!/usr/bin/env bash
# Installs nbjobs into ./.venv and starts the single-machine demo.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh
# shellcheck disable=SC1091
. .venv/bin/activate
exec nbjobs demo "$@"

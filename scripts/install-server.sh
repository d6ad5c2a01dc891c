#!/usr/bin/env bash
# A class on this GPU server, in one command, as root on Debian 12 or Ubuntu 22.04+:
#
#     sudo ./scripts/install-server.sh --admin YOURNAME
#
# Installs the system packages nbjobs needs (python3-venv, Node.js for the hub's proxy),
# nbjobs from this checkout into its own environment ($NBJOBS_PREFIX, /opt/nbjobs by
# default: a place every user's account may run), then runs `nbjobs install` with the
# arguments given (see `nbjobs install --help`). Run it again to upgrade in place;
# `sudo /opt/nbjobs/bin/nbjobs uninstall` removes what it made.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
    echo "install-server.sh: run it as root: sudo $0 $*" >&2
    exit 2
fi
prefix=${NBJOBS_PREFIX:-/opt/nbjobs}
if ! command -v npm >/dev/null || ! /usr/bin/python3 -c 'import ensurepip' 2>/dev/null; then
    echo "==> system packages: python3-venv, nodejs, npm"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv nodejs npm >/dev/null
fi
if [ ! -x "$prefix/bin/python" ]; then
    echo "==> a Python environment for nbjobs in $prefix"
    /usr/bin/python3 -m venv "$prefix"
fi
echo "==> nbjobs from $(pwd) into $prefix (a few minutes: it builds the JupyterLab extension)"
# from the committed tree alone: a development build in this checkout (./scripts/install.sh
# --dev) would otherwise end up in the wheel beside a fresh one
source=$(mktemp -d)
trap 'rm -rf "$source"' EXIT
if [ -d .git ] && command -v git >/dev/null; then
    git archive HEAD | tar -x -C "$source"
else
    cp -r . "$source"
fi
"$prefix/bin/python" -m pip install --quiet --upgrade pip
"$prefix/bin/python" -m pip install --quiet --upgrade "$source[all]"
echo "==> nbjobs install $*"
"$prefix/bin/nbjobs" install "$@"

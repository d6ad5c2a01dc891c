#!/usr/bin/env bash
# Prints the Python interpreter the checkout's .venv should be made with: the one given
# ($1, python3 by default), or, run as root, /usr/bin/python3 when users' OS accounts
# could not run the given one (a Python under /root, pyenv's say: notebook servers and
# jobs run under each user's account and start the venv's interpreter).
#
# Asked of the interpreter itself, as nobody: can it reach its own executable, and does
# it find the standard library it was built with? Starting it is no answer: setpriv keeps
# root's capabilities until its exec, so the exec reaches a binary under a closed /root,
# and the Python then falls back to the system's library of the same version and runs.
set -euo pipefail
python=$(command -v "${1:-python3}")
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
    echo "$python"
    exit 0
fi
ask='import os, sys; print(sys.base_prefix if os.access(sys.executable, os.X_OK) else "")'
own=$("$python" -c "$ask")
as_nobody=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$python" -c "$ask" 2>/dev/null || true)
if [ -n "$own" ] && [ "$as_nobody" = "$own" ]; then
    echo "$python"
elif [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import sys; assert sys.version_info >= (3, 10)' 2>/dev/null; then
    echo "==> $python lies where users' accounts cannot start it; using /usr/bin/python3" >&2
    echo /usr/bin/python3
else
    echo "==> $python lies where users' accounts cannot start it, and there is no /usr/bin/python3 3.10 or newer: jobs under OS accounts will not start" >&2
    echo "$python"
fi

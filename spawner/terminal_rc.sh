# The start-up file of terminals in a notebook server nbjobs' local spawner started.
# A login shell would read /etc/profile, which sets PATH anew and loses the folder the
# `nbjobs` command is in; so: the usual start-up files first, then that folder in front.
if [ -f /etc/profile ]; then . /etc/profile; fi
if [ -f "$HOME/.bashrc" ]; then . "$HOME/.bashrc"; fi
if [ -n "$NBJOBS_BIN" ]; then export PATH="$NBJOBS_BIN:$PATH"; fi

#!/bin/sh
# The service benchmark's cheapest stand-in for job_runner: a POSIX shell script that
# only takes time. Same command line as `python -m nbjobs.job_runner` (INPUT OUTPUT
# --status-file S --parameters JSON ...); it sleeps parameters["seconds"] and writes a
# final status. It starts in about a millisecond, where even `python -S` takes tens, so
# the packing benchmark can show what the queue itself costs.
status=""
seconds=0
while [ $# -gt 0 ]; do
    case "$1" in
        --status-file) status="$2"; shift 2 ;;
        --parameters)
            rest="${2#*\"seconds\": }"
            [ "$rest" != "$2" ] && seconds="${rest%%[,\}]*}"
            shift 2 ;;
        *) shift ;;
    esac
done
sleep "$seconds"
now=$(date -u +%Y-%m-%dT%H:%M:%S.%3N+00:00)
printf '{"state": "succeeded", "exit_code": 0, "started_at": "%s", "finished_at": "%s"}' \
    "$now" "$now" > "$status.tmp"
mv "$status.tmp" "$status"

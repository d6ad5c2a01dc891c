"""Job definitions: saved submissions that run now or on a schedule (issue 20).

:mod:`.cron` reads schedules (cron expressions in an IANA time zone), :mod:`.store`
keeps definitions, their versions and their runs, :mod:`.ticker` starts the runs that
are due (exactly one job per tick, whatever restarts or second processes happen), and
:mod:`.handlers` serves them under ``api/definitions``.
"""

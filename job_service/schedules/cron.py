"""Schedules: a cron expression read in an IANA time zone.

A schedule's ticks are the minutes its five cron fields match on the wall clock of its
time zone, as Debian's cron runs them (``cronsim`` works them out): on the night the
clocks go forward a daily run in the skipped hour runs once, right after the change;
on the night they go back it runs once, not twice. Ticks are kept in UTC.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from itertools import islice, pairwise
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from cronsim import CronSim, CronSimError

#: simple schedules by name, as the Submit dialog and ``nbjobs schedule create --every``
#: offer them; ``{minute}`` and ``{hour}`` come from the time asked for
PRESETS = {
    "hour": "{minute} * * * *",
    "day": "{minute} {hour} * * *",
    "weekday": "{minute} {hour} * * 1-5",
    "monday": "{minute} {hour} * * 1",
}
#: how many ticks ahead are looked at for a schedule's shortest gap
GAP_SAMPLES = 60


class ScheduleError(ValueError):
    """A schedule that cannot be used; the message says which part and what to do."""


@dataclass(frozen=True)
class Schedule:
    """When a definition runs: ``cron`` (five fields) on the clock of ``timezone``."""

    cron: str
    timezone: str

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def ticks_after(self, after: datetime) -> CronSim:
        """The ticks after ``after`` (aware), as aware datetimes in the schedule's zone."""
        return CronSim(self.cron, after.astimezone(self.zone))

    def next_after(self, after: datetime) -> datetime:
        """The first tick after ``after``, in UTC."""
        return next(self.ticks_after(after)).astimezone(timezone.utc)

    def shortest_gap(self, after: datetime) -> timedelta:
        """The shortest time between two ticks among the next :data:`GAP_SAMPLES`."""
        ticks = list(islice(self.ticks_after(after), GAP_SAMPLES))
        gaps = [b.astimezone(timezone.utc) - a.astimezone(timezone.utc) for a, b in pairwise(ticks)]
        return min(gaps) if gaps else timedelta.max

    def explain(self) -> str:
        """The schedule in words ("At 02:00 on Monday through Friday, Europe/Paris")."""
        words = CronSim(self.cron, datetime.now(self.zone)).explain()
        return f"{words} ({self.timezone})"


def preset(every: str, at: str | None = None) -> str:
    """The cron expression for a named schedule ("day" at "02:00": ``0 2 * * *``)."""
    if every not in PRESETS:
        raise ScheduleError(f"every: {every!r} is not one of {', '.join(PRESETS)}")
    hour, minute = 0, 0
    if at:
        try:
            hour_text, minute_text = at.split(":")
            hour, minute = int(hour_text), int(minute_text)
        except ValueError:
            raise ScheduleError(f"at: {at!r} is not a time as HH:MM (e.g. 02:00)") from None
        if not (0 <= hour < 24 and 0 <= minute < 60):
            raise ScheduleError(f"at: {at!r} is not a time of day (00:00 to 23:59)")
    return PRESETS[every].format(minute=minute, hour=hour)


def parse_schedule(cron: str, zone: str, min_interval: float, now: datetime) -> Schedule:
    """A schedule checked for use: five valid fields, a known time zone, and no two
    ticks closer than ``min_interval`` seconds (``schedules.min_interval``)."""
    fields = cron.split()
    if len(fields) != 5:
        raise ScheduleError(
            f"cron: {cron!r} has {len(fields)} field(s); a schedule has five: minute hour "
            "day-of-month month day-of-week (e.g. '0 2 * * *' for 02:00 every day)"
        )
    try:
        zone_info = ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ScheduleError(
            f"timezone: {zone!r} is not an IANA time zone (e.g. Europe/Paris, "
            "America/New_York, UTC)"
        ) from None
    if zone not in available_timezones() and zone != "UTC":
        raise ScheduleError(f"timezone: {zone!r} is not an IANA time zone name")
    normal = " ".join(fields)
    try:
        ticks = CronSim(normal, now.astimezone(zone_info))
        next(ticks)
    except CronSimError as exc:
        raise ScheduleError(f"cron: {cron!r} is not valid: {exc}") from None
    except StopIteration:
        raise ScheduleError(f"cron: {cron!r} never matches a date") from None
    schedule = Schedule(normal, zone)
    gap = schedule.shortest_gap(now)
    if gap.total_seconds() < min_interval:
        raise ScheduleError(
            f"cron: {cron!r} runs every {_spoken(gap.total_seconds())} at times; this "
            f"service runs a definition at most every {_spoken(min_interval)} "
            "(schedules.min_interval in nbjobs.yaml)"
        )
    return schedule


def _spoken(seconds: float) -> str:
    seconds = round(seconds)
    if seconds % 3600 == 0 and seconds >= 3600:
        return f"{seconds // 3600} h"
    if seconds % 60 == 0 and seconds >= 60:
        return f"{seconds // 60} min"
    return f"{seconds} s"

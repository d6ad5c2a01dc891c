/**
 * Schedules as the Submit dialog offers them: simple choices that become the five
 * cron fields the service reads, or a cron expression typed as is.
 */
import type { Translate } from './translate';

export type Every = 'hour' | 'day' | 'weekday' | 'monday' | 'cron';

/** The choices, in the order the dialog lists them. */
export function everyChoices(trans: Translate): [Every, string][] {
  return [
    ['day', trans('every day at')],
    ['weekday', trans('on weekdays at')],
    ['monday', trans('every Monday at')],
    ['hour', trans('every hour, at minute')],
    ['cron', trans('as a cron expression')]
  ];
}

/**
 * The cron expression for a choice: `time` is `HH:MM` (for `hour`, only its minutes
 * count); for `cron` the text typed. Null with the reason when it cannot be one.
 */
export function cronFor(
  every: Every,
  time: string,
  typed: string,
  trans: Translate
): { cron: string } | { error: string } {
  if (every === 'cron') {
    const fields = typed.trim().split(/\s+/).filter(Boolean);
    if (fields.length !== 5) {
      return {
        error: trans(
          'A cron expression has five fields: minute hour day-of-month month day-of-week (e.g. 0 2 * * *).'
        )
      };
    }
    return { cron: fields.join(' ') };
  }
  const found = /^(\d{1,2}):(\d{2})$/.exec(time.trim());
  const hour = found ? Number(found[1]) : NaN;
  const minute = found ? Number(found[2]) : NaN;
  if (!found || hour > 23 || minute > 59) {
    return { error: trans('Give the time as HH:MM, e.g. 02:00.') };
  }
  switch (every) {
    case 'hour':
      return { cron: `${minute} * * * *` };
    case 'day':
      return { cron: `${minute} ${hour} * * *` };
    case 'weekday':
      return { cron: `${minute} ${hour} * * 1-5` };
    case 'monday':
      return { cron: `${minute} ${hour} * * 1` };
  }
  return { error: trans('Pick when it runs.') };
}

/** The browser's time zone (IANA), which a schedule uses unless changed. */
export function browserTimezone(): string {
  try {
    return Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
  } catch {
    return 'UTC';
  }
}

/** The day `YYYY-MM-DD` as its three numbers, or null when it is not one. */
function dayParts(day: string): [number, number, number] | null {
  const found = /^(\d{4})-(\d{2})-(\d{2})$/.exec(day.trim());
  if (!found) {
    return null;
  }
  const [year, month, date] = [Number(found[1]), Number(found[2]), Number(found[3])];
  const check = new Date(Date.UTC(year, month - 1, date));
  return check.getUTCMonth() === month - 1 && check.getUTCDate() === date
    ? [year, month, date]
    : null;
}

/** How far `zone`'s clock is ahead of UTC (ms) at the instant `at` (ms since the epoch). */
function zoneOffset(at: number, zone: string): number {
  const parts = new Intl.DateTimeFormat('en-US', {
    timeZone: zone,
    hour12: false,
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit'
  }).formatToParts(new Date(at));
  const part = (type: string) => Number(parts.find(p => p.type === type)?.value ?? 0);
  const wall = Date.UTC(
    part('year'),
    part('month') - 1,
    part('day'),
    part('hour') % 24, // some engines say 24 for midnight
    part('minute'),
    part('second')
  );
  return wall - Math.floor(at / 1000) * 1000;
}

/** The instant day `YYYY-MM-DD` begins on `zone`'s clock (a RangeError for a zone that
 *  is none). */
export function dayStart(day: string, zone: string): Date | null {
  const parts = dayParts(day);
  if (!parts) {
    return null;
  }
  const midnight = Date.UTC(parts[0], parts[1] - 1, parts[2]);
  // the offset at a first guess, then at the instant it gives (a clock change between)
  const guess = midnight - zoneOffset(midnight, zone);
  return new Date(midnight - zoneOffset(guess, zone));
}

/** The day (`YYYY-MM-DD`) instant `iso` falls on, on `zone`'s clock. */
export function dayIn(iso: string, zone: string): string {
  const at = Date.parse(iso);
  const shifted = new Date(at + zoneOffset(at, zone));
  return shifted.toISOString().slice(0, 10);
}

/**
 * A schedule's first and last day as the instants the service takes: from the start of
 * `first` to the last second of `last`, on `zone`'s clock. Either may be empty (no
 * bound); the reason when they cannot be.
 */
export function windowFor(
  first: string,
  last: string,
  zone: string,
  trans: Translate
): { start_at: string | null; end_at: string | null } | { error: string } {
  let start: Date | null = null;
  let end: Date | null = null;
  try {
    if (first.trim()) {
      start = dayStart(first, zone);
      if (!start) {
        return { error: trans('Give the first day as YYYY-MM-DD.') };
      }
    }
    if (last.trim()) {
      const parts = dayParts(last);
      const next = parts
        ? new Date(Date.UTC(parts[0], parts[1] - 1, parts[2] + 1)).toISOString().slice(0, 10)
        : '';
      const after = parts ? dayStart(next, zone) : null;
      if (!after) {
        return { error: trans('Give the last day as YYYY-MM-DD.') };
      }
      end = new Date(after.getTime() - 1000);
    }
  } catch {
    return { error: trans('%1 is not a time zone (e.g. Europe/Paris).', zone) };
  }
  if (start && end && end <= start) {
    return { error: trans('The last day comes before the first.') };
  }
  return {
    start_at: start ? start.toISOString() : null,
    end_at: end ? end.toISOString() : null
  };
}

/** A schedule's first and last day in words ("from 2026-12-01 until 2026-12-20"), on
 *  its own clock; empty without either. */
export function windowWords(
  start: string | null | undefined,
  end: string | null | undefined,
  zone: string,
  trans: Translate
): string {
  const first = start ? dayIn(start, zone) : null;
  const last = end ? dayIn(end, zone) : null;
  if (first && last) {
    return trans('from %1 until %2', first, last);
  }
  if (first) {
    return trans('from %1', first);
  }
  return last ? trans('until %1', last) : '';
}

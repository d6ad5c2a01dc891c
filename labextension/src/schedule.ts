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

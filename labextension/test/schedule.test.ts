import { describe, expect, it } from 'vitest';

import { cronFor, dayIn, dayStart, everyChoices, windowFor, windowWords } from '../src/schedule';
import { plain } from '../src/translate';

describe('cronFor', () => {
  it('turns the simple choices into five cron fields', () => {
    expect(cronFor('day', '02:00', '', plain)).toEqual({ cron: '0 2 * * *' });
    expect(cronFor('weekday', '7:45', '', plain)).toEqual({ cron: '45 7 * * 1-5' });
    expect(cronFor('monday', '23:59', '', plain)).toEqual({ cron: '59 23 * * 1' });
    expect(cronFor('hour', '00:15', '', plain)).toEqual({ cron: '15 * * * *' });
  });

  it('takes a typed cron expression of five fields, spaces tidied', () => {
    expect(cronFor('cron', '', '  */10   * * * 1-5 ', plain)).toEqual({ cron: '*/10 * * * 1-5' });
  });

  it('says what is wrong with a time or an expression', () => {
    for (const time of ['25:00', '2pm', '02:60', '']) {
      expect(cronFor('day', time, '', plain)).toEqual({
        error: 'Give the time as HH:MM, e.g. 02:00.'
      });
    }
    expect(cronFor('cron', '', '0 2 * *', plain)).toHaveProperty('error');
    expect(cronFor('cron', '', '* * * * * *', plain)).toHaveProperty('error');
  });

  it('offers every choice it can turn into cron', () => {
    for (const [every] of everyChoices(plain)) {
      expect(cronFor(every, '01:02', '1 2 3 4 5', plain)).toHaveProperty('cron');
    }
  });
});

describe('windowFor', () => {
  it('runs from the start of the first day to the last second of the last, on the zone clock', () => {
    expect(windowFor('2026-12-01', '2026-12-20', 'Europe/Paris', plain)).toEqual({
      start_at: '2026-11-30T23:00:00.000Z',
      end_at: '2026-12-20T22:59:59.000Z'
    });
    expect(windowFor('2026-07-01', '', 'America/New_York', plain)).toEqual({
      start_at: '2026-07-01T04:00:00.000Z',
      end_at: null
    });
    expect(windowFor('', '2026-01-31', 'UTC', plain)).toEqual({
      start_at: null,
      end_at: '2026-01-31T23:59:59.000Z'
    });
    expect(windowFor('', '', 'Asia/Kolkata', plain)).toEqual({ start_at: null, end_at: null });
  });

  it('finds midnight on a day the clocks change', () => {
    // Paris goes to summer time at 02:00 on 29 March 2026: the day still starts at 00:00
    // winter time, and ends at 24:00 summer time
    expect(windowFor('2026-03-29', '2026-03-29', 'Europe/Paris', plain)).toEqual({
      start_at: '2026-03-28T23:00:00.000Z',
      end_at: '2026-03-29T21:59:59.000Z'
    });
  });

  it('says what is wrong', () => {
    expect(windowFor('2026-12-20', '2026-12-01', 'UTC', plain)).toEqual({
      error: 'The last day comes before the first.'
    });
    expect(windowFor('1 Dec', '', 'UTC', plain)).toEqual({
      error: 'Give the first day as YYYY-MM-DD.'
    });
    expect(windowFor('', '2026-02-30', 'UTC', plain)).toEqual({
      error: 'Give the last day as YYYY-MM-DD.'
    });
    expect(windowFor('2026-12-01', '', 'Mars/Olympus', plain)).toEqual({
      error: 'Mars/Olympus is not a time zone (e.g. Europe/Paris).'
    });
  });
});

describe('dayIn', () => {
  it('gives back the days a window was made from', () => {
    const made = windowFor('2026-12-01', '2026-12-20', 'Pacific/Auckland', plain);
    if ('error' in made) {
      throw new Error(made.error);
    }
    expect(dayIn(made.start_at!, 'Pacific/Auckland')).toBe('2026-12-01');
    expect(dayIn(made.end_at!, 'Pacific/Auckland')).toBe('2026-12-20');
    expect(dayStart('2026-12-01', 'UTC')?.toISOString()).toBe('2026-12-01T00:00:00.000Z');
  });
});

describe('windowWords', () => {
  it('says the days on the schedule clock, or nothing', () => {
    expect(windowWords('2026-11-30T23:00:00Z', '2026-12-20T22:59:59Z', 'Europe/Paris', plain)).toBe(
      'from 2026-12-01 until 2026-12-20'
    );
    expect(windowWords('2026-11-30T23:00:00Z', null, 'UTC', plain)).toBe('from 2026-11-30');
    expect(windowWords(null, '2026-12-20T22:59:59Z', 'UTC', plain)).toBe('until 2026-12-20');
    expect(windowWords(null, null, 'UTC', plain)).toBe('');
  });
});

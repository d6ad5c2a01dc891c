import { describe, expect, it } from 'vitest';

import { cronFor, everyChoices } from '../src/schedule';
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

import { describe, expect, it } from 'vitest';

import { bytes, creditText, csvField, gpus, hours, rosterNames, wait } from '../format';

describe('rosterNames', () => {
  it('takes one name per line or the first column of a CSV, skipping a header', () => {
    expect(rosterNames('username,email\nada,ada@example.org\n"bob",b@x\n\n  cy  \r\n')).toEqual([
      'ada',
      'bob',
      'cy'
    ]);
    expect(rosterNames('Student\nAda')).toEqual(['Ada']);
    expect(rosterNames('ada;1\nbob\t2')).toEqual(['ada', 'bob']);
    expect(rosterNames('')).toEqual([]);
  });

  it('keeps a first name that only looks like a header word later on', () => {
    expect(rosterNames('ada\nname')).toEqual(['ada', 'name']);
  });
});

describe('csvField', () => {
  it('quotes what must be quoted and defuses formulas', () => {
    expect(csvField('ada')).toBe('ada');
    expect(csvField('a,b')).toBe('"a,b"');
    expect(csvField('say "hi"')).toBe('"say ""hi"""');
    expect(csvField('=HYPERLINK("x")')).toBe('"\'=HYPERLINK(""x"")"');
    expect(csvField(-1.5)).toBe('-1.5');
    expect(csvField(null)).toBe('');
  });
});

describe('numbers for people', () => {
  it('writes GPUs, hours and waits readably', () => {
    expect(gpus(2)).toBe('2');
    expect(gpus(0.75)).toBe('0.75');
    expect(gpus(1.5)).toBe('1.5');
    expect(hours(0)).toBe('0');
    expect(hours(0.0015)).toBe('0.0015');
    expect(hours(3.254)).toBe('3.25');
    expect(hours(12.34)).toBe('12.3');
    expect(wait(45)).toBe('45 s');
    expect(wait(125)).toBe('2 min');
    expect(wait(3 * 3600 + 5 * 60)).toBe('3 h 05 min');
    expect(wait(50 * 3600)).toBe('2 d 2 h');
  });
});

describe('bytes', () => {
  it('writes sizes in the largest binary unit they fill, to a tenth', () => {
    expect(bytes(512)).toBe('512 B');
    expect(bytes(3500)).toBe('3.4 KiB');
    expect(bytes(2_000_000)).toBe('1.9 MiB');
    expect(bytes(5 * 1024 ** 3)).toBe('5.0 GiB');
  });
});

describe('creditText', () => {
  it('shows credits to the cent, a charge of seconds as a cent rather than nothing', () => {
    expect(creditText(0)).toBe('0.00');
    expect(creditText(12.345)).toBe('12.35');
    expect(creditText(0.0016)).toBe('0.01');
    expect(creditText(-0.0016)).toBe('-0.01');
    expect(creditText(-1.5)).toBe('-1.50');
  });
});

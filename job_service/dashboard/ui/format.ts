/** Numbers and times as the dashboard shows them. */

import { PERIOD_SPANS, PERIOD_WORDS } from '../../../labextension/src/contract';

/** GPU counts: whole numbers as they are, fractions to two places (`2`, `0.75`). */
export function gpus(value: number): string {
  return Number.isInteger(value) ? String(value) : value.toFixed(2).replace(/0$/, '');
}

/** Bytes for people: `512 B`, `3.4 KiB`, `120.0 MiB`, `5.0 GiB`. */
export function bytes(value: number): string {
  for (const [unit, size] of [
    ['GiB', 1024 ** 3],
    ['MiB', 1024 ** 2],
    ['KiB', 1024]
  ] as const) {
    if (value >= size) {
      return `${(value / size).toFixed(1)} ${unit}`;
    }
  }
  return `${value} B`;
}

/** GPU-hours for people: `12.5`, `3.25`, `0.0015` (two significant digits below one). */
/** Credits, to the cent (a charge of seconds shows as 0.01, not 0). */
export function creditText(value: number): string {
  if (value !== 0 && Math.abs(value) < 0.01) {
    return value < 0 ? '-0.01' : '0.01';
  }
  return value.toFixed(2);
}

export function hours(value: number): string {
  if (value === 0) {
    return '0';
  }
  if (value >= 10) {
    return value.toFixed(1);
  }
  return value >= 1 ? value.toFixed(2) : value.toPrecision(2);
}

/** A wait for people: `45 s`, `12 min`, `3 h 05 min`, `2 d 4 h`. */
export function wait(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) {
    return `${s} s`;
  }
  const minutes = Math.floor(s / 60);
  if (minutes < 60) {
    return `${minutes} min`;
  }
  const h = Math.floor(minutes / 60);
  if (h < 48) {
    return `${h} h ${String(minutes % 60).padStart(2, '0')} min`;
  }
  return `${Math.floor(h / 24)} d ${h % 24} h`;
}

/** A moment in the reader's own time zone, to the minute. */
export function when(iso: string | null): string {
  if (!iso) {
    return '';
  }
  const date = new Date(iso.endsWith('Z') || iso.includes('+') ? iso : `${iso}Z`);
  return date.toLocaleString(undefined, {
    month: 'short',
    day: 'numeric',
    hour: '2-digit',
    minute: '2-digit'
  });
}

/** A budget's period as every view says it: `the last 7 days` (a rolling window). */
export function periodWords(period: string): string {
  return PERIOD_WORDS[period] ?? `the last ${period}`;
}

/** How long a period is: `7 days` (what a granted extension counts for). */
export function periodSpan(period: string): string {
  return PERIOD_SPANS[period] ?? period;
}

/** A usage report's range as every view says it (`nbjobs usage` too): whole UTC days. */
export function rangeWords(since: string | null, until: string | null): string {
  return `from ${since ?? '?'} to ${until ?? '?'} (whole UTC days)`;
}

/** A date as the API takes it (`YYYY-MM-DD`, UTC). */
export function isoDay(date: Date): string {
  return date.toISOString().slice(0, 10);
}

/** One CSV field, quoted when it must be (RFC 4180), and never read as a formula. */
export function csvField(value: string | number | null): string {
  let text = value === null ? '' : String(value);
  if (/^[=+\-@\t\r]/.test(text) && typeof value === 'string') {
    text = `'${text}`;
  }
  return /[",\n\r]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/** User names from a roster: one per line, the first column of a CSV (a header row such
 * as `username` or `student` is skipped), quotes and blanks removed. */
export function rosterNames(text: string): string[] {
  const names: string[] = [];
  for (const line of text.split(/\r?\n/)) {
    const first = line
      .split(/[,;\t]/)[0]
      .trim()
      .replace(/^"(.*)"$/, '$1')
      .trim();
    if (!first) {
      continue;
    }
    if (names.length === 0 && /^(user ?name|user|student|name|login|e-?mail)$/i.test(first)) {
      continue;
    }
    names.push(first);
  }
  return names;
}

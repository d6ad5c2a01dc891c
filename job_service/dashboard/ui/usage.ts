/**
 * The Usage view's arithmetic and its CSV: the days of a range, several lines of the
 * report merged into one, and the report downloaded as one row per key and day.
 */
import type { IUsage, IUsageLine } from './api';
import { csvField, periodWords } from './format';

/** The title of the use against budgets, for whoever reads it: an admin's top users,
 * a teacher's students (and themselves), anyone else their own. */
export function budgetTitle(
  me: { admin: boolean; teacher: boolean } | null,
  period: string
): string {
  const words = periodWords(period);
  if (me?.admin) {
    return `Top users in ${words}, against their budgets`;
  }
  return me?.teacher
    ? `You and your students in ${words}, against their budgets`
    : `Your GPU-hours in ${words}`;
}

/** Each UTC day from `since` to `until`, both included, as YYYY-MM-DD. */
export function dayLabels(since: string | null, until: string | null): string[] {
  if (!since || !until) {
    return [];
  }
  const days: string[] = [];
  for (
    let t = Date.parse(`${since}T00:00:00Z`);
    t <= Date.parse(`${until}T00:00:00Z`);
    t += 86_400_000
  ) {
    days.push(new Date(t).toISOString().slice(0, 10));
  }
  return days;
}

/** Several lines of the report as one (the chart's "N others"), day by day. */
export function merge(name: string, lines: IUsageLine[]): IUsageLine {
  const days = new Map<
    string,
    { date: string; gpu_hours_allocated: number; gpu_hours_busy: number }
  >();
  for (const line of lines) {
    for (const d of line.days) {
      const day = days.get(d.date) ?? { date: d.date, gpu_hours_allocated: 0, gpu_hours_busy: 0 };
      day.gpu_hours_allocated += d.gpu_hours_allocated;
      day.gpu_hours_busy += d.gpu_hours_busy;
      days.set(d.date, day);
    }
  }
  return {
    name,
    jobs: lines.reduce((n, l) => n + l.jobs, 0),
    gpu_hours_allocated: lines.reduce((n, l) => n + l.gpu_hours_allocated, 0),
    gpu_hours_busy: lines.reduce((n, l) => n + l.gpu_hours_busy, 0),
    busy_percent: null,
    cost: null,
    days: [...days.values()]
  };
}

/** The report as CSV, one row per key and day. */
export function download(usage: IUsage): void {
  const rows = [['date', usage.by ?? 'key', 'gpu_hours_allocated', 'gpu_hours_busy'].join(',')];
  for (const line of usage.breakdown) {
    for (const d of line.days) {
      rows.push(
        [d.date, line.name, d.gpu_hours_allocated, d.gpu_hours_busy].map(csvField).join(',')
      );
    }
  }
  const link = document.createElement('a');
  link.href = URL.createObjectURL(new Blob([rows.join('\r\n') + '\r\n'], { type: 'text/csv' }));
  link.download = `nbjobs-usage-by-${usage.by}-${usage.range_since}-${usage.range_until}.csv`;
  link.click();
  URL.revokeObjectURL(link.href);
}

/** The dashboard's Usage (everyone, each seeing what the API lets them): GPU time by day
 * and by a breakdown, charted and tabled, with a CSV download. */

import { Chart } from 'chart.js';

import { IUsage, IUsageLine, IUsageRow } from './api';
import { COLOURS, SERIES_SHOWN, h, table, meter } from './dom';
import { hours, isoDay, periodWords, rangeWords } from './format';
import { Page } from './page';
import { budgetTitle, dayLabels, download, merge } from './usage';

export function usageForm(page: Page): HTMLFormElement {
  const today = new Date();
  const start = new Date(today.getTime() - 13 * 86_400_000);
  const choices = page.me?.admin
    ? ['user', 'group', 'class', 'flavor', 'node']
    : page.me?.teacher
      ? ['user', 'class', 'flavor']
      : ['flavor'];
  const by = h(
    'select',
    { id: 'nbjobs-by', name: 'by' },
    ...choices.map(c => h('option', { value: c }, c))
  );
  return h(
    'form',
    { class: 'nbjobs-Controls', 'aria-label': 'Report' },
    h('label', { for: 'nbjobs-by' }, 'By'),
    by,
    h('label', { for: 'nbjobs-since' }, 'From'),
    h('input', { type: 'date', id: 'nbjobs-since', name: 'since', value: isoDay(start) }),
    h('label', { for: 'nbjobs-until' }, 'to'),
    h('input', { type: 'date', id: 'nbjobs-until', name: 'until', value: isoDay(today) }),
    h('button', { type: 'submit' }, 'Show'),
    h('button', { type: 'button', id: 'nbjobs-csv' }, 'Download CSV')
  ) as HTMLFormElement;
}

export async function usageView(page: Page): Promise<void> {
  const form = usageForm(page);
  const result = h('div', { class: 'nbjobs-Usage' });
  page.main.replaceChildren(h('h2', {}, 'GPU-hours'), form, result);
  let last: IUsage | null = null;
  const load = async (): Promise<void> => {
    const query = Object.fromEntries(new FormData(form).entries()) as Record<string, string>;
    result.replaceChildren(h('p', { class: 'nbjobs-Loading' }, 'Loading…'));
    try {
      last = await page.api.get<IUsage>('usage', query);
    } catch (error) {
      result.replaceChildren(
        h('p', { class: 'nbjobs-Error', role: 'alert' }, (error as Error).message)
      );
      return;
    }
    drawUsage(page, result, last);
  };
  form.addEventListener('submit', event => {
    event.preventDefault();
    void load();
  });
  form.querySelector('#nbjobs-csv')?.addEventListener('click', () => {
    if (last) {
      download(last);
    }
  });
  await load();
}

export function drawUsage(page: Page, into: HTMLElement, usage: IUsage): void {
  for (const chart of page.charts) {
    chart.destroy();
  }
  page.charts = [];
  const days = dayLabels(usage.range_since, usage.range_until);
  const total = usage.total;
  if (!total || usage.breakdown.length === 0) {
    const budgets = budgetsSection(page, usage);
    into.replaceChildren(
      ...(budgets ? [budgets] : []),
      h('p', {}, `No GPU use ${rangeWords(usage.range_since, usage.range_until)}.`)
    );
    return;
  }
  const lines = [...usage.breakdown].sort((a, b) => b.gpu_hours_allocated - a.gpu_hours_allocated);
  const shown = lines.slice(0, SERIES_SHOWN);
  const rest = lines.slice(SERIES_SHOWN);
  const series = rest.length ? [...shown, merge(`${rest.length} others`, rest)] : shown;
  const stacked = h('canvas', {
    id: 'nbjobs-usage-by',
    role: 'img',
    'aria-label': `GPU-hours allocated per day by ${usage.by}: ${series.map(s => `${s.name} ${hours(s.gpu_hours_allocated)}`).join(', ')}`
  }) as HTMLCanvasElement;
  const versus = h('canvas', {
    id: 'nbjobs-usage-busy',
    role: 'img',
    'aria-label': `GPU-hours allocated and busy per day: ${hours(total.gpu_hours_allocated)} allocated, ${hours(total.gpu_hours_busy)} busy`
  }) as HTMLCanvasElement;
  const summary = summaryTable(usage, lines, total);
  const budgets = budgetsSection(page, usage);
  into.replaceChildren(
    ...(budgets ? [budgets] : []),
    h(
      'section',
      {},
      h('h3', {}, `Allocated per day, by ${usage.by}`),
      h('div', { class: 'nbjobs-Chart' }, stacked)
    ),
    h(
      'section',
      {},
      h('h3', {}, 'Allocated and busy per day'),
      h('div', { class: 'nbjobs-Chart' }, versus)
    ),
    h(
      'section',
      {},
      h('h3', {}, `GPU-hours ${rangeWords(usage.range_since, usage.range_until)}`),
      summary
    )
  );
  page.charts.push(
    new Chart(stacked, {
      type: 'bar',
      data: {
        labels: days,
        datasets: series.map((line, i) => ({
          label: line.name,
          data: perDay(days, line, 'gpu_hours_allocated'),
          backgroundColor: COLOURS[i % COLOURS.length],
          borderColor: '#ffffff',
          borderWidth: 1
        }))
      },
      options: {
        animation: false,
        maintainAspectRatio: false,
        scales: {
          x: { stacked: true },
          y: { stacked: true, title: { display: true, text: 'GPU-hours' } }
        }
      }
    }),
    versusChart(versus, days, total)
  );
}

/** Each key's jobs, GPU-hours allocated and busy, and cost over the days chosen. */
function summaryTable(usage: IUsage, lines: IUsageLine[], total: IUsageLine): HTMLElement {
  return table(
    // the days chosen above, counted by the same rule as the budgets' period
    [usage.by ?? 'key', 'Jobs', 'GPU-hours allocated', 'GPU-hours busy', 'Busy %', 'Cost'],
    [...lines, { ...total, name: 'all' }].map(line => [
      line.name,
      String(line.jobs),
      hours(line.gpu_hours_allocated),
      hours(line.gpu_hours_busy),
      line.busy_percent === null ? '–' : `${Math.round(line.busy_percent)} %`,
      line.cost === null ? '–' : line.cost.toFixed(2)
    ]),
    `GPU-hours by ${usage.by}`
  );
}

/** Use against budgets, each in its period up to now: an admin's top users, a teacher's
 * students and themselves, anyone else their own (none: null). */
function budgetsSection(page: Page, usage: IUsage): HTMLElement | null {
  const own = !page.me?.admin && !page.me?.teacher;
  const rows = own ? [usage.own] : usage.users.slice(0, 10);
  if (!rows.length) {
    return null;
  }
  const title = budgetTitle(page.me, usage.period);
  return h(
    'section',
    {},
    h('h3', {}, title),
    table(
      [...(own ? [] : ['User']), 'Jobs', 'Running now', 'Queued now', 'GPU-hours used'],
      rows.map(u => [...(own ? [] : [u.name]), ...budgetCells(u, usage.period)]),
      title
    )
  );
}

/** A row's jobs, what runs and waits now, and its GPU-hours against its budget (in its
 * own period, said when it is not the table's). */
function budgetCells(u: IUsageRow, period: string): (string | HTMLElement)[] {
  const other = u.period === period ? '' : ` in ${periodWords(u.period)}`;
  const granted = u.gpu_hours_granted ? ` (${hours(u.gpu_hours_granted)} granted)` : '';
  return [
    String(u.jobs),
    String(u.running),
    String(u.queued),
    u.gpu_hours_limit === null
      ? `${hours(u.gpu_hours)}${other} (no budget)`
      : h(
          'span',
          {},
          meter(u.gpu_hours, u.gpu_hours_limit, `${u.name}'s GPU-hours`, hours),
          `${other}${granted}`
        )
  ];
}

/** A line's GPU-hours (allocated or busy) on each of ``days``. */
function perDay(
  days: string[],
  line: IUsageLine,
  field: 'gpu_hours_allocated' | 'gpu_hours_busy'
): number[] {
  const byDay = new Map(line.days.map(d => [d.date, d[field]]));
  return days.map(d => byDay.get(d) ?? 0);
}

/** The chart of GPU-hours allocated against busy, per day. */
function versusChart(canvas: HTMLCanvasElement, days: string[], total: IUsageLine): Chart {
  return new Chart(canvas, {
    type: 'line',
    data: {
      labels: days,
      datasets: [
        {
          label: 'allocated',
          data: perDay(days, total, 'gpu_hours_allocated'),
          borderColor: COLOURS[0],
          backgroundColor: COLOURS[0],
          pointStyle: 'rect',
          pointRadius: 4
        },
        {
          label: 'busy',
          data: perDay(days, total, 'gpu_hours_busy'),
          borderColor: COLOURS[1],
          backgroundColor: COLOURS[1],
          borderDash: [6, 4],
          pointStyle: 'triangle',
          pointRadius: 5
        }
      ]
    },
    options: {
      animation: false,
      maintainAspectRatio: false,
      plugins: { legend: { labels: { usePointStyle: true } } },
      scales: { y: { beginAtZero: true, title: { display: true, text: 'GPU-hours' } } }
    }
  });
}

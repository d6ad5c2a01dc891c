/** The dashboard's Overview (admins): GPUs held and busy, per node and type, the queues,
 * the last day's failures. */

import { IOverview } from './api';
import { REFRESH_MS, h, table, meter } from './dom';
import { gpus, wait, when } from './format';
import { Page } from './page';
import { kueueQueues } from './queue';

export async function overviewView(page: Page): Promise<void> {
  let data: IOverview;
  try {
    data = await page.api.get<IOverview>('dashboard/overview');
  } catch (error) {
    page.fail(error);
    return;
  }
  if (page.view !== 'overview') {
    return;
  }
  const cards = nowCards(data);
  const nodes = nodesTable(data);
  const types = typesTable(data);
  const flavors = table(
    ['Flavor', 'Running', 'Queued', 'Longest wait'],
    data.flavors.map(f => [
      `${f.display_name} (${f.name})`,
      String(f.running),
      String(f.queued),
      f.longest_wait_seconds === null ? '–' : wait(f.longest_wait_seconds)
    ]),
    'Jobs per flavor'
  );
  const longest = data.longest_wait;
  const failures = data.recent_failures.length
    ? table(
        ['Ended', 'User', 'Job', 'Flavor', 'Why'],
        data.recent_failures.map(f => [
          when(f.finished_at),
          f.user,
          `${f.name} (${f.id})`,
          f.flavor,
          `${f.state.replace('_', ' ')}: ${f.message ?? ''}`
        ]),
        'Recent failures'
      )
    : h('p', {}, 'No job failed in the last 24 hours.');
  page.main.replaceChildren(
    cards,
    h(
      'section',
      {},
      h('h2', {}, 'GPUs per node'),
      data.nodes.length ? nodes : h('p', {}, 'No GPU nodes seen.')
    ),
    h('section', {}, h('h2', {}, 'GPUs per type'), types),
    h(
      'section',
      {},
      h('h2', {}, 'Queues'),
      flavors,
      h(
        'p',
        { class: 'nbjobs-Longest' },
        longest
          ? `Longest wait: ${longest.user}'s job ${longest.id} on ${longest.flavor}, ${wait(longest.waited_seconds)}${longest.reason ? ` (${longest.reason})` : ''}`
          : 'Nobody waits.'
      )
    ),
    ...(data.queues.length ? [kueueQueues(page, data.queues)] : []),
    h('section', {}, h('h2', {}, 'Failures in the last 24 hours'), failures),
    h(
      'p',
      { class: 'nbjobs-Hint', 'data-role': 'freshness' },
      `As of ${when(data.generated_at)}. ` +
        (page.events?.connected
          ? `Live: drawn again as soon as a job changes; GPUs busy read again every ${REFRESH_MS / 1000} s.`
          : `Not live now (no connection to the service's changes): drawn again every ${REFRESH_MS / 1000} s.`)
    )
  );
  page.timer = window.setTimeout(() => {
    if (page.view === 'overview') {
      void overviewView(page);
    }
  }, REFRESH_MS);
}

/** The cards on top: GPUs held and busy, jobs running and queued, the backend, and what
 * is wrong with classes and groups. */
function nowCards(data: IOverview): HTMLElement {
  const busy = data.gpus.busy;
  const running = data.flavors.reduce((n, f) => n + f.running, 0);
  const queued = data.flavors.reduce((n, f) => n + f.queued, 0);
  return h(
    'section',
    { class: 'nbjobs-Cards', 'aria-label': 'Now' },
    h(
      'div',
      { class: 'nbjobs-Card' },
      h('h2', {}, 'GPUs held'),
      meter(data.gpus.allocated, data.gpus.total, 'GPUs held')
    ),
    h(
      'div',
      { class: 'nbjobs-Card' },
      h('h2', {}, 'GPUs busy'),
      busy === null
        ? h('p', {}, 'no telemetry from running jobs')
        : meter(busy, data.gpus.total, 'GPUs busy')
    ),
    h(
      'div',
      { class: 'nbjobs-Card' },
      h('h2', {}, 'Jobs'),
      h('p', { class: 'nbjobs-Big' }, `${running} running · ${queued} queued`)
    ),
    h(
      'div',
      { class: `nbjobs-Card ${data.backend.ok ? 'nbjobs-Ok' : 'nbjobs-Bad'}` },
      h('h2', {}, `Backend: ${data.backend.kind}`),
      h('p', {}, `${data.backend.ok ? 'working' : 'NOT working'}: ${data.backend.detail}`)
    ),
    ...(data.class_notices.length
      ? [
          h(
            'div',
            { class: 'nbjobs-Card nbjobs-Bad', 'aria-label': 'Classes and groups' },
            h('h2', {}, 'Classes and groups'),
            ...data.class_notices.map(notice => h('p', {}, notice))
          )
        ]
      : [])
  );
}

/** Each node's GPUs held and busy, its jobs, whether it is drained. */
function nodesTable(data: IOverview): HTMLElement {
  return table(
    ['Node', 'GPU', 'Held', 'Busy', 'Jobs', 'State'],
    data.nodes.map(n => [
      n.node,
      n.gpu_type,
      meter(n.allocated, n.total, `${n.node} held`),
      n.busy === null ? '–' : meter(n.busy, n.total, `${n.node} busy`),
      n.jobs.length ? n.jobs.join(', ') : 'none',
      nodeState(n)
    ]),
    'GPUs per node'
  );
}

/** Whether new jobs may start on a node: all of it, or all but the GPUs drained one by one. */
export function nodeState(n: IOverview['nodes'][number]): string {
  if (n.drained) {
    return 'drained: no new jobs';
  }
  const off = n.drained_gpus ?? [];
  if (off.length) {
    return `open but GPU${off.length > 1 ? 's' : ''} ${off.join(', ')}: drained, no new jobs`;
  }
  return 'open';
}

/** The GPUs summed per type. */
function typesTable(data: IOverview): HTMLElement {
  return table(
    ['GPU type', 'Nodes', 'Total', 'Held', 'Busy'],
    data.types.map(t => [
      t.gpu_type,
      String(t.nodes),
      gpus(t.total),
      gpus(t.allocated),
      t.busy === null ? '–' : gpus(t.busy)
    ]),
    'GPUs per type'
  );
}

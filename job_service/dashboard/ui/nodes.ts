/** The dashboard's Nodes (admins): each node's GPUs and jobs, and draining a node (or, on
 * one machine, one of its GPUs) for maintenance, after a confirmation that says what stops
 * and how many GPUs leave the pool. */

import { INodeView } from './api';
import { askInPlace, h, table, meter } from './dom';
import { when } from './format';
import { Page } from './page';

type IGpuSlot = INodeView['gpu_slots'][number];

export async function nodesView(page: Page, nodes?: INodeView[], said = ''): Promise<void> {
  if (!nodes) {
    try {
      nodes = await page.api.get<INodeView[]>('dashboard/nodes');
    } catch (error) {
      page.fail(error);
      return;
    }
  }
  if (page.view !== 'nodes') {
    return;
  }
  const status = h('p', { class: 'nbjobs-Status', role: 'status' }, said);
  const rows = nodes.map(node => [
    node.node,
    h(
      'span',
      {},
      ...node.gpus.map(g =>
        h(
          'span',
          { class: 'nbjobs-NodeGpu' },
          `${g.gpu_type}: `,
          meter(g.allocated, g.total, `${node.node} ${g.gpu_type} held`)
        )
      )
    ),
    node.jobs.length
      ? h(
          'span',
          {},
          ...node.jobs.map(j =>
            h(
              'span',
              { class: 'nbjobs-NodeJob' },
              `${j.name} (${j.user}, ${j.flavor}) `,
              h('code', {}, j.id),
              onGpus(node, j.id)
            )
          )
        )
      : 'none',
    nodeState(page, node, status),
    node.drain
      ? undrain(page, node, null, status)
      : node.drained
        ? ''
        : drainForm(page, node, status)
  ]);
  page.main.replaceChildren(
    h('h2', {}, 'Nodes'),
    status,
    nodes.length
      ? table(['Node', 'GPUs held', 'Jobs', 'State', ''], rows, 'Nodes')
      : h('p', {}, 'No GPU nodes seen.'),
    h(
      'p',
      { class: 'nbjobs-Hint' },
      'A drained node (or GPU) takes no new job; its running jobs finish unless you cancel them, and cancelled jobs are not queued again. Users of an affected flavor see how much of it is in maintenance.'
    )
  );
}

/** Which of the node's GPUs a job holds, where the node lists them (one machine). */
function onGpus(node: INodeView, job: string): string {
  const held = node.gpu_slots.filter(slot => slot.jobs.includes(job)).map(slot => slot.id);
  return held.length ? ` on GPU ${held.join(', ')}` : '';
}

/** A node's state: open, drained (by whom, why), or which of its GPUs are drained, each
 * with its Undrain button. */
function nodeState(page: Page, node: INodeView, status: HTMLElement): HTMLElement | string {
  if (node.drain) {
    return `drained by ${node.drain.by}, ${when(node.drain.at)}${node.drain.reason ? `: ${node.drain.reason}` : ''}`;
  }
  if (node.drained) {
    return 'drained outside the dashboard (nbjobs.yaml, a label or a cordon)';
  }
  const off = node.gpu_slots.filter(slot => slot.drain);
  if (!off.length) {
    return 'open';
  }
  return h(
    'span',
    {},
    `${node.gpu_slots.length - off.length} of ${node.gpu_slots.length} GPUs open`,
    ...off.map(slot =>
      h(
        'span',
        { class: 'nbjobs-NodeJob', 'data-gpu': slot.id },
        `GPU ${slot.id} drained by ${slot.drain?.by}, ${when(slot.drain?.at ?? null)}${slot.drain?.reason ? `: ${slot.drain.reason}` : ''} `,
        undrain(page, node, slot, status)
      )
    )
  );
}

/** A node's drain form: what (the whole node, or one GPU where the node lists them), why,
 * and whether its running jobs are cancelled; Drain first says, beside the form, what
 * stops and how many GPUs leave the pool, and drains only when that is confirmed. */
function drainForm(page: Page, node: INodeView, status: HTMLElement): HTMLElement {
  const id = `nbjobs-reason-${node.node}`;
  const reason = h('input', {
    type: 'text',
    id,
    maxlength: '500',
    placeholder: 'why (shown to admins)'
  }) as HTMLInputElement;
  const open = node.gpu_slots.filter(slot => !slot.drained);
  const what = h(
    'select',
    { id: `${id}-what`, 'aria-label': `What of ${node.node} to drain` },
    h('option', { value: '' }, `all of ${node.node}`),
    ...(open.length > 1 ? open.map(slot => h('option', { value: slot.id }, `GPU ${slot.id}`)) : [])
  ) as HTMLSelectElement;
  const cancel = h('input', { type: 'checkbox', id: `${id}-cancel` }) as HTMLInputElement;
  const cancelLabel = h('label', { for: `${id}-cancel` }, cancel, '');
  const said = h('span', { class: 'nbjobs-RowSaid', role: 'status' });
  const target = (): IGpuSlot | null => open.find(slot => slot.id === what.value) ?? null;
  const jobs = (): number => target()?.jobs.length ?? node.cancellable;
  const sayCancel = (): void => {
    cancelLabel.lastChild!.textContent = ` cancel the ${jobs()} job(s) there`;
  };
  what.addEventListener('change', sayCancel);
  sayCancel();
  const go = h('button', { type: 'submit', 'data-action': 'drain' }, 'Drain…');
  const form = h(
    'form',
    { class: 'nbjobs-Drain', 'aria-label': `Drain ${node.node}` },
    h('label', { for: id, class: 'nbjobs-Hidden' }, `Why ${node.node} is drained`),
    node.gpu_slots.length > 1 ? what : null,
    reason,
    cancelLabel,
    go,
    said
  );
  form.addEventListener('submit', event => {
    event.preventDefault();
    const slot = target();
    const box = drainConfirmation(node, slot, cancel.checked, jobs());
    askInPlace(
      form,
      box,
      { yes: 'confirm-drain', no: 'keep-open' },
      async () => {
        const after = await page.api.post<INodeView[]>(drainPath(node, slot), {
          reason: reason.value,
          cancel_running: cancel.checked
        });
        await nodesView(
          page,
          after,
          `Drained ${slotName(node, slot)}: no new job starts there${cancel.checked ? '; its jobs were cancelled' : '; running jobs finish'}.`
        );
      },
      error => page.failIn(said, error),
      go
    );
  });
  return form;
}

/** A node, or one GPU of it, as the Nodes view names it. */
function slotName(node: INodeView, slot: IGpuSlot | null): string {
  return slot ? `GPU ${slot.id} of ${node.node}` : node.node;
}

/** Where a drain of a node, or of one GPU of it, is made and taken back. */
function drainPath(node: INodeView, slot: IGpuSlot | null): string {
  const where = `dashboard/nodes/${encodeURIComponent(node.node)}`;
  return slot ? `${where}/gpus/${encodeURIComponent(slot.id)}/drain` : `${where}/drain`;
}

/** What a drain would do, said before it is done (the sentence and the buttons that
 * drain or keep it open). */
export function drainConfirmation(
  node: INodeView,
  slot: IGpuSlot | null,
  cancelling: boolean,
  jobs: number
): HTMLElement {
  const name = slotName(node, slot);
  return h(
    'div',
    { class: 'nbjobs-Confirm', role: 'group', 'aria-label': `Drain ${name}?` },
    h('p', {}, drainWords(node, slot, cancelling, jobs)),
    h('button', { type: 'button', 'data-action': 'confirm-drain' }, `Drain ${name}`),
    h('button', { type: 'button', 'data-action': 'keep-open' }, 'Keep it open')
  );
}

/** What a drain of ``node`` (or of its GPU ``slot``) does, in words: how many GPUs leave
 * the pool and how many stay, and what becomes of the ``jobs`` running there. */
export function drainWords(
  node: INodeView,
  slot: IGpuSlot | null,
  cancelling: boolean,
  jobs: number
): string {
  const total = node.gpus.reduce((n, g) => n + g.total, 0);
  const drainedBefore = node.gpu_slots.filter(s => s.drained).length;
  const leaving = slot ? 1 : total - drainedBefore;
  const staying = total - drainedBefore - leaving;
  const name = slotName(node, slot);
  const gpus = `${leaving} GPU${leaving === 1 ? '' : 's'}`;
  const running =
    jobs === 0
      ? 'No job runs there now.'
      : cancelling
        ? `The ${jobs} job(s) running there are cancelled now, not queued again: they keep their partial output and their owners are told why.`
        : `The ${jobs} job(s) running there keep running until they end.`;
  const cpu = node.gpu_slots.length ? ' Jobs without a GPU go on.' : '';
  return (
    `Drain ${name}? ${gpus} leave${leaving === 1 ? 's' : ''} the pool (${staying} stay${staying === 1 ? 's' : ''}): ` +
    `no new job starts on ${slot ? 'it' : 'them'} until you undrain ${slot ? 'it' : 'the node'}. ${running}${cpu}`
  );
}

/** The button that opens a drained node (or one drained GPU of it) again. */
function undrain(
  page: Page,
  node: INodeView,
  slot: IGpuSlot | null,
  status: HTMLElement
): HTMLElement {
  const b = h(
    'button',
    { type: 'button', 'data-action': 'undrain' },
    slot ? `Undrain GPU ${slot.id}` : 'Undrain'
  );
  b.addEventListener('click', () => {
    void (async () => {
      try {
        const after = await page.api.delete<INodeView[]>(drainPath(node, slot));
        await nodesView(
          page,
          after,
          `Undrained ${slotName(node, slot)}: jobs may start there again.`
        );
      } catch (error) {
        page.failIn(status, error);
      }
    })();
  });
  return b;
}

/** The dashboard's Nodes (admins): each node's GPUs and jobs, and draining a node for
 * maintenance. */

import { INodeView } from './api';
import { h, table, meter } from './dom';
import { when } from './format';
import { Page } from './page';

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
              h('code', {}, j.id)
            )
          )
        )
      : 'none',
    node.drain
      ? `drained by ${node.drain.by}, ${when(node.drain.at)}${node.drain.reason ? `: ${node.drain.reason}` : ''}`
      : node.drained
        ? 'drained outside the dashboard (nbjobs.yaml, a label or a cordon)'
        : 'open',
    node.drain ? undrain(page, node, status) : node.drained ? '' : drainForm(page, node, status)
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
      'A drained node takes no new job; its running jobs finish unless you cancel them. Users of an affected flavor see how much of it is in maintenance.'
    )
  );
}

/** A node's drain form: why, and whether its running jobs are cancelled. */
function drainForm(page: Page, node: INodeView, status: HTMLElement): HTMLElement {
  const id = `nbjobs-reason-${node.node}`;
  const reason = h('input', {
    type: 'text',
    id,
    maxlength: '500',
    placeholder: 'why (shown to admins)'
  }) as HTMLInputElement;
  const cancel = h('input', { type: 'checkbox', id: `${id}-cancel` }) as HTMLInputElement;
  const go = h('button', { type: 'submit', 'data-action': 'drain' }, 'Drain');
  const form = h(
    'form',
    { class: 'nbjobs-Drain', 'aria-label': `Drain ${node.node}` },
    h('label', { for: id, class: 'nbjobs-Hidden' }, `Why ${node.node} is drained`),
    reason,
    h('label', { for: `${id}-cancel` }, cancel, ` cancel the ${node.jobs.length} job(s) there`),
    go
  );
  form.addEventListener('submit', event => {
    event.preventDefault();
    if (
      cancel.checked &&
      !window.confirm(
        `Cancel the ${node.jobs.length} job(s) running on ${node.node}? They keep their partial output; their owners are told why.`
      )
    ) {
      return;
    }
    void (async () => {
      try {
        const after = await page.api.post<INodeView[]>(
          `dashboard/nodes/${encodeURIComponent(node.node)}/drain`,
          {
            reason: reason.value,
            cancel_running: cancel.checked
          }
        );
        await nodesView(
          page,
          after,
          `Drained ${node.node}: no new job starts there${cancel.checked ? '; its jobs were cancelled' : '; running jobs finish'}.`
        );
      } catch (error) {
        page.failIn(status, error);
      }
    })();
  });
  return form;
}

/** The button that opens a drained node again. */
function undrain(page: Page, node: INodeView, status: HTMLElement): HTMLElement {
  const b = h('button', { type: 'button', 'data-action': 'undrain' }, 'Undrain');
  b.addEventListener('click', () => {
    void (async () => {
      try {
        const after = await page.api.delete<INodeView[]>(
          `dashboard/nodes/${encodeURIComponent(node.node)}/drain`
        );
        await nodesView(page, after, `Undrained ${node.node}: jobs may start there again.`);
      } catch (error) {
        page.failIn(status, error);
      }
    })();
  });
  return b;
}

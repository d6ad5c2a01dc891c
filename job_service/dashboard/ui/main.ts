/** The nbjobs dashboard: the overview (admins) and usage charts (everyone, each seeing
 * what the API lets them see). Static; all data comes from the job service's API. */

import {
  BarController,
  BarElement,
  CategoryScale,
  Chart,
  Legend,
  LinearScale,
  LineController,
  LineElement,
  PointElement,
  Tooltip
} from 'chart.js';

import {
  Api,
  ApiError,
  IAuditList,
  IResultLink,
  IClass,
  IFlavor,
  IInvitation,
  IJob,
  IMe,
  INodeView,
  IOverview,
  IQueuedJob,
  IRosterProblem,
  IStorageReport,
  ICreditAccount,
  ICreditStatement,
  IQueueRow,
  IUsage,
  IUsageLine
} from './api';
import { EventStream, type ServiceEvent } from '../../../labextension/src/events';
import { FINAL_STATES } from '../../../labextension/src/types';
import { bytes, creditText, gpus, hours, isoDay, rosterNames, wait, when } from './format';
import { dayLabels, download, merge } from './usage';
import { usersView } from './users';

Chart.register(
  BarController,
  BarElement,
  CategoryScale,
  LinearScale,
  LineController,
  LineElement,
  PointElement,
  Legend,
  Tooltip
);

/** Colours for the breakdown's series; each series also has its own pattern of dashes in
 * the legend and the table beside the chart, so no reader depends on colour alone. */
const COLOURS = [
  '#1f6feb',
  '#d9480f',
  '#2b8a3e',
  '#862e9c',
  '#e67700',
  '#0b7285',
  '#c2255c',
  '#5c940d'
];
const SERIES_SHOWN = 7;
const REFRESH_MS = 10_000;
/** how long after a pushed change a view draws again: a burst draws once */
const REDRAW_DELAY_MS = 500;

type Child = Node | string | null | undefined | false;

/**
 * What a redraw after a pushed change passes as what the view says: whatever it says at
 * the moment it is drawn again (its last move or decision, or a mistake to mend such as a
 * rejection without a reason), not what it said when the redraw began.
 */
const AS_IT_IS = Symbol('as it is');
type Said = string | typeof AS_IT_IS;

/** Whether someone is typing in the view (a reason, a roster): a redraw would wipe it. */
function typing(): boolean {
  return !!document.activeElement?.closest(
    '#nbjobs-main input, #nbjobs-main textarea, #nbjobs-main select'
  );
}

function h(tag: string, attrs: Record<string, string> = {}, ...children: Child[]): HTMLElement {
  const element = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    element.setAttribute(key, value);
  }
  for (const child of children) {
    if (child !== null && child !== undefined && child !== false) {
      element.append(child);
    }
  }
  return element;
}

function meta(name: string): string {
  return document.querySelector<HTMLMetaElement>(`meta[name="${name}"]`)?.content ?? '';
}

function table(headers: string[], rows: Child[][], label: string): HTMLElement {
  return h(
    'table',
    { class: 'nbjobs-Table', 'aria-label': label },
    h('thead', {}, h('tr', {}, ...headers.map(text => h('th', { scope: 'col' }, text)))),
    h('tbody', {}, ...rows.map(cells => h('tr', {}, ...cells.map(cell => h('td', {}, cell)))))
  );
}

/** A bar of `part` out of `whole` with the numbers written beside it. */
function meter(
  part: number,
  whole: number,
  label: string,
  show: (n: number) => string = gpus
): HTMLElement {
  const percent = whole > 0 ? Math.min(100, (100 * part) / whole) : 0;
  const bar = h('span', { class: 'nbjobs-Meter-fill' });
  bar.style.width = `${percent}%`;
  return h(
    'span',
    {
      class: 'nbjobs-Meter',
      role: 'img',
      'aria-label': `${label}: ${show(part)} of ${show(whole)}`
    },
    h('span', { class: 'nbjobs-Meter-track' }, bar),
    h('span', { class: 'nbjobs-Meter-text' }, `${show(part)} / ${show(whole)}`)
  );
}

class Dashboard {
  private api: Api;
  private me: IMe | null = null;
  private root: HTMLElement;
  private main = h('main', { class: 'nbjobs-Main', id: 'nbjobs-main' });
  private view = '';
  private timer = 0;
  private charts: Chart[] = [];
  /** changes the service pushes: the views that list jobs draw again by themselves */
  private events: EventStream | null = null;
  private redrawSoon = 0;
  /** the invitations the last roster change or Invite made: shown until handed out */
  private invitations: IInvitation[] = [];

  constructor(root: HTMLElement) {
    this.root = root;
    const token = meta('nbjobs-token') || sessionStorage.getItem('nbjobs-token') || '';
    this.api = new Api(meta('nbjobs-api'), token);
  }

  async start(): Promise<void> {
    if (!this.api.token) {
      this.askForToken('');
      return;
    }
    try {
      this.me = await this.api.get<IMe>('me');
    } catch (error) {
      if (error instanceof ApiError && [401, 403].includes(error.status) && !meta('nbjobs-token')) {
        sessionStorage.removeItem('nbjobs-token');
        this.askForToken('the service does not know that token');
        return;
      }
      this.root.replaceChildren(
        h('p', { class: 'nbjobs-Error', role: 'alert' }, String((error as Error).message))
      );
      return;
    }
    this.layout();
    this.events?.dispose();
    this.events = new EventStream(signal => this.api.events(signal));
    this.events.received.connect((_, event) => this.pushed(event));
    // whether the page follows the service's changes as they happen, on its root for
    // what reads the page (and said in the Overview's last line)
    this.events.connectedChanged.connect((_, live) => {
      this.root.dataset.live = live ? 'yes' : 'no';
    });
    this.events.start();
    const fromHash = (): string => {
      const wanted = window.location.hash.slice(1);
      return this.views().some(([id]) => id === wanted) ? wanted : this.views()[0][0];
    };
    // a link or the Back button to another view changes only the hash
    window.addEventListener('hashchange', () => {
      if (fromHash() !== this.view) {
        this.show(fromHash());
      }
    });
    this.show(fromHash());
  }

  /**
   * A change the service pushed: the Overview, Queue and Approvals views draw again (once
   * for a burst), unless someone is typing in them (a reason, a roster); the others hold
   * no job that moves.
   */
  private pushed(event: ServiceEvent): void {
    if (event.event === 'definitions' || this.redrawSoon) {
      return;
    }
    const redraw: Record<string, () => Promise<void>> = {
      overview: () => this.overview(),
      queue: () => this.queue(undefined, AS_IT_IS),
      approvals: () => this.approvals(AS_IT_IS)
    };
    const view = this.view;
    if (!redraw[view]) {
      return;
    }
    this.redrawSoon = window.setTimeout(() => {
      this.redrawSoon = 0;
      if (this.view === view && !typing()) {
        window.clearTimeout(this.timer);
        void redraw[view]();
      }
    }, REDRAW_DELAY_MS);
  }

  /** Standalone (no hub): one of the service's API tokens, kept in this tab only. */
  private askForToken(problem: string): void {
    const input = h('input', {
      type: 'password',
      id: 'nbjobs-token',
      autocomplete: 'off',
      required: ''
    });
    const form = h(
      'form',
      { class: 'nbjobs-Login' },
      h('h1', {}, 'nbjobs dashboard'),
      h('label', { for: 'nbjobs-token' }, 'API token'),
      input,
      problem ? h('p', { class: 'nbjobs-Error', role: 'alert' }, problem) : null,
      h(
        'p',
        { class: 'nbjobs-Hint' },
        'A token from the job service’s tokens file; it stays in this browser tab.'
      ),
      h('button', { type: 'submit' }, 'Open')
    );
    form.addEventListener('submit', event => {
      event.preventDefault();
      sessionStorage.setItem('nbjobs-token', (input as HTMLInputElement).value.trim());
      this.api = new Api(this.api.base, (input as HTMLInputElement).value.trim());
      void this.start();
    });
    this.root.replaceChildren(form);
    input.focus();
  }

  private views(): [string, string][] {
    const views: [string, string][] = [];
    if (this.me?.admin) {
      views.push(['overview', 'Overview'], ['queue', 'Queue'], ['nodes', 'Nodes']);
    }
    if (this.me?.admin || this.me?.teacher) {
      views.push(['approvals', 'Approvals'], ['classes', 'Classes']);
    }
    views.push(['usage', 'Usage'], ['storage', 'Storage']);
    if (this.me?.credits) {
      views.push(['credits', 'Credits']);
    }
    if (this.me?.admin) {
      views.push(['audit', 'Audit'], ['users', 'Users']);
    }
    return views;
  }

  private layout(): void {
    const nav = h('nav', { class: 'nbjobs-Tabs', 'aria-label': 'Views' });
    for (const [id, title] of this.views()) {
      const link = h('a', { href: `#${id}`, 'data-view': id }, title);
      link.addEventListener('click', event => {
        event.preventDefault();
        this.show(id);
      });
      nav.append(link);
    }
    const role = this.me?.admin ? 'admin' : this.me?.teacher ? 'teacher' : 'user';
    const hub = meta('nbjobs-hub');
    this.root.replaceChildren(
      h(
        'header',
        { class: 'nbjobs-Header' },
        h('h1', {}, 'nbjobs'),
        nav,
        h(
          'span',
          { class: 'nbjobs-Who' },
          `${this.me?.name} (${role})`,
          hub ? h('a', { href: hub + 'home' }, 'Hub home') : null
        )
      ),
      this.main
    );
  }

  private show(id: string): void {
    this.view = id;
    window.clearTimeout(this.timer);
    for (const chart of this.charts) {
      chart.destroy();
    }
    this.charts = [];
    history.replaceState(null, '', `#${id}`);
    for (const link of Array.from(this.root.querySelectorAll('[data-view]'))) {
      if (link.getAttribute('data-view') === id) {
        link.setAttribute('aria-current', 'page');
      } else {
        link.removeAttribute('aria-current');
      }
    }
    this.main.replaceChildren(h('p', { class: 'nbjobs-Loading' }, 'Loading…'));
    const draw: Record<string, () => Promise<void>> = {
      overview: () => this.overview(),
      queue: () => this.queue(),
      nodes: () => this.nodes(),
      approvals: () => this.approvals(),
      classes: () => this.classes(),
      usage: () => this.usage(),
      storage: () => this.storage(),
      credits: () => this.credits(),
      audit: () => this.audit(),
      users: () => this.users()
    };
    void (draw[id] ?? draw.usage)();
  }

  private fail(error: unknown): void {
    this.main.replaceChildren(
      h('p', { class: 'nbjobs-Error', role: 'alert' }, (error as Error).message)
    );
  }

  // -- overview ----------------------------------------------------------------------

  private async overview(): Promise<void> {
    let data: IOverview;
    try {
      data = await this.api.get<IOverview>('dashboard/overview');
    } catch (error) {
      this.fail(error);
      return;
    }
    if (this.view !== 'overview') {
      return;
    }
    const busy = data.gpus.busy;
    const running = data.flavors.reduce((n, f) => n + f.running, 0);
    const queued = data.flavors.reduce((n, f) => n + f.queued, 0);
    const cards = h(
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
    const nodes = table(
      ['Node', 'GPU', 'Held', 'Busy', 'Jobs', 'State'],
      data.nodes.map(n => [
        n.node,
        n.gpu_type,
        meter(n.allocated, n.total, `${n.node} held`),
        n.busy === null ? '–' : meter(n.busy, n.total, `${n.node} busy`),
        n.jobs.length ? n.jobs.join(', ') : 'none',
        n.drained ? 'drained: no new jobs' : 'open'
      ]),
      'GPUs per node'
    );
    const types = table(
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
    this.main.replaceChildren(
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
      ...(data.queues.length ? [this.kueueQueues(data.queues)] : []),
      h('section', {}, h('h2', {}, 'Failures in the last 24 hours'), failures),
      h(
        'p',
        { class: 'nbjobs-Hint' },
        `As of ${when(data.generated_at)}; ` +
          (this.events?.connected
            ? 'drawn again as jobs change.'
            : `refreshed every ${REFRESH_MS / 1000} s (changes are not followed live now).`)
      )
    );
    this.timer = window.setTimeout(() => {
      if (this.view === 'overview') {
        void this.overview();
      }
    }, REFRESH_MS);
  }

  // -- queue -------------------------------------------------------------------------

  /**
   * The view's status line: what it is told to say, or for a redraw what it says now
   * (kept as it was said, an error as an error); null when someone typed in the view
   * while the redraw read the service (the next change draws it again).
   */
  private statusLine(said: Said): HTMLElement | null {
    if (said !== AS_IT_IS) {
      return h('p', { class: 'nbjobs-Status', role: 'status' }, said);
    }
    if (typing()) {
      return null;
    }
    const told = this.main.querySelector('[role="status"]');
    return h(
      'p',
      { class: told?.className || 'nbjobs-Status', role: 'status' },
      told?.textContent ?? ''
    );
  }

  private async queue(jobs?: IQueuedJob[], said: Said = ''): Promise<void> {
    if (!jobs) {
      try {
        jobs = await this.api.get<IQueuedJob[]>('dashboard/queue');
      } catch (error) {
        this.fail(error);
        return;
      }
    }
    const status = this.view === 'queue' ? this.statusLine(said) : null;
    if (!status) {
      return;
    }
    const act = async (job: IQueuedJob, what: string): Promise<void> => {
      try {
        if (what === 'cancel') {
          if (
            !window.confirm(
              `Cancel ${job.user}'s job "${job.name}" (${job.id})? It never ran; ${job.user} is told.`
            )
          ) {
            return;
          }
          await this.api.post(`jobs/${job.id}/cancel`);
          await this.queue(undefined, `Cancelled ${job.user}'s job ${job.id}.`);
        } else {
          const after = await this.api.post<IQueuedJob[]>(`dashboard/queue/${job.id}/move`, {
            to: what
          });
          const place = after.find(j => j.id === job.id)?.place;
          const queued = after.filter(j => j.place !== null).length;
          await this.queue(
            after,
            `Moved ${job.user}'s job ${job.id} ${what === 'front' || what === 'back' ? `to the ${what}` : what}: now ${place} of ${queued}.`
          );
        }
      } catch (error) {
        status.textContent = (error as Error).message;
        status.className = 'nbjobs-Error';
      }
    };
    const button = (
      job: IQueuedJob,
      what: string,
      label: string,
      title: string,
      disabled: boolean
    ): HTMLElement => {
      const b = h('button', {
        type: 'button',
        title,
        'aria-label': `${title}: ${job.name} (${job.id})`,
        'data-move': what
      });
      b.textContent = label;
      (b as HTMLButtonElement).disabled = disabled;
      b.addEventListener('click', () => void act(job, what));
      return b;
    };
    const last = jobs.filter(j => j.place !== null).length;
    const rows = jobs.map(job => [
      job.place === null ? 'awaiting approval' : String(job.place),
      h('span', {}, job.name, h('br'), h('code', {}, job.id)),
      job.user,
      job.flavor,
      wait(job.waited_seconds),
      job.reason ?? 'not looked at yet',
      job.moved_by
        ? `${job.priority} (set by ${job.moved_by}, ${when(job.moved_at)})`
        : String(job.priority),
      h(
        'span',
        { class: 'nbjobs-Actions' },
        button(job, 'front', 'Front', 'Move to the front', job.place === 1 || job.place === null),
        button(
          job,
          'up',
          'Up',
          'Move ahead of the job before it',
          job.place === 1 || job.place === null
        ),
        button(
          job,
          'down',
          'Down',
          'Move behind the job after it',
          job.place === last || job.place === null
        ),
        button(job, 'back', 'Back', 'Move to the back', job.place === last || job.place === null),
        button(job, 'cancel', 'Cancel', 'Cancel this job', false)
      )
    ]);
    this.main.replaceChildren(
      h(
        'h2',
        {},
        `Queue: ${last} waiting${jobs.length > last ? `, ${jobs.length - last} awaiting approval (see Approvals)` : ''}`
      ),
      status,
      jobs.length
        ? table(
            ['#', 'Job', 'User', 'Flavor', 'Waited', 'Why it waits', 'Priority', ''],
            rows,
            'Queue'
          )
        : h('p', {}, 'Nobody waits.'),
      h(
        'p',
        { class: 'nbjobs-Hint' },
        'A move changes the job’s priority; jobs of equal priority take turns by fair share. Quotas and free GPUs may still pass a job over.'
      )
    );
  }

  // -- users (job_service/dashboard/ui/users.ts) ---------------------------------------

  private async users(said = ''): Promise<void> {
    let content: HTMLElement[];
    try {
      content = await usersView(this.api, { h, table }, again => void this.users(again), said);
    } catch (error) {
      this.fail(error);
      return;
    }
    if (this.view === 'users') {
      this.main.replaceChildren(...content);
    }
  }

  // -- nodes -------------------------------------------------------------------------

  private async nodes(nodes?: INodeView[], said = ''): Promise<void> {
    if (!nodes) {
      try {
        nodes = await this.api.get<INodeView[]>('dashboard/nodes');
      } catch (error) {
        this.fail(error);
        return;
      }
    }
    if (this.view !== 'nodes') {
      return;
    }
    const status = h('p', { class: 'nbjobs-Status', role: 'status' }, said);
    const failed = (error: unknown): void => {
      status.textContent = (error as Error).message;
      status.className = 'nbjobs-Error';
    };
    const drainForm = (node: INodeView): HTMLElement => {
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
            const after = await this.api.post<INodeView[]>(
              `dashboard/nodes/${encodeURIComponent(node.node)}/drain`,
              {
                reason: reason.value,
                cancel_running: cancel.checked
              }
            );
            await this.nodes(
              after,
              `Drained ${node.node}: no new job starts there${cancel.checked ? '; its jobs were cancelled' : '; running jobs finish'}.`
            );
          } catch (error) {
            failed(error);
          }
        })();
      });
      return form;
    };
    const undrain = (node: INodeView): HTMLElement => {
      const b = h('button', { type: 'button', 'data-action': 'undrain' }, 'Undrain');
      b.addEventListener('click', () => {
        void (async () => {
          try {
            const after = await this.api.delete<INodeView[]>(
              `dashboard/nodes/${encodeURIComponent(node.node)}/drain`
            );
            await this.nodes(after, `Undrained ${node.node}: jobs may start there again.`);
          } catch (error) {
            failed(error);
          }
        })();
      });
      return b;
    };
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
      node.drain ? undrain(node) : node.drained ? '' : drainForm(node)
    ]);
    this.main.replaceChildren(
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

  // -- approvals ---------------------------------------------------------------------

  private async approvals(said: Said = ''): Promise<void> {
    let jobs: IJob[];
    try {
      jobs = await this.api.get<IJob[]>('dashboard/approvals');
    } catch (error) {
      this.fail(error);
      return;
    }
    const status = this.view === 'approvals' ? this.statusLine(said) : null;
    if (!status) {
      return;
    }
    const failed = (error: unknown): void => {
      status.textContent = (error as Error).message;
      status.className = 'nbjobs-Error';
    };
    const decide = (job: IJob): HTMLElement => {
      const id = `nbjobs-why-${job.id}`;
      const why = h('input', {
        type: 'text',
        id,
        maxlength: '500',
        placeholder: 'why not (its owner reads it)'
      }) as HTMLInputElement;
      const approve = h('button', { type: 'button', 'data-action': 'approve' }, 'Approve');
      const reject = h('button', { type: 'button', 'data-action': 'reject' }, 'Reject');
      approve.addEventListener('click', () => {
        void (async () => {
          try {
            await this.api.post(`jobs/${job.id}/approve`);
            await this.approvals(`Approved ${job.user}'s job ${job.id}: it is queued.`);
          } catch (error) {
            failed(error);
          }
        })();
      });
      reject.addEventListener('click', () => {
        if (!why.value.trim()) {
          failed(new Error(`Say why ${job.user}'s job is rejected: they read it.`));
          why.focus();
          return;
        }
        void (async () => {
          try {
            await this.api.post(`jobs/${job.id}/reject`, { reason: why.value.trim() });
            await this.approvals(`Rejected ${job.user}'s job ${job.id}; they are told why.`);
          } catch (error) {
            failed(error);
          }
        })();
      });
      return h(
        'span',
        { class: 'nbjobs-Actions' },
        approve,
        h('label', { for: id, class: 'nbjobs-Hidden' }, `Why ${job.user}'s job is rejected`),
        why,
        reject
      );
    };
    const rows = jobs.map(job => [
      h('span', {}, job.name, h('br'), h('code', {}, job.id)),
      job.user,
      job.flavor,
      job.path,
      Object.keys(job.parameters).length ? h('code', {}, JSON.stringify(job.parameters)) : 'none',
      when(job.submitted_at),
      decide(job)
    ]);
    this.main.replaceChildren(
      h('h2', {}, `Approvals: ${jobs.length} waiting`),
      status,
      jobs.length
        ? table(['Job', 'User', 'Flavor', 'Notebook', 'Parameters', 'Asked', ''], rows, 'Approvals')
        : h('p', {}, 'No job waits for your approval.'),
      h(
        'p',
        { class: 'nbjobs-Hint' },
        'An approved job joins the queue; a rejected one is cancelled with your reason. A request nobody answers in time is cancelled: its student was told when.'
      )
    );
  }

  // -- classes -----------------------------------------------------------------------

  private async classes(said = ''): Promise<void> {
    let classes: IClass[];
    let flavors: IFlavor[];
    try {
      [classes, flavors] = await Promise.all([
        this.api.get<IClass[]>('classes'),
        this.api.get<IFlavor[]>('flavors')
      ]);
    } catch (error) {
      this.fail(error);
      return;
    }
    if (this.view !== 'classes') {
      return;
    }
    const status = h('p', { class: 'nbjobs-Status', role: 'status' }, said);
    const sections = await Promise.all(classes.map(c => this.classSection(c, status)));
    this.main.replaceChildren(
      h('h2', {}, `Classes: ${classes.length}`),
      status,
      ...this.invitationsPanel(),
      ...sections,
      this.createClassForm(flavors, status)
    );
  }

  /** The invitations to hand out (each link works once, for its own person), or nothing. */
  private invitationsPanel(): HTMLElement[] {
    if (!this.invitations.length) {
      return [];
    }
    const rows = this.invitations.map(invitation => {
      const link = new URL(invitation.url, window.location.origin).href;
      return [
        invitation.user,
        h('a', { href: link, class: 'nbjobs-InvitationLink' }, link),
        h('code', {}, invitation.code),
        `${invitation.expires_at.slice(0, 16).replace('T', ' ')} UTC`,
        invitation.mailed_to ? `mailed to ${invitation.mailed_to}` : 'not mailed'
      ];
    });
    const panel = h(
      'section',
      { class: 'nbjobs-Invitations', 'aria-label': 'Invitations to hand out' },
      h('h3', {}, 'Invitations to hand out'),
      h(
        'p',
        { class: 'nbjobs-Hint' },
        'Give each person their own link, privately: whoever opens it first chooses that ' +
          "account's password. It works once, until the time shown; they are shown only now."
      ),
      table(['User', 'Link', 'Code', 'Until', 'Mail'], rows, 'Invitations')
    );
    return [panel];
  }

  private failIn(status: HTMLElement, error: unknown): void {
    status.textContent = (error as Error).message;
    status.className = 'nbjobs-Error';
  }

  private async classSection(cls: IClass, status: HTMLElement): Promise<HTMLElement> {
    const days = cls.period === 'day' ? 1 : cls.period === 'week' ? 7 : 30;
    const since = isoDay(new Date(Date.now() - (days - 1) * 86_400_000));
    let used = new Map<string, IUsageLine>();
    try {
      const usage = await this.api.get<IUsage>('usage', { by: 'user', since });
      used = new Map(usage.breakdown.map(line => [line.name, line]));
    } catch {
      // the table still lists the students, without their hours
    }
    const fromHub = cls.source === 'hub';
    const rows = cls.students.map(student => {
      const line = used.get(student);
      const extra = cls.extra_hours[student] ?? 0;
      const budget = cls.gpu_hours === null ? null : cls.gpu_hours + extra;
      const amount = h('input', {
        type: 'number',
        min: '0.5',
        step: '0.5',
        value: '1',
        'aria-label': `Hours more for ${student}`
      }) as HTMLInputElement;
      const extend = h('button', { type: 'button', 'data-action': 'extend' }, 'Extend');
      extend.addEventListener('click', () => {
        void (async () => {
          try {
            await this.api.post(
              `classes/${encodeURIComponent(cls.name)}/students/${encodeURIComponent(student)}/budget`,
              { hours: Number(amount.value) }
            );
            await this.classes(
              `${student} may use ${amount.value} more GPU-hours in ${cls.name} this ${cls.period}.`
            );
          } catch (error) {
            this.failIn(status, error);
          }
        })();
      });
      const invite = h('button', { type: 'button', 'data-action': 'invite' }, 'Invite');
      invite.addEventListener('click', () => {
        void (async () => {
          try {
            const made = await this.api.post<IInvitation>('invitations', { user: student });
            this.invitations = [made];
            await this.classes(`A new invitation for ${student}; an earlier one stops working.`);
          } catch (error) {
            this.failIn(status, error);
          }
        })();
      });
      const remove = h('button', { type: 'button', 'data-action': 'remove' }, 'Remove');
      remove.addEventListener('click', () => {
        if (!window.confirm(`Remove ${student} from ${cls.name}? Their jobs and files stay.`)) {
          return;
        }
        void (async () => {
          try {
            await this.api.call(
              'DELETE',
              `classes/${encodeURIComponent(cls.name)}/students`,
              {},
              { students: [student] }
            );
            await this.classes(`Removed ${student} from ${cls.name}.`);
          } catch (error) {
            this.failIn(status, error);
          }
        })();
      });
      return [
        student,
        this.studentJobs(student, line?.jobs ?? 0, status),
        budget === null
          ? `${hours(line?.gpu_hours_allocated ?? 0)} (no class budget)`
          : meter(line?.gpu_hours_allocated ?? 0, budget, `${student}'s GPU-hours`, hours),
        extra ? `+${gpus(extra)} h` : '–',
        h(
          'span',
          { class: 'nbjobs-Actions' },
          cls.gpu_hours === null ? null : amount,
          cls.gpu_hours === null ? null : extend,
          invite,
          fromHub ? remove : null
        )
      ];
    });
    const add = fromHub
      ? this.rosterForm(
          `Add students to ${cls.name}`,
          'Add',
          async names => {
            const changed = await this.api.post<IClass>(
              `classes/${encodeURIComponent(cls.name)}/students`,
              { students: names }
            );
            this.invitations = changed.invitations;
            return `Added ${names.length} student(s) to ${cls.name}.`;
          },
          status,
          [],
          cls.name
        )
      : null;
    let drop: HTMLElement | null = null;
    if (fromHub) {
      drop = h('button', { type: 'button', 'data-action': 'delete-class' }, `Delete ${cls.name}`);
      drop.addEventListener('click', () => {
        if (
          !window.confirm(
            `Delete class ${cls.name}? Its students' accounts, files and jobs stay; they lose the class's flavors and budget.`
          )
        ) {
          return;
        }
        void (async () => {
          try {
            await this.api.delete(`classes/${encodeURIComponent(cls.name)}`);
            await this.classes(`Deleted class ${cls.name}.`);
          } catch (error) {
            this.failIn(status, error);
          }
        })();
      });
    }
    return h(
      'section',
      { class: 'nbjobs-Class', 'aria-label': `Class ${cls.name}` },
      h('h3', {}, cls.name, drop ? ' ' : null, drop),
      h(
        'p',
        { class: 'nbjobs-Hint' },
        `Teachers: ${cls.teachers.join(', ') || 'none'} · flavors: ${cls.flavors.join(', ') || 'as usual'} · ` +
          `${cls.gpu_hours === null ? 'no GPU-hour budget' : `${gpus(cls.gpu_hours)} GPU-hours per student per ${cls.period}`}` +
          `${cls.queue ? ` · queue ${cls.queue}` : ''} · ${fromHub ? 'made in the dashboard or the CLI' : 'from nbjobs.yaml (read-only here)'}`
      ),
      cls.students.length
        ? table(
            ['Student', 'Jobs', `GPU-hours, last ${days} day(s)`, 'Granted', ''],
            rows,
            `Students of ${cls.name}`
          )
        : h('p', {}, 'No students yet.'),
      add
    );
  }

  /** A student's job count, a button that lists their latest jobs under it. */
  private studentJobs(student: string, count: number, status: HTMLElement): HTMLElement {
    const cell = h('span', { class: 'nbjobs-StudentJobs' });
    const toggle = h(
      'button',
      { type: 'button', 'data-action': 'student-jobs', 'aria-expanded': 'false' },
      String(count)
    );
    toggle.setAttribute('aria-label', `${student}'s jobs`);
    const list = h('div', { class: 'nbjobs-StudentJobs-list' });
    list.hidden = true;
    toggle.addEventListener('click', () => {
      const open = list.hidden;
      list.hidden = !open;
      toggle.setAttribute('aria-expanded', String(open));
      if (!open) {
        return;
      }
      void (async () => {
        try {
          const page = await this.api.get<{ jobs: IJob[] }>('jobs', { user: student, limit: '20' });
          const viewer = h('section', { class: 'nbjobs-Viewer', 'aria-live': 'polite' });
          viewer.hidden = true;
          list.replaceChildren(
            page.jobs.length
              ? table(
                  ['Job', 'State', 'Flavor', 'Submitted', ''],
                  page.jobs.map(j => [
                    `${j.name} (${j.id})`,
                    j.state.replace('_', ' '),
                    j.flavor,
                    when(j.submitted_at),
                    this.lookIn(j, viewer, status)
                  ]),
                  `${student}'s latest jobs`
                )
              : h('p', { class: 'nbjobs-Hint' }, `${student} has no jobs.`),
            viewer
          );
        } catch (error) {
          this.failIn(status, error);
        }
      })();
    });
    cell.append(toggle, list);
    return cell;
  }

  /** A student's job's log and result, opened read-only below the list: the log as
   * text, the result as the service rendered it, in a frame that runs no script. Each
   * opening is on the audit list admins see. */
  private lookIn(job: IJob, viewer: HTMLElement, status: HTMLElement): HTMLElement {
    const started = job.started_at !== null;
    const ended = FINAL_STATES.has(job.state);
    const open = (what: 'log' | 'result') => {
      void (async () => {
        try {
          const where = `jobs/${encodeURIComponent(job.id)}`;
          // the log as text; the result by a link that opens it once, in a frame under
          // the result's own policy (its styles apply there, not the dashboard's)
          const text = what === 'log' ? await this.api.text(`${where}/logs`) : '';
          const link =
            what === 'result' ? await this.api.post<IResultLink>(`${where}/result/link`) : null;
          const title = h(
            'h3',
            {},
            `${job.user}'s job ${job.name} (${job.id}): ${what === 'log' ? 'log' : 'result'}, read-only`
          );
          let body: HTMLElement;
          if (what === 'log') {
            body = h('pre', { class: 'nbjobs-Viewer-log' }, text || '(the log is empty)');
          } else {
            const frame = h('iframe', {
              class: 'nbjobs-Viewer-result',
              title: `${job.name}: result`,
              sandbox: ''
            }) as HTMLIFrameElement;
            frame.src = link?.url ?? 'about:blank';
            body = frame;
          }
          const close = h('button', { type: 'button', 'data-action': 'close-viewer' }, 'Close');
          close.addEventListener('click', () => {
            viewer.hidden = true;
            viewer.replaceChildren();
          });
          viewer.replaceChildren(title, close, body);
          viewer.hidden = false;
        } catch (error) {
          this.failIn(status, error);
        }
      })();
    };
    const button = (what: 'log' | 'result', label: string, why: string | null) => {
      const b = h('button', { type: 'button', 'data-action': `view-${what}` }, label);
      b.setAttribute('aria-label', `${label} of ${job.name}`);
      if (why) {
        (b as HTMLButtonElement).disabled = true;
        b.title = why;
      } else {
        b.addEventListener('click', () => open(what));
      }
      return b;
    };
    return h(
      'span',
      { class: 'nbjobs-Actions' },
      button('log', 'Log', started ? null : 'it has not started: no log yet'),
      button(
        'result',
        'Result',
        !started ? 'it never started: no result' : ended ? null : 'it has not ended yet'
      )
    );
  }

  /** Who read another person's log or result (admins). */
  private async audit(): Promise<void> {
    let list: IAuditList;
    try {
      list = await this.api.get<IAuditList>('audit', { limit: '200' });
    } catch (error) {
      this.fail(error);
      return;
    }
    if (this.view !== 'audit') {
      return;
    }
    this.main.replaceChildren(
      h('h2', {}, 'Audit'),
      h(
        'p',
        { class: 'nbjobs-Hint' },
        "Each time a teacher or an admin opened another person's job log or result " +
          '(one entry per reader, job and kind within 10 minutes), newest first.'
      ),
      list.entries.length
        ? table(
            ['When', 'Reader', 'Owner', 'Job', 'Opened'],
            list.entries.map(e => [when(e.at), e.reader, e.owner, e.job_id, e.what]),
            'Audit list'
          )
        : h('p', { class: 'nbjobs-Hint' }, "Nobody has opened another person's work yet."),
      list.more ? h('p', { class: 'nbjobs-Hint' }, 'Older entries: GET api/audit?before=…') : ''
    );
  }

  /** A roster: pasted names or a CSV file, previewed row by row, the service's refusals
   * shown on their rows. `send` returns the sentence to show when it worked. */
  private rosterForm(
    label: string,
    verb: string,
    send: (names: string[]) => Promise<string>,
    status: HTMLElement,
    extra: HTMLElement[] = [],
    /** the class the students would join; null: a new one */
    joining: string | null = null
  ): HTMLElement {
    const id = `nbjobs-roster-${Math.random().toString(36).slice(2)}`;
    const text = h('textarea', {
      id,
      rows: '3',
      placeholder: 'one user name per line, or choose a CSV file'
    }) as HTMLTextAreaElement;
    const file = h('input', {
      type: 'file',
      accept: '.csv,.txt,text/csv',
      'aria-label': `${label}: CSV file`
    }) as HTMLInputElement;
    const preview = h('div', { class: 'nbjobs-Preview' });
    // "ok" only once the service said it would take that name (a name's form, a name
    // listed twice, someone in another class or who teaches): asked as the list changes
    let asked = 0;
    const show = (problems: IRosterProblem[] | null = null, failed = false): void => {
      const names = rosterNames(text.value);
      const why = new Map((problems ?? []).map(p => [p.index, p.reason]));
      preview.replaceChildren(
        names.length
          ? table(
              ['#', 'User name', 'Problem'],
              names.map((name, i) => [
                String(i + 1),
                name,
                why.get(i) ?? (problems !== null ? 'ok' : failed ? 'not checked yet' : 'checking…')
              ]),
              `${label}: preview`
            )
          : h('p', { class: 'nbjobs-Hint' }, 'Nobody listed yet.')
      );
      for (const [i] of why) {
        preview.querySelectorAll('tbody tr')[i]?.classList.add('nbjobs-Bad');
      }
    };
    let later = 0;
    const check = (): void => {
      const names = rosterNames(text.value);
      show(null);
      window.clearTimeout(later);
      if (!names.length) {
        return;
      }
      const mine = ++asked;
      later = window.setTimeout(() => {
        void this.api
          .post<{ problems: IRosterProblem[] }>('roster-check', {
            students: names,
            class_name: joining
          })
          .then(answer => mine === asked && show(answer.problems))
          .catch(() => mine === asked && show(null, true)); // checked again when sent
      }, 300);
    };
    text.addEventListener('input', check);
    file.addEventListener('change', () => {
      const chosen = file.files?.[0];
      if (chosen) {
        void chosen.text().then(content => {
          text.value = content;
          check();
        });
      }
    });
    const go = h('button', { type: 'submit' }, verb);
    const form = h(
      'form',
      { class: 'nbjobs-Roster', 'aria-label': label },
      h('h4', {}, label),
      ...extra,
      h('label', { for: id }, 'Students'),
      text,
      file,
      preview,
      go
    );
    form.addEventListener('submit', event => {
      event.preventDefault();
      void (async () => {
        try {
          const done = await send(rosterNames(text.value));
          await this.classes(done);
        } catch (error) {
          this.failIn(status, error);
          if (error instanceof ApiError && error.problems.length) {
            show(error.problems);
          }
        }
      })();
    });
    show();
    return form;
  }

  private createClassForm(flavors: IFlavor[], status: HTMLElement): HTMLElement {
    const name = h('input', {
      type: 'text',
      id: 'nbjobs-class-name',
      required: '',
      maxlength: '63',
      placeholder: 'e.g. physics-101'
    }) as HTMLInputElement;
    const budget = h('input', {
      type: 'number',
      id: 'nbjobs-class-hours',
      min: '0',
      step: '0.5',
      placeholder: 'none'
    }) as HTMLInputElement;
    const period = h(
      'select',
      { id: 'nbjobs-class-period' },
      ...['week', 'day', 'month'].map(p => h('option', { value: p }, p))
    ) as HTMLSelectElement;
    const boxes = flavors.map(
      f =>
        h('input', {
          type: 'checkbox',
          value: f.name,
          id: `nbjobs-flavor-${f.name}`
        }) as HTMLInputElement
    );
    const extra = [
      h('label', { for: 'nbjobs-class-name' }, 'Name'),
      name,
      h(
        'fieldset',
        {},
        h('legend', {}, 'Flavors its students may use (none ticked: as usual)'),
        ...flavors.map((f, i) =>
          h(
            'label',
            { for: `nbjobs-flavor-${f.name}`, class: 'nbjobs-Check' },
            boxes[i],
            ` ${f.display_name} (${f.name})`
          )
        )
      ),
      h('label', { for: 'nbjobs-class-hours' }, 'GPU-hours per student'),
      budget,
      h('label', { for: 'nbjobs-class-period' }, 'per'),
      period
    ];
    return this.rosterForm(
      'Create a class',
      'Create class',
      async students => {
        const made = await this.api.post<IClass>('classes', {
          name: name.value.trim(),
          students,
          flavors: boxes.filter(b => b.checked).map(b => b.value),
          gpu_hours: budget.value === '' ? null : Number(budget.value),
          period: period.value
        });
        this.invitations = made.invitations;
        return `Created class ${name.value.trim()} with ${students.length} student(s).`;
      },
      status,
      extra
    );
  }

  // -- storage -----------------------------------------------------------------------

  private async storage(): Promise<void> {
    let report: IStorageReport;
    try {
      report = await this.api.get<IStorageReport>('storage');
    } catch (error) {
      this.fail(error);
      return;
    }
    const limit = report.max_job_files;
    const days = report.retention_seconds === null ? null : report.retention_seconds / 86_400;
    const rules = h(
      'p',
      {},
      limit === null
        ? 'No limit on job files per user. '
        : `Each user may keep ${bytes(limit)} of job files. `,
      days === null
        ? 'Ended jobs keep their inputs until they are deleted.'
        : `An ended job's input is removed ${days} days after it ended; its log and output stay until the job is deleted.`
    );
    const rows = report.users.map(u => [
      u.user,
      String(u.jobs),
      limit === null
        ? bytes(u.job_files)
        : meter(u.job_files, limit, `${u.user}'s job files`, bytes),
      // where the user's results are written, as people know the place, and the room left
      u.folder,
      u.free_bytes === null ? '–' : bytes(u.free_bytes)
    ]);
    this.main.replaceChildren(
      h('h2', {}, 'Storage'),
      h(
        'p',
        {},
        'The space nbjobs keeps for jobs in each folder (.nbjobs: the notebooks jobs ran, their logs and telemetry). Outputs are written beside the notebooks and are not counted.'
      ),
      rules,
      rows.length
        ? table(['User', 'Jobs', 'Job files', 'Folder', 'Free there'], rows, 'Job files per user')
        : h('p', {}, 'No jobs yet.')
    );
  }

  /** Kueue's queues: each one's GPU quota, use, and what it borrows and lends. */
  private kueueQueues(queues: IQueueRow[]): HTMLElement {
    const limit = (value: number | null): string =>
      value === null ? '' : ` (at most ${gpus(value)})`;
    return h(
      'section',
      {},
      h('h2', {}, 'Kueue queues'),
      table(
        ['Queue', 'Cohort', 'GPU quota', 'In use', 'Borrowed', 'Lent (estimated)'],
        queues.map(q => [
          q.local_queue === q.cluster_queue
            ? q.local_queue
            : `${q.local_queue} → ${q.cluster_queue}`,
          q.cohort ?? '–',
          gpus(q.nominal),
          gpus(q.used),
          gpus(q.borrowed) + limit(q.borrowing_limit),
          gpus(q.lent) + limit(q.lending_limit)
        ]),
        'Kueue queues'
      ),
      h(
        'p',
        { class: 'nbjobs-Hint' },
        "Borrowed: GPUs a queue uses beyond its quota, from its cohort's unused quota; Kueue takes them back when their queue needs them, and those jobs are queued again. Kueue does not say which queue lent them: the Lent column shares each cohort's borrowed GPUs among the queues that leave quota unused."
      )
    );
  }

  // -- credits -----------------------------------------------------------------------

  private async credits(said = '', open = ''): Promise<void> {
    let accounts: ICreditAccount[];
    try {
      accounts = await this.api.get<ICreditAccount[]>('credits');
    } catch (error) {
      this.fail(error);
      return;
    }
    const status = h('p', { class: 'nbjobs-Status', role: 'status' }, said);
    const statement = h('section', { class: 'nbjobs-Statement', 'aria-live': 'polite' });
    const grants = Boolean(this.me?.admin || this.me?.teacher);
    const rows = accounts.map(a => {
      const show = h('button', { type: 'button', 'data-action': 'statement' }, 'Statement');
      show.addEventListener('click', () => void this.statement(a.account, statement));
      const cells: Child[] = [
        a.pays_for_you ? h('span', {}, a.account, h('em', {}, ' (pays for your jobs)')) : a.account,
        creditText(a.balance),
        creditText(a.held),
        creditText(a.available),
        creditText(a.standing),
        creditText(a.granted),
        creditText(a.charged),
        show
      ];
      if (grants) {
        cells.push(this.grantForm(a.account, status));
      }
      return cells;
    });
    const headers = [
      'Account',
      'Balance',
      'Held',
      'Available',
      'Standing',
      'Granted',
      'Charged',
      ''
    ];
    if (grants) {
      headers.push('Grant');
    }
    this.main.replaceChildren(
      h('h2', {}, 'Credits'),
      h(
        'p',
        {},
        "Jobs on flavors with a price are paid from an account: the user's own, else their class's, else their group's. A job holds its worst case (its time limit × its GPUs × the price) while it waits and runs, and is charged what it cost once it ends. Every grant and charge stays on the account's statement."
      ),
      status,
      rows.length
        ? table(headers, rows, 'Credit accounts')
        : h('p', {}, 'No credit accounts yet: jobs on priced flavors need credits.'),
      ...(this.me?.admin
        ? [h('h3', {}, 'Grant credits to another account'), this.newGrantForm(status)]
        : []),
      statement
    );
    if (open) {
      await this.statement(open, statement);
    }
  }

  /** An amount and a note, and a button that grants them to `account`. */
  private grantForm(account: string, status: HTMLElement): HTMLElement {
    const amount = h('input', {
      type: 'number',
      step: '0.5',
      value: '10',
      'aria-label': `Credits for ${account}`
    }) as HTMLInputElement;
    const note = h('input', {
      type: 'text',
      maxlength: '200',
      placeholder: 'why',
      'aria-label': `Why ${account} gets them`
    }) as HTMLInputElement;
    const give = h('button', { type: 'button', 'data-action': 'grant' }, 'Grant');
    give.addEventListener(
      'click',
      () => void this.grant(account, amount.value, note.value, status)
    );
    return h('span', { class: 'nbjobs-Grant' }, amount, note, give);
  }

  /** Admins: credits for an account not listed yet (a user's, a class's, a group's). */
  private newGrantForm(status: HTMLElement): HTMLElement {
    const account = h('input', {
      type: 'text',
      id: 'nbjobs-account',
      placeholder: 'user:ada, class:ml101, group:physics',
      required: ''
    }) as HTMLInputElement;
    const amount = h('input', {
      type: 'number',
      id: 'nbjobs-amount',
      step: '0.5',
      value: '10'
    }) as HTMLInputElement;
    const note = h('input', {
      type: 'text',
      id: 'nbjobs-note',
      maxlength: '200'
    }) as HTMLInputElement;
    const form = h(
      'form',
      { class: 'nbjobs-Controls', 'aria-label': 'Grant credits' },
      h('label', { for: 'nbjobs-account' }, 'Account'),
      account,
      h('label', { for: 'nbjobs-amount' }, 'Credits'),
      amount,
      h('label', { for: 'nbjobs-note' }, 'Why'),
      note,
      h('button', { type: 'submit' }, 'Grant')
    );
    form.addEventListener('submit', event => {
      event.preventDefault();
      void this.grant(account.value.trim(), amount.value, note.value, status);
    });
    return form;
  }

  private async grant(
    account: string,
    amount: string,
    note: string,
    status: HTMLElement
  ): Promise<void> {
    try {
      await this.api.post(`credits/${encodeURIComponent(account)}/grants`, {
        amount: Number(amount),
        note
      });
      await this.credits(`Granted ${amount} credits to ${account}.`, account);
    } catch (error) {
      this.failIn(status, error);
    }
  }

  /** An account's grants and charges, oldest first, with a CSV download. */
  private async statement(account: string, into: HTMLElement): Promise<void> {
    let found: ICreditStatement;
    try {
      found = await this.api.get<ICreditStatement>(`credits/${encodeURIComponent(account)}`);
    } catch (error) {
      into.replaceChildren(
        h('p', { class: 'nbjobs-Error', role: 'alert' }, (error as Error).message)
      );
      return;
    }
    const csv = h('button', { type: 'button', id: 'nbjobs-statement-csv' }, 'Download CSV');
    csv.addEventListener('click', () => {
      void (async () => {
        const text = await this.api.text(`credits/${encodeURIComponent(account)}`, {
          format: 'csv'
        });
        const link = document.createElement('a');
        link.href = URL.createObjectURL(new Blob([text], { type: 'text/csv' }));
        link.download = `nbjobs-credits-${account.replace(':', '-')}.csv`;
        link.click();
        URL.revokeObjectURL(link.href);
      })();
    });
    const rows = found.entries.map(e => [
      when(e.at),
      e.kind,
      (e.amount > 0 ? '+' : '') + creditText(e.amount),
      creditText(e.balance),
      e.job_id ?? '–',
      e.by,
      e.note
    ]);
    into.replaceChildren(
      h('h3', {}, `Statement of ${account}`),
      h(
        'p',
        {},
        `Standing credits ${creditText(found.account.standing)}; balance now ${creditText(found.account.balance)}, of which ${creditText(found.account.held)} held for jobs not ended. `,
        csv
      ),
      rows.length
        ? table(
            ['When', 'Kind', 'Amount', 'Balance', 'Job', 'By', 'Note'],
            rows,
            `Statement of ${account}`
          )
        : h('p', {}, 'No grants or charges yet.')
    );
  }

  // -- usage -------------------------------------------------------------------------

  private usageForm(): HTMLFormElement {
    const today = new Date();
    const start = new Date(today.getTime() - 13 * 86_400_000);
    const choices = this.me?.admin
      ? ['user', 'group', 'class', 'flavor', 'node']
      : this.me?.teacher
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

  private async usage(): Promise<void> {
    const form = this.usageForm();
    const result = h('div', { class: 'nbjobs-Usage' });
    this.main.replaceChildren(h('h2', {}, 'GPU-hours'), form, result);
    let last: IUsage | null = null;
    const load = async (): Promise<void> => {
      const query = Object.fromEntries(new FormData(form).entries()) as Record<string, string>;
      result.replaceChildren(h('p', { class: 'nbjobs-Loading' }, 'Loading…'));
      try {
        last = await this.api.get<IUsage>('usage', query);
      } catch (error) {
        result.replaceChildren(
          h('p', { class: 'nbjobs-Error', role: 'alert' }, (error as Error).message)
        );
        return;
      }
      this.drawUsage(result, last);
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

  private drawUsage(into: HTMLElement, usage: IUsage): void {
    for (const chart of this.charts) {
      chart.destroy();
    }
    this.charts = [];
    const days = dayLabels(usage.range_since, usage.range_until);
    const total = usage.total;
    if (!total || usage.breakdown.length === 0) {
      into.replaceChildren(
        h('p', {}, `No GPU use from ${usage.range_since} to ${usage.range_until}.`)
      );
      return;
    }
    const lines = [...usage.breakdown].sort(
      (a, b) => b.gpu_hours_allocated - a.gpu_hours_allocated
    );
    const shown = lines.slice(0, SERIES_SHOWN);
    const rest = lines.slice(SERIES_SHOWN);
    const series = rest.length ? [...shown, merge(`${rest.length} others`, rest)] : shown;
    const perDay = (
      line: IUsageLine,
      field: 'gpu_hours_allocated' | 'gpu_hours_busy'
    ): number[] => {
      const byDay = new Map(line.days.map(d => [d.date, d[field]]));
      return days.map(d => byDay.get(d) ?? 0);
    };
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
    const summary = table(
      // the days chosen above, not the budget's period: its own count of jobs
      [
        usage.by ?? 'key',
        'Jobs in these days',
        'GPU-hours allocated',
        'GPU-hours busy',
        'Busy %',
        'Cost'
      ],
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
    const top = usage.users.slice(0, 10);
    const budgets = top.length
      ? h(
          'section',
          {},
          h('h3', {}, `Top users this ${usage.period}, against their budgets`),
          table(
            ['User', `Jobs this ${usage.period}`, 'Running', 'Queued', 'GPU-hours used'],
            top.map(u => [
              u.name,
              String(u.jobs),
              String(u.running),
              String(u.queued),
              u.gpu_hours_limit === null
                ? `${hours(u.gpu_hours)} (no budget)`
                : meter(u.gpu_hours, u.gpu_hours_limit, `${u.name}'s GPU-hours`, hours)
            ]),
            `Top users this ${usage.period}`
          )
        )
      : null;
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
      h('section', {}, h('h3', {}, `From ${usage.range_since} to ${usage.range_until}`), summary)
    );
    this.charts.push(
      new Chart(stacked, {
        type: 'bar',
        data: {
          labels: days,
          datasets: series.map((line, i) => ({
            label: line.name,
            data: perDay(line, 'gpu_hours_allocated'),
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
      new Chart(versus, {
        type: 'line',
        data: {
          labels: days,
          datasets: [
            {
              label: 'allocated',
              data: perDay(total, 'gpu_hours_allocated'),
              borderColor: COLOURS[0],
              backgroundColor: COLOURS[0],
              pointStyle: 'rect',
              pointRadius: 4
            },
            {
              label: 'busy',
              data: perDay(total, 'gpu_hours_busy'),
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
      })
    );
  }
}

const root = document.getElementById('nbjobs-dashboard');
if (root) {
  void new Dashboard(root).start();
}

/** The nbjobs dashboard: the overview (admins) and usage charts (everyone, each seeing
 * what the API lets them see). Static; all data comes from the job service's API.
 *
 * This module is the page's frame: sign-in, the tabs, which view is shown, and the
 * changes the service pushes. Each view is a module of its own (overview.ts, queue.ts,
 * nodes.ts, approvals.ts, classes.ts, usage_view.ts, storage.ts, credits.ts, audit.ts,
 * users.ts), a function of the state they share (page.ts). */

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

import { EventStream, type ServiceEvent } from '../../../labextension/src/events';
import { Api, ApiError, IMe } from './api';
import { approvalsView } from './approvals';
import { auditView } from './audit';
import { classesView } from './classes';
import { creditsView } from './credits';
import { AS_IT_IS, h, meta, REDRAW_DELAY_MS, typing } from './dom';
import { JOB_PAGE, jobPageMoves, jobView } from './job_view';
import { nodesView } from './nodes';
import { overviewView } from './overview';
import { Page } from './page';
import { queueView } from './queue';
import { storageView } from './storage';
import { usageView } from './usage_view';
import { usersPage } from './users';

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

class Dashboard {
  private page: Page;
  private root: HTMLElement;
  private redrawSoon = 0;

  constructor(root: HTMLElement) {
    this.root = root;
    const token = meta('nbjobs-token') || sessionStorage.getItem('nbjobs-token') || '';
    this.page = new Page(new Api(meta('nbjobs-api'), token));
  }

  async start(): Promise<void> {
    if (!this.page.api.token) {
      this.askForToken('');
      return;
    }
    try {
      this.page.me = await this.page.api.get<IMe>('me');
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
    this.page.events?.dispose();
    this.page.events = new EventStream(signal => this.page.api.events(signal));
    this.page.events.received.connect((_, event) => this.pushed(event));
    // whether the page follows the service's changes as they happen, on its root for
    // what reads the page (and said in the Overview's last line)
    this.page.events.connectedChanged.connect((_, live) => {
      this.root.dataset.live = live ? 'yes' : 'no';
      if (this.page.view === 'overview') {
        window.clearTimeout(this.page.timer);
        void overviewView(this.page); // its last line says whether it is live
      }
    });
    this.page.events.start();
    const fromHash = (): string => {
      const wanted = window.location.hash.slice(1);
      if (wanted.startsWith(JOB_PAGE) && this.views().some(([id]) => id === 'classes')) {
        return wanted; // a student's job, opened from the Classes tab
      }
      return this.views().some(([id]) => id === wanted) ? wanted : this.views()[0][0];
    };
    // a link or the Back button to another view changes only the hash
    window.addEventListener('hashchange', () => {
      if (fromHash() !== this.page.view) {
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
    const view = this.page.view;
    if (event.event === 'job' && jobPageMoves(view, event.data.id, this.page.main)) {
      // the job whose page is shown moved on: its state, its log, its result once ended
      this.redrawSoon = window.setTimeout(() => {
        this.redrawSoon = 0;
        if (this.page.view === view) {
          void jobView(this.page, event.data.id);
        }
      }, REDRAW_DELAY_MS);
      return;
    }
    const redraw: Record<string, () => Promise<void>> = {
      overview: () => overviewView(this.page),
      queue: () => queueView(this.page, undefined, AS_IT_IS),
      approvals: () => approvalsView(this.page, AS_IT_IS)
    };
    if (!redraw[view]) {
      return;
    }
    this.redrawSoon = window.setTimeout(() => {
      this.redrawSoon = 0;
      if (this.page.view === view && !typing()) {
        window.clearTimeout(this.page.timer);
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
      this.page.api = new Api(this.page.api.base, (input as HTMLInputElement).value.trim());
      void this.start();
    });
    this.root.replaceChildren(form);
    input.focus();
  }

  private views(): [string, string][] {
    const views: [string, string][] = [];
    if (this.page.me?.admin) {
      views.push(['overview', 'Overview'], ['queue', 'Queue'], ['nodes', 'Nodes']);
    }
    if (this.page.me?.admin || this.page.me?.teacher) {
      views.push(['approvals', 'Approvals'], ['classes', 'Classes']);
    }
    views.push(['usage', 'Usage'], ['storage', 'Storage']);
    if (this.page.me?.credits) {
      views.push(['credits', 'Credits']);
    }
    if (this.page.me?.admin) {
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
    const role = this.page.me?.admin ? 'admin' : this.page.me?.teacher ? 'teacher' : 'user';
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
          `${this.page.me?.name} (${role})`,
          hub ? h('a', { href: hub + 'home' }, 'Hub home') : null
        )
      ),
      this.page.main
    );
  }

  private show(id: string): void {
    this.page.view = id;
    window.clearTimeout(this.page.timer);
    for (const chart of this.page.charts) {
      chart.destroy();
    }
    this.page.charts = [];
    history.replaceState(null, '', `#${id}`);
    // a job's page belongs to the Classes tab, where it was opened from
    const tab = id.startsWith(JOB_PAGE) ? 'classes' : id;
    for (const link of Array.from(this.root.querySelectorAll('[data-view]'))) {
      if (link.getAttribute('data-view') === tab) {
        link.setAttribute('aria-current', 'page');
      } else {
        link.removeAttribute('aria-current');
      }
    }
    this.page.main.replaceChildren(h('p', { class: 'nbjobs-Loading' }, 'Loading…'));
    const draw: Record<string, () => Promise<void>> = {
      overview: () => overviewView(this.page),
      queue: () => queueView(this.page),
      nodes: () => nodesView(this.page),
      approvals: () => approvalsView(this.page),
      classes: () => classesView(this.page),
      usage: () => usageView(this.page),
      storage: () => storageView(this.page),
      credits: () => creditsView(this.page),
      audit: () => auditView(this.page),
      users: () => usersPage(this.page)
    };
    if (id.startsWith(JOB_PAGE)) {
      void jobView(this.page, decodeURIComponent(id.slice(JOB_PAGE.length)));
      return;
    }
    void (draw[id] ?? draw.usage)();
  }
}

const root = document.getElementById('nbjobs-dashboard');
if (root) {
  void new Dashboard(root).start();
}

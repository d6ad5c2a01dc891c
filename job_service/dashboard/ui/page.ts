/** What the dashboard's views share: the API, who is signed in, where a view draws and
 * which view is shown; each view (overview.ts, queue.ts, ...) is a function of it. */

import type { Chart } from 'chart.js';

import type { EventStream } from '../../../labextension/src/events';
import { Api, IInvitation, IMe } from './api';
import { AS_IT_IS, h, Said, typing } from './dom';

/** An action failed: the reason in the view's status line (for a view drawn without its
 * Page, as the Users view is; the others call ``page.failIn``). */
export function failIn(status: HTMLElement, error: unknown): void {
  status.textContent = (error as Error).message;
  status.className = 'nbjobs-Error';
}

export class Page {
  api: Api;
  me: IMe | null = null;
  /** where the shown view draws */
  readonly main = h('main', { class: 'nbjobs-Main', id: 'nbjobs-main' });
  /** the view shown: a view that read the service draws only if it is still the one */
  view = '';
  /** the shown view's next refresh */
  timer = 0;
  /** the shown view's charts, destroyed when another is shown */
  charts: Chart[] = [];
  /** changes the service pushes: the views that list jobs draw again by themselves */
  events: EventStream | null = null;
  /** the invitations the last roster change or Invite made: shown until handed out */
  invitations: IInvitation[] = [];

  constructor(api: Api) {
    this.api = api;
  }

  /** The view could not be drawn: the reason in its place. */
  fail(error: unknown): void {
    this.main.replaceChildren(
      h('p', { class: 'nbjobs-Error', role: 'alert' }, (error as Error).message)
    );
  }

  /** An action in a view failed: the reason in its status line. */
  failIn(status: HTMLElement, error: unknown): void {
    failIn(status, error);
  }

  /**
   * The view's status line: what it is told to say, or for a redraw what it says now
   * (kept as it was said, an error as an error); null when someone typed in the view
   * while the redraw read the service (the next change draws it again).
   */
  statusLine(said: Said): HTMLElement | null {
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
}

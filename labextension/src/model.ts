/**
 * The user's jobs as the browser knows them, kept fresh by one poll.
 *
 * The Jobs panel renders it, the notifications listen to it, and the Submit
 * command nudges it. How often it asks is decided by `planPoll`.
 *
 * Two lists: the user's newest jobs, which the notifications follow whatever the
 * panel shows; and the panel's list for its query (search, state, whose jobs),
 * newest page polled, older pages loaded on demand (`loadOlder`) and kept as
 * loaded (see `joblist.ts`). While the query is the default they are one request.
 */
import { Poll } from '@lumino/polling';
import { type ISignal, Signal } from '@lumino/signaling';

import { NbjobsAPI, NbjobsError } from './api';
import type { EventStream, ServiceEvent } from './events';
import { isActive } from './format';
import {
  DEFAULT_QUERY,
  type IJobQuery,
  PAGE_SIZE,
  appendOlder,
  isDefaultQuery,
  matchesQuery,
  mergeNewest,
  pageHasMore,
  sameQuery
} from './joblist';
import {
  IDLE_MAX,
  fingerprint,
  newlyApproved,
  newlyEnded,
  nextQuietPolls,
  planPoll
} from './pollpolicy';
import type { IJob, IJobList, JobState } from './types';

export class JobsModel {
  constructor(readonly api: NbjobsAPI) {
    this._poll = new Poll({
      factory: () => this._fetch(),
      frequency: { interval: IDLE_MAX, backoff: true, max: IDLE_MAX },
      // A background tab does not poll; it catches up when shown again.
      standby: 'when-hidden',
      auto: false,
      name: 'nbjobs:jobs'
    });
  }

  /** The jobs the panel shows (its query's), newest first. */
  get jobs(): readonly IJob[] {
    return this._view;
  }

  /** What the panel asks for. */
  get query(): IJobQuery {
    return this._query;
  }

  /** Whether the list is what was shown before the query changed, filtered here, until
   * the service answers. */
  get searching(): boolean {
    return this._provisional;
  }

  /** Whether the service holds older jobs for the query than those loaded. */
  get hasOlder(): boolean {
    return this._hasOlder;
  }

  /** Whether an older page is on its way. */
  get loadingOlder(): boolean {
    return this._loadingOlder;
  }

  /** Why the last older page could not be loaded; null when it was. */
  get olderError(): NbjobsError | null {
    return this._olderError;
  }

  /** A job the model holds (shown or followed), by id. */
  find(id: string): IJob | undefined {
    return this._view.find(j => j.id === id) ?? this._jobs.find(j => j.id === id);
  }

  /**
   * Ask for other jobs (the search, the state, whose). Until the service answers,
   * the panel shows those it holds that match; then the service's newest page.
   */
  setQuery(query: IJobQuery): void {
    if (sameQuery(query, this._query)) {
      return;
    }
    this._query = { ...query };
    this._generation++;
    this._view = this._view.filter(job => matchesQuery(job, query));
    this._provisional = true;
    this._hasOlder = false;
    this._olderError = null;
    this._changed.emit();
    void this.refresh();
  }

  /** Load the page of jobs after the last one shown ("Show older jobs"). */
  async loadOlder(): Promise<void> {
    const last = this._view[this._view.length - 1];
    if (this._loadingOlder || !this._hasOlder || this._provisional || !last) {
      return;
    }
    const generation = this._generation;
    this._loadingOlder = true;
    this._olderError = null;
    this._changed.emit();
    try {
      const page = await this.api.jobs(this._query, { limit: PAGE_SIZE, before: last.id });
      if (generation === this._generation) {
        this._view = appendOlder(this._view, page.jobs);
        this._hasOlder = pageHasMore(page);
      }
    } catch (error) {
      if (generation === this._generation) {
        this._olderError =
          error instanceof NbjobsError ? error : new NbjobsError(String(error), 'refused', 0);
      }
    } finally {
      this._loadingOlder = false;
      this._changed.emit();
    }
  }

  /** Drop a job the user removed, wherever it is in the list (older pages are not polled). */
  forget(id: string): void {
    this._view = this._view.filter(j => j.id !== id);
    this._jobs = this._jobs.filter(j => j.id !== id);
    this._changed.emit();
  }

  /** What went wrong on the last poll, for the panel to say; null when it worked. */
  get error(): NbjobsError | null {
    return this._error;
  }

  /** Whether at least one poll has answered (successfully or not). */
  get loaded(): boolean {
    return this._loaded;
  }

  /** Emitted after every poll, and when the panel's list changes otherwise (a query, a page). */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /** Emitted with the jobs that ended since the previous poll. */
  get ended(): ISignal<this, IJob[]> {
    return this._ended;
  }

  /** Emitted with the jobs an admin or teacher approved since the previous poll. */
  get approved(): ISignal<this, IJob[]> {
    return this._approved;
  }

  /** Emitted with each event the service pushed (after the model acted on it). */
  get pushed(): ISignal<this, ServiceEvent> {
    return this._pushed;
  }

  /**
   * Follow the service's stream of events: any change to the user's jobs (or, for
   * admins and teachers, to jobs they may see) asks again at once; while the stream is
   * open, polling is only a slow safety net.
   */
  listen(events: EventStream): void {
    this._events = events;
    events.received.connect((_, event) => {
      if (event.event !== 'definitions') {
        this._refreshSoon();
      }
      this._pushed.emit(event);
    }, this);
    events.connectedChanged.connect(() => this._plan(), this);
  }

  /** Ask again shortly: a burst of events (a job running cell after cell) asks once. */
  private _refreshSoon(): void {
    if (this._soon) {
      return;
    }
    this._soon = setTimeout(() => {
      this._soon = 0;
      void this.refresh();
    }, REFRESH_DELAY);
  }

  /** Tell the model whether the panel is shown; polling follows. */
  setVisible(visible: boolean): void {
    if (visible === this._visible) {
      return;
    }
    this._visible = visible;
    if (visible) {
      void this.refresh();
    } else {
      this._plan();
    }
  }

  /** Ask now (after a submit, a cancel, opening the panel, a pushed change). */
  async refresh(): Promise<void> {
    this._quietPolls = 0;
    const asked = ++this._asks;
    if (this._poll.isDisposed) {
      return;
    }
    if (this._poll.state.phase === 'stopped' || this._poll.state.phase === 'constructed') {
      await this._poll.start();
    }
    await this._poll.refresh();
    await this._poll.tick;
    // The Poll folds a refresh asked while another is on its way into that one. That
    // answer was asked for before this: it may not hold what made us ask (a job that
    // ended meanwhile, whose event came while the answer was out; a query the user
    // chose meanwhile). Ask once more then, or the change waits for the next poll.
    const stale = this._answeredAsk < asked || this._answered !== this._generation;
    if (stale && !this._poll.isDisposed) {
      await this._poll.refresh();
      await this._poll.tick;
    }
  }

  /** Stop polling for good. */
  dispose(): void {
    clearTimeout(this._soon);
    this._poll.dispose();
    Signal.clearData(this);
  }

  private async _fetch(): Promise<void> {
    const query = this._query;
    const generation = this._generation;
    const asks = this._asks; // each refresh asked for until now: this answer is theirs
    let jobs: IJob[];
    let page: IJobList;
    try {
      // The user's newest jobs, for the notifications and the pace of polling; the
      // panel's newest page too when it shows something else.
      const own = this.api.jobs();
      const shown = isDefaultQuery(query) ? own : this.api.jobs(query);
      [jobs, page] = await Promise.all([own.then(list => list.jobs), shown]);
    } catch (error) {
      this._error =
        error instanceof NbjobsError ? error : new NbjobsError(String(error), 'refused', 0);
      this._loaded = true;
      this._changed.emit();
      if (this._error.kind === 'missing') {
        void this._poll.stop(); // nothing will appear without a reinstall
        return;
      }
      throw error; // the Poll backs off
    }
    const print = fingerprint(jobs);
    const changed = print !== this._fingerprint || this._error !== null;
    const ended = newlyEnded(this._states, jobs);
    const approved = newlyApproved(this._states, jobs);
    this._fingerprint = print;
    this._states = new Map<string, JobState>(jobs.map(j => [j.id, j.state]));
    this._jobs = jobs;
    if (generation === this._generation) {
      // An answer to an older query is dropped: the one for the new query follows.
      const merged = mergeNewest(this._provisional ? [] : this._view, page.jobs, pageHasMore(page));
      this._view = merged.jobs;
      this._hasOlder = merged.keptOlder ? this._hasOlder : pageHasMore(page);
      this._provisional = false;
      this._answered = generation;
    }
    this._answeredAsk = asks;
    this._error = null;
    this._loaded = true;
    this._active = countActive(jobs, page.jobs);
    this._quietPolls = nextQuietPolls(this._quietPolls, this._active, changed);
    this._plan();
    this._changed.emit();
    if (ended.length) {
      this._ended.emit(ended);
    }
    if (approved.length) {
      this._approved.emit(approved);
    }
  }

  private _plan(): void {
    const plan = planPoll({
      panelVisible: this._visible,
      activeJobs: this._active,
      quietPolls: this._quietPolls,
      pushed: this._events?.connected ?? false
    });
    if (!plan.run) {
      void this._poll.stop();
      return;
    }
    this._poll.frequency = { interval: plan.interval, backoff: true, max: IDLE_MAX };
    if (this._poll.state.phase === 'stopped') {
      void this._poll.start();
    }
  }

  private _poll: Poll;
  /** the user's newest jobs (the default query's newest page) */
  private _jobs: IJob[] = [];
  /** what the panel shows: its query's newest page and the older pages loaded */
  private _view: IJob[] = [];
  private _query: IJobQuery = DEFAULT_QUERY;
  /** counts query changes: an answer for an earlier query is dropped */
  private _generation = 0;
  /** the generation of the query the last applied answer was for */
  private _answered = -1;
  /** counts refreshes asked for */
  private _asks = 0;
  /** the refreshes asked for before the last answer's request went out */
  private _answeredAsk = 0;
  /** the view is the old list filtered here, until the service answers the new query */
  private _provisional = false;
  /** jobs waiting or running in the last poll's answers (older pages are not asked again) */
  private _active = 0;
  private _hasOlder = false;
  private _loadingOlder = false;
  private _olderError: NbjobsError | null = null;
  private _states = new Map<string, JobState>();
  private _fingerprint = '';
  private _quietPolls = 0;
  private _visible = false;
  private _loaded = false;
  private _error: NbjobsError | null = null;
  private _changed = new Signal<this, void>(this);
  private _ended = new Signal<this, IJob[]>(this);
  private _approved = new Signal<this, IJob[]>(this);
  private _pushed = new Signal<this, ServiceEvent>(this);
  private _events: EventStream | null = null;
  private _soon = 0;
}

/** How long after an event the list is asked for again (ms): events that come together
 * are answered by one request. */
export const REFRESH_DELAY = 150;

/** Jobs waiting or running among those a poll got, each once. */
function countActive(...lists: IJob[][]): number {
  const active = new Set<string>();
  for (const list of lists) {
    for (const job of list) {
      if (isActive(job.state)) {
        active.add(job.id);
      }
    }
  }
  return active.size;
}

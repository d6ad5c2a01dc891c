/**
 * The user's jobs as the browser knows them, kept fresh by one poll.
 *
 * The Jobs panel renders it, the notifications listen to it, and the Submit
 * command nudges it. How often it asks is decided by `planPoll`.
 */
import { Poll } from '@lumino/polling';
import { type ISignal, Signal } from '@lumino/signaling';

import { NbjobsAPI, NbjobsError } from './api';
import { isActive } from './format';
import {
  IDLE_MAX,
  fingerprint,
  newlyApproved,
  newlyEnded,
  nextQuietPolls,
  planPoll
} from './pollpolicy';
import type { IJob, JobState } from './types';

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

  /** The jobs, newest first. */
  get jobs(): readonly IJob[] {
    return this._jobs;
  }

  /** What went wrong on the last poll, for the panel to say; null when it worked. */
  get error(): NbjobsError | null {
    return this._error;
  }

  /** Whether at least one poll has answered (successfully or not). */
  get loaded(): boolean {
    return this._loaded;
  }

  /** Emitted after every poll. */
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

  /** Ask now (after a submit, a cancel, opening the panel). */
  async refresh(): Promise<void> {
    this._quietPolls = 0;
    if (this._poll.isDisposed) {
      return;
    }
    if (this._poll.state.phase === 'stopped' || this._poll.state.phase === 'constructed') {
      await this._poll.start();
    }
    await this._poll.refresh();
    await this._poll.tick;
  }

  /** Stop polling for good. */
  dispose(): void {
    this._poll.dispose();
    Signal.clearData(this);
  }

  private async _fetch(): Promise<void> {
    let jobs: IJob[];
    try {
      jobs = (await this.api.jobs()).jobs;
    } catch (error) {
      this._error =
        error instanceof NbjobsError
          ? error
          : new NbjobsError(String(error), 'refused', 0);
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
    this._error = null;
    this._loaded = true;
    const active = jobs.filter(j => isActive(j.state)).length;
    this._quietPolls = nextQuietPolls(this._quietPolls, active, changed);
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
      activeJobs: this._jobs.filter(j => isActive(j.state)).length,
      quietPolls: this._quietPolls
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
  private _jobs: IJob[] = [];
  private _states = new Map<string, JobState>();
  private _fingerprint = '';
  private _quietPolls = 0;
  private _visible = false;
  private _loaded = false;
  private _error: NbjobsError | null = null;
  private _changed = new Signal<this, void>(this);
  private _ended = new Signal<this, IJob[]>(this);
  private _approved = new Signal<this, IJob[]>(this);
}

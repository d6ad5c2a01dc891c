/**
 * The Jobs panel: the user's jobs, newest first, with what each is doing and
 * what can be done with it.
 *
 * Rows are kept per job id and updated in place, so a poll never moves the
 * keyboard focus or the scroll position.
 */
import {
  type LabIcon,
  deleteIcon,
  launchIcon,
  listIcon,
  redoIcon,
  refreshIcon,
  stopIcon
} from '@jupyterlab/ui-components';
import type { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import type { NbjobsAPI } from './api';
import {
  elapsedSeconds,
  formatDuration,
  isActive,
  isWaiting,
  jobActions,
  jobMatches,
  submittedAt,
  jobWarning,
  progressFraction,
  progressLabel,
  stateLabel
} from './format';
import { jobsIcon, usageIcon } from './icons';
import type { JobsModel } from './model';
import { TelemetryView } from './telemetryview';
import type { Translate } from './translate';
import type { IJob } from './types';

/** What the panel's buttons do; the plugin supplies them. */
export interface IJobActions {
  cancel(job: IJob): Promise<void>;
  rerun(job: IJob): Promise<void>;
  openOutput(job: IJob): Promise<void>;
  viewLog(job: IJob): Promise<void>;
  remove(job: IJob): Promise<void>;
  /** the job's details, in a tab */
  showDetails(job: IJob): Promise<void>;
}

export class JobsPanel extends Widget {
  constructor(
    private readonly model: JobsModel,
    private readonly actions: IJobActions,
    private readonly trans: Translate,
    dashboard: string | null = null,
    readonly me: string | null = null
  ) {
    super();
    this.id = 'nbjobs-jobs-panel';
    this.addClass('nbjobs-JobsPanel');
    this.title.icon = jobsIcon;
    this.title.caption = trans('Jobs');

    const header = document.createElement('div');
    header.className = 'nbjobs-JobsPanel-header';
    const title = document.createElement('h2');
    title.className = 'nbjobs-JobsPanel-title';
    title.textContent = trans('Jobs');
    const refresh = iconButton(refreshIcon, trans('Refresh the list'), () =>
      this.model.refresh()
    );
    refresh.classList.add('nbjobs-JobsPanel-refresh');
    header.append(title);
    if (dashboard) {
      // GPUs, queues and usage charts: the job service's own page, in a new tab
      const link = document.createElement('a');
      link.className = 'nbjobs-JobsPanel-dashboard';
      link.href = dashboard;
      link.target = '_blank';
      link.rel = 'noopener';
      link.textContent = trans('Dashboard');
      link.title = trans('GPUs, queues and usage, in a new browser tab');
      header.append(link);
    }
    header.append(refresh);

    this._notice = document.createElement('div');
    this._notice.className = 'nbjobs-JobsPanel-notice';
    this._notice.setAttribute('role', 'status');

    // Find a job among many: words against name, notebook, id, flavor, owner; a state.
    const filters = document.createElement('div');
    filters.className = 'nbjobs-JobsPanel-filters';
    this._search = document.createElement('input');
    this._search.type = 'search';
    this._search.className = 'jp-mod-styled nbjobs-JobsPanel-search';
    this._search.placeholder = trans('Search jobs');
    this._search.setAttribute('aria-label', trans('Search jobs by name, notebook, id or flavor'));
    this._show = document.createElement('select');
    this._show.className = 'jp-mod-styled nbjobs-JobsPanel-show';
    this._show.setAttribute('aria-label', trans('Show jobs'));
    for (const [value, text] of [
      ['all', trans('All')],
      ['active', trans('Waiting or running')],
      ['ended', trans('Ended')],
      ['failed', trans('Failed')]
    ]) {
      const option = document.createElement('option');
      option.value = value;
      option.textContent = text;
      this._show.append(option);
    }
    this._search.addEventListener('input', () => this._render());
    this._show.addEventListener('change', () => this._render());
    filters.append(this._search, this._show);

    this._list = document.createElement('ul');
    this._list.className = 'nbjobs-JobList';
    this._list.setAttribute('aria-label', trans('Your jobs, newest first'));

    this.node.append(header, filters, this._notice, this._list);
    model.changed.connect(this._render, this);
  }

  dispose(): void {
    this.model.changed.disconnect(this._render, this);
    window.clearInterval(this._clock);
    for (const row of this._rows.values()) {
      row.dispose();
    }
    super.dispose();
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    this._visible = true;
    this.model.setVisible(true);
    this._render();
    // Elapsed times tick locally; only the poll talks to the server.
    this._clock = window.setInterval(() => this._tick(), 1000);
  }

  protected onAfterHide(msg: Message): void {
    super.onAfterHide(msg);
    this._visible = false;
    this.model.setVisible(false);
    window.clearInterval(this._clock);
    // Nobody sees the readings: they stop asking until the panel is shown again.
    for (const row of this._rows.values()) {
      row.setVisible(false);
    }
  }

  private _render(): void {
    const { jobs, error, loaded } = this.model;
    const trans = this.trans;
    if (error) {
      this._setNotice(error.message, 'error');
    } else if (!loaded) {
      this._setNotice(trans('Loading your jobs…'), 'info');
    } else if (jobs.length === 0) {
      this._setNotice(
        trans('No jobs yet. Open a notebook and press Submit Job in its toolbar.'),
        'info'
      );
    } else {
      this._setNotice('', 'none');
    }
    const show = this._show.value as 'all' | 'active' | 'ended' | 'failed';
    const shown = jobs.filter(job => jobMatches(job, this._search.value, show));
    if (loaded && !error && jobs.length && !shown.length) {
      this._setNotice(trans('No job matches; clear the search or pick All.'), 'info');
    }

    const seen = new Set<string>();
    let previous: HTMLElement | null = null;
    for (const job of shown) {
      seen.add(job.id);
      let row = this._rows.get(job.id);
      if (!row) {
        row = new JobRow(this.actions, this.model.api, trans, this.me);
        this._rows.set(job.id, row);
      }
      row.update(job, this._visible);
      // Keep DOM order = list order without re-inserting rows that are in place.
      const expected: ChildNode | null = previous ? previous.nextSibling : this._list.firstChild;
      if (expected !== row.node) {
        this._list.insertBefore(row.node, expected);
      }
      previous = row.node;
    }
    for (const [id, row] of this._rows) {
      if (!seen.has(id)) {
        row.dispose();
        row.node.remove();
        this._rows.delete(id);
      }
    }
  }

  private _tick(): void {
    for (const row of this._rows.values()) {
      row.tick();
    }
  }

  private _setNotice(text: string, kind: 'error' | 'info' | 'none'): void {
    this._notice.textContent = text;
    this._notice.dataset.kind = kind;
    this._notice.hidden = kind === 'none';
  }

  private _rows = new Map<string, JobRow>();
  private _search: HTMLInputElement;
  private _show: HTMLSelectElement;
  private _visible = false;
  private _list: HTMLUListElement;
  private _notice: HTMLDivElement;
  private _clock = 0;
}

/** One job's row. */
class JobRow {
  readonly node: HTMLLIElement;

  constructor(
    actions: IJobActions,
    api: NbjobsAPI,
    private readonly trans: Translate,
    private readonly _me: string | null = null
  ) {
    this.node = document.createElement('li');
    this.node.className = 'nbjobs-Job';

    const top = div('nbjobs-Job-top');
    this._name = div('nbjobs-Job-name');
    // The name opens the job's details (a button: reachable by keyboard too).
    this._name.setAttribute('role', 'button');
    this._name.tabIndex = 0;
    const details = () => void actions.showDetails(this._job!);
    this._name.addEventListener('click', details);
    this._name.addEventListener('keydown', event => {
      if (event.key === 'Enter' || event.key === ' ') {
        event.preventDefault();
        details();
      }
    });
    this._state = div('nbjobs-Job-state');
    top.append(this._name, this._state);

    const meta = div('nbjobs-Job-meta');
    this._flavor = span('nbjobs-Job-flavor');
    this._source = span('nbjobs-Job-source');
    this._elapsed = span('nbjobs-Job-elapsed');
    meta.append(this._flavor, this._source, this._elapsed);

    this._progress = document.createElement('div');
    this._progress.className = 'nbjobs-Job-progress';
    this._progress.setAttribute('role', 'progressbar');
    this._progress.setAttribute('aria-valuemin', '0');
    this._progressBar = div('nbjobs-Job-progressBar');
    this._progress.append(this._progressBar);
    this._progressText = div('nbjobs-Job-progressText');

    this._message = div('nbjobs-Job-message');
    // The service's warning (its GPUs idle): read out when it appears, gone once acted on.
    this._warning = div('nbjobs-Job-warning');
    this._warning.setAttribute('role', 'status');

    const buttons = div('nbjobs-Job-actions');
    const run = (fn: (job: IJob) => Promise<void>) => () => fn(this._job!);
    this._cancel = iconButton(stopIcon, trans('Cancel'), run(j => actions.cancel(j)), trans('Cancel'));
    this._rerun = iconButton(redoIcon, trans('Re-run'), run(j => actions.rerun(j)), trans('Re-run'));
    this._open = iconButton(launchIcon, trans('Open output'), run(j => actions.openOutput(j)), trans('Output'));
    this._log = iconButton(listIcon, trans('View log'), run(j => actions.viewLog(j)), trans('Log'));
    this._remove = iconButton(deleteIcon, trans('Remove from list'), run(j => actions.remove(j)));
    // Icon only, like Remove: the row's buttons fit the panel's usual width on one line.
    this._usage = iconButton(usageIcon, trans('GPU and CPU use'), async () =>
      this._toggleUsage()
    );
    buttons.append(this._cancel, this._rerun, this._open, this._log, this._usage, this._remove);

    this._telemetry = new TelemetryView(api, trans);
    // The buttons sit above everything that grows or shrinks as the job moves on
    // (progress, message, warning): they never move under the pointer.
    this.node.append(
      top,
      meta,
      buttons,
      this._progress,
      this._progressText,
      this._message,
      this._warning,
      this._telemetry.node
    );
  }

  update(job: IJob, visible: boolean): void {
    const trans = this.trans;
    this._job = job;
    this._visible = visible;
    this.node.dataset.state = job.state;
    this.node.dataset.jobId = job.id;
    this._name.textContent = job.name;
    this._name.title = trans('%1 (job %2)', job.path, job.id);
    this._state.textContent = stateLabel(job, trans);
    this._flavor.textContent = job.flavor;
    this._flavor.title = trans('Flavor');
    // Tell jobs apart: the notebook they ran, when they were asked for, and whose.
    const notebook = job.path.split('/').pop() ?? job.path;
    const whose = this._me !== null && job.user !== this._me ? ` · ${job.user}` : '';
    this._source.textContent = `${notebook} · ${submittedAt(job.submitted_at)}${whose}`;
    this._source.title = trans('%1, submitted %2 by %3 (job %4)', job.path, job.submitted_at, job.user, job.id);

    const fraction = progressFraction(job);
    const showProgress = job.state === 'running' || job.state === 'starting';
    this._progress.hidden = !showProgress;
    this._progressText.hidden = !showProgress;
    const label = progressLabel(job, trans) ?? trans('starting the kernel…');
    this._progressBar.style.width = `${Math.round((fraction ?? 0) * 100)}%`;
    this._progress.setAttribute('aria-valuemax', String(job.progress.cells_total || 1));
    this._progress.setAttribute('aria-valuenow', String(job.progress.cells_done));
    this._progress.setAttribute('aria-label', label);
    this._progressText.textContent = label;

    const message =
      isWaiting(job.state) ? job.waiting_reason : isActive(job.state) ? null : job.message;
    this._message.textContent = message ?? '';
    this._message.hidden = !message;
    const warning = jobWarning(job);
    this._warning.textContent = warning ?? '';
    this._warning.hidden = !warning;

    // Every button stays where it is; one that cannot act now is disabled and says why.
    const can = jobActions(job, this._me, trans);
    for (const [button, state] of [
      [this._cancel, can.cancel],
      [this._rerun, can.rerun],
      [this._open, can.output],
      [this._log, can.log],
      [this._remove, can.remove]
    ] as const) {
      button.dataset.allowed = String(state.enabled);
      button.disabled = !state.enabled || button.dataset.busy === '1';
      button.title = state.why;
    }
    this._updateUsage();
    this.tick();
  }

  /** The panel was shown or hidden. */
  setVisible(visible: boolean): void {
    this._visible = visible;
    this._updateUsage();
  }

  dispose(): void {
    this._telemetry.dispose();
  }

  private _toggleUsage(): void {
    this._usageOpen = !this._usageOpen;
    this._updateUsage();
  }

  /**
   * The Usage button and the readings: there once the job has started; open on
   * their own while it runs (and left open when it ends, showing its summary),
   * else when the user opens them.
   */
  private _updateUsage(): void {
    const job = this._job;
    if (!job) {
      return;
    }
    const started = job.started_at !== null || job.state === 'running';
    if (this._usageOpen === null && job.state === 'running') {
      this._usageOpen = true;
    }
    const open = started && this._usageOpen === true;
    this._usage.hidden = !started;
    this._usage.setAttribute('aria-expanded', String(open));
    this._telemetry.node.id = `nbjobs-usage-${job.id}`;
    this._usage.setAttribute('aria-controls', this._telemetry.node.id);
    this._usage.title = open
      ? this.trans('Hide what the job uses (GPU, CPU, memory)')
      : this.trans('Show what the job uses (GPU, CPU, memory)');
    this._telemetry.update(job, open && this._visible);
  }

  tick(): void {
    if (this._job) {
      const seconds = elapsedSeconds(this._job, new Date());
      const took = formatDuration(seconds, this.trans);
      this._elapsed.textContent =
        isWaiting(this._job.state) ? this.trans('waiting %1', took) : took;
      this._elapsed.title = this.trans('Elapsed time');
    }
  }

  private _job: IJob | null = null;
  private _visible = false;
  /** the readings are open; null: the user has not said (open while it runs) */
  private _usageOpen: boolean | null = null;
  private _telemetry: TelemetryView;
  private _usage: HTMLButtonElement;
  private _name: HTMLDivElement;
  private _state: HTMLDivElement;
  private _flavor: HTMLSpanElement;
  private _source: HTMLSpanElement;
  private _elapsed: HTMLSpanElement;
  private _progress: HTMLDivElement;
  private _progressBar: HTMLDivElement;
  private _progressText: HTMLDivElement;
  private _message: HTMLDivElement;
  private _warning: HTMLDivElement;
  private _cancel: HTMLButtonElement;
  private _rerun: HTMLButtonElement;
  private _open: HTMLButtonElement;
  private _log: HTMLButtonElement;
  private _remove: HTMLButtonElement;
}

function div(className: string): HTMLDivElement {
  const node = document.createElement('div');
  node.className = className;
  return node;
}

function span(className: string): HTMLSpanElement {
  const node = document.createElement('span');
  node.className = className;
  return node;
}

/** A button with an icon (and optionally a short text); disabled while its action runs. */
function iconButton(
  icon: LabIcon,
  description: string,
  onClick: () => Promise<void>,
  text?: string
): HTMLButtonElement {
  const button = document.createElement('button');
  button.type = 'button';
  button.className = 'jp-Button jp-mod-minimal nbjobs-Button';
  button.title = description;
  button.setAttribute('aria-label', description);
  button.append(icon.element({ tag: 'span', className: 'nbjobs-Button-icon' }));
  if (text) {
    const label = document.createElement('span');
    label.className = 'nbjobs-Button-label';
    label.textContent = text;
    button.append(label);
  }
  button.addEventListener('click', () => {
    // Busy while its action runs (no double submit); then as the job allows.
    button.dataset.busy = '1';
    button.disabled = true;
    void onClick().finally(() => {
      delete button.dataset.busy;
      button.disabled = button.dataset.allowed === 'false';
    });
  });
  return button;
}

/**
 * The Jobs panel: the user's jobs, newest first, with what each is doing and
 * what can be done with it.
 *
 * Rows are kept per job id and updated in place, so a poll never moves the
 * keyboard focus or the scroll position, and a row whose job did not change is
 * not touched: a list of thousands costs a poll only the rows of its newest page.
 * The search, the state and whose jobs are asked of the job service, a page at a
 * time ("Show older jobs" at the bottom).
 */
import {
  type LabIcon,
  bellIcon,
  deleteIcon,
  launchIcon,
  listIcon,
  redoIcon,
  refreshIcon,
  stopIcon
} from '@jupyterlab/ui-components';
import type { Message } from '@lumino/messaging';
import { Debouncer } from '@lumino/polling';
import { Signal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import type { NbjobsAPI } from './api';
import {
  elapsedSeconds,
  formatDuration,
  isActive,
  isFinal,
  isWaiting,
  jobActions,
  submittedAt,
  jobWarning,
  progressDone,
  progressFraction,
  progressLabel,
  stateLabel
} from './format';
import { DefinitionsView } from './definitions';
import { jobsIcon, usageIcon } from './icons';
import { MAX_SEARCH_CHARS, type Show, isDefaultQuery } from './joblist';
import type { JobsModel } from './model';
import { TelemetryView } from './telemetryview';
import type { Translate } from './translate';
import type { IDefinition, IJob } from './types';
import { WhoseSelect } from './whose';

/** How long the search waits for the typing to pause before asking the service (ms). */
export const SEARCH_DELAY = 250;

/**
 * Rows per group of the list. Rows and their groups both have `content-visibility:
 * auto`: the browser skips whole groups off screen, so a scroll frame costs what is
 * near the screen rather than every row (bench/panel_bench.py measures it).
 */
export const ROWS_PER_GROUP = 50;

/** A row's usual height (px): what a group of rows not drawn yet stands for. */
const ROW_HEIGHT = 100;

/**
 * New rows one drawing makes before the frame is painted: more than a tall screen
 * shows. The rest are made just after that frame, so a page of a hundred jobs shows
 * its first screen at the cost of those rows (bench/panel_bench.py).
 */
export const FIRST_ROWS = 15;

/** What the panel's buttons do; the plugin supplies them. */
export interface IJobActions {
  cancel(job: IJob): Promise<void>;
  rerun(job: IJob): Promise<void>;
  openOutput(job: IJob): Promise<void>;
  viewLog(job: IJob): Promise<void>;
  remove(job: IJob): Promise<void>;
  /** the job's details, in a tab */
  showDetails(job: IJob): Promise<void>;
  /** a job by id (a definition's run), in its details tab */
  showJobById?(id: string): Promise<void>;
  /** edit a job definition in the Submit dialog */
  editDefinition?(definition: IDefinition): Promise<IDefinition | null>;
  /** where and when the user is told about their jobs (email, webhook) */
  notifications?(): Promise<void>;
  /** the Notebook Jobs page: the jobs in a full-width table */
  openFullView?(): Promise<void>;
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
    // Two views: the jobs, and the job definitions that run on a schedule.
    const title = document.createElement('div');
    title.className = 'nbjobs-JobsPanel-title';
    title.setAttribute('role', 'tablist');
    const tab = (label: string, view: 'jobs' | 'schedules') => {
      const b = document.createElement('button');
      b.type = 'button';
      b.className = 'nbjobs-JobsPanel-tab';
      b.textContent = label;
      b.dataset.view = view;
      b.setAttribute('role', 'tab');
      b.addEventListener('click', () => this._showView(view));
      return b;
    };
    this._tabs = [tab(trans('Jobs'), 'jobs'), tab(trans('Schedules'), 'schedules')];
    title.append(...this._tabs);
    const refresh = iconButton(refreshIcon, trans('Refresh the list'), () =>
      this._view === 'jobs' ? this.model.refresh() : this._definitions.refresh()
    );
    refresh.classList.add('nbjobs-JobsPanel-refresh');
    header.append(title);
    const tools = panelTools(actions, trans, dashboard);
    tools.append(refresh);
    header.append(tools);

    this._notice = document.createElement('div');
    this._notice.className = 'nbjobs-JobsPanel-notice';
    this._notice.setAttribute('role', 'status');

    // Whose jobs: offered once the service says the user is an admin or a teacher.
    this._whose = new WhoseSelect(trans, 'nbjobs-JobsPanel-whose');
    const filters = this._filters(trans);
    this._fillList(trans);

    this._definitions = new DefinitionsView(model.api, trans, {
      openJob: id => this.actions.showJobById?.(id) ?? Promise.resolve(),
      edit: definition => this.actions.editDefinition?.(definition) ?? Promise.resolve(null)
    });
    this._jobsView = [filters, this._notice, this._list];
    this.node.append(header, filters, this._notice, this._list, this._definitions.node);
    this._showView('jobs');
    model.changed.connect(this._render, this);
    // Schedules shown: a change to the user's definitions, or a job (a run's) queued or
    // ended, is drawn again at once ("last: starting" turns "succeeded" as it ends); a
    // running job's next cell changes nothing there
    model.pushed.connect((_, event) => {
      const moved = event.event !== 'job' || event.data.state !== 'running';
      if (this._visible && this._view === 'schedules' && moved) {
        void this._definitions.refresh();
      }
    }, this);
  }

  /** Find a job among many: words against name, notebook, id, flavor, owner; a state;
   * whose (admins and teachers). The service searches, so older jobs are found too. */
  private _filters(trans: Translate): HTMLDivElement {
    const filters = document.createElement('div');
    filters.className = 'nbjobs-JobsPanel-filters';
    this._search.type = 'search';
    this._search.className = 'jp-mod-styled nbjobs-JobsPanel-search';
    this._search.placeholder = trans('Search jobs');
    this._search.maxLength = MAX_SEARCH_CHARS;
    this._search.setAttribute('aria-label', trans('Search jobs by name, notebook, id or flavor'));
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
    // Typing asks once it pauses; a choice in a select asks at once.
    this._search.addEventListener('input', () => void this._searchLater.invoke());
    this._show.addEventListener('change', () => this._askService());
    this._whose.node.addEventListener('change', () => this._askService());
    filters.append(this._search, this._show, this._whose.node);
    return filters;
  }

  /** The scrolled area: the list (groups of rows, see ROWS_PER_GROUP), then the button
   * for the next page, by the service's cursor. */
  private _fillList(trans: Translate): void {
    this._list.className = 'nbjobs-JobList';
    this._items.className = 'nbjobs-JobList-items';
    this._items.setAttribute('aria-label', trans('Your jobs, newest first'));
    this._more.className = 'nbjobs-JobList-more';
    this._older.type = 'button';
    this._older.className = 'jp-Button jp-mod-styled jp-mod-reject nbjobs-JobList-older';
    this._older.textContent = trans('Show older jobs');
    this._older.addEventListener('click', () => void this.model.loadOlder());
    this._olderNote.className = 'nbjobs-JobList-olderNote';
    this._olderNote.setAttribute('role', 'status');
    this._more.append(this._older, this._olderNote);
    this._list.append(this._items, this._more);
  }

  /** Show the job definitions (Schedules) instead of the jobs. */
  showSchedules(): void {
    this._showView('schedules');
  }

  private _showView(view: 'jobs' | 'schedules'): void {
    this._view = view;
    for (const b of this._tabs) {
      const current = b.dataset.view === view;
      b.setAttribute('aria-selected', String(current));
      b.classList.toggle('jp-mod-current', current);
    }
    for (const node of this._jobsView) {
      node.classList.toggle('nbjobs-mod-away', view !== 'jobs');
    }
    this._definitions.node.hidden = view !== 'schedules';
    if (view === 'schedules') {
      void this._definitions.refresh();
    } else if (this._viewShown) {
      // back from Schedules: its runs may have queued jobs since the last poll
      void this.model.refresh();
    }
    this._viewShown = true;
  }

  dispose(): void {
    this.model.changed.disconnect(this._render, this);
    Signal.disconnectReceiver(this);
    this._searchLater.dispose();
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
    if (!this._askedWho) {
      this._askedWho = true;
      void this._whose.learn(this.model.api);
    }
  }

  /** Ask the service for what the search box and the selects say. */
  private _askService(): void {
    this.model.setQuery({
      search: this._search.value,
      show: this._show.value as Show,
      // the service's own default is left unsaid: the query stays the plain list
      scope: this._whose.scope
    });
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
    const { jobs, error, loaded, searching } = this.model;
    const trans = this.trans;
    // A search or a state that finds nothing says so; whose jobs alone is a plain list.
    const filtered = !isDefaultQuery({ ...this.model.query, scope: null });
    if (error) {
      this._setNotice(error.message, 'error');
    } else if (!loaded || (searching && jobs.length === 0)) {
      this._setNotice(filtered ? trans('Searching…') : trans('Loading your jobs…'), 'info');
    } else if (jobs.length === 0 && filtered) {
      this._setNotice(trans('No job matches; clear the search or pick All.'), 'info');
    } else if (jobs.length === 0) {
      this._setNotice(
        trans('No jobs yet. Open a notebook and press Submit Job in its toolbar.'),
        'info'
      );
    } else {
      this._setNotice('', 'none');
    }
    this._renderMore();

    const seen = new Set(jobs.map(job => job.id));
    let previous: HTMLElement | null = null;
    let made = 0;
    let later = false;
    // while the rest of an earlier drawing waits for its frame, new rows wait with it
    const budget = this._drawingAll ? Infinity : this._restPending ? 0 : FIRST_ROWS;
    jobs.every((job, index) => {
      let row = this._rows.get(job.id);
      if (!row) {
        if (made >= budget) {
          later = true; // this job and the ones after it: once this frame is painted
          return false;
        }
        made++;
        row = new JobRow(this.actions, this.model.api, trans, this.me);
        this._rows.set(job.id, row);
      }
      row.update(job, this._visible);
      // Keep DOM order = list order without re-inserting rows that are in place: a new
      // job at the top moves one row from each group into the next, no more.
      const group = this._group(Math.floor(index / ROWS_PER_GROUP));
      const expected = index % ROWS_PER_GROUP ? previous!.nextSibling : group.firstChild;
      if (expected !== row.node) {
        group.insertBefore(row.node, expected);
      }
      previous = row.node;
      return true;
    });
    if (later) {
      this._drawRestLater();
    }
    for (const [id, row] of this._rows) {
      if (!seen.has(id)) {
        row.dispose();
        row.node.remove();
        this._rows.delete(id);
      }
    }
    // Groups past the last row are empty now: every row shown was moved before them.
    const used = Math.ceil(jobs.length / ROWS_PER_GROUP);
    for (const gone of this._groups.splice(used)) {
      gone.parentElement!.remove();
    }
    this._groups.forEach((group, index) => {
      // The size a group stands for while the browser skips it: its rows at a usual height.
      const rows = Math.min(ROWS_PER_GROUP, jobs.length - index * ROWS_PER_GROUP);
      const size = `auto ${rows * ROW_HEIGHT}px`;
      if (group.parentElement!.style.containIntrinsicSize !== size) {
        group.parentElement!.style.containIntrinsicSize = size;
      }
    });
  }

  /**
   * Draw the whole list in the frame after the one now being made: that one paints the
   * first screen, the next the rows below it (off screen, so cheap to paint).
   */
  private _drawRestLater(): void {
    if (this._restPending) {
      return;
    }
    this._restPending = true;
    requestAnimationFrame(() =>
      requestAnimationFrame(() => {
        this._restPending = false;
        if (this.isDisposed) {
          return;
        }
        this._drawingAll = true;
        try {
          this._render();
        } finally {
          this._drawingAll = false;
        }
      })
    );
  }

  /** The `index`th group of rows (a `ul` in a presentational `li`), made when missing. */
  private _group(index: number): HTMLUListElement {
    while (this._groups.length <= index) {
      const holder = document.createElement('li');
      holder.className = 'nbjobs-JobList-group';
      holder.setAttribute('role', 'none');
      const group = document.createElement('ul');
      group.setAttribute('role', 'none');
      holder.append(group);
      this._items.append(holder);
      this._groups.push(group);
    }
    return this._groups[index];
  }

  /** The "Show older jobs" button: there while the service has older jobs. */
  private _renderMore(): void {
    const { hasOlder, loadingOlder, olderError, searching } = this.model;
    this._more.hidden = !hasOlder || searching;
    this._older.disabled = loadingOlder;
    this._older.textContent = loadingOlder
      ? this.trans('Loading older jobs…')
      : this.trans('Show older jobs');
    this._olderNote.textContent = olderError ? olderError.message : '';
    this._olderNote.hidden = !olderError;
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
  /** rows beyond the first screen are to be made after the next painted frame */
  private _restPending = false;
  /** this drawing makes every row (the one after the first screen's) */
  private _drawingAll = false;
  private _search = document.createElement('input');
  private _tabs: HTMLButtonElement[];
  private _view: 'jobs' | 'schedules' = 'jobs';
  /** a view was shown already (the first is the panel being built) */
  private _viewShown = false;
  private _definitions: DefinitionsView;
  private _jobsView: HTMLElement[];
  private _searchLater = new Debouncer(() => this._askService(), SEARCH_DELAY);
  private _show = document.createElement('select');
  private _whose: WhoseSelect;
  /** whose jobs the service lists when not told (known once it said who the user is) */
  private _askedWho = false;
  private _visible = false;
  /** the scrolled area */
  private _list = document.createElement('div');
  /** the list of jobs: groups of rows */
  private _items = document.createElement('ul');
  private _groups: HTMLUListElement[] = [];
  private _more = document.createElement('div');
  private _older = document.createElement('button');
  private _olderNote = document.createElement('div');
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
    // Its list is the panel's: the groups between them are presentational.
    this.node.setAttribute('role', 'listitem');

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

    const made = rowButtons(
      actions,
      trans,
      () => this._job!,
      () => this._toggleUsage()
    );
    const buttons = made.node;
    ({
      cancel: this._cancel,
      rerun: this._rerun,
      open: this._open,
      log: this._log,
      remove: this._remove,
      usage: this._usage
    } = made);

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
    if (job === this._job && visible === this._visible) {
      return; // an older page's job, as loaded: nothing to redraw
    }
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
    this._source.title = trans(
      '%1, submitted %2 by %3 (job %4)',
      job.path,
      job.submitted_at,
      job.user,
      job.id
    );

    const fraction = progressFraction(job);
    const showProgress = job.state === 'running' || job.state === 'starting';
    this._progress.hidden = !showProgress;
    this._progressText.hidden = !showProgress;
    // the text names the running cell as the log does; the bar counts the cells done
    const label = progressLabel(job, trans) ?? trans('starting the kernel…');
    this._progress.title = progressDone(job, trans) ?? label;
    this._progressBar.style.width = `${Math.round((fraction ?? 0) * 100)}%`;
    this._progress.setAttribute('aria-valuemax', String(job.progress.cells_total || 1));
    this._progress.setAttribute('aria-valuenow', String(job.progress.cells_done));
    this._progress.setAttribute('aria-label', this._progress.title);
    this._progressText.textContent = label;

    const message = isWaiting(job.state)
      ? job.waiting_reason
      : isActive(job.state)
        ? null
        : job.message;
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
    const job = this._job;
    if (!job || (isFinal(job.state) && this._ticked === job)) {
      return; // an ended job's time does not change: thousands of rows cost nothing a second
    }
    this._ticked = job;
    const seconds = elapsedSeconds(job, new Date());
    const took = formatDuration(seconds, this.trans);
    const text = isWaiting(job.state) ? this.trans('waiting %1', took) : took;
    if (this._elapsed.textContent !== text) {
      this._elapsed.textContent = text;
    }
    this._elapsed.title = this.trans('Elapsed time');
  }

  private _job: IJob | null = null;
  /** the job whose elapsed time is shown */
  private _ticked: IJob | null = null;
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

/** A job row's buttons: cancel, re-run, open the output, the log, its use, remove. */
function rowButtons(
  actions: IJobActions,
  trans: Translate,
  job: () => IJob,
  toggleUsage: () => void
): Record<'cancel' | 'rerun' | 'open' | 'log' | 'remove' | 'usage', HTMLButtonElement> & {
  node: HTMLDivElement;
} {
  const run = (fn: (job: IJob) => Promise<void>) => () => fn(job());
  const cancel = iconButton(
    stopIcon,
    trans('Cancel'),
    run(j => actions.cancel(j)),
    trans('Cancel')
  );
  const rerun = iconButton(
    redoIcon,
    trans('Re-run'),
    run(j => actions.rerun(j)),
    trans('Re-run')
  );
  const open = iconButton(
    launchIcon,
    trans('Open output'),
    run(j => actions.openOutput(j)),
    trans('Output')
  );
  const log = iconButton(
    listIcon,
    trans('View log'),
    run(j => actions.viewLog(j)),
    trans('Log')
  );
  const remove = iconButton(
    deleteIcon,
    trans('Remove from list'),
    run(j => actions.remove(j))
  );
  // Icon only, like Remove: the row's buttons fit the panel's usual width on one line.
  const usage = iconButton(usageIcon, trans('GPU and CPU use'), async () => toggleUsage());
  const node = div('nbjobs-Job-actions');
  node.append(cancel, rerun, open, log, usage, remove);
  return { node, cancel, rerun, open, log, remove, usage };
}

/** The panel's own buttons: the dashboard (under a hub), notifications, the full view. */
function panelTools(
  actions: IJobActions,
  trans: Translate,
  dashboard: string | null
): HTMLDivElement {
  // the panel's own buttons keep together: a narrow panel puts them on a line of their own
  const tools = document.createElement('div');
  tools.className = 'nbjobs-JobsPanel-tools';
  if (dashboard) {
    // GPUs, queues and usage charts: the job service's own page, in a new tab
    const link = document.createElement('a');
    link.className = 'nbjobs-JobsPanel-dashboard';
    link.href = dashboard;
    link.target = '_blank';
    link.rel = 'noopener';
    link.textContent = trans('Dashboard');
    link.title = trans('GPUs, queues and usage, in a new browser tab');
    tools.append(link);
  }
  if (actions.notifications) {
    const bell = iconButton(
      bellIcon,
      trans('Notifications: be told by email or webhook when jobs end'),
      () => actions.notifications!()
    );
    bell.classList.add('nbjobs-JobsPanel-notifications');
    tools.append(bell);
  }
  if (actions.openFullView) {
    const full = document.createElement('button');
    full.type = 'button';
    full.className = 'nbjobs-JobsPanel-fullView';
    full.textContent = trans('Full view');
    full.title = trans('Open the Notebook Jobs page: every job in a full-width table');
    full.addEventListener('click', () => void actions.openFullView!());
    tools.append(full);
  }
  return tools;
}

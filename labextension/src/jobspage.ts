/**
 * The Notebook Jobs page: the jobs of the Jobs panel in a full-width table of the main
 * area, for when a sidebar is too narrow. Columns sort, the search and the state filter
 * ask the service, older pages load on demand, rows can be selected for one Cancel or
 * Delete of them all, and a job's details open beside the table with every action.
 *
 * It has a model of its own (its query is not the panel's), fed by the same event
 * stream, asking only while the page is shown.
 */
import type { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { type IDetailActions, JobDetail } from './detail';
import { elapsedSeconds, formatDuration, progressLabel, stateLabel } from './format';
import {
  DEFAULT_SORT,
  type ISort,
  MAX_SEARCH_CHARS,
  type Show,
  type SortKey,
  bulkTargets,
  sortJobs
} from './joblist';
import type { JobsModel } from './model';
import { patchChildren } from './patch';
import { formatGpuHours } from './telemetry';
import type { Translate } from './translate';
import type { IJob } from './types';
import { WhoseSelect } from './whose';

/** What the page does beyond showing: the details' actions, and the bulk ones. */
export interface IJobsPageActions {
  details: IDetailActions;
  /** cancel these jobs (all active), after one question */
  cancelMany(jobs: IJob[]): Promise<void>;
  /** delete these jobs' records (all ended), after one question */
  removeMany(jobs: IJob[]): Promise<void>;
}

export class JobsPage extends Widget {
  constructor(
    private readonly model: JobsModel,
    private readonly actions: IJobsPageActions,
    private readonly trans: Translate,
    private readonly me: string | null
  ) {
    super();
    this.id = 'nbjobs-jobs-page';
    this.addClass('nbjobs-JobsPage');
    this.title.label = trans('Notebook Jobs');
    this.title.closable = true;

    const tools = document.createElement('div');
    tools.className = 'nbjobs-JobsPage-tools';
    this._search.type = 'search';
    this._search.className = 'jp-mod-styled';
    this._search.placeholder = trans('Search name, notebook, flavor, id');
    this._search.maxLength = MAX_SEARCH_CHARS;
    this._search.setAttribute('aria-label', trans('Search jobs'));
    this._search.addEventListener('input', () => {
      window.clearTimeout(this._typing);
      this._typing = window.setTimeout(() => this._askService(), 300);
    });
    const shows: [Show, string][] = [
      ['all', trans('All states')],
      ['active', trans('Waiting or running')],
      ['ended', trans('Ended')],
      ['failed', trans('Failed')]
    ];
    this._show.className = 'jp-mod-styled';
    this._show.setAttribute('aria-label', trans('Which jobs'));
    for (const [value, label] of shows) {
      this._show.append(new Option(label, value));
    }
    this._show.addEventListener('change', () => this._askService());
    this._whose.node.addEventListener('change', () => this._askService());
    this._cancel = this._button(trans('Cancel selected'), 'cancel', () => this._bulk('cancel'));
    this._remove = this._button(trans('Delete selected'), 'remove', () => this._bulk('remove'));
    this._count.className = 'nbjobs-JobsPage-count';
    this._count.setAttribute('role', 'status');
    tools.append(
      this._search,
      this._show,
      this._whose.node,
      this._cancel,
      this._remove,
      this._count
    );

    this._table.className = 'nbjobs-JobsPage-table';
    this._table.setAttribute('aria-label', trans('Notebook jobs'));
    this._older.type = 'button';
    this._older.className = 'jp-mod-styled nbjobs-JobsPage-older';
    this._older.textContent = trans('Show older jobs');
    this._older.addEventListener('click', () => void this.model.loadOlder());
    this._notice.className = 'nbjobs-JobsPage-notice';
    const list = document.createElement('div');
    list.className = 'nbjobs-JobsPage-list';
    list.append(this._table, this._notice, this._older);

    this._pane.className = 'nbjobs-JobsPage-details';
    this._pane.setAttribute('aria-label', trans('Job details'));
    this._pane.hidden = true;
    const body = document.createElement('div');
    body.className = 'nbjobs-JobsPage-body';
    body.append(list, this._pane);
    this.node.append(tools, body);

    model.changed.connect(this._render, this);
    this._render();
    void this._whose.learn(model.api).then(shown => shown && this._render());
  }

  /** The job whose details are open beside the table (null: none). */
  get shown(): IJob | null {
    return this._detail?.job ?? null;
  }

  /** Open a job's details beside the table. */
  showDetails(job: IJob): void {
    if (this._detail && this._detail.job.id === job.id) {
      return;
    }
    this._detail?.dispose();
    this._detail = new JobDetail(job, this.actions.details, this.trans, this.me);
    const close = document.createElement('button');
    close.type = 'button';
    close.className = 'jp-mod-styled nbjobs-JobsPage-closeDetails';
    close.textContent = this.trans('Close');
    close.setAttribute('aria-label', this.trans('Close the details'));
    close.addEventListener('click', () => this._closeDetails());
    this._pane.replaceChildren(close);
    Widget.attach(this._detail, this._pane);
    this._pane.hidden = false;
    this._render();
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    window.clearTimeout(this._typing);
    this._detail?.dispose();
    this.model.dispose();
    super.dispose();
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    this.model.setVisible(true);
  }

  protected onAfterHide(msg: Message): void {
    super.onAfterHide(msg);
    this.model.setVisible(false);
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    this.model.setVisible(this.isVisible);
  }

  private _closeDetails(): void {
    this._detail?.dispose();
    this._detail = null;
    this._pane.replaceChildren();
    this._pane.hidden = true;
    this._render();
  }

  private _askService(): void {
    this.model.setQuery({
      search: this._search.value,
      show: this._show.value as Show,
      scope: this._whose.scope
    });
  }

  private _button(label: string, action: string, go: () => void): HTMLButtonElement {
    const button = document.createElement('button');
    button.type = 'button';
    button.className = 'jp-mod-styled nbjobs-JobsPage-bulk';
    button.dataset.action = action;
    button.textContent = label;
    button.addEventListener('click', go);
    return button;
  }

  private _selectedJobs(): IJob[] {
    return this.model.jobs.filter(job => this._selected.has(job.id));
  }

  private async _bulk(kind: 'cancel' | 'remove'): Promise<void> {
    const targets = bulkTargets(this._selectedJobs(), this.me)[kind];
    if (!targets.length) {
      return;
    }
    if (kind === 'cancel') {
      await this.actions.cancelMany(targets);
    } else {
      await this.actions.removeMany(targets);
    }
    for (const job of targets) {
      if (kind === 'remove' || !this.model.find(job.id)) {
        this._selected.delete(job.id);
      }
    }
    this._render();
  }

  /** Whether another person's jobs can be in the list (an owner column is worth it). */
  private _othersShown(): boolean {
    return (
      this._whose.othersChosen ||
      this.model.jobs.some(job => this.me !== null && job.user !== this.me)
    );
  }

  private _render(): void {
    if (this.isDisposed) {
      return;
    }
    const trans = this.trans;
    const now = new Date();
    const jobs = sortJobs(this.model.jobs, this._sort, now);
    // a selection only of what is listed (a search narrowed it, a job was deleted)
    const listed = new Set(jobs.map(job => job.id));
    for (const id of [...this._selected]) {
      if (!listed.has(id)) {
        this._selected.delete(id);
      }
    }
    const owners = this._othersShown();
    const columns: [SortKey | null, string][] = [
      [null, ''],
      ['name', trans('Name')],
      ['state', trans('State')],
      ['flavor', trans('Flavor')],
      ...(owners ? ([['user', trans('Owner')]] as [SortKey, string][]) : []),
      ['submitted', trans('Submitted')],
      ['took', trans('Ran for')],
      ['gpuHours', trans('GPU-hours')]
    ];
    const head = document.createElement('thead');
    const headRow = head.insertRow();
    for (const [key, label] of columns) {
      const th = document.createElement('th');
      th.scope = 'col';
      if (key === null) {
        th.append(this._selectAll(jobs));
      } else {
        th.append(this._sortButton(th, key, label));
      }
      headRow.append(th);
    }
    const body = document.createElement('tbody');
    for (const job of jobs) {
      body.append(this._row(job, owners, now));
    }
    // what looks the same stays: a press on a job's name while the list moves is a click
    this._listed = jobs;
    patchChildren(this._table, [head, body]);

    const { error, loaded, searching, hasOlder, loadingOlder } = this.model;
    this._notice.textContent = error
      ? error.message
      : !loaded || searching
        ? trans('Loading…')
        : jobs.length === 0
          ? trans('No jobs match.')
          : '';
    this._notice.dataset.kind = error ? 'error' : 'info';
    this._older.hidden = !hasOlder;
    this._older.disabled = loadingOlder;
    const selected = this._selectedJobs();
    const targets = bulkTargets(selected, this.me);
    this._cancel.disabled = targets.cancel.length === 0;
    this._cancel.title = targets.cancel.length
      ? trans('Cancel %1 job(s)', targets.cancel.length)
      : trans('Select waiting or running jobs to cancel them');
    this._remove.disabled = targets.remove.length === 0;
    this._remove.title = targets.remove.length
      ? trans('Delete %1 job(s) from the list; their outputs stay', targets.remove.length)
      : trans('Select your ended jobs to delete them');
    this._count.textContent = selected.length
      ? trans('%1 of %2 selected', selected.length, jobs.length)
      : trans('%1 job(s)', jobs.length);
    // the details follow the poll
    if (this._detail) {
      const now = this.model.find(this._detail.job.id);
      if (now) {
        this._detail.setJob(now);
      }
    }
  }

  /** A column's heading: sorts by it, the other way when it sorts already. */
  private _sortButton(th: HTMLTableCellElement, key: SortKey, label: string): HTMLButtonElement {
    const button = document.createElement('button');
    button.type = 'button';
    button.className = 'nbjobs-JobsPage-sort';
    button.dataset.sort = key;
    button.textContent = label;
    if (this._sort.key === key) {
      th.setAttribute('aria-sort', this._sort.descending ? 'descending' : 'ascending');
      button.textContent = `${label} ${this._sort.descending ? '▾' : '▴'}`;
    }
    button.addEventListener('click', () => {
      this._sort =
        this._sort.key === key
          ? { key, descending: !this._sort.descending }
          : { key, descending: key === 'submitted' || key === 'took' || key === 'gpuHours' };
      this._render();
    });
    return button;
  }

  private _selectAll(jobs: IJob[]): HTMLInputElement {
    const all = document.createElement('input');
    all.type = 'checkbox';
    all.setAttribute('aria-label', this.trans('Select every job listed'));
    // as attributes too: a redraw keeps a box whose attributes are the same (patchChildren)
    all.defaultChecked = all.checked =
      jobs.length > 0 && jobs.every(job => this._selected.has(job.id));
    all.indeterminate = !all.checked && jobs.some(job => this._selected.has(job.id));
    all.dataset.some = String(all.indeterminate);
    all.addEventListener('change', () => {
      for (const job of this._listed) {
        if (all.checked) {
          this._selected.add(job.id);
        } else {
          this._selected.delete(job.id);
        }
      }
      this._render();
    });
    return all;
  }

  private _row(job: IJob, owners: boolean, now: Date): HTMLTableRowElement {
    const trans = this.trans;
    const row = document.createElement('tr');
    row.dataset.jobId = job.id;
    row.dataset.state = job.state;
    if (this._detail?.job.id === job.id) {
      row.classList.add('jp-mod-selected');
    }
    const pick = document.createElement('input');
    pick.type = 'checkbox';
    pick.defaultChecked = pick.checked = this._selected.has(job.id);
    pick.setAttribute('aria-label', trans('Select job "%1"', job.name));
    pick.addEventListener('change', () => {
      if (pick.checked) {
        this._selected.add(job.id);
      } else {
        this._selected.delete(job.id);
      }
      this._render();
    });
    const name = document.createElement('button');
    name.type = 'button';
    name.className = 'nbjobs-JobsPage-name';
    name.textContent = job.name;
    name.title = trans('Show the details of "%1"', job.name);
    name.addEventListener('click', () => this.showDetails(this.model.find(job.id) ?? job));
    const submitted = new Date(job.submitted_at);
    const cells: (Node | string)[] = [
      pick,
      name,
      stateWithProgress(job, trans),
      job.flavor,
      ...(owners ? [job.user] : []),
      submitted.toLocaleString(),
      job.started_at ? formatDuration(elapsedSeconds(job, now), trans) : '–',
      formatGpuHours(job.gpu_hours * 3600)
    ];
    for (const value of cells) {
      const td = row.insertCell();
      td.append(value);
    }
    row.cells[owners ? 5 : 4].title = submitted.toISOString();
    return row;
  }

  private readonly _whose = new WhoseSelect(this.trans, 'nbjobs-JobsPage-whose');
  private readonly _search = document.createElement('input');
  private readonly _show = document.createElement('select');
  private readonly _cancel: HTMLButtonElement;
  private readonly _remove: HTMLButtonElement;
  private readonly _count = document.createElement('span');
  private readonly _table = document.createElement('table');
  private readonly _notice = document.createElement('p');
  private readonly _older = document.createElement('button');
  private readonly _pane = document.createElement('section');
  private readonly _selected = new Set<string>();
  private _detail: JobDetail | null = null;
  /** the jobs the table lists now, in its order */
  private _listed: IJob[] = [];
  private _sort: ISort = DEFAULT_SORT;
  private _typing = 0;
}

/** The job's state, and for a running one the cell it runs ("Running · code cell 3 of 8"). */
function stateWithProgress(job: IJob, trans: Translate): string {
  const progress = job.state === 'running' ? progressLabel(job, trans) : null;
  return progress ? `${stateLabel(job, trans)} · ${progress}` : stateLabel(job, trans);
}

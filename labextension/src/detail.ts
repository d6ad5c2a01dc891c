/**
 * A job's details in a main-area tab: everything that tells it apart and says what
 * became of it, with links to what it ran and made. It follows the Jobs panel's poll
 * (the model), so it stays current while the job moves on.
 */
import { MainAreaWidget } from '@jupyterlab/apputils';
import { infoIcon } from '@jupyterlab/ui-components';
import { Widget } from '@lumino/widgets';

import {
  flavorResources,
  formatLimit,
  isWaiting,
  jobActions,
  jobNodes,
  queueHistory,
  stateLabel
} from './format';
import { patchChildren } from './patch';
import type { Translate } from './translate';
import type { IFlavor, IJob } from './types';

/** What the view's links and buttons do (the panel's actions, and opening files). */
export interface IDetailActions {
  openPath(path: string): void;
  openOutput(job: IJob): Promise<void>;
  viewLog(job: IJob): Promise<void>;
  showJob(id: string): void;
  /** save a file of the user's folder to their computer */
  download(path: string): Promise<void>;
  /** the flavor as the service describes it now (null: not offered to the user any more) */
  flavor(name: string): IFlavor | null;
  /** the viewer's folder as they know it (the share on a cluster); null: not known */
  place?: string | null;
  /** the job's own actions, as buttons above its facts (each where it applies) */
  rerun?(job: IJob): Promise<void>;
  cancel?(job: IJob): Promise<void>;
  remove?(job: IJob): Promise<void>;
}

export class JobDetail extends Widget {
  constructor(
    private _job: IJob,
    private readonly actions: IDetailActions,
    private readonly trans: Translate,
    private readonly me: string | null
  ) {
    super();
    this.addClass('nbjobs-JobDetail');
    this.render();
  }

  get job(): IJob {
    return this._job;
  }

  /** The job as the latest poll saw it. */
  setJob(job: IJob): void {
    this._job = job;
    this.render();
  }

  private render(): void {
    const job = this._job;
    const trans = this.trans;
    const can = jobActions(job, this.me, trans);
    const nodes = jobNodes(job, trans);
    const rows: [string, Node | string][] = [
      [trans('State'), stateLabel(job, trans)],
      [trans('Why'), (isWaiting(job.state) ? job.waiting_reason : job.message) ?? '–'],
      [trans('Owner'), job.user],
      job.kind === 'command'
        ? [trans('Command'), `${job.command ?? ''} (${trans('in %1', job.path)})`]
        : [
            job.kind === 'script' ? trans('Script') : trans('Notebook'),
            this.link(
              job.path,
              () => this.actions.openPath(job.path),
              job.user === this.me || this.me === null
            )
          ],
      [trans('Flavor'), this.flavorText(job)],
      ...(nodes ? ([[trans('Nodes'), nodes]] as [string, string][]) : []),
      [trans('Kernel'), job.kernel ?? trans("the notebook's own")],
      [trans('Time limit'), job.time_limit ? formatLimit(job.time_limit, trans) : trans('none')],
      [
        trans('Parameters'),
        Object.keys(job.parameters).length ? JSON.stringify(job.parameters) : trans('none')
      ],
      [trans('Queue'), this.list(queueHistory(job, new Date(), trans))],
      [trans('Output'), this.output(job, can.output)],
      ...(job.html_path
        ? ([
            [
              trans('HTML copy'),
              this.file(job.html_path, () => this.actions.openPath(job.html_path!), can.output)
            ]
          ] as [string, Node][])
        : []),
      [
        trans('Log'),
        can.log.enabled
          ? this.link(trans('View log'), () => void this.actions.viewLog(this._job), true)
          : can.log.why
      ],
      [
        trans('Re-run of'),
        job.rerun_of
          ? this.link(job.rerun_of, () => this.actions.showJob(job.rerun_of!), true)
          : '–'
      ],
      [trans('Job id'), this.copyable(job.id)]
    ];
    const table = document.createElement('dl');
    table.className = 'nbjobs-JobDetail-facts';
    for (const [term, value] of rows) {
      const dt = document.createElement('dt');
      dt.textContent = term;
      const dd = document.createElement('dd');
      dd.append(value);
      table.append(dt, dd);
    }
    const title = document.createElement('h2');
    title.textContent = job.name;
    // what looks the same stays: a press on Cancel while the job moves on is a click
    patchChildren(this.node, [title, this.buttons(job, can), table]);
  }

  /** The output's file, and (the viewer's own job) where it is on the share. */
  private output(job: IJob, can: ReturnType<typeof jobActions>['output']): Node {
    const file = this.file(job.output_path, () => void this.actions.openOutput(this._job), can);
    const place = this.actions.place;
    if (!place || (this.me !== null && job.user !== this.me)) {
      return file;
    }
    const wrap = document.createElement('span');
    const where = document.createElement('span');
    where.className = 'nbjobs-JobDetail-where';
    where.textContent = this.trans('in %1', `${place}/${job.output_path}`);
    wrap.append(file, document.createElement('br'), where);
    return wrap;
  }

  /** Every action on the job, each enabled where it applies or saying why not. */
  private buttons(job: IJob, can: ReturnType<typeof jobActions>): Node {
    const trans = this.trans;
    const bar = document.createElement('div');
    bar.className = 'nbjobs-JobDetail-actions';
    bar.setAttribute('role', 'toolbar');
    bar.setAttribute('aria-label', trans('Actions on job "%1"', job.name));
    const add = (
      action: string,
      label: string,
      state: { enabled: boolean; why: string },
      go: (() => Promise<void>) | undefined
    ): void => {
      if (!go) {
        return;
      }
      const button = document.createElement('button');
      button.type = 'button';
      button.className = 'jp-mod-styled nbjobs-JobDetail-action';
      button.dataset.action = action;
      button.textContent = label;
      button.disabled = !state.enabled;
      button.title = state.why;
      button.addEventListener('click', () => {
        button.disabled = true;
        void go().finally(() => {
          button.disabled = !state.enabled;
        });
      });
      bar.append(button);
    };
    const actions = this.actions;
    add('rerun', trans('Re-run'), can.rerun, actions.rerun && (() => actions.rerun!(this._job)));
    add(
      'cancel',
      trans('Cancel'),
      can.cancel,
      actions.cancel && (() => actions.cancel!(this._job))
    );
    add('output', trans('Open output'), can.output, () => actions.openOutput(this._job));
    const saving = can.output.enabled
      ? { enabled: true, why: trans('Save the output notebook to your computer') }
      : can.output;
    add('download', trans('Download output'), saving, () =>
      actions.download(this._job.output_path)
    );
    add('log', trans('View log'), can.log, () => actions.viewLog(this._job));
    add(
      'remove',
      trans('Delete'),
      can.remove,
      actions.remove && (() => actions.remove!(this._job))
    );
    return bar;
  }

  private link(text: string, go: () => void, enabled: boolean): Node {
    if (!enabled) {
      return document.createTextNode(text);
    }
    const a = document.createElement('button');
    a.type = 'button';
    a.className = 'nbjobs-JobDetail-link';
    a.textContent = text;
    a.addEventListener('click', go);
    return a;
  }

  /** The flavor, what it gives (when the service still offers it) and the GPUs it held. */
  private flavorText(job: IJob): string {
    const trans = this.trans;
    const flavor = this.actions.flavor(job.flavor);
    const parts = [
      flavor && flavor.display_name && flavor.display_name !== flavor.name
        ? trans('%1 (%2)', flavor.display_name, flavor.name)
        : job.flavor
    ];
    if (flavor) {
      parts.push(flavorResources(flavor, trans));
    }
    if (job.gpus.length) {
      // the devices it was given, by number: "GPU 0" is the first GPU, not "no GPU"
      parts.push(
        job.gpus.length === 1
          ? trans('on GPU %1', job.gpus[0])
          : trans('on GPUs %1', job.gpus.join(', '))
      );
    }
    return parts.join(' · ');
  }

  /** A result file: open it and download it, or its path and why not yet. */
  private file(path: string, open: () => void, can: { enabled: boolean; why: string }): Node {
    if (!can.enabled) {
      return document.createTextNode(`${path} (${can.why})`);
    }
    const wrap = document.createElement('span');
    const download = this.link(
      this.trans('Download'),
      () => void this.actions.download(path),
      true
    );
    (download as HTMLElement).setAttribute('aria-label', this.trans('Download %1', path));
    wrap.append(this.link(path, open, true), ' · ', download);
    return wrap;
  }

  private list(lines: string[]): Node {
    const ul = document.createElement('ul');
    ul.className = 'nbjobs-JobDetail-history';
    for (const line of lines) {
      const li = document.createElement('li');
      li.textContent = line;
      ul.append(li);
    }
    return ul;
  }

  private copyable(id: string): Node {
    const wrap = document.createElement('span');
    const code = document.createElement('code');
    code.textContent = id;
    const copy = document.createElement('button');
    copy.type = 'button';
    copy.className = 'nbjobs-JobDetail-link';
    copy.textContent = this.trans('Copy');
    copy.setAttribute('aria-label', this.trans('Copy the job id'));
    copy.addEventListener('click', () => {
      void navigator.clipboard?.writeText(id).then(() => {
        copy.textContent = this.trans('Copied');
      });
    });
    wrap.append(code, ' ', copy);
    return wrap;
  }
}

export function createDetailWidget(
  job: IJob,
  actions: IDetailActions,
  trans: Translate,
  me: string | null
): MainAreaWidget<JobDetail> {
  const content = new JobDetail(job, actions, trans, me);
  const widget = new MainAreaWidget({ content });
  widget.id = `nbjobs-job-${job.id}`;
  widget.title.label = trans('Job: %1', job.name);
  widget.title.caption = trans('Job %1 (%2)', job.name, job.id);
  widget.title.icon = infoIcon;
  widget.title.closable = true;
  return widget;
}

/**
 * A job's log in a main-area tab, following it live until the job ends.
 *
 * The reading (the tail first, then the stream, picking up where a broken stream left
 * off) is logreader.ts's; the tab shows what it reads and keeps at most
 * {@link LOG_KEPT} characters, dropping the oldest, so a flood cannot exhaust the
 * browser. A job on several nodes has a log per rank: a select above the log picks
 * which one the tab follows.
 */
import { MainAreaWidget } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';

import type { NbjobsAPI } from './api';
import { listIcon } from '@jupyterlab/ui-components';
import type { Translate } from './translate';
import type { IJob } from './types';
import { formatBytes } from './format';
import { LogReader, logsCommand, rankChoices } from './logreader';

/** How much text the tab holds at most; older text is dropped. */
export const LOG_KEPT = 4 * 1024 * 1024;

/** The log text and a status line (and, for a job on several nodes, which rank's). */
export class LogView extends Widget {
  constructor(
    api: NbjobsAPI,
    readonly job: IJob,
    private readonly trans: Translate
  ) {
    super();
    this.addClass('nbjobs-LogView');
    this._status = document.createElement('div');
    this._status.className = 'nbjobs-LogView-status';
    this._status.setAttribute('role', 'status');
    this._text = document.createElement('pre');
    this._text.className = 'nbjobs-LogView-text';
    this._text.tabIndex = 0; // scrollable with the keyboard
    this._text.setAttribute('aria-label', trans('Log of job %1', job.name));
    this._notice = document.createElement('div');
    this._notice.className = 'nbjobs-LogView-notice';
    this._notice.hidden = true;
    this._reader = new LogReader(
      api,
      job.id,
      {
        reset: rank => this._reset(rank),
        text: text => this._append(text),
        status: text => this._setStatus(text),
        skipped: bytes => {
          this._skipped = true;
          this._note(
            trans(
              'The first %1 of the log are not shown; `%2` prints it whole.',
              formatBytes(bytes),
              logsCommand(job.id, this._reader.rank)
            )
          );
        },
        ended: () => this._ended()
      },
      trans
    );
    const ranks = rankChoices(job, trans);
    if (ranks.length) {
      this.node.append(this._rankBar(ranks));
    }
    this.node.append(this._status, this._notice, this._text);
    this._reader.start(0);
  }

  dispose(): void {
    this._reader.stop();
    super.dispose();
  }

  /** "Rank 0" … "Rank N-1": the log the tab follows; another restarts from its tail. */
  private _rankBar(ranks: string[]): HTMLElement {
    const bar = document.createElement('label');
    bar.className = 'nbjobs-LogView-ranks';
    bar.textContent = this.trans('Log of');
    const select = document.createElement('select');
    select.className = 'jp-mod-styled';
    select.name = 'nbjobs-rank';
    select.title = this.trans('Each node of the job (each rank) writes a log of its own');
    ranks.forEach((label, rank) => {
      const option = document.createElement('option');
      option.value = String(rank);
      option.textContent = label;
      select.append(option);
    });
    select.value = '0';
    select.addEventListener('change', () => this._reader.start(Number(select.value)));
    bar.append(select);
    return bar;
  }

  /** A new read (another rank's): the tab starts over, empty. */
  private _reset(rank: number): void {
    this._text.replaceChildren();
    this._kept = 0;
    this._trimmed = false;
    this._skipped = false;
    this._notice.hidden = true;
    this._notice.textContent = '';
    delete this.node.dataset.ended;
    this.node.dataset.rank = String(rank);
  }

  private _ended(): void {
    this._setStatus(
      this._trimmed || this._skipped
        ? this.trans('The job has ended; this is the end of its log.')
        : this.trans('The job has ended; this is its whole log.')
    );
    this.node.dataset.ended = 'true';
  }

  private _append(text: string): void {
    const pre = this._text;
    // Stay at the bottom only if the reader was there: scrolling up stops following.
    const atBottom = pre.scrollHeight - pre.scrollTop - pre.clientHeight < 24;
    pre.append(document.createTextNode(text));
    this._kept += text.length;
    // Past the limit, the oldest text goes (whole pieces, then part of one).
    while (this._kept > LOG_KEPT && pre.firstChild) {
      const oldest = pre.firstChild as Text;
      const excess = this._kept - LOG_KEPT;
      if (oldest.data.length <= excess) {
        this._kept -= oldest.data.length;
        oldest.remove();
      } else {
        oldest.data = oldest.data.slice(excess);
        this._kept -= excess;
      }
      if (!this._trimmed) {
        this._trimmed = true;
        this._note(
          this.trans(
            'Older lines are no longer shown; `%1` prints it whole.',
            logsCommand(this.job.id, this._reader.rank)
          )
        );
      }
    }
    if (atBottom) {
      pre.scrollTop = pre.scrollHeight;
    }
  }

  private _note(text: string): void {
    this._notice.textContent = text;
    this._notice.hidden = false;
  }

  private _setStatus(text: string): void {
    this._status.textContent = text;
  }

  private _reader: LogReader;
  private _kept = 0;
  private _trimmed = false;
  /** the read started past the log's beginning (its tail) */
  private _skipped = false;
  private _notice: HTMLDivElement;
  private _status: HTMLDivElement;
  private _text: HTMLPreElement;
}

/** A main-area tab with a job's live log. */
export function createLogWidget(
  api: NbjobsAPI,
  job: IJob,
  trans: Translate
): MainAreaWidget<LogView> {
  const content = new LogView(api, job, trans);
  const widget = new MainAreaWidget({ content });
  widget.id = `nbjobs-log-${job.id}`;
  widget.title.label = trans('Log: %1', job.name);
  widget.title.caption = trans('Log of job %1 (%2)', job.name, job.id);
  widget.title.icon = listIcon;
  widget.title.closable = true;
  return widget;
}

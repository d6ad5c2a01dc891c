/**
 * A job's log in a main-area tab, following it live until the job ends.
 *
 * The server streams the log (`?follow=1`) and closes the stream when the job
 * is over; if the stream breaks earlier (a proxy timeout), the viewer picks up
 * again from the last byte it has. A long log is read from its end (the last
 * {@link LOG_TAIL} bytes), and the tab keeps at most {@link LOG_KEPT} characters,
 * dropping the oldest, so a flood cannot exhaust the browser.
 */
import { MainAreaWidget } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';

import { type NbjobsAPI, NbjobsError } from './api';
import { listIcon } from '@jupyterlab/ui-components';
import type { Translate } from './translate';
import type { IJob } from './types';
import { formatBytes } from './format';

/** How much of a log the tab first asks for: its last 1 MiB. */
export const LOG_TAIL = 1024 * 1024;
/** How much text the tab holds at most; older text is dropped. */
export const LOG_KEPT = 4 * 1024 * 1024;

/** The log text and a status line. */
export class LogView extends Widget {
  constructor(
    private readonly api: NbjobsAPI,
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
    this.node.append(this._status, this._notice, this._text);
    void this._follow();
  }

  dispose(): void {
    this._abort.abort();
    super.dispose();
  }

  private async _follow(): Promise<void> {
    const trans = this.trans;
    const decoder = new TextDecoder();
    let failures = 0;
    while (!this.isDisposed) {
      this._setStatus(trans('Following the log…'));
      try {
        const first = this._offset === null;
        const response = await this.api.logs(this.job.id, {
          follow: true,
          ...(first ? { tail: LOG_TAIL } : { offset: this._offset ?? 0 }),
          signal: this._abort.signal
        });
        const start = Number(response.headers.get('X-Log-Offset') ?? '0') || 0;
        if (first) {
          this._offset = start;
          this._skipped = start > 0;
          if (start > 0) {
            this._note(
              trans(
                'The first %1 of the log are not shown; `nbjobs logs %2` prints it whole.',
                formatBytes(start),
                this.job.id
              )
            );
          }
        }
        const reader = response.body?.getReader();
        if (!reader) {
          this._append(decoder.decode(new Uint8Array(await response.arrayBuffer())));
          break;
        }
        for (;;) {
          const { done, value } = await reader.read();
          if (done) {
            break;
          }
          this._offset = (this._offset ?? 0) + value.byteLength;
          failures = 0;
          this._append(decoder.decode(value, { stream: true }));
        }
        // The server closes the stream when the job has ended.
        break;
      } catch (error) {
        if (this.isDisposed || (error as Error)?.name === 'AbortError') {
          return;
        }
        if (error instanceof NbjobsError && error.kind === 'refused') {
          this._setStatus(error.message);
          return;
        }
        failures++;
        this._setStatus(
          error instanceof NbjobsError ? error.message : trans('The log stream broke; retrying…')
        );
        await new Promise(resolve => setTimeout(resolve, Math.min(30000, 1000 * 2 ** failures)));
      }
    }
    if (!this.isDisposed) {
      this._setStatus(
        this._trimmed || this._skipped
          ? trans('The job has ended; this is the end of its log.')
          : trans('The job has ended; this is its whole log.')
      );
      this.node.dataset.ended = 'true';
    }
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
            'Older lines are no longer shown; `nbjobs logs %1` prints it whole.',
            this.job.id
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

  private _abort = new AbortController();
  /** the next byte of the log to ask for; null until the first answer says */
  private _offset: number | null = null;
  private _kept = 0;
  private _trimmed = false;
  /** the first answer started past the log's beginning (its tail) */
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

/**
 * A job's log in a main-area tab, following it live until the job ends.
 *
 * The server streams the log (`?follow=1`) and closes the stream when the job
 * is over; if the stream breaks earlier (a proxy timeout), the viewer picks up
 * again from the last byte it has.
 */
import { MainAreaWidget } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';

import { type NbjobsAPI, NbjobsError } from './api';
import { listIcon } from '@jupyterlab/ui-components';
import type { Translate } from './translate';
import type { IJob } from './types';

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
    this.node.append(this._status, this._text);
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
        const response = await this.api.logs(this.job.id, {
          follow: true,
          offset: this._offset,
          signal: this._abort.signal
        });
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
          this._offset += value.byteLength;
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
      this._setStatus(trans('The job has ended; this is its whole log.'));
      this.node.dataset.ended = 'true';
    }
  }

  private _append(text: string): void {
    const pre = this._text;
    // Stay at the bottom only if the reader was there: scrolling up stops following.
    const atBottom = pre.scrollHeight - pre.scrollTop - pre.clientHeight < 24;
    pre.append(document.createTextNode(text));
    if (atBottom) {
      pre.scrollTop = pre.scrollHeight;
    }
  }

  private _setStatus(text: string): void {
    this._status.textContent = text;
  }

  private _abort = new AbortController();
  private _offset = 0;
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

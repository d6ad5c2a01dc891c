/**
 * Reading a job's log as it grows, for the log tab (logview.ts shows what it reads).
 *
 * The service streams the log (`?follow=1`) and closes the stream when the job is
 * over; if the stream breaks earlier (a proxy timeout), the reader asks again from the
 * byte after the last one it has. A long log is read from its end (the last
 * {@link LOG_TAIL} bytes). A job on several nodes has a log per rank: `start(rank)`
 * drops the read in progress and reads that rank's log from its tail.
 *
 * Free of the DOM, so that what it asks the service for is tested without a browser.
 */
import { type NbjobsAPI, NbjobsError } from './api';
import type { Translate } from './translate';
import type { IJob } from './types';

/** How much of a log a read first asks for: its last 1 MiB. */
export const LOG_TAIL = 1024 * 1024;

/** Where what the reader reads goes (the tab's text and status line). */
export interface ILogSink {
  /** a read starts (the first, or another rank's): forget what was shown */
  reset(rank: number): void;
  /** more of the log */
  text(text: string): void;
  /** what the reader is doing, or why it stopped */
  status(text: string): void;
  /** the read starts `bytes` into the log: its beginning is not shown */
  skipped(bytes: number): void;
  /** the job has ended and its log was read to the end */
  ended(): void;
}

/** The ranks a job's log tab offers: `Rank 0` … `Rank N-1`; none for a job on one node. */
export function rankChoices(job: Pick<IJob, 'nodes'>, trans: Translate): string[] {
  const nodes = job.nodes ?? 1;
  return nodes > 1 ? Array.from({ length: nodes }, (_, rank) => trans('Rank %1', rank)) : [];
}

/** The command that prints a rank's log whole (rank 0's is the job's own). */
export function logsCommand(jobId: string, rank: number): string {
  return rank > 0 ? `nbjobs logs ${jobId} --rank ${rank}` : `nbjobs logs ${jobId}`;
}

export class LogReader {
  constructor(
    private readonly api: Pick<NbjobsAPI, 'logs'>,
    readonly jobId: string,
    private readonly sink: ILogSink,
    private readonly trans: Translate,
    /** how long to wait before asking again after the `failures`-th failure in a row */
    private readonly delay: (failures: number) => number = failures =>
      Math.min(30000, 1000 * 2 ** failures)
  ) {}

  /** The rank whose log is read (0: the job's own). */
  get rank(): number {
    return this._rank;
  }

  /** Read `rank`'s log from its tail, dropping the read in progress (another rank's). */
  start(rank = 0): void {
    this._controller?.abort();
    const controller = new AbortController();
    this._controller = controller;
    this._rank = rank;
    this.sink.reset(rank);
    void this._read(rank, controller.signal);
  }

  /** Stop reading (the tab closed). */
  stop(): void {
    this._controller?.abort();
    this._controller = null;
  }

  private async _read(rank: number, signal: AbortSignal): Promise<void> {
    const trans = this.trans;
    const decoder = new TextDecoder();
    /** the next byte of the log to ask for; null until the first answer says */
    let offset: number | null = null;
    let failures = 0;
    while (!signal.aborted) {
      this.sink.status(trans('Following the log…'));
      try {
        const response = await this.api.logs(this.jobId, {
          follow: true,
          // rank 0's is the job's own log: asked as for a job on one node
          ...(rank > 0 ? { rank } : {}),
          ...(offset === null ? { tail: LOG_TAIL } : { offset }),
          signal
        });
        if (signal.aborted) {
          return;
        }
        if (offset === null) {
          offset = Number(response.headers.get('X-Log-Offset') ?? '0') || 0;
          if (offset > 0) {
            this.sink.skipped(offset);
          }
        }
        const reader = response.body?.getReader();
        if (!reader) {
          this.sink.text(decoder.decode(new Uint8Array(await response.arrayBuffer())));
          break;
        }
        for (;;) {
          const { done, value } = await reader.read();
          if (signal.aborted) {
            // another rank was picked while this chunk was on its way: not this tab's now
            void reader.cancel().catch(() => undefined);
            return;
          }
          if (done) {
            break;
          }
          offset += value.byteLength;
          failures = 0;
          this.sink.text(decoder.decode(value, { stream: true }));
        }
        // The server closes the stream when the job has ended.
        break;
      } catch (error) {
        if (signal.aborted || (error as Error)?.name === 'AbortError') {
          return;
        }
        if (error instanceof NbjobsError && error.kind === 'refused') {
          this.sink.status(error.message);
          return;
        }
        failures++;
        this.sink.status(
          error instanceof NbjobsError ? error.message : trans('The log stream broke; retrying…')
        );
        await new Promise(resolve => setTimeout(resolve, this.delay(failures)));
      }
    }
    if (!signal.aborted) {
      this.sink.ended();
    }
  }

  private _rank = 0;
  private _controller: AbortController | null = null;
}

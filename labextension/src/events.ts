/**
 * Changes pushed by the job service (`GET nbjobs/api/events`, server-sent events): the
 * Jobs panel and the Schedules view ask again when something changed, instead of on a
 * timer.
 *
 * The stream is read with `fetch` (through the server's own request settings, so it is
 * authenticated like every other call), not `EventSource`. It is open only while the page
 * is shown: hidden, it closes; shown again, it opens and its first event (`hello`) makes
 * the lists catch up. When it cannot be opened it tries again, later each time, and the
 * lists go on polling meanwhile (`connected` says which).
 */
import { type ISignal, Signal } from '@lumino/signaling';

import type * as api from '../../api/openapi';
import type { EVENTS } from './contract';

/** One event as the service sent it. */
export type ServiceEvent =
  | { event: 'hello'; data: { user: string } }
  | { event: 'resync'; data: Record<string, never> }
  | { event: 'job'; data: api.JobEvent }
  | { event: 'job_removed'; data: api.JobRemovedEvent }
  | { event: 'definitions'; data: api.DefinitionsEvent };

/** An event's name, as the service names them (contract.ts). */
export type EventName = (typeof EVENTS)[number];
/** Fails to compile when the events above and the service's differ either way. */
type SameNames<A, B> = [A] extends [B] ? ([B] extends [A] ? true : never) : never;
export const EVENT_NAMES_MATCH: SameNames<ServiceEvent['event'], EventName> = true;

/** Reads server-sent events out of text as it arrives, a chunk at a time. */
export class EventParser {
  /** The events the text so far completes; a partial one waits for the next chunk. */
  push(text: string): ServiceEvent[] {
    this._buffer += text.replace(/\r\n?/g, '\n');
    const events: ServiceEvent[] = [];
    let end: number;
    while ((end = this._buffer.indexOf('\n\n')) >= 0) {
      const block = this._buffer.slice(0, end);
      this._buffer = this._buffer.slice(end + 2);
      let name = 'message';
      const data: string[] = [];
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) {
          continue; // a comment: the service keeping the connection open
        }
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'event') {
          name = value;
        } else if (field === 'data') {
          data.push(value);
        }
      }
      if (!data.length) {
        continue;
      }
      try {
        events.push({ event: name, data: JSON.parse(data.join('\n')) } as ServiceEvent);
      } catch {
        // not JSON: not an event of nbjobs'
      }
    }
    return events;
  }

  private _buffer = '';
}

/** The first wait before opening the stream again after it failed (ms)... */
export const RETRY_FIRST = 2000;
/** ...doubling up to this. */
export const RETRY_MAX = 60000;

/** What the page tells the stream: whether it is shown, and when that changes. */
export interface IPageVisibility {
  hidden: boolean;
  addEventListener(type: 'visibilitychange', listener: () => void): void;
  removeEventListener(type: 'visibilitychange', listener: () => void): void;
}

/** The service's stream of events, open while the page is shown. */
export class EventStream {
  constructor(
    private readonly open: (signal: AbortSignal) => Promise<Response>,
    private readonly page: IPageVisibility = document
  ) {
    this._onVisibility = () => this._follow();
  }

  /** Each event, as it arrives. */
  get received(): ISignal<this, ServiceEvent> {
    return this._received;
  }

  /** Whether the stream is open and has said hello (the lists may poll less). */
  get connected(): boolean {
    return this._connected;
  }

  get connectedChanged(): ISignal<this, boolean> {
    return this._connectedChanged;
  }

  /** Open the stream (while the page is shown) and keep it open. */
  start(): void {
    if (this._started || this._disposed) {
      return;
    }
    this._started = true;
    this.page.addEventListener('visibilitychange', this._onVisibility);
    this._follow();
  }

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    this.page.removeEventListener('visibilitychange', this._onVisibility);
    this._close();
    clearTimeout(this._retry);
    Signal.clearData(this);
  }

  /** Open or close as the page is shown or hidden. */
  private _follow(): void {
    if (this._disposed) {
      return;
    }
    if (this.page.hidden) {
      clearTimeout(this._retry);
      this._close();
    } else if (!this._abort) {
      clearTimeout(this._retry);
      void this._read();
    }
  }

  private async _read(): Promise<void> {
    const abort = new AbortController();
    this._abort = abort;
    let failed = false;
    try {
      const response = await this.open(abort.signal);
      const reader = response.body?.getReader();
      if (!reader) {
        throw new Error('no body');
      }
      const decoder = new TextDecoder();
      const parser = new EventParser();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) {
          break;
        }
        for (const event of parser.push(decoder.decode(value, { stream: true }))) {
          if (event.event === 'hello') {
            this._failures = 0;
            this._setConnected(true);
          }
          this._received.emit(event);
        }
      }
    } catch {
      failed = !abort.signal.aborted;
    }
    if (this._abort !== abort) {
      return; // closed meanwhile (hidden, disposed): nothing to reopen
    }
    this._abort = null;
    this._setConnected(false);
    // The service ends each stream after a few minutes: open the next at once. A
    // failure (a service without events, one that is down) waits, longer each time.
    const wait = failed ? Math.min(RETRY_MAX, RETRY_FIRST * 2 ** this._failures++) : 0;
    this._retry = setTimeout(() => this._follow(), wait);
  }

  private _close(): void {
    const abort = this._abort;
    this._abort = null;
    abort?.abort();
    this._setConnected(false);
  }

  private _setConnected(connected: boolean): void {
    if (connected !== this._connected) {
      this._connected = connected;
      this._connectedChanged.emit(connected);
    }
  }

  private _abort: AbortController | null = null;
  private _started = false;
  private _disposed = false;
  private _connected = false;
  private _failures = 0;
  private _retry = 0;
  private readonly _onVisibility: () => void;
  private _received = new Signal<this, ServiceEvent>(this);
  private _connectedChanged = new Signal<this, boolean>(this);
}

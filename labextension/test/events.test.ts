import { describe, expect, it, vi } from 'vitest';

import {
  EventParser,
  EventStream,
  type IPageVisibility,
  RETRY_FIRST,
  type ServiceEvent
} from '../src/events';
import { PUSHED_INTERVAL, planPoll } from '../src/pollpolicy';

describe('EventParser', () => {
  it('reads events split anywhere across chunks, skipping comments', () => {
    const parser = new EventParser();
    const text =
      'retry: 3000\n\n: still here\n\nevent: hello\ndata: {"user":"ada"}\n\n' +
      'id: 7\nevent: job\ndata: {"id":"abc","state":"queued"}\r\n\r\n';
    const events: ServiceEvent[] = [];
    for (let i = 0; i < text.length; i += 5) {
      events.push(...parser.push(text.slice(i, i + 5)));
    }
    expect(events.map(e => e.event)).toEqual(['hello', 'job']);
    expect(events[1].data).toEqual({ id: 'abc', state: 'queued' });
  });

  it('leaves out what is not JSON', () => {
    expect(new EventParser().push('event: job\ndata: {not json\n\n')).toEqual([]);
  });
});

class Page implements IPageVisibility {
  hidden = false;
  listeners = new Set<() => void>();
  addEventListener(_: 'visibilitychange', listener: () => void): void {
    this.listeners.add(listener);
  }
  removeEventListener(_: 'visibilitychange', listener: () => void): void {
    this.listeners.delete(listener);
  }
  set(hidden: boolean): void {
    this.hidden = hidden;
    this.listeners.forEach(l => l());
  }
}

/** A response whose body the test writes to, as the service would. */
function streamingResponse(signal: AbortSignal) {
  let push: (text: string) => void = () => undefined;
  let end: () => void = () => undefined;
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      const encoder = new TextEncoder();
      push = text => controller.enqueue(encoder.encode(text));
      end = () => controller.close();
      signal.addEventListener('abort', () => controller.error(new Error('aborted')));
    }
  });
  return { response: new Response(body), push: (t: string) => push(t), end: () => end() };
}

async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) {
    await Promise.resolve();
  }
  await new Promise(resolve => setTimeout(resolve, 0));
}

describe('EventStream', () => {
  it('is connected after hello, closes while the page is hidden, reopens when shown', async () => {
    const page = new Page();
    const opened: ReturnType<typeof streamingResponse>[] = [];
    const stream = new EventStream(async signal => {
      const r = streamingResponse(signal);
      opened.push(r);
      return r.response;
    }, page);
    const got: string[] = [];
    stream.received.connect((_, e) => got.push(e.event));
    stream.start();
    await settle();
    expect(opened.length).toBe(1);
    expect(stream.connected).toBe(false);
    opened[0].push('event: hello\ndata: {"user":"ada"}\n\n');
    await settle();
    expect(stream.connected).toBe(true);

    page.set(true); // hidden: nothing stays open
    await settle();
    expect(stream.connected).toBe(false);
    expect(opened.length).toBe(1);

    page.set(false); // shown: a new stream, whose hello makes the lists catch up
    await settle();
    expect(opened.length).toBe(2);
    opened[1].push('event: hello\ndata: {"user":"ada"}\n\nevent: job\ndata: {"id":"a"}\n\n');
    await settle();
    expect(got).toEqual(['hello', 'hello', 'job']);
    stream.dispose();
  });

  it('opens the next stream at once when one ends, and waits after a failure', async () => {
    vi.useFakeTimers();
    try {
      let calls = 0;
      const ends: (() => void)[] = [];
      const stream = new EventStream(async signal => {
        calls++;
        if (calls === 2) {
          throw new Error('the service is down');
        }
        const r = streamingResponse(signal);
        ends.push(r.end);
        return r.response;
      }, new Page());
      stream.start();
      await vi.advanceTimersByTimeAsync(0);
      expect(calls).toBe(1);
      ends[0](); // the service ended the stream (after its few minutes)
      await vi.advanceTimersByTimeAsync(0);
      expect(calls).toBe(2); // at once; this one fails
      await vi.advanceTimersByTimeAsync(RETRY_FIRST - 1);
      expect(calls).toBe(2);
      await vi.advanceTimersByTimeAsync(1);
      expect(calls).toBe(3);
      stream.dispose();
    } finally {
      vi.useRealTimers();
    }
  });
});

describe('planPoll while changes are pushed', () => {
  it('polls slowly as a safety net, and not at all when nothing runs and nobody looks', () => {
    expect(planPoll({ panelVisible: true, activeJobs: 3, quietPolls: 0, pushed: true })).toEqual({
      run: true,
      interval: PUSHED_INTERVAL
    });
    expect(planPoll({ panelVisible: false, activeJobs: 0, quietPolls: 0, pushed: true }).run).toBe(
      false
    );
  });
});

import { ServerConnection } from '@jupyterlab/services';
import { describe, expect, it, vi } from 'vitest';

import { NbjobsAPI } from '../src/api';
import { type ILogSink, LOG_TAIL, LogReader, logsCommand, rankChoices } from '../src/logreader';
import { type Translate, plain } from '../src/translate';

/** A translator that marks every message it was asked for, to see what goes through it. */
const marked: Translate = (msgid, ...args) => `«${plain(msgid, ...args)}»`;

/**
 * A Jupyter server that answers every log request with a stream the test writes to
 * (`send`, `end`), starting at byte `start` of the log. Its requests go through the real
 * NbjobsAPI, so the URLs are the ones a browser would ask for.
 */
class FakeServer {
  readonly urls: URL[] = [];
  readonly streams: ReadableStreamDefaultController<Uint8Array>[] = [];
  start = 0;

  readonly api = new NbjobsAPI(
    plain,
    ServerConnection.makeSettings({
      baseUrl: 'http://lab.test/',
      fetch: (input: RequestInfo | URL) => this.answer(input as Request)
    })
  );

  /** The query of request `index` (the cache-buster JupyterLab appends left out). */
  query(index: number): Record<string, string> {
    const params = Object.fromEntries(this.urls[index].searchParams);
    return Object.fromEntries(Object.entries(params).filter(([key]) => !/^\d+$/.test(key)));
  }

  send(index: number, text: string): void {
    this.streams[index].enqueue(new TextEncoder().encode(text));
  }

  end(index: number): void {
    this.streams[index].close();
  }

  private answer(request: Request): Promise<Response> {
    this.urls.push(new URL(request.url));
    let stream!: ReadableStreamDefaultController<Uint8Array>;
    const body = new ReadableStream<Uint8Array>({
      start: controller => {
        stream = controller;
      }
    });
    // as a browser does: an aborted request's body fails with an AbortError
    request.signal.addEventListener('abort', () =>
      stream.error(new DOMException('aborted', 'AbortError'))
    );
    this.streams.push(stream);
    return Promise.resolve(new Response(body, { headers: { 'X-Log-Offset': String(this.start) } }));
  }
}

/** What a log tab would have been told. */
function recorder() {
  const seen = {
    text: '',
    resets: [] as number[],
    statuses: [] as string[],
    skipped: [] as number[],
    ended: 0
  };
  const sink: ILogSink = {
    reset: rank => {
      seen.resets.push(rank);
      seen.text = '';
    },
    text: text => {
      seen.text += text;
    },
    status: text => seen.statuses.push(text),
    skipped: bytes => seen.skipped.push(bytes),
    ended: () => {
      seen.ended++;
    }
  };
  return { seen, sink };
}

describe('rankChoices', () => {
  it('offers every rank of a job on several nodes, and none for one node', () => {
    expect(rankChoices({ nodes: 3 }, plain)).toEqual(['Rank 0', 'Rank 1', 'Rank 2']);
    expect(rankChoices({ nodes: 2 }, marked)).toEqual(['«Rank 0»', '«Rank 1»']);
    expect(rankChoices({ nodes: 1 }, plain)).toEqual([]);
    // a job from a service that does not say: one node
    expect(rankChoices({} as { nodes: number }, plain)).toEqual([]);
  });
});

describe('logsCommand', () => {
  it('names the rank, except the job’s own log', () => {
    expect(logsCommand('abc', 0)).toBe('nbjobs logs abc');
    expect(logsCommand('abc', 2)).toBe('nbjobs logs abc --rank 2');
  });
});

describe('NbjobsAPI.logs', () => {
  it('asks for a rank only when given one', async () => {
    const server = new FakeServer();
    await server.api.logs('j1', { follow: true, tail: 100 });
    await server.api.logs('j1', { follow: true, offset: 7, rank: 1 });
    expect(server.urls[0].pathname).toBe('/nbjobs/api/jobs/j1/logs');
    expect(server.query(0)).toEqual({ follow: '1', tail: '100' });
    expect(server.query(1)).toEqual({ follow: '1', offset: '7', rank: '1' });
  });
});

describe('LogReader', () => {
  it('follows the job’s log from its tail, and asks on from the last byte it read', async () => {
    const server = new FakeServer();
    const { seen, sink } = recorder();
    const reader = new LogReader(server.api, 'j1', sink, plain, () => 0);

    server.start = 5000;
    reader.start();
    await vi.waitFor(() => expect(server.urls).toHaveLength(1));
    expect(server.query(0)).toEqual({ follow: '1', tail: String(LOG_TAIL) });
    server.send(0, 'line 1\n');
    await vi.waitFor(() => expect(seen.text).toBe('line 1\n'));
    expect(seen.skipped).toEqual([5000]);
    // the stream breaks: the reader asks for what follows the 7 bytes it has
    server.streams[0].error(new TypeError('network error'));
    await vi.waitFor(() => expect(server.urls).toHaveLength(2));
    expect(server.query(1)).toEqual({ follow: '1', offset: '5007' });
    server.send(1, 'line 2\n');
    server.end(1);
    await vi.waitFor(() => expect(seen.ended).toBe(1));
    expect(seen.text).toBe('line 1\nline 2\n');
    expect(seen.statuses).toContain('The log stream broke; retrying…');
  });

  it('switching rank drops the read in progress and reads that rank’s log from its tail', async () => {
    const server = new FakeServer();
    const { seen, sink } = recorder();
    const reader = new LogReader(server.api, 'j2', sink, plain, () => 0);

    reader.start(0);
    await vi.waitFor(() => expect(server.urls).toHaveLength(1));
    server.send(0, 'rank 0 says hello\n');
    await vi.waitFor(() => expect(seen.text).toBe('rank 0 says hello\n'));

    reader.start(1);
    expect(reader.rank).toBe(1);
    expect(seen.resets).toEqual([0, 1]);
    expect(seen.text).toBe('');
    await vi.waitFor(() => expect(server.urls).toHaveLength(2));
    // from the tail again, not from the offset reached in rank 0's log
    expect(server.query(1)).toEqual({ follow: '1', tail: String(LOG_TAIL), rank: '1' });
    server.send(1, 'rank 1 says hello\n');
    await vi.waitFor(() => expect(seen.text).toBe('rank 1 says hello\n'));
    // rank 0's stream was dropped: nothing more of it shows, and it is not asked again
    expect(() => server.send(0, 'late rank 0 line\n')).toThrow();
    server.end(1);
    await vi.waitFor(() => expect(seen.ended).toBe(1));
    expect(seen.text).toBe('rank 1 says hello\n');

    // back to rank 0: the job's own log, asked as for a job on one node
    reader.start(0);
    await vi.waitFor(() => expect(server.urls).toHaveLength(3));
    expect(server.query(2)).toEqual({ follow: '1', tail: String(LOG_TAIL) });
    reader.stop();
    await new Promise(resolve => setTimeout(resolve, 10));
    expect(server.urls).toHaveLength(3);
    expect(seen.ended).toBe(1);
  });

  it('stops on a refusal with the service’s sentence', async () => {
    const { seen, sink } = recorder();
    const refusing = new NbjobsAPI(
      plain,
      ServerConnection.makeSettings({
        baseUrl: 'http://lab.test/',
        fetch: () =>
          Promise.resolve(
            new Response(
              JSON.stringify({ message: 'job j3 runs on 2 nodes: its ranks are 0 to 1, not 5' }),
              { status: 400, headers: { 'Content-Type': 'application/json' } }
            )
          )
      })
    );
    const reader = new LogReader(refusing, 'j3', sink, plain, () => 0);
    reader.start(5);
    await vi.waitFor(() =>
      expect(seen.statuses).toContain('job j3 runs on 2 nodes: its ranks are 0 to 1, not 5')
    );
    expect(seen.ended).toBe(0);
  });
});

import { afterEach, describe, expect, it, vi } from 'vitest';

import type { NbjobsAPI } from '../src/api';
import { DEFAULT_QUERY, type IJobQuery, matchesQuery } from '../src/joblist';
import type { Signal } from '@lumino/signaling';

import { EventStream, type ServiceEvent } from '../src/events';
import { JobsModel } from '../src/model';
import type { IJob, IJobList } from '../src/types';

/**
 * The job service's list, as `GET jobs` answers it (newest first, `before`, `more`),
 * over jobs held here: a fresh copy of each job per answer, as JSON would give.
 */
class ServiceStandIn {
  jobs: IJob[] = [];
  calls: string[] = [];
  /** when set, answers wait for it (a slow service, or a slow way back: each answer is
   * what the service held when asked) */
  gate: Promise<void> | null = null;

  add(count: number, name = 'job'): void {
    for (let i = 0; i < count; i++) {
      const id = (this.jobs.length + 1).toString(16).padStart(8, '0');
      this.jobs.unshift({
        id,
        name: `${name} ${id}`,
        path: 'n.ipynb',
        flavor: 'cpu',
        user: 'ada',
        state: 'succeeded',
        progress: { cells_done: 1, cells_total: 1, current_cell: null },
        submitted_at: '2026-01-01T00:00:00Z',
        started_at: '2026-01-01T00:00:01Z',
        finished_at: '2026-01-01T00:00:02Z'
      } as IJob);
    }
  }

  async list(
    query: IJobQuery = DEFAULT_QUERY,
    page: { limit?: number; before?: string | null } = {}
  ): Promise<IJobList> {
    this.calls.push(`${query.search}|${page.before ?? ''}`);
    const limit = page.limit ?? 100;
    const matching = this.jobs.filter(j => matchesQuery(j, query));
    const start = page.before ? matching.findIndex(j => j.id === page.before) + 1 : 0;
    const jobs = matching.slice(start, start + limit).map(j => ({ ...j }));
    await this.gate;
    return {
      jobs,
      total: matching.length,
      limit,
      offset: 0,
      more: start + limit < matching.length
    };
  }

  api(): NbjobsAPI {
    return { jobs: this.list.bind(this) } as unknown as NbjobsAPI;
  }
}

const models: JobsModel[] = [];

function modelOver(service: ServiceStandIn): JobsModel {
  const model = new JobsModel(service.api());
  models.push(model);
  return model;
}

afterEach(() => {
  models.splice(0).forEach(m => m.dispose());
});

const ids = (jobs: readonly IJob[]) => jobs.map(j => j.id);

describe('JobsModel pages', () => {
  it('shows the newest page, then older pages on demand, with nothing twice', async () => {
    const service = new ServiceStandIn();
    service.add(250);
    const model = modelOver(service);
    await model.refresh();
    expect(model.jobs).toHaveLength(100);
    expect(model.hasOlder).toBe(true);

    await model.loadOlder();
    service.add(7, 'new'); // arrive while the user reads
    await model.refresh();
    await model.loadOlder();

    expect(model.hasOlder).toBe(false);
    expect(ids(model.jobs)).toEqual(ids(service.jobs));
  });

  it('keeps older pages as loaded while the poll refreshes the newest', async () => {
    const service = new ServiceStandIn();
    service.add(150);
    const model = modelOver(service);
    await model.refresh();
    await model.loadOlder();
    const older = model.jobs[120];
    await model.refresh();
    expect(model.jobs[120]).toBe(older); // the same object: its row is left alone
    expect(model.jobs[0]).not.toBe(service.jobs[0]);
  });

  it('asks the service for a search and shows what it finds beyond the newest page', async () => {
    const service = new ServiceStandIn();
    service.add(1, 'needle');
    service.add(300, 'hay');
    const model = modelOver(service);
    await model.refresh();
    expect(model.jobs.some(j => j.name.startsWith('needle'))).toBe(false);

    model.setQuery({ ...DEFAULT_QUERY, search: 'needle' });
    expect(model.searching).toBe(true);
    expect(model.jobs).toHaveLength(0); // none of the held jobs match, until it answers
    await model.refresh();

    expect(model.searching).toBe(false);
    expect(model.jobs.map(j => j.name)).toEqual(['needle 00000001']);
    expect(model.hasOlder).toBe(false);
    // the user's own newest jobs are still followed, for the notifications
    expect(model.find(service.jobs[0].id)).toBeDefined();
  });

  it('answers a search asked while an earlier refresh was on its way', async () => {
    const service = new ServiceStandIn();
    service.add(1, 'needle');
    service.add(3, 'hay');
    const model = modelOver(service);
    await model.refresh();
    // The service answers slowly: a refresh (a pushed change, the refresh button) is
    // in flight with the old query when the user picks a new one.
    let release: () => void = () => undefined;
    service.gate = new Promise<void>(resolve => (release = resolve));
    const inFlight = model.refresh();
    await new Promise(resolve => setTimeout(resolve, 20));
    model.setQuery({ ...DEFAULT_QUERY, search: 'needle hay' }); // matches nothing held
    const asked = model.refresh();
    release();
    await Promise.all([inFlight, asked]);
    expect(model.searching).toBe(false);
    expect(service.calls.some(c => c.startsWith('needle hay|'))).toBe(true);
  });

  it('shows a job that ended while an earlier answer was on its way', async () => {
    const service = new ServiceStandIn();
    service.add(1);
    const job = service.jobs[0];
    job.state = 'running';
    const model = modelOver(service);
    await model.refresh();
    // A refresh is out: the service answered "running", the answer is slow to arrive.
    let release: () => void = () => undefined;
    service.gate = new Promise<void>(resolve => (release = resolve));
    const inFlight = model.refresh();
    await vi.waitFor(() => expect(service.calls).toHaveLength(2));
    // The job ends now; its event asks again while that answer is still out.
    job.state = 'succeeded';
    service.gate = null;
    const asked = model.refresh();
    release();
    await Promise.all([inFlight, asked]);
    expect(model.find(job.id)?.state).toBe('succeeded');
    expect(service.calls).toHaveLength(3);
  });

  it('drops a removed job from an older page at once', async () => {
    const service = new ServiceStandIn();
    service.add(150);
    const model = modelOver(service);
    await model.refresh();
    await model.loadOlder();
    const gone = model.jobs[140].id;
    model.forget(gone);
    expect(model.find(gone)).toBeUndefined();
    expect(model.jobs).toHaveLength(149);
  });
});

describe('JobsModel with pushed changes', () => {
  it('asks again once for a burst of events, and shows the job they announce', async () => {
    const service = new ServiceStandIn();
    service.add(2);
    const model = modelOver(service);
    const events = new EventStream(() => new Promise<Response>(() => undefined), {
      hidden: true,
      addEventListener: () => undefined,
      removeEventListener: () => undefined
    });
    model.listen(events);
    await model.refresh();
    const before = service.calls.length;

    service.add(1, 'from the terminal'); // submitted elsewhere
    const emit = (events as unknown as { _received: Signal<EventStream, ServiceEvent> })._received;
    for (let cell = 0; cell < 5; cell++) {
      emit.emit({ event: 'job', data: { id: 'x', user: 'ada', state: 'running' } as never });
    }
    expect(service.calls.length - before).toBe(0); // not at once: the burst is gathered
    // the burst's one refresh, REFRESH_DELAY later (later still on a loaded machine: a
    // fixed sleep once ended while it was on its way, and the refresh below folded into it)
    await vi.waitFor(() => expect(model.jobs[0]?.name).toMatch(/^from the terminal/), {
      timeout: 10_000
    });
    expect(service.calls.length - before).toBe(1);
    await model.refresh();
    expect(service.calls.length - before).toBe(2); // the events' one, and this one
    events.dispose();
  });
});

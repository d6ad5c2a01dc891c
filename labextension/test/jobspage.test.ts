import { describe, expect, it } from 'vitest';

import { DEFAULT_SORT, bulkTargets, sortJobs } from '../src/joblist';
import type { IJob, JobState } from '../src/types';

function job(id: string, state: JobState = 'succeeded', extra: Partial<IJob> = {}): IJob {
  return {
    id,
    state,
    name: `job ${id}`,
    path: 'train.ipynb',
    flavor: 'cpu',
    user: 'ada',
    submitted_at: '2026-11-27T10:00:00Z',
    started_at: '2026-11-27T10:00:00Z',
    finished_at: '2026-11-27T10:01:00Z',
    gpu_hours: 0,
    ...extra
  } as IJob;
}

const ids = (jobs: readonly IJob[]) => jobs.map(j => j.id);
const now = new Date('2026-11-27T12:00:00Z');

describe('sortJobs', () => {
  const jobs = [
    job('a', 'running', {
      name: 'Beta',
      submitted_at: '2026-11-27T11:00:00Z',
      started_at: '2026-11-27T11:30:00Z',
      finished_at: null,
      gpu_hours: 0.5
    }),
    job('b', 'failed', { name: 'alpha', submitted_at: '2026-11-27T09:00:00Z', gpu_hours: 2 }),
    job('c', 'queued', {
      name: 'gamma',
      submitted_at: '2026-11-27T11:50:00Z',
      started_at: null,
      finished_at: null
    })
  ];

  it('puts the newest first by default, as the service lists them', () => {
    expect(ids(sortJobs(jobs, DEFAULT_SORT, now))).toEqual(['c', 'a', 'b']);
  });

  it('sorts names without regard to case, either way', () => {
    expect(ids(sortJobs(jobs, { key: 'name', descending: false }, now))).toEqual(['b', 'a', 'c']);
    expect(ids(sortJobs(jobs, { key: 'name', descending: true }, now))).toEqual(['c', 'a', 'b']);
  });

  it('sorts by how long they ran (a running one counts to now; a waiting one not at all)', () => {
    // a: 30 min so far; b: 1 min; c: never started
    expect(ids(sortJobs(jobs, { key: 'took', descending: true }, now))).toEqual(['a', 'b', 'c']);
  });

  it('sorts by GPU-hours, and keeps the service order among equals', () => {
    const more = [...jobs, job('d', 'succeeded', { gpu_hours: 0.5 })];
    expect(ids(sortJobs(more, { key: 'gpuHours', descending: true }, now))).toEqual([
      'b',
      'a',
      'd',
      'c'
    ]);
  });
});

describe('bulkTargets', () => {
  it('cancels only active jobs and deletes only the caller’s ended ones', () => {
    const picked = [
      job('q', 'queued'),
      job('r', 'running'),
      job('s', 'succeeded'),
      job('t', 'failed', { user: 'bob' })
    ];
    const targets = bulkTargets(picked, 'ada');
    expect(ids(targets.cancel)).toEqual(['q', 'r']);
    expect(ids(targets.remove)).toEqual(['s']);
  });
});

import { describe, expect, it } from 'vitest';

import {
  ACTIVE_INTERVAL,
  HIDDEN_ACTIVE_INTERVAL,
  IDLE_INTERVAL,
  IDLE_MAX,
  METRICS_MIN_INTERVAL,
  fingerprint,
  newlyApproved,
  newlyEnded,
  nextQuietPolls,
  planMetricsPoll,
  planPoll
} from '../src/pollpolicy';
import type { IJob, JobState } from '../src/types';

function job(id: string, state: JobState, cells_done = 0): IJob {
  return {
    id,
    state,
    progress: { cells_done, cells_total: 5, current_cell: null },
    queue_position: null
  } as IJob;
}

describe('planPoll', () => {
  it('polls briskly while a job moves and the panel is open', () => {
    expect(planPoll({ panelVisible: true, activeJobs: 1, quietPolls: 7 })).toEqual({
      run: true,
      interval: ACTIVE_INTERVAL
    });
  });

  it('polls slowly with the panel closed, only to notify when a job ends', () => {
    expect(planPoll({ panelVisible: false, activeJobs: 2, quietPolls: 0 })).toEqual({
      run: true,
      interval: HIDDEN_ACTIVE_INTERVAL
    });
  });

  it('stops with the panel closed and nothing active', () => {
    expect(planPoll({ panelVisible: false, activeJobs: 0, quietPolls: 0 }).run).toBe(false);
  });

  it('backs off, doubling, while nothing happens, up to the maximum', () => {
    const intervals = [0, 1, 2, 3, 4, 10, 60].map(
      quietPolls => planPoll({ panelVisible: true, activeJobs: 0, quietPolls }).interval
    );
    expect(intervals).toEqual([
      IDLE_INTERVAL,
      IDLE_INTERVAL * 2,
      IDLE_INTERVAL * 4,
      IDLE_INTERVAL * 8,
      IDLE_MAX,
      IDLE_MAX,
      IDLE_MAX
    ]);
  });

  it('counts quiet polls only when nothing is active and nothing changed', () => {
    expect(nextQuietPolls(3, 0, false)).toBe(4);
    expect(nextQuietPolls(3, 0, true)).toBe(0);
    expect(nextQuietPolls(3, 1, false)).toBe(0);
  });
});

describe('change detection', () => {
  it('notices progress, state and queue changes', () => {
    const before = fingerprint([job('a', 'running', 1)]);
    expect(fingerprint([job('a', 'running', 1)])).toBe(before);
    expect(fingerprint([job('a', 'running', 2)])).not.toBe(before);
    expect(fingerprint([job('a', 'succeeded', 1)])).not.toBe(before);
    expect(fingerprint([job('a', 'running', 1), job('b', 'queued')])).not.toBe(before);
  });

  it('reports jobs that ended since the last poll, once', () => {
    const seen = new Map<string, JobState>([
      ['run', 'running'],
      ['wait', 'queued'],
      ['old', 'failed']
    ]);
    const now = [
      job('run', 'succeeded'),
      job('wait', 'cancelled'),
      job('old', 'failed'),
      job('new', 'succeeded')
    ];

    expect(newlyEnded(seen, now).map(j => j.id)).toEqual(['run', 'wait']);
    const next = new Map(now.map(j => [j.id, j.state] as [string, JobState]));
    expect(newlyEnded(next, now)).toEqual([]);
  });

  it('reports approvals, not rejections, once', () => {
    const seen = new Map<string, JobState>([
      ['yes', 'pending_approval'],
      ['no', 'pending_approval'],
      ['still', 'pending_approval'],
      ['ran', 'pending_approval']
    ]);
    const now = [
      job('yes', 'queued'),
      job('no', 'cancelled'),
      job('still', 'pending_approval'),
      job('ran', 'running')
    ];
    expect(newlyApproved(seen, now).map(j => j.id)).toEqual(['yes', 'ran']);
    // a rejection ends the job: it is told as its end
    expect(newlyEnded(seen, now).map(j => j.id)).toEqual(['no']);
    const next = new Map(now.map(j => [j.id, j.state] as [string, JobState]));
    expect(newlyApproved(next, now)).toEqual([]);
  });
});

describe('planMetricsPoll', () => {
  it('asks once a sample interval while the job runs and its readings are shown', () => {
    expect(planMetricsPoll({ shown: true, state: 'running', intervalSeconds: 10 })).toEqual({
      run: true,
      interval: 10_000
    });
  });

  it('never asks faster than every 5 s, nor before it knows the interval', () => {
    for (const intervalSeconds of [1, 2.5, 0, undefined]) {
      expect(planMetricsPoll({ shown: true, state: 'running', intervalSeconds })).toEqual({
        run: true,
        interval: METRICS_MIN_INTERVAL
      });
    }
    expect(METRICS_MIN_INTERVAL).toBe(5000);
  });

  it('does not ask when nobody sees the readings, telemetry is off, or the job ended', () => {
    expect(planMetricsPoll({ shown: false, state: 'running', intervalSeconds: 10 }).run).toBe(
      false
    );
    expect(planMetricsPoll({ shown: true, state: 'running', intervalSeconds: null }).run).toBe(
      false
    );
    for (const state of ['succeeded', 'failed', 'cancelled', 'timed_out'] as const) {
      expect(planMetricsPoll({ shown: true, state, intervalSeconds: 10 }).run).toBe(false);
    }
  });
});

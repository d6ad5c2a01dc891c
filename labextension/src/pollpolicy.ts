/**
 * When the Jobs panel asks the server again: often while something moves,
 * rarely when nothing does, not at all when nobody could see the answer.
 *
 * A pure function of what the panel knows, so the decisions are tested on
 * their own; `JobsModel` applies them to a Lumino `Poll` (whose own backoff
 * handles failed requests, e.g. a job service that is down).
 */
import { isActive } from './format';
import type { IJob, JobState } from './types';

/** Polling period while a job waits or runs and the panel is open (ms). */
export const ACTIVE_INTERVAL = 2000;
/**
 * Period while a job waits or runs and the panel is closed: only to notify
 * the user when it ends.
 */
export const HIDDEN_ACTIVE_INTERVAL = 10000;
/**
 * Period while the service pushes changes (its stream of events is open): a safety net
 * only, as every change arrives by itself.
 */
export const PUSHED_INTERVAL = 30000;
/** First period once nothing is active; it doubles per quiet poll... */
export const IDLE_INTERVAL = 5000;
/** ...up to this. */
export const IDLE_MAX = 60000;

export interface IPollInputs {
  /** the Jobs panel is shown */
  panelVisible: boolean;
  /** jobs queued, starting or running */
  activeJobs: number;
  /** polls in a row that saw nothing active and nothing changed */
  quietPolls: number;
  /** the service's stream of events is open: changes arrive without asking */
  pushed?: boolean;
}

export interface IPollPlan {
  /** whether to poll at all */
  run: boolean;
  /** the next period, in ms */
  interval: number;
}

/** The next polling period, or none. */
export function planPoll({
  panelVisible,
  activeJobs,
  quietPolls,
  pushed = false
}: IPollInputs): IPollPlan {
  if (pushed) {
    // Changes arrive as events: a slow poll only in case one was missed, none when
    // nothing runs and nobody looks.
    return { run: activeJobs > 0 || panelVisible, interval: PUSHED_INTERVAL };
  }
  if (activeJobs > 0) {
    return {
      run: true,
      interval: panelVisible ? ACTIVE_INTERVAL : HIDDEN_ACTIVE_INTERVAL
    };
  }
  if (!panelVisible) {
    // Nothing can end, nobody looks: a submit or opening the panel restarts it.
    return { run: false, interval: IDLE_MAX };
  }
  const interval = IDLE_INTERVAL * 2 ** Math.min(quietPolls, 16);
  return { run: true, interval: Math.min(IDLE_MAX, interval) };
}

/** Count of quiet polls after one that saw `activeJobs` and did or did not see a change. */
export function nextQuietPolls(previous: number, activeJobs: number, changed: boolean): number {
  return activeJobs > 0 || changed ? 0 : previous + 1;
}

/** A cheap fingerprint of a job list: changes when anything the panel shows changes. */
export function fingerprint(jobs: IJob[]): string {
  return jobs
    .map(
      j =>
        `${j.id}:${j.state}:${j.queue_position ?? ''}:${j.progress.cells_done}/${j.progress.cells_total}`
    )
    .join('|');
}

/**
 * Jobs that ended since the last poll: seen waiting or running before, final now.
 * Jobs never seen active (finished before the page loaded) do not count.
 */
export function newlyEnded(previous: ReadonlyMap<string, JobState>, jobs: IJob[]): IJob[] {
  return jobs.filter(job => {
    const before = previous.get(job.id);
    return before !== undefined && isActive(before) && !isActive(job.state);
  });
}

/**
 * Jobs approved since the last poll: seen waiting for approval before, past it now and
 * not cancelled (a rejection ends the job and is told as its end).
 */
export function newlyApproved(previous: ReadonlyMap<string, JobState>, jobs: IJob[]): IJob[] {
  return jobs.filter(
    job =>
      previous.get(job.id) === 'pending_approval' &&
      job.state !== 'pending_approval' &&
      job.state !== 'cancelled'
  );
}

/** The job view never asks for a job's telemetry more often than this (ms). */
export const METRICS_MIN_INTERVAL = 5000;

export interface IMetricsPollInputs {
  /** the Jobs panel is shown and the job's readings are open in it */
  shown: boolean;
  /** the job's state as the panel last saw it */
  state: JobState;
  /**
   * seconds between the job's samples as the service said (null: telemetry is off);
   * undefined before the first answer
   */
  intervalSeconds: number | null | undefined;
}

/**
 * When the job view asks for a running job's telemetry again: once a sample
 * interval, but not faster than {@link METRICS_MIN_INTERVAL}; not at all when
 * nobody sees it, when telemetry is off, or once the job is over (its summary is
 * final: one last answer is enough).
 */
export function planMetricsPoll({ shown, state, intervalSeconds }: IMetricsPollInputs): IPollPlan {
  if (!shown || !isActive(state) || intervalSeconds === null) {
    return { run: false, interval: IDLE_MAX };
  }
  // Before the first answer, or an interval the service did not give: the floor.
  const every = intervalSeconds && intervalSeconds > 0 ? intervalSeconds * 1000 : 0;
  return { run: true, interval: Math.max(METRICS_MIN_INTERVAL, every) };
}

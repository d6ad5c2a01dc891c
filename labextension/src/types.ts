/**
 * The JSON bodies of nbjobs' REST API (api/openapi.yaml is the source of truth).
 */
import type { JSONValue } from './params';

export type JobState =
  | 'queued'
  | 'starting'
  | 'running'
  | 'succeeded'
  | 'failed'
  | 'cancelled'
  | 'timed_out';

/** The states a job never leaves. */
export const FINAL_STATES: ReadonlySet<JobState> = new Set([
  'succeeded',
  'failed',
  'cancelled',
  'timed_out'
]);

/** A flavor the user may pick, with what is free right now. */
export interface IFlavor {
  name: string;
  display_name: string;
  description: string;
  gpus: number;
  gpu_type: string | null;
  shared: boolean;
  cpu: string | null;
  memory: string | null;
  /** seconds */
  time_limit: number | null;
  /** jobs of this flavor that could start now */
  available: number;
  /** jobs of this flavor waiting */
  queued: number;
  /** why no job of this flavor could ever start here; null when it can */
  unavailable?: string | null;
  /** GPUs of the kind this flavor uses that are free now; null without GPUs or when unknown */
  free_gpus?: number | null;
  /** all GPUs of that kind */
  total_gpus?: number | null;
}

export interface IProgress {
  cells_done: number;
  cells_total: number;
  current_cell: number | null;
}

export interface IJobError {
  cell_index: number | null;
  ename: string;
  evalue: string;
}

/** One job, as `GET nbjobs/api/jobs` lists it. */
export interface IJob {
  id: string;
  user: string;
  name: string;
  path: string;
  output_path: string;
  flavor: string;
  state: JobState;
  queue_position: number | null;
  waiting_reason: string | null;
  progress: IProgress;
  parameters: { [name: string]: JSONValue };
  priority: number;
  gpus: string[];
  submitted_at: string;
  started_at: string | null;
  finished_at: string | null;
  exit_code: number | null;
  message: string | null;
  error: IJobError | null;
  rerun_of: string | null;
  time_limit: number | null;
}

export interface IJobList {
  jobs: IJob[];
  total: number;
  limit: number;
  offset: number;
}

/** `POST nbjobs/api/jobs` */
export interface ISubmitRequest {
  path: string;
  flavor: string;
  parameters?: { [name: string]: JSONValue };
  name?: string;
}

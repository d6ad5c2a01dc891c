/**
 * The JSON bodies of nbjobs' REST API (api/openapi.yaml is the source of truth).
 */
import type { JSONValue } from './params';

export type JobState =
  | 'pending_approval'
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
  /** the share of one GPU a job gets (free_gpus and total_gpus then count slices); null: whole GPUs */
  fraction?: number | null;
  /** who decides when its jobs start, where nbjobs cannot count free GPUs (KAI Scheduler, Volcano) */
  placement?: string | null;
  /** drained nodes that take part of its capacity ("1 of 3 A100 nodes in maintenance") */
  maintenance?: string | null;
  /** its GPUs are simulated (trying nbjobs on a machine without one) */
  simulated?: boolean;
  /** the kernels its jobs can run; null or absent: not known (a missing one fails the job) */
  kernels?: string[] | null;
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
  /** Something its owner should act on while it runs (its GPUs have been idle). */
  warning?: string | null;
  /** where it runs or ran (a Kubernetes node), when the backend knows */
  node?: string | null;
  /** times the cluster disrupted it (evicted, preempted) and it went back to the queue */
  requeues?: number;
  /** the kernel chosen at submit instead of the notebook's own */
  kernel?: string | null;
  /** the HTML copy of the result, when one was asked for */
  html_path?: string | null;
  /** a notebook, a script (its output is its log) or a shell command run in `path` */
  kind?: 'notebook' | 'script' | 'command';
  command?: string | null;
}

export interface IJobList {
  jobs: IJob[];
  /** every job the filters match, on this page or not */
  total: number;
  limit: number;
  offset: number;
  /** older jobs follow this page (ask with `before` = its last job's id); absent from older services */
  more?: boolean;
}

/** `GET nbjobs/api/me`: who the user is to nbjobs, so the panel offers what the API allows. */
export interface IMe {
  name: string;
  admin: boolean;
  /** may provision classes */
  teacher: boolean;
  groups: string[];
  /** the classes they teach (every class, for admins) */
  classes: string[];
  /** the Submit dialog's defaults for results; absent from older services */
  outputs?: IOutputDefaults;
}

/** `POST nbjobs/api/jobs` */
export interface ISubmitRequest {
  path: string;
  flavor: string;
  parameters?: { [name: string]: JSONValue };
  name?: string;
  /** run on this kernel instead of the notebook's own */
  kernel?: string;
  /** the result next to the notebook, or in the outputs folder next to it */
  outputs?: OutputLocation;
  /** also write an HTML copy of the result */
  html?: boolean;
}

export type OutputLocation = 'beside' | 'folder';

/** Where results go unless a submission says otherwise (nbjobs.yaml's `outputs`). */
export interface IOutputDefaults {
  location: OutputLocation;
  /** the outputs folder's name, made next to the notebook */
  folder: string;
  html: boolean;
}

/** One GPU in one telemetry sample (null: the runner could not read it). */
export interface IGpuReading {
  /** the GPU as the job sees it (its CUDA device number), as text */
  index: string;
  uuid?: string | null;
  name?: string | null;
  utilization_percent: number | null;
  memory_used_bytes: number | null;
  memory_total_bytes: number | null;
  temperature_celsius?: number | null;
  power_watts?: number | null;
  /** why this GPU gave no reading */
  error?: string | null;
}

/** What a job used at one moment; GPU figures are over the job's GPUs together. */
export interface ITelemetrySample {
  /** ISO 8601 */
  at: string;
  /** mean over the job's GPUs */
  gpu_utilization_percent: number | null;
  /** sums over the job's GPUs */
  gpu_memory_used_bytes: number | null;
  gpu_memory_total_bytes: number | null;
  /** 100 = one core busy */
  cpu_percent: number | null;
  memory_bytes: number | null;
  gpus?: IGpuReading[];
}

/** One GPU over the whole run. */
export interface IGpuSummary {
  index: string;
  uuid?: string | null;
  name?: string | null;
  utilization_mean_percent: number | null;
  utilization_peak_percent: number | null;
  memory_peak_bytes: number | null;
  memory_total_bytes: number | null;
  busy_seconds: number;
  allocated_seconds: number;
}

/** What a job used over its run so far (final once it ended). */
export interface ITelemetrySummary {
  samples: number;
  since?: string | null;
  until?: string | null;
  /** GPU-seconds measured busy and GPU-seconds sampled, over all its GPUs */
  gpu_busy_seconds: number | null;
  gpu_allocated_seconds: number | null;
  gpu_utilization_mean_percent: number | null;
  gpu_utilization_peak_percent: number | null;
  /** the most memory any one of its GPUs held, and that GPU's size */
  gpu_memory_peak_bytes: number | null;
  gpu_memory_total_bytes: number | null;
  cpu_mean_percent: number | null;
  cpu_peak_percent: number | null;
  memory_peak_bytes: number | null;
  gpus?: IGpuSummary[];
}

/** `GET nbjobs/api/jobs/{id}/metrics`: a job's telemetry series, summary and hint. */
export interface IJobMetrics {
  job_id: string;
  state: JobState;
  /** seconds between samples; null: telemetry is off */
  interval_seconds: number | null;
  /** oldest first */
  samples: ITelemetrySample[];
  summary: ITelemetrySummary | null;
  /** a plain sentence when the job used its GPUs little */
  hint: string | null;
}

/** When a definition runs by itself (`POST nbjobs/api/definitions`'s `schedule`). */
export interface IScheduleSpec {
  /** five cron fields on the clock of `timezone` */
  cron: string;
  timezone?: string | null;
  /** no run before this instant, none after that one (ISO 8601; null: no bound) */
  start_at?: string | null;
  end_at?: string | null;
  catch_up?: 'once' | 'skip';
}

/** `POST nbjobs/api/definitions`: a submission saved, with or without a schedule. */
export interface IDefinitionRequest extends ISubmitRequest {
  schedule?: IScheduleSpec | null;
  paused?: boolean;
}

/** One run of a definition, with what its job became. */
export interface IDefinitionRun {
  id: string;
  definition_id: string;
  version: number;
  scheduled_for: string;
  kind: 'tick' | 'catch_up' | 'manual';
  state: 'starting' | 'submitted' | 'refused' | 'skipped';
  reason?: string | null;
  missed?: number;
  job_id?: string | null;
  job_state?: JobState | null;
  output_path?: string | null;
  duration_seconds?: number | null;
  parameters?: { [name: string]: JSONValue };
  parameters_changed?: { [name: string]: [JSONValue, JSONValue] };
}

/** A job definition as its latest version says. */
export interface IDefinition {
  id: string;
  user: string;
  name: string;
  version: number;
  path: string;
  flavor: string;
  parameters: { [name: string]: JSONValue };
  schedule: {
    cron: string;
    timezone: string;
    start_at: string | null;
    end_at: string | null;
    catch_up: 'once' | 'skip';
    /** the schedule in words */
    description: string;
  } | null;
  paused: boolean;
  next_run_at: string | null;
  last_run: IDefinitionRun | null;
}

/** What a notification may be about (`nbjobs notify --on`). */
export type NotifyEvent =
  | 'succeeded'
  | 'failed'
  | 'timed_out'
  | 'cancelled'
  | 'queued_long'
  | 'run_refused';

/** `GET/PUT api/notifications/settings`: where and when a user is told about jobs. */
export interface INotifySettings {
  email: string | null;
  webhook: string | null;
  webhook_format: 'json' | 'slack' | 'teams';
  on: NotifyEvent[];
  queue_minutes?: number | null;
  job_id?: string | null;
  definition_id?: string | null;
  /** false until the code nbjobs mailed to `email` is entered; null without an email */
  email_confirmed?: boolean | null;
  updated_at?: string;
}

/** One message of `GET api/notifications`, with its attempts. */
export interface INotification {
  id: string;
  user: string;
  job_id: string | null;
  event: string;
  channel: 'email' | 'webhook';
  target: string;
  subject: string;
  state: 'pending' | 'sending' | 'sent' | 'failed' | 'held' | 'summarised';
  attempts: { at: string; ok: boolean; error?: string | null }[];
  created_at: string;
}

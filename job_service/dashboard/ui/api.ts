/** The job service's API as the dashboard calls it: with the caller's token, JSON in and out,
 * and the service's own sentence when it says no. */

/** One bad roster entry, as the service names it. */
export interface IRosterProblem {
  index: number;
  student: string;
  reason: string;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly problems: IRosterProblem[] = []
  ) {
    super(message);
  }
}

export interface IMe {
  name: string;
  admin: boolean;
  teacher: boolean;
  groups: string[];
  classes: string[];
}

export interface IGpuCount {
  total: number;
  allocated: number;
  busy: number | null;
}

export interface INodeRow extends IGpuCount {
  node: string;
  gpu_type: string;
  resource: string;
  drained: boolean;
  jobs: string[];
}

export interface ITypeRow extends IGpuCount {
  gpu_type: string;
  nodes: number;
}

export interface IFlavorRow {
  name: string;
  display_name: string;
  running: number;
  queued: number;
  longest_wait_seconds: number | null;
}

export interface IFailure {
  id: string;
  user: string;
  name: string;
  flavor: string;
  state: string;
  message: string | null;
  finished_at: string | null;
}

export interface IOverview {
  generated_at: string;
  backend: { kind: string; ok: boolean; detail: string };
  gpus: IGpuCount;
  nodes: INodeRow[];
  types: ITypeRow[];
  flavors: IFlavorRow[];
  longest_wait: {
    id: string;
    user: string;
    flavor: string;
    waited_seconds: number;
    reason: string | null;
  } | null;
  recent_failures: IFailure[];
}

export interface IQueuedJob {
  id: string;
  name: string;
  user: string;
  flavor: string;
  place: number | null;
  priority: number;
  submitted_at: string;
  waited_seconds: number;
  reason: string | null;
  moved_by: string | null;
  moved_at: string | null;
}

/** A job as the API shows it (what the approvals view reads of it). */
export interface IJob {
  id: string;
  user: string;
  name: string;
  path: string;
  flavor: string;
  state: string;
  submitted_at: string;
  waiting_reason: string | null;
  parameters: Record<string, unknown>;
}

export interface IClass {
  name: string;
  teachers: string[];
  students: string[];
  flavors: string[];
  gpu_hours: number | null;
  period: string;
  queue: string | null;
  source: string;
  extra_hours: Record<string, number>;
}

export interface IFlavor {
  name: string;
  display_name: string;
  gpus: number;
}

export interface INodeView {
  node: string;
  gpus: { gpu_type: string; resource: string; total: number; allocated: number }[];
  drained: boolean;
  drain: { by: string; at: string; reason: string } | null;
  jobs: { id: string; user: string; name: string; flavor: string }[];
}

export interface IUsageDay {
  date: string;
  gpu_hours_allocated: number;
  gpu_hours_busy: number;
}

export interface IUsageLine {
  name: string;
  jobs: number;
  gpu_hours_allocated: number;
  gpu_hours_busy: number;
  busy_percent: number | null;
  cost: number | null;
  days: IUsageDay[];
}

export interface IUsageRow {
  name: string;
  jobs: number;
  running: number;
  queued: number;
  gpu_hours: number;
  gpu_hours_limit: number | null;
}

/** `GET api/storage`: the space users' job files take, and its rules. */
export interface IStorageReport {
  retention_seconds: number | null;
  max_job_files: number | null;
  users: { user: string; job_files: number; jobs: number }[];
}

export interface IUsage {
  period: string;
  users: IUsageRow[];
  range_since: string | null;
  range_until: string | null;
  by: string | null;
  breakdown: IUsageLine[];
  total: IUsageLine | null;
}

export class Api {
  constructor(
    readonly base: string,
    readonly token: string
  ) {}

  async get<T>(path: string, query: Record<string, string> = {}): Promise<T> {
    return this.call<T>('GET', path, query);
  }

  async post<T>(path: string, body: unknown = {}): Promise<T> {
    return this.call<T>('POST', path, {}, body);
  }

  async delete<T>(path: string): Promise<T> {
    return this.call<T>('DELETE', path);
  }

  async call<T>(
    method: string,
    path: string,
    query: Record<string, string> = {},
    body?: unknown
  ): Promise<T> {
    const url = new URL(this.base + path, window.location.href);
    for (const [key, value] of Object.entries(query)) {
      if (value) {
        url.searchParams.set(key, value);
      }
    }
    const headers: Record<string, string> = { Authorization: `token ${this.token}` };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
    }
    let response: Response;
    try {
      response = await fetch(url.toString(), {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        credentials: 'omit'
      });
    } catch {
      throw new ApiError(0, 'the job service does not answer; is it running?');
    }
    const text = await response.text();
    let answer: unknown = null;
    try {
      answer = text ? JSON.parse(text) : null;
    } catch {
      answer = null;
    }
    if (!response.ok) {
      const said = answer as { message?: string; problems?: IRosterProblem[] } | null;
      throw new ApiError(
        response.status,
        said?.message || `the job service answered ${response.status}`,
        said?.problems ?? []
      );
    }
    return answer as T;
  }
}

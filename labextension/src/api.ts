/**
 * Calls to the nbjobs server extension (`{base_url}nbjobs/api/...`).
 *
 * Every failure becomes an `NbjobsError` whose message is a sentence for the
 * user: the job service's own sentence when it gave one, else what is wrong
 * (the server extension is missing, the server cannot be reached) and what to do.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { DEFAULT_QUERY, type IJobQuery, PAGE_SIZE, listParams } from './joblist';
import { type Translate, plain } from './translate';
import type {
  IDefinition,
  IDefinitionRequest,
  IDefinitionRun,
  IFlavor,
  IJob,
  IJobList,
  IJobMetrics,
  IMe,
  INotification,
  INotifySettings,
  INotifySettingsInfo,
  ISubmitRequest
} from './types';

/** Why a call failed, for deciding how to show it. */
export type FailureKind =
  /** the server extension is not there (404 on its URL) */
  | 'missing'
  /** the Jupyter server, or the job service behind it, cannot be reached */
  | 'unreachable'
  /** the job service refused or failed, and said why */
  | 'refused';

export class NbjobsError extends Error {
  constructor(
    message: string,
    readonly kind: FailureKind,
    readonly status: number
  ) {
    super(message);
  }
}

/** The client of one Jupyter server's nbjobs API. */
export class NbjobsAPI {
  constructor(
    private readonly trans: Translate = plain,
    readonly settings: ServerConnection.ISettings = ServerConnection.makeSettings()
  ) {}

  /** The absolute URL of an API path (for links and tests). */
  url(path: string): string {
    return URLExt.join(this.settings.baseUrl, 'nbjobs', 'api', path);
  }

  flavors(): Promise<IFlavor[]> {
    return this.json<IFlavor[]>('flavors');
  }

  /**
   * One page of the jobs `query` asks for, newest first: the newest page, or the
   * one after job `page.before` (the last job of the page the caller holds).
   */
  jobs(
    query: IJobQuery = DEFAULT_QUERY,
    page: { limit?: number; before?: string | null } = {}
  ): Promise<IJobList> {
    const params = listParams(query, { limit: page.limit ?? PAGE_SIZE, before: page.before });
    return this.json<IJobList>(`jobs?${params}`);
  }

  /** One job (any of the caller's, however old). */
  job(id: string): Promise<IJob> {
    return this.json<IJob>(`jobs/${encodeURIComponent(id)}`);
  }

  /** Who the user is to nbjobs (admin, teacher, the classes they teach). */
  me(): Promise<IMe> {
    return this.json<IMe>('me');
  }

  submit(request: ISubmitRequest): Promise<IJob> {
    return this.json<IJob>('jobs', { method: 'POST', body: JSON.stringify(request) });
  }

  /** Save a submission as a definition (with a schedule, it runs by itself). */
  createDefinition(request: IDefinitionRequest): Promise<IDefinition> {
    return this.json<IDefinition>('definitions', {
      method: 'POST',
      body: JSON.stringify(request)
    });
  }

  definitions(): Promise<IDefinition[]> {
    return this.json<{ definitions: IDefinition[] }>('definitions').then(a => a.definitions);
  }

  /** A definition's runs, newest first. */
  definitionRuns(id: string): Promise<IDefinitionRun[]> {
    return this.json<{ runs: IDefinitionRun[] }>(`definitions/${encodeURIComponent(id)}/runs`).then(
      a => a.runs
    );
  }

  /** Pause, resume or run a definition now. */
  definitionAction(id: string, action: 'pause' | 'resume'): Promise<IDefinition>;
  definitionAction(id: string, action: 'run'): Promise<IDefinitionRun>;
  definitionAction(
    id: string,
    action: 'pause' | 'resume' | 'run'
  ): Promise<IDefinition | IDefinitionRun> {
    return this.json(`definitions/${encodeURIComponent(id)}/${action}`, { method: 'POST' });
  }

  /** Edit a definition (a new version); `schedule: null` removes its schedule. */
  updateDefinition(
    id: string,
    change: Partial<Omit<IDefinitionRequest, 'path' | 'paused'>>
  ): Promise<IDefinition> {
    return this.json<IDefinition>(`definitions/${encodeURIComponent(id)}`, {
      method: 'PATCH',
      body: JSON.stringify(change)
    });
  }

  async deleteDefinition(id: string): Promise<void> {
    await this.fetch(`definitions/${encodeURIComponent(id)}`, { method: 'DELETE' });
  }

  /** The user's notification settings (all jobs, and per job or definition). */
  notifySettings(): Promise<INotifySettingsInfo[]> {
    return this.json<{ settings: INotifySettingsInfo[] }>('notifications/settings').then(
      a => a.settings
    );
  }

  /** Remove a definition's (or job's) own setting: it follows the user's again. */
  async removeNotifySettings(scope: { definition?: string; job?: string }): Promise<void> {
    const query = new URLSearchParams(scope as Record<string, string>).toString();
    await this.fetch(`notifications/settings?${query}`, { method: 'DELETE' });
  }

  saveNotifySettings(settings: INotifySettings): Promise<INotifySettingsInfo> {
    return this.json<INotifySettingsInfo>('notifications/settings', {
      method: 'PUT',
      body: JSON.stringify(settings)
    });
  }

  /** Confirm an address with the code nbjobs mailed to it; the address. */
  confirmAddress(code: string): Promise<string> {
    return this.json<{ address: string }>('notifications/confirm', {
      method: 'POST',
      body: JSON.stringify({ code })
    }).then(a => a.address);
  }

  /** The user's latest messages, newest first. */
  notifications(limit = 10): Promise<INotification[]> {
    return this.json<{ notifications: INotification[] }>(`notifications?limit=${limit}`).then(
      a => a.notifications
    );
  }

  cancel(id: string): Promise<IJob> {
    return this.json<IJob>(`jobs/${encodeURIComponent(id)}/cancel`, { method: 'POST' });
  }

  /** Run a finished job's notebook again; `changes` (flavor, parameters, name) as asked. */
  rerun(
    id: string,
    changes?: Omit<ISubmitRequest, 'path' | 'flavor' | 'parameters'> & {
      flavor?: string;
      parameters?: object;
    }
  ): Promise<IJob> {
    return this.json<IJob>(`jobs/${encodeURIComponent(id)}/rerun`, {
      method: 'POST',
      ...(changes ? { body: JSON.stringify(changes) } : {})
    });
  }

  /**
   * Mark a finished job's output trusted in this server (its owner ran the code), so
   * that its HTML and JavaScript outputs show; answered by the server extension.
   */
  async trust(id: string): Promise<void> {
    await this.fetch(`jobs/${encodeURIComponent(id)}/trust`, { method: 'POST' });
  }

  async remove(id: string): Promise<void> {
    await this.fetch(`jobs/${encodeURIComponent(id)}`, { method: 'DELETE' });
  }

  /**
   * The job's telemetry: its samples (only those taken after `since`, an ISO time
   * the caller already has, when given), its summary so far and the hint.
   */
  metrics(id: string, since?: string | null): Promise<IJobMetrics> {
    const query = since ? `?since=${encodeURIComponent(since)}` : '';
    return this.json<IJobMetrics>(`jobs/${encodeURIComponent(id)}/metrics${query}`);
  }

  /** The service's stream of events (`events.ts` reads it), until `signal` aborts it. */
  events(signal: AbortSignal): Promise<Response> {
    return this.fetch('events', { signal });
  }

  /**
   * The log from `offset` bytes on, or its last `tail` bytes; with `follow`, a stream
   * that lasts until the job ends. The response's `X-Log-Offset` header says at which
   * byte of the log it starts. `rank`: the log of that rank of a job on several nodes
   * (unsaid, the job's own: rank 0's).
   */
  logs(
    id: string,
    options: {
      follow?: boolean;
      offset?: number;
      tail?: number;
      rank?: number;
      signal?: AbortSignal;
    } = {}
  ): Promise<Response> {
    const from =
      options.tail !== undefined ? `tail=${options.tail}` : `offset=${options.offset ?? 0}`;
    const rank = options.rank !== undefined ? `&rank=${options.rank}` : '';
    const query = `follow=${options.follow ? 1 : 0}&${from}${rank}`;
    return this.fetch(`jobs/${encodeURIComponent(id)}/logs?${query}`, {
      signal: options.signal
    });
  }

  private async json<T>(path: string, init: RequestInit = {}): Promise<T> {
    const response = await this.fetch(path, init);
    return (await response.json()) as T;
  }

  private async fetch(path: string, init: RequestInit): Promise<Response> {
    let response: Response;
    try {
      response = await ServerConnection.makeRequest(this.url(path), init, this.settings);
    } catch (error) {
      if ((error as Error)?.name === 'AbortError') {
        throw error;
      }
      throw new NbjobsError(
        this.trans(
          'JupyterLab cannot reach its server. Check your network connection, then reload the page.'
        ),
        'unreachable',
        0
      );
    }
    if (response.ok) {
      return response;
    }
    throw await this.failure(response);
  }

  private async failure(response: Response): Promise<NbjobsError> {
    let message: string | null = null;
    try {
      const body = await response.json();
      message = typeof body?.message === 'string' && body.message ? body.message : null;
    } catch {
      // not JSON: a page from the server or a proxy, not from nbjobs
    }
    const status = response.status;
    if (status === 404 && message === null) {
      return new NbjobsError(
        this.trans(
          'The nbjobs server extension is not running in this Jupyter server, so jobs cannot be submitted from here. Ask your admin to install nbjobs where the server runs (`jupyter server extension list` should show nbjobs enabled).'
        ),
        'missing',
        status
      );
    }
    if (status === 502 || status === 503 || status === 504) {
      return new NbjobsError(
        message ??
          this.trans(
            'The nbjobs job service is not answering; try again in a minute, or ask your admin.'
          ),
        'unreachable',
        status
      );
    }
    if (status === 403 && message && /xsrf/i.test(message)) {
      message = this.trans('Your session has expired; reload the page and log in again.');
    }
    return new NbjobsError(
      message ?? this.trans('The server answered %1 %2.', status, response.statusText),
      'refused',
      status
    );
  }
}

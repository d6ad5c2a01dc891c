/** The job service's API as the dashboard calls it: with the caller's token, JSON in and out,
 * and the service's own sentence when it says no. */

import type * as api from '../../../api/openapi';

/* The API's bodies, generated from api/openapi.yaml (api/openapi.d.ts, shared with the
 * Lab extension), by the names the dashboard uses. */

/** One bad roster entry, as the service names it. */
export type IRosterProblem = NonNullable<api.ErrorBody['problems']>[number];
/** `POST api/roster-check`: what a roster would do, entry by entry. */
export type IRosterChecked = api.RosterChecked;

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly problems: IRosterProblem[] = []
  ) {
    super(message);
  }
}

export type IMe = api.Me;
export type IGpuCount = api.GpuCount;
export type INodeRow = api.NodeRow;
export type ITypeRow = api.TypeRow;
export type IFlavorRow = api.FlavorRow;
export type IFailure = api.Failure;
export type IOverview = api.Overview;
/** A Kueue queue: its GPU quota, use, and what it borrows and lends. */
export type IQueueRow = api.QueueUse;
export type IQueuedJob = api.QueuedJob;
/** A job as the API shows it (what the approvals view reads of it). */
export type IJob = api.Job;
export type IClass = api.ClassInfo;
/** A one-time link for a new account to choose its password (`POST api/invitations`). */
export type IInvitation = api.InvitationInfo;
export type IFlavor = api.FlavorInfo;
export type INodeView = api.NodeView;
export type IUsageLine = api.UsageLine;
export type IUsageDay = IUsageLine['days'][number];
export type IUsageRow = api.UsageRow;
/** `GET api/storage`: the space users' job files take, and its rules. */
export type IStorageReport = api.StorageReport;
export type IUsage = api.Usage;
/** A credit account, with its balance (`GET api/credits`). */
export type ICreditAccount = api.CreditAccount;
/** An account with every grant and charge (`GET api/credits/{account}`). */
export type ICreditStatement = api.CreditStatement;
export type IAuditEntry = api.AuditEntry;
export type IAuditList = api.AuditList;
/** `POST api/jobs/{id}/result/link`: where a job's result opens, once. */
export type IResultLink = api.ResultLink;
/** GET api/dashboard/users: what becomes of a deleted user’s things, and who was deleted. */
export type IUsersView = api.UsersView;
export type IDeletedUser = api.DeletedUser;

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

  /** The service's stream of events (`GET api/events`), until `signal` aborts it. */
  events(signal: AbortSignal): Promise<Response> {
    return this.send('GET', 'events', {}, undefined, signal);
  }

  /** A text answer (a log, a rendered result), as the service sent it. */
  async text(path: string, query: Record<string, string> = {}): Promise<string> {
    return (await this.send('GET', path, query)).text();
  }

  async call<T>(
    method: string,
    path: string,
    query: Record<string, string> = {},
    body?: unknown
  ): Promise<T> {
    const text = await (await this.send(method, path, query, body)).text();
    try {
      return (text ? JSON.parse(text) : null) as T;
    } catch {
      return null as T;
    }
  }

  /** The response to one request, with the caller's token; an `ApiError` with the
   * service's own sentence when it says no, or when it does not answer. */
  private async send(
    method: string,
    path: string,
    query: Record<string, string>,
    body?: unknown,
    signal?: AbortSignal
  ): Promise<Response> {
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
        credentials: 'omit',
        signal
      });
    } catch {
      throw new ApiError(0, 'the job service does not answer; is it running?');
    }
    if (response.ok) {
      return response;
    }
    let said: { message?: string; problems?: IRosterProblem[] } | null = null;
    try {
      said = JSON.parse(await response.text());
    } catch {
      said = null; // not the service's JSON (a proxy's page)
    }
    throw new ApiError(
      response.status,
      said?.message || `the job service answered ${response.status}`,
      said?.problems ?? []
    );
  }
}

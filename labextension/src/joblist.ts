/**
 * The Jobs panel's list, a page at a time from the job service: what to ask for,
 * and how the pages join into one list that never shows a job twice.
 *
 * The service searches and filters (`GET jobs?q=…&state=…&scope=…`), so a search
 * finds jobs older than the page the panel holds. The panel polls the newest page
 * only; older pages, loaded with `before=<the last job's id>`, stay as loaded.
 * Pure functions, tested on their own; `JobsModel` applies them.
 */
import type { SCOPES } from './contract';
import { elapsedSeconds, jobActions } from './format';
import type { IJob, IMe, JobState } from './types';

/** Which jobs the panel's state select shows. */
export type Show = 'all' | 'active' | 'ended' | 'failed';

/** Whose jobs: the user's, theirs and their students', everyone's (admins). */
export type Scope = (typeof SCOPES)[number];

/** What the panel asks the service for. */
export interface IJobQuery {
  /** words typed in the search box */
  search: string;
  show: Show;
  /** null: the service's default (admins everyone's, others their own) */
  scope: Scope | null;
}

/** The panel as it opens: every job of the user's, no search. */
export const DEFAULT_QUERY: IJobQuery = { search: '', show: 'all', scope: null };

/** Jobs per page: the newest page (polled) and each older page. */
export const PAGE_SIZE = 100;

/** The longest search the service takes (`q`); the search box stops there. */
export { MAX_SEARCH_CHARS } from './contract';

/** The job states each choice of the state select stands for; null: any. */
export const SHOW_STATES: Readonly<Record<Show, readonly JobState[] | null>> = {
  all: null,
  active: ['pending_approval', 'queued', 'starting', 'running'],
  ended: ['succeeded', 'failed', 'cancelled', 'timed_out'],
  failed: ['failed', 'timed_out']
};

/** The search's words, as the service splits them. */
export function searchWords(search: string): string[] {
  return search.toLowerCase().split(/\s+/).filter(Boolean);
}

/** Whether a query is the panel's default (its newest page is the plain job list). */
export function isDefaultQuery(query: IJobQuery): boolean {
  return searchWords(query.search).length === 0 && query.show === 'all' && query.scope === null;
}

/** Whether two queries ask for the same jobs. */
export function sameQuery(a: IJobQuery, b: IJobQuery): boolean {
  return (
    searchWords(a.search).join(' ') === searchWords(b.search).join(' ') &&
    a.show === b.show &&
    a.scope === b.scope
  );
}

/** The query string of `GET jobs` for one page of `query`'s jobs. */
export function listParams(
  query: IJobQuery,
  page: { limit: number; before?: string | null }
): string {
  const params = new URLSearchParams();
  const words = searchWords(query.search);
  if (words.length) {
    params.set('q', words.join(' '));
  }
  const states = SHOW_STATES[query.show];
  if (states) {
    params.set('state', states.join(','));
  }
  if (query.scope) {
    params.set('scope', query.scope);
  }
  if (page.before) {
    params.set('before', page.before);
  }
  params.set('limit', String(page.limit));
  return params.toString();
}

/**
 * Whether the service would list `job` for `query` (whose jobs aside): every word
 * part of its name, notebook, flavor or owner, or the start of its id. The panel
 * filters what it holds with it while the service's answer is on its way.
 */
export function matchesQuery(job: IJob, query: IJobQuery): boolean {
  const states = SHOW_STATES[query.show];
  if (states && !states.includes(job.state)) {
    return false;
  }
  const fields = [job.name, job.path, job.flavor, job.user].map(f => f.toLowerCase());
  return searchWords(query.search).every(
    word => job.id.startsWith(word) || fields.some(f => f.includes(word))
  );
}

/** The list after a poll's newest page, and whether it kept older jobs it held. */
export interface IMerged {
  jobs: IJob[];
  keptOlder: boolean;
}

/**
 * Join a fresh newest page to the list shown, newest first, each job once.
 *
 * The page replaces what it covers (a job that left it, removed or no longer
 * matching, goes); the jobs shown after the page's last job stay as loaded:
 * older pages, and jobs that new arrivals pushed off the page. When the page's
 * last job is not among those shown, more jobs arrived than a page holds, and
 * what was shown after it may be far older: the list starts again from the page,
 * rather than hide a gap.
 */
export function mergeNewest(shown: readonly IJob[], page: readonly IJob[], more: boolean): IMerged {
  if (!more || page.length === 0) {
    return { jobs: page.slice(), keptOlder: false };
  }
  const last = page[page.length - 1].id;
  const at = shown.findIndex(job => job.id === last);
  if (at < 0) {
    return { jobs: page.slice(), keptOlder: false };
  }
  const inPage = new Set(page.map(job => job.id));
  const older = shown.slice(at + 1).filter(job => !inPage.has(job.id));
  return { jobs: [...page, ...older], keptOlder: older.length > 0 };
}

/** The list with an older page after it; a job it already holds is not added again. */
export function appendOlder(shown: readonly IJob[], page: readonly IJob[]): IJob[] {
  const have = new Set(shown.map(job => job.id));
  return [...shown, ...page.filter(job => !have.has(job.id))];
}

/** Whether older jobs follow a page; from `total` where a service does not say `more`. */
export function pageHasMore(page: {
  jobs: readonly unknown[];
  total: number;
  offset: number;
  more?: boolean;
}): boolean {
  return page.more ?? page.offset + page.jobs.length < page.total;
}

/**
 * The "whose jobs" choices the panel offers, in the order shown: admins their own,
 * their classes' or everyone's; teachers their own or their classes'; anyone else
 * none (no select).
 */
export function scopeChoices(me: IMe | null): Scope[] {
  if (me?.admin) {
    return ['mine', 'classes', 'all'];
  }
  if (me && (me.teacher || me.classes.length > 0)) {
    return ['mine', 'classes'];
  }
  return [];
}

/** Whose jobs the service lists when not told: admins everyone's, others their own. */
export function defaultScope(me: IMe | null): Scope {
  return me?.admin ? 'all' : 'mine';
}

// -- the Notebook Jobs page's table ----------------------------------------------

/** The columns a table can be sorted by. */
export type SortKey = 'name' | 'state' | 'flavor' | 'user' | 'submitted' | 'took' | 'gpuHours';

export interface ISort {
  key: SortKey;
  descending: boolean;
}

/** Newest first, as the service lists them. */
export const DEFAULT_SORT: ISort = { key: 'submitted', descending: true };

/** A job's value in a column, for sorting. */
function sortValue(job: IJob, key: SortKey, now: Date): string | number {
  switch (key) {
    case 'name':
      return job.name.toLowerCase();
    case 'state':
      return job.state;
    case 'flavor':
      return job.flavor;
    case 'user':
      return job.user;
    case 'submitted':
      return Date.parse(job.submitted_at);
    case 'took':
      return job.started_at ? elapsedSeconds(job, now) : -1;
    case 'gpuHours':
      return job.gpu_hours;
  }
}

/** The jobs in the order of a column (ties keep the service's order: newest first). */
export function sortJobs(jobs: readonly IJob[], sort: ISort, now: Date = new Date()): IJob[] {
  const order = sort.descending ? -1 : 1;
  return jobs
    .map((job, index) => ({ job, index, value: sortValue(job, sort.key, now) }))
    .sort((a, b) => {
      if (a.value < b.value) {
        return -order;
      }
      if (a.value > b.value) {
        return order;
      }
      return a.index - b.index;
    })
    .map(item => item.job);
}

/** Of the selected jobs, those a bulk action applies to: active ones can be cancelled,
 * the caller's ended ones deleted. */
export function bulkTargets(
  jobs: readonly IJob[],
  me: string | null
): { cancel: IJob[]; remove: IJob[] } {
  return {
    cancel: jobs.filter(job => jobActions(job, me).cancel.enabled),
    remove: jobs.filter(job => jobActions(job, me).remove.enabled)
  };
}

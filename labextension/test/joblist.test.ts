import { describe, expect, it } from 'vitest';

import {
  DEFAULT_QUERY,
  type IJobQuery,
  appendOlder,
  defaultScope,
  isDefaultQuery,
  listParams,
  matchesQuery,
  mergeNewest,
  pageHasMore,
  sameQuery,
  scopeChoices
} from '../src/joblist';
import type { IJob, IMe, JobState } from '../src/types';

function job(id: string, state: JobState = 'succeeded', extra: Partial<IJob> = {}): IJob {
  return {
    id,
    state,
    name: `job ${id}`,
    path: 'work/train.ipynb',
    flavor: 'cpu',
    user: 'ada',
    ...extra
  } as IJob;
}

const ids = (jobs: readonly IJob[]) => jobs.map(j => j.id);

function me(extra: Partial<IMe> = {}): IMe {
  return { name: 'ada', admin: false, teacher: false, groups: [], classes: [], ...extra };
}

describe('listParams', () => {
  it('asks for the newest page alone when nothing is filtered', () => {
    expect(listParams(DEFAULT_QUERY, { limit: 100 })).toBe('limit=100');
  });

  it('sends the search as words, the state choice as states, the scope and the cursor', () => {
    const query: IJobQuery = { search: '  Clean   DATA ', show: 'failed', scope: 'classes' };
    const params = new URLSearchParams(listParams(query, { limit: 50, before: 'abc123' }));
    expect(params.get('q')).toBe('clean data');
    expect(params.get('state')).toBe('failed,timed_out');
    expect(params.get('scope')).toBe('classes');
    expect(params.get('before')).toBe('abc123');
    expect(params.get('limit')).toBe('50');
  });

  it('asks for every waiting or running state under "Waiting or running"', () => {
    const params = new URLSearchParams(
      listParams({ ...DEFAULT_QUERY, show: 'active' }, { limit: 1 })
    );
    expect(params.get('state')).toBe('pending_approval,queued,starting,running');
  });

  it('escapes what is typed, so a search cannot add parameters', () => {
    const params = new URLSearchParams(
      listParams({ ...DEFAULT_QUERY, search: '50%&scope=all' }, { limit: 1 })
    );
    expect(params.get('q')).toBe('50%&scope=all');
    expect(params.get('scope')).toBeNull();
  });
});

describe('queries', () => {
  it('calls a blank search with every state and no scope the default', () => {
    expect(isDefaultQuery({ search: '   ', show: 'all', scope: null })).toBe(true);
    expect(isDefaultQuery({ search: '', show: 'ended', scope: null })).toBe(false);
    expect(isDefaultQuery({ search: '', show: 'all', scope: 'mine' })).toBe(false);
  });

  it('calls two searches the same when their words are', () => {
    expect(
      sameQuery({ ...DEFAULT_QUERY, search: 'a  B' }, { ...DEFAULT_QUERY, search: 'a b ' })
    ).toBe(true);
    expect(sameQuery({ ...DEFAULT_QUERY, search: 'a' }, { ...DEFAULT_QUERY, search: 'ab' })).toBe(
      false
    );
  });

  it('matches as the service does: every word, in a field or at the start of the id', () => {
    const j = job('c0ffee01', 'failed', { name: 'Clean data', user: 'bob', flavor: 'gpu' });
    const q = (search: string, show: IJobQuery['show'] = 'all') => ({ search, show, scope: null });
    expect(matchesQuery(j, q('clean DATA'))).toBe(true);
    expect(matchesQuery(j, q('train.ipynb bob gpu'))).toBe(true);
    expect(matchesQuery(j, q('c0ff'))).toBe(true);
    expect(matchesQuery(j, q('ffee'))).toBe(false); // inside the id, not its start
    expect(matchesQuery(j, q('clean ada'))).toBe(false);
    expect(matchesQuery(j, q('', 'failed'))).toBe(true);
    expect(matchesQuery(j, q('', 'active'))).toBe(false);
  });
});

describe('mergeNewest', () => {
  it('takes the page whole when nothing older follows it', () => {
    const merged = mergeNewest([job('3'), job('2'), job('1')], [job('4'), job('3')], false);
    expect(ids(merged.jobs)).toEqual(['4', '3']);
    expect(merged.keptOlder).toBe(false);
  });

  it('keeps the older pages after the fresh newest page, each job once', () => {
    const shown = ['6', '5', '4', '3', '2', '1'].map(id => job(id));
    const merged = mergeNewest(shown, [job('6', 'failed'), job('5'), job('4')], true);
    expect(ids(merged.jobs)).toEqual(['6', '5', '4', '3', '2', '1']);
    expect(merged.jobs[0].state).toBe('failed'); // the poll's news wins
    expect(merged.keptOlder).toBe(true);
  });

  it('keeps the jobs that new arrivals pushed off the page: no gap before "show older"', () => {
    const shown = ['5', '4', '3'].map(id => job(id));
    const merged = mergeNewest(shown, [job('7'), job('6'), job('5')], true);
    expect(ids(merged.jobs)).toEqual(['7', '6', '5', '4', '3']);
  });

  it('drops a job gone from within the page (removed, or no longer matching)', () => {
    const shown = ['5', '4', '3', '2'].map(id => job(id));
    const merged = mergeNewest(shown, [job('5'), job('3')], true);
    expect(ids(merged.jobs)).toEqual(['5', '3', '2']);
  });

  it('starts again from the page when more jobs arrived than it holds', () => {
    const shown = ['3', '2', '1'].map(id => job(id));
    const merged = mergeNewest(shown, [job('9'), job('8')], true);
    expect(ids(merged.jobs)).toEqual(['9', '8']);
    expect(merged.keptOlder).toBe(false);
  });
});

describe('appendOlder', () => {
  it('adds an older page after the list, skipping what the list holds', () => {
    const shown = ['5', '4', '3'].map(id => job(id));
    expect(ids(appendOlder(shown, [job('3'), job('2'), job('1')]))).toEqual([
      '5',
      '4',
      '3',
      '2',
      '1'
    ]);
  });

  it('pages through thousands without a job twice', () => {
    const all = Array.from({ length: 2000 }, (_, i) => job(String(2000 - i)));
    let shown: IJob[] = [];
    for (let at = 0; at < all.length; at += 100) {
      shown = appendOlder(shown, all.slice(Math.max(0, at - 1), at + 100)); // pages overlap by one
    }
    expect(ids(shown)).toEqual(ids(all));
  });
});

describe('pageHasMore', () => {
  it('believes the service when it says, else counts', () => {
    expect(pageHasMore({ jobs: [1], total: 5, offset: 0, more: false })).toBe(false);
    expect(pageHasMore({ jobs: [1, 2], total: 5, offset: 0 })).toBe(true);
    expect(pageHasMore({ jobs: [1, 2], total: 5, offset: 3 })).toBe(false);
  });
});

describe('scopeChoices', () => {
  it('offers admins three choices, starting at everyone', () => {
    expect(scopeChoices(me({ admin: true }))).toEqual(['mine', 'classes', 'all']);
    expect(defaultScope(me({ admin: true }))).toBe('all');
  });

  it('offers teachers their own and their classes, starting at their own', () => {
    expect(scopeChoices(me({ teacher: true }))).toEqual(['mine', 'classes']);
    expect(scopeChoices(me({ classes: ['ml101'] }))).toEqual(['mine', 'classes']);
    expect(defaultScope(me({ teacher: true }))).toBe('mine');
  });

  it('offers students nothing', () => {
    expect(scopeChoices(me())).toEqual([]);
    expect(scopeChoices(null)).toEqual([]);
  });
});

import { describe, expect, it } from 'vitest';

import { outcomeText, policyText } from '../users';

const retired = {
  name: 'ada',
  noticed_at: '2026-11-29T03:01:00Z',
  why: 'deleted in the hub',
  action: 'archive' as const,
  archived_as: 'ada/deleted-20261129T030100Z',
  jobs: 3,
  cancelled: 1,
  definitions: 1,
  settings: 2,
  folder: '/srv/nbjobs/home/.nbjobs-deleted/ada-20261129T030100Z',
  account: 'jupyter-ada',
  problems: null
};

describe('outcomeText', () => {
  it('says what was archived, where the folder went and which account went', () => {
    expect(outcomeText(retired)).toBe(
      '3 job(s) (1 cancelled), 1 definition(s), 2 notification setting(s) archived as ' +
        'ada/deleted-20261129T030100Z; folder moved to ' +
        '/srv/nbjobs/home/.nbjobs-deleted/ada-20261129T030100Z; OS account jupyter-ada removed'
    );
  });

  it('says what was removed', () => {
    expect(
      outcomeText({ ...retired, action: 'remove', folder: null, account: null, cancelled: 0 })
    ).toBe('3 job(s), 1 definition(s), 2 notification setting(s) removed; folder removed');
  });
});

describe('policyText', () => {
  it('names the setting and when a deletion is noticed', () => {
    const text = policyText({ on_delete: 'remove', check_every: 60, in_hub: true });
    expect(text).toContain('noticed within 60 s');
    expect(text).toContain('are removed');
    expect(text).toContain('users.on_delete: remove in nbjobs.yaml');
  });
});

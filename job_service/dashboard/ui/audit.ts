/** The dashboard's Audit (admins): who opened another person's job log or result. */

import { IAuditList } from './api';
import { h, table } from './dom';
import { when } from './format';
import { Page } from './page';

/** Who read another person's log or result (admins). */
export async function auditView(page: Page): Promise<void> {
  let list: IAuditList;
  try {
    list = await page.api.get<IAuditList>('audit', { limit: '200' });
  } catch (error) {
    page.fail(error);
    return;
  }
  if (page.view !== 'audit') {
    return;
  }
  page.main.replaceChildren(
    h('h2', {}, 'Audit'),
    h(
      'p',
      { class: 'nbjobs-Hint' },
      "Each time a teacher or an admin opened another person's job log or result " +
        '(one entry per reader, job and kind within 10 minutes), newest first.'
    ),
    list.entries.length
      ? table(
          ['When', 'Reader', 'Owner', 'Job', 'Opened'],
          list.entries.map(e => [when(e.at), e.reader, e.owner, e.job_id, e.what]),
          'Audit list'
        )
      : h('p', { class: 'nbjobs-Hint' }, "Nobody has opened another person's work yet."),
    list.more ? h('p', { class: 'nbjobs-Hint' }, 'Older entries: GET api/audit?before=…') : ''
  );
}

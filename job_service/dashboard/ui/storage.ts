/** The dashboard's Storage: what each user's job files hold (their own for a user,
 * everyone's for an admin). */

import { IStorageReport } from './api';
import { h, table, meter } from './dom';
import { bytes } from './format';
import { Page } from './page';

export async function storageView(page: Page): Promise<void> {
  let report: IStorageReport;
  try {
    report = await page.api.get<IStorageReport>('storage');
  } catch (error) {
    page.fail(error);
    return;
  }
  const limit = report.max_job_files;
  const days = report.retention_seconds === null ? null : report.retention_seconds / 86_400;
  const rules = h(
    'p',
    {},
    limit === null
      ? 'No limit on job files per user. '
      : `Each user may keep ${bytes(limit)} of job files. `,
    days === null
      ? 'Ended jobs keep their inputs until they are deleted.'
      : `An ended job's input is removed ${days} days after it ended; its log and output stay until the job is deleted.`
  );
  const rows = report.users.map(u => [
    u.user,
    String(u.jobs),
    limit === null ? bytes(u.job_files) : meter(u.job_files, limit, `${u.user}'s job files`, bytes),
    // where the user's results are written, as people know the place, and the room left
    u.folder,
    u.free_bytes === null ? '–' : bytes(u.free_bytes)
  ]);
  page.main.replaceChildren(
    h('h2', {}, 'Storage'),
    h(
      'p',
      {},
      'The space nbjobs keeps for jobs in each folder (.nbjobs: the notebooks jobs ran, their logs and telemetry). Outputs are written beside the notebooks and are not counted.'
    ),
    rules,
    rows.length
      ? table(['User', 'Jobs', 'Job files', 'Folder', 'Free there'], rows, 'Job files per user')
      : h('p', {}, 'No jobs yet.')
  );
}

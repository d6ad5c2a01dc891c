/** The dashboard's Approvals (teachers, admins): the jobs that wait for a person's yes,
 * approved or rejected with a reason. */

import { IJob } from './api';
import { Said, h, table } from './dom';
import { when } from './format';
import { Page } from './page';

export async function approvalsView(page: Page, said: Said = ''): Promise<void> {
  let jobs: IJob[];
  try {
    jobs = await page.api.get<IJob[]>('dashboard/approvals');
  } catch (error) {
    page.fail(error);
    return;
  }
  const status = page.view === 'approvals' ? page.statusLine(said) : null;
  if (!status) {
    return;
  }
  const rows = jobs.map(job => [
    h('span', {}, job.name, h('br'), h('code', {}, job.id)),
    job.user,
    job.flavor,
    job.path,
    Object.keys(job.parameters).length ? h('code', {}, JSON.stringify(job.parameters)) : 'none',
    when(job.submitted_at),
    decide(page, job, status)
  ]);
  page.main.replaceChildren(
    h('h2', {}, `Approvals: ${jobs.length} waiting`),
    status,
    jobs.length
      ? table(['Job', 'User', 'Flavor', 'Notebook', 'Parameters', 'Asked', ''], rows, 'Approvals')
      : h('p', {}, 'No job waits for your approval.'),
    h(
      'p',
      { class: 'nbjobs-Hint' },
      'An approved job joins the queue; a rejected one is cancelled with your reason. A request nobody answers in time is cancelled: its student was told when.'
    )
  );
}

/** A waiting job's Approve, and its Reject with the reason its owner reads. */
function decide(page: Page, job: IJob, status: HTMLElement): HTMLElement {
  const id = `nbjobs-why-${job.id}`;
  const why = h('input', {
    type: 'text',
    id,
    maxlength: '500',
    placeholder: 'why not (its owner reads it)'
  }) as HTMLInputElement;
  const approve = h('button', { type: 'button', 'data-action': 'approve' }, 'Approve');
  const reject = h('button', { type: 'button', 'data-action': 'reject' }, 'Reject');
  approve.addEventListener('click', () => {
    void (async () => {
      try {
        await page.api.post(`jobs/${job.id}/approve`);
        await approvalsView(page, `Approved ${job.user}'s job ${job.id}: it is queued.`);
      } catch (error) {
        page.failIn(status, error);
      }
    })();
  });
  reject.addEventListener('click', () => {
    if (!why.value.trim()) {
      page.failIn(status, new Error(`Say why ${job.user}'s job is rejected: they read it.`));
      why.focus();
      return;
    }
    void (async () => {
      try {
        await page.api.post(`jobs/${job.id}/reject`, { reason: why.value.trim() });
        await approvalsView(page, `Rejected ${job.user}'s job ${job.id}; they are told why.`);
      } catch (error) {
        page.failIn(status, error);
      }
    })();
  });
  return h(
    'span',
    { class: 'nbjobs-Actions' },
    approve,
    h('label', { for: id, class: 'nbjobs-Hidden' }, `Why ${job.user}'s job is rejected`),
    why,
    reject
  );
}

/** The dashboard's Queue (admins): every queued job in the order it would start, with why
 * it waits, and moving one up or down or cancelling it; Kueue's queues. */

import { IQueuedJob, IQueueRow } from './api';
import { Said, h, table } from './dom';
import { gpus, wait, when } from './format';
import { Page } from './page';

export async function queueView(page: Page, jobs?: IQueuedJob[], said: Said = ''): Promise<void> {
  if (!jobs) {
    try {
      jobs = await page.api.get<IQueuedJob[]>('dashboard/queue');
    } catch (error) {
      page.fail(error);
      return;
    }
  }
  const status = page.view === 'queue' ? page.statusLine(said) : null;
  if (!status) {
    return;
  }
  const last = jobs.filter(j => j.place !== null).length;
  const rows = jobs.map(job => [
    job.place === null ? 'awaiting approval' : String(job.place),
    h('span', {}, job.name, h('br'), h('code', {}, job.id)),
    job.user,
    job.flavor,
    wait(job.waited_seconds),
    job.reason ?? 'not looked at yet',
    job.moved_by
      ? `${job.priority} (set by ${job.moved_by}, ${when(job.moved_at)})`
      : String(job.priority),
    queueActions(page, job, last, status)
  ]);
  page.main.replaceChildren(
    h(
      'h2',
      {},
      `Queue: ${last} waiting${jobs.length > last ? `, ${jobs.length - last} awaiting approval (see Approvals)` : ''}`
    ),
    status,
    jobs.length
      ? table(
          ['#', 'Job', 'User', 'Flavor', 'Waited', 'Why it waits', 'Priority', ''],
          rows,
          'Queue'
        )
      : h('p', {}, 'Nobody waits.'),
    h(
      'p',
      { class: 'nbjobs-Hint' },
      'A move changes the job’s priority; jobs of equal priority take turns by fair share. Quotas and free GPUs may still pass a job over.'
    )
  );
}

/** What an admin does to a queued job: cancel it (after a confirmation) or move it. */
async function act(page: Page, job: IQueuedJob, what: string, status: HTMLElement): Promise<void> {
  try {
    if (what === 'cancel') {
      if (
        !window.confirm(
          `Cancel ${job.user}'s job "${job.name}" (${job.id})? It never ran; ${job.user} is told.`
        )
      ) {
        return;
      }
      await page.api.post(`jobs/${job.id}/cancel`);
      await queueView(page, undefined, `Cancelled ${job.user}'s job ${job.id}.`);
    } else {
      const after = await page.api.post<IQueuedJob[]>(`dashboard/queue/${job.id}/move`, {
        to: what
      });
      const place = after.find(j => j.id === job.id)?.place;
      const queued = after.filter(j => j.place !== null).length;
      await queueView(
        page,
        after,
        `Moved ${job.user}'s job ${job.id} ${what === 'front' || what === 'back' ? `to the ${what}` : what}: now ${place} of ${queued}.`
      );
    }
  } catch (error) {
    page.failIn(status, error);
  }
}

/** A queued job's buttons: to the front, up, down, to the back, cancel. */
function queueActions(page: Page, job: IQueuedJob, last: number, status: HTMLElement): HTMLElement {
  const button = (what: string, label: string, title: string, disabled: boolean): HTMLElement => {
    const b = h('button', {
      type: 'button',
      title,
      'aria-label': `${title}: ${job.name} (${job.id})`,
      'data-move': what
    });
    b.textContent = label;
    (b as HTMLButtonElement).disabled = disabled;
    b.addEventListener('click', () => void act(page, job, what, status));
    return b;
  };
  return h(
    'span',
    { class: 'nbjobs-Actions' },
    button('front', 'Front', 'Move to the front', job.place === 1 || job.place === null),
    button('up', 'Up', 'Move ahead of the job before it', job.place === 1 || job.place === null),
    button(
      'down',
      'Down',
      'Move behind the job after it',
      job.place === last || job.place === null
    ),
    button('back', 'Back', 'Move to the back', job.place === last || job.place === null),
    button('cancel', 'Cancel', 'Cancel this job', false)
  );
}

/** Kueue's queues: each one's GPU quota, use, and what it borrows and lends. */
export function kueueQueues(page: Page, queues: IQueueRow[]): HTMLElement {
  const limit = (value: number | null): string =>
    value === null ? '' : ` (at most ${gpus(value)})`;
  return h(
    'section',
    {},
    h('h2', {}, 'Kueue queues'),
    table(
      ['Queue', 'Cohort', 'GPU quota', 'In use', 'Borrowed', 'Lent (estimated)'],
      queues.map(q => [
        q.local_queue === q.cluster_queue ? q.local_queue : `${q.local_queue} → ${q.cluster_queue}`,
        q.cohort ?? '–',
        gpus(q.nominal),
        gpus(q.used),
        gpus(q.borrowed) + limit(q.borrowing_limit),
        gpus(q.lent) + limit(q.lending_limit)
      ]),
      'Kueue queues'
    ),
    h(
      'p',
      { class: 'nbjobs-Hint' },
      "Borrowed: GPUs a queue uses beyond its quota, from its cohort's unused quota; Kueue takes them back when their queue needs them, and those jobs are queued again. Kueue does not say which queue lent them: the Lent column shares each cohort's borrowed GPUs among the queues that leave quota unused."
    )
  );
}

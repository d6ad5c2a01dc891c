/** A student's job as their teacher (or an admin) opens it from the Classes tab: a page of
 * its own, the dashboard's full width (`#job/<id>`), with the job's details, its result
 * and its log, read-only. Each log or result read is on the admins' audit list. */

import { FINAL_STATES } from '../../../labextension/src/types';
import { IJob, IResultLink } from './api';
import { h } from './dom';
import { hours, when } from './format';
import { Page } from './page';

/** The views' name for a job's page: `job/<id>`, as in the address's hash. */
export const JOB_PAGE = 'job/';

/** Where a job's page is: a link anyone can follow (and come Back from). */
export function jobHref(id: string): string {
  return `#${JOB_PAGE}${encodeURIComponent(id)}`;
}

/** Draw the page of job ``id`` (the view's name is ``job/<id>``). */
export async function jobView(page: Page, id: string): Promise<void> {
  const view = page.view;
  const where = `jobs/${encodeURIComponent(id)}`;
  let job: IJob;
  try {
    job = await page.api.get<IJob>(where);
  } catch (error) {
    page.fail(error);
    return;
  }
  if (page.view !== view) {
    return;
  }
  const started = job.started_at !== null;
  const ended = FINAL_STATES.has(job.state);
  const log = h('pre', { class: 'nbjobs-JobPage-log', 'aria-label': `Log of ${job.name}` });
  const result = h('div', { class: 'nbjobs-JobPage-result' });
  page.main.replaceChildren(
    h('a', { href: '#classes', class: 'nbjobs-Back', 'data-action': 'back' }, '← Classes'),
    h('h2', {}, `${job.user}'s job ${job.name} (${job.id})`),
    h(
      'p',
      { class: 'nbjobs-Hint' },
      'Read-only: nothing here changes the student’s files or runs their notebook. ' +
        'Your admins’ audit list records that you read this log and result.'
    ),
    details(job),
    h('section', { 'aria-label': 'Result' }, h('h3', {}, 'Result'), result),
    h('section', { 'aria-label': 'Log' }, h('h3', {}, 'Log'), log)
  );
  log.textContent = started ? 'Loading…' : 'It has not started: no log yet.';
  if (started) {
    void page.api
      .text(`${where}/logs`)
      .then(text => (log.textContent = text || '(the log is empty)'))
      .catch(error => (log.textContent = `The log could not be read: ${error.message}`));
  }
  if (!ended) {
    result.append(
      h(
        'p',
        { class: 'nbjobs-Hint' },
        `${started ? 'It has not ended yet' : 'It has not started yet'}: the result shows here when it ends (this page follows the job).`
      )
    );
    return;
  }
  if (!job.output_path) {
    result.append(h('p', { class: 'nbjobs-Hint' }, 'It wrote no result notebook.'));
    return;
  }
  try {
    // a link that opens once, in a frame under the result's own policy: its styles
    // apply, nothing in it runs
    const link = await page.api.post<IResultLink>(`${where}/result/link`);
    const frame = h('iframe', {
      class: 'nbjobs-JobPage-frame',
      title: `${job.name}: result`,
      sandbox: ''
    }) as HTMLIFrameElement;
    frame.src = link.url;
    result.append(frame);
  } catch (error) {
    result.append(h('p', { class: 'nbjobs-Error' }, (error as Error).message));
  }
}

/** Whether a pushed change of job ``id`` should draw the page of ``view`` again: it is
 * that job's page, and the job had not ended when it was drawn. */
export function jobPageMoves(view: string, id: string, main: HTMLElement): boolean {
  return view === JOB_PAGE + encodeURIComponent(id) && !main.querySelector('.nbjobs-JobPage-frame');
}

/** The job's details as a list of terms. */
function details(job: IJob): HTMLElement {
  const rows: [string, string][] = [
    ['State', job.state.replace('_', ' ')],
    ['Notebook', job.path],
    ['Result notebook', job.output_path || '–'],
    ['Flavor', job.flavor],
    [
      'GPUs',
      job.gpus?.length ? `${job.gpus.length === 1 ? 'GPU' : 'GPUs'} ${job.gpus.join(', ')}` : 'none'
    ],
    ['Submitted', when(job.submitted_at)],
    ['Started', when(job.started_at) || '–'],
    ['Ended', when(job.finished_at) || '–'],
    ['GPU-hours', hours(job.gpu_hours ?? 0)],
    ['Node', job.node ?? '–']
  ];
  if (job.message) {
    rows.push(['Message', job.message]);
  }
  if (job.error) {
    const cell = job.error.cell_index === null ? '' : ` (cell ${job.error.cell_index + 1})`;
    rows.push(['Error', `${job.error.ename}: ${job.error.evalue}${cell}`]);
  }
  return h(
    'dl',
    { class: 'nbjobs-JobPage-details', 'aria-label': 'Details' },
    ...rows.flatMap(([term, value]) => [h('dt', {}, term), h('dd', {}, value)])
  );
}

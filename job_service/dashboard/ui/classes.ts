/** The dashboard's Classes (teachers, admins): each class's roster, budgets and students'
 * jobs, and the invitations a roster change made. */

import { FINAL_STATES } from '../../../labextension/src/types';
import { IResultLink, IClass, IFlavor, IInvitation, IJob, IUsage, IUsageRow } from './api';
import { h, table, meter } from './dom';
import { gpus, hours, periodSpan, periodWords, when } from './format';
import { Page } from './page';
import { rosterForm, createClassForm } from './roster';

export async function classesView(page: Page, said = ''): Promise<void> {
  let classes: IClass[];
  let flavors: IFlavor[];
  try {
    [classes, flavors] = await Promise.all([
      page.api.get<IClass[]>('classes'),
      page.api.get<IFlavor[]>('flavors')
    ]);
  } catch (error) {
    page.fail(error);
    return;
  }
  if (page.view !== 'classes') {
    return;
  }
  const status = h('p', { class: 'nbjobs-Status', role: 'status' }, said);
  const sections = await Promise.all(classes.map(c => classSection(page, c, status)));
  page.main.replaceChildren(
    h('h2', {}, `Classes: ${classes.length}`),
    status,
    ...invitationsPanel(page),
    ...sections,
    createClassForm(page, flavors, status)
  );
}

/** The invitations to hand out (each link works once, for its own person), or nothing. */
export function invitationsPanel(page: Page): HTMLElement[] {
  if (!page.invitations.length) {
    return [];
  }
  const rows = page.invitations.map(invitation => {
    const link = new URL(invitation.url, window.location.origin).href;
    return [
      invitation.user,
      h('a', { href: link, class: 'nbjobs-InvitationLink' }, link),
      h('code', {}, invitation.code),
      `${invitation.expires_at.slice(0, 16).replace('T', ' ')} UTC`,
      invitation.mailed_to ? `mailed to ${invitation.mailed_to}` : 'not mailed'
    ];
  });
  const panel = h(
    'section',
    { class: 'nbjobs-Invitations', 'aria-label': 'Invitations to hand out' },
    h('h3', {}, 'Invitations to hand out'),
    h(
      'p',
      { class: 'nbjobs-Hint' },
      'Give each person their own link, privately: whoever opens it first chooses that ' +
        "account's password. It works once, until the time shown; they are shown only now."
    ),
    table(['User', 'Link', 'Code', 'Until', 'Mail'], rows, 'Invitations')
  );
  return [panel];
}

export async function classSection(
  page: Page,
  cls: IClass,
  status: HTMLElement
): Promise<HTMLElement> {
  let used = new Map<string, IUsageRow>();
  try {
    // each student's row against their budget, in its period up to now: what a submit
    // is held to, and what the Usage page shows
    const usage = await page.api.get<IUsage>('usage', { by: 'user' });
    used = new Map(usage.users.map(row => [row.name, row]));
  } catch {
    // the table still lists the students, without their hours
  }
  const fromHub = cls.source === 'hub';
  const rows = cls.students.map(student =>
    studentRow(page, cls, student, used.get(student), status)
  );
  const add = fromHub
    ? rosterForm(
        page,
        `Add students to ${cls.name}`,
        'Add',
        async names => {
          const changed = await page.api.post<IClass>(
            `classes/${encodeURIComponent(cls.name)}/students`,
            { students: names }
          );
          page.invitations = changed.invitations;
          return `Added ${names.length} student(s) to ${cls.name}.`;
        },
        status,
        [],
        cls.name
      )
    : null;
  const drop = fromHub ? deleteClassButton(page, cls, status) : null;
  return h(
    'section',
    { class: 'nbjobs-Class', 'aria-label': `Class ${cls.name}` },
    h('h3', {}, cls.name, drop ? ' ' : null, drop),
    h(
      'p',
      { class: 'nbjobs-Hint' },
      `Teachers: ${cls.teachers.join(', ') || 'none'} · flavors: ${cls.flavors.join(', ') || 'as usual'} · ` +
        `${cls.gpu_hours === null ? 'no GPU-hour budget' : `${gpus(cls.gpu_hours)} GPU-hours per student in ${periodWords(cls.period)}`}` +
        `${cls.queue ? ` · queue ${cls.queue}` : ''} · ${fromHub ? 'made in the dashboard or the CLI' : 'from nbjobs.yaml (read-only here)'}`
    ),
    cls.students.length
      ? table(
          ['Student', `Jobs in ${periodWords(cls.period)}`, 'GPU-hours used', 'Granted', ''],
          rows,
          `Students of ${cls.name}`
        )
      : h('p', {}, 'No students yet.'),
    add
  );
}

/** A student's row: their jobs, GPU-hours against the class's budget, and the buttons
 * that extend it, invite them again and remove them. */
function studentRow(
  page: Page,
  cls: IClass,
  student: string,
  line: IUsageRow | undefined,
  status: HTMLElement
): (string | HTMLElement)[] {
  const fromHub = cls.source === 'hub';
  const extra = cls.extra_hours[student] ?? 0;
  const budget = cls.gpu_hours === null ? null : cls.gpu_hours + extra;
  const amount = h('input', {
    type: 'number',
    min: '0.5',
    step: '0.5',
    value: '1',
    'aria-label': `Hours more for ${student}`
  }) as HTMLInputElement;
  const extend = h('button', { type: 'button', 'data-action': 'extend' }, 'Extend');
  extend.addEventListener('click', () => {
    void (async () => {
      try {
        await page.api.post(
          `classes/${encodeURIComponent(cls.name)}/students/${encodeURIComponent(student)}/budget`,
          { hours: Number(amount.value) }
        );
        await classesView(
          page,
          `${student} may use ${amount.value} more GPU-hours in ${cls.name} for the next ${periodSpan(cls.period)}.`
        );
      } catch (error) {
        page.failIn(status, error);
      }
    })();
  });
  const invite = h('button', { type: 'button', 'data-action': 'invite' }, 'Invite');
  invite.addEventListener('click', () => {
    void (async () => {
      try {
        const made = await page.api.post<IInvitation>('invitations', { user: student });
        page.invitations = [made];
        await classesView(page, `A new invitation for ${student}; an earlier one stops working.`);
      } catch (error) {
        page.failIn(status, error);
      }
    })();
  });
  const remove = removeButton(page, cls, student, status);
  return [
    student,
    studentJobs(page, student, line?.jobs ?? 0, status),
    budget === null
      ? `${hours(line?.gpu_hours ?? 0)} (no class budget)`
      : meter(
          line?.gpu_hours ?? 0,
          line?.gpu_hours_limit ?? budget,
          `${student}'s GPU-hours`,
          hours
        ),
    extra ? `+${gpus(extra)} h` : '–',
    h(
      'span',
      { class: 'nbjobs-Actions' },
      cls.gpu_hours === null ? null : amount,
      cls.gpu_hours === null ? null : extend,
      invite,
      fromHub ? remove : null
    )
  ];
}

/** The button that takes a student out of a class, after a confirmation. */
function removeButton(page: Page, cls: IClass, student: string, status: HTMLElement): HTMLElement {
  const remove = h('button', { type: 'button', 'data-action': 'remove' }, 'Remove');
  remove.addEventListener('click', () => {
    if (!window.confirm(`Remove ${student} from ${cls.name}? Their jobs and files stay.`)) {
      return;
    }
    void (async () => {
      try {
        await page.api.call(
          'DELETE',
          `classes/${encodeURIComponent(cls.name)}/students`,
          {},
          { students: [student] }
        );
        await classesView(page, `Removed ${student} from ${cls.name}.`);
      } catch (error) {
        page.failIn(status, error);
      }
    })();
  });
  return remove;
}

/** The button that deletes a class made in the dashboard, after a confirmation. */
function deleteClassButton(page: Page, cls: IClass, status: HTMLElement): HTMLElement {
  const drop = h('button', { type: 'button', 'data-action': 'delete-class' }, `Delete ${cls.name}`);
  drop.addEventListener('click', () => {
    if (
      !window.confirm(
        `Delete class ${cls.name}? Its students' accounts, files and jobs stay; they lose the class's flavors and budget.`
      )
    ) {
      return;
    }
    void (async () => {
      try {
        await page.api.delete(`classes/${encodeURIComponent(cls.name)}`);
        await classesView(page, `Deleted class ${cls.name}.`);
      } catch (error) {
        page.failIn(status, error);
      }
    })();
  });
  return drop;
}

/** A student's job count, a button that lists their latest jobs under it. */
export function studentJobs(
  page: Page,
  student: string,
  count: number,
  status: HTMLElement
): HTMLElement {
  const cell = h('span', { class: 'nbjobs-StudentJobs' });
  const toggle = h(
    'button',
    { type: 'button', 'data-action': 'student-jobs', 'aria-expanded': 'false' },
    String(count)
  );
  toggle.setAttribute('aria-label', `${student}'s jobs`);
  const list = h('div', { class: 'nbjobs-StudentJobs-list' });
  list.hidden = true;
  toggle.addEventListener('click', () => {
    const open = list.hidden;
    list.hidden = !open;
    toggle.setAttribute('aria-expanded', String(open));
    if (!open) {
      return;
    }
    void (async () => {
      try {
        const found = await page.api.get<{ jobs: IJob[] }>('jobs', { user: student, limit: '20' });
        const viewer = h('section', { class: 'nbjobs-Viewer', 'aria-live': 'polite' });
        viewer.hidden = true;
        list.replaceChildren(
          found.jobs.length
            ? table(
                ['Job', 'State', 'Flavor', 'Submitted', ''],
                found.jobs.map(j => [
                  `${j.name} (${j.id})`,
                  j.state.replace('_', ' '),
                  j.flavor,
                  when(j.submitted_at),
                  lookIn(page, j, viewer, status)
                ]),
                `${student}'s latest jobs`
              )
            : h('p', { class: 'nbjobs-Hint' }, `${student} has no jobs.`),
          viewer
        );
      } catch (error) {
        page.failIn(status, error);
      }
    })();
  });
  cell.append(toggle, list);
  return cell;
}

/** A student's job's log and result, opened read-only below the list: the log as
 * text, the result as the service rendered it, in a frame that runs no script. Each
 * opening is on the audit list admins see. */
export function lookIn(
  page: Page,
  job: IJob,
  viewer: HTMLElement,
  status: HTMLElement
): HTMLElement {
  const started = job.started_at !== null;
  const ended = FINAL_STATES.has(job.state);
  const open = (what: 'log' | 'result') => {
    void (async () => {
      try {
        const where = `jobs/${encodeURIComponent(job.id)}`;
        // the log as text; the result by a link that opens it once, in a frame under
        // the result's own policy (its styles apply there, not the dashboard's)
        const text = what === 'log' ? await page.api.text(`${where}/logs`) : '';
        const link =
          what === 'result' ? await page.api.post<IResultLink>(`${where}/result/link`) : null;
        const title = h(
          'h3',
          {},
          `${job.user}'s job ${job.name} (${job.id}): ${what === 'log' ? 'log' : 'result'}, read-only`
        );
        let body: HTMLElement;
        if (what === 'log') {
          body = h('pre', { class: 'nbjobs-Viewer-log' }, text || '(the log is empty)');
        } else {
          const frame = h('iframe', {
            class: 'nbjobs-Viewer-result',
            title: `${job.name}: result`,
            sandbox: ''
          }) as HTMLIFrameElement;
          frame.src = link?.url ?? 'about:blank';
          body = frame;
        }
        const close = h('button', { type: 'button', 'data-action': 'close-viewer' }, 'Close');
        close.addEventListener('click', () => {
          viewer.hidden = true;
          viewer.replaceChildren();
        });
        viewer.replaceChildren(title, close, body);
        viewer.hidden = false;
      } catch (error) {
        page.failIn(status, error);
      }
    })();
  };
  const button = (what: 'log' | 'result', label: string, why: string | null) => {
    const b = h('button', { type: 'button', 'data-action': `view-${what}` }, label);
    b.setAttribute('aria-label', `${label} of ${job.name}`);
    if (why) {
      (b as HTMLButtonElement).disabled = true;
      b.title = why;
    } else {
      b.addEventListener('click', () => open(what));
    }
    return b;
  };
  return h(
    'span',
    { class: 'nbjobs-Actions' },
    button('log', 'Log', started ? null : 'it has not started: no log yet'),
    button(
      'result',
      'Result',
      !started ? 'it never started: no result' : ended ? null : 'it has not ended yet'
    )
  );
}

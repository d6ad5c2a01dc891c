/** The dashboard's Classes (teachers, admins): each class's roster, budgets and students'
 * jobs, and the invitations a roster change made. */

import { IClass, IFlavor, IInvitation, IJob, IUsage, IUsageRow } from './api';
import { askInPlace, h, table, meter, withUnit } from './dom';
import { gpus, hours, periodSpan, periodWords, when } from './format';
import { jobHref } from './job_view';
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
    createClassForm(page, flavors)
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
  const rows = cls.students.map(student => studentRow(page, cls, student, used.get(student)));
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
          const added = changed.students.length - cls.students.length;
          const same = names.length - added;
          return `Added ${added} student(s) to ${cls.name}${same > 0 ? ` (${same} already in it)` : ''}.`;
        },
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
 * that extend it, invite them again and remove them; what goes wrong with a button is
 * said beside it. */
function studentRow(
  page: Page,
  cls: IClass,
  student: string,
  line: IUsageRow | undefined
): (string | HTMLElement)[] {
  const fromHub = cls.source === 'hub';
  const extra = cls.extra_hours[student] ?? 0;
  const budget = cls.gpu_hours === null ? null : cls.gpu_hours + extra;
  const said = h('span', { class: 'nbjobs-RowSaid', role: 'status' });
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
        page.failIn(said, error);
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
        page.failIn(said, error);
      }
    })();
  });
  const actions = h(
    'span',
    { class: 'nbjobs-Actions' },
    cls.gpu_hours === null ? null : withUnit(amount, 'GPU-hours'),
    cls.gpu_hours === null ? null : extend,
    invite
  );
  if (fromHub) {
    actions.append(removeButton(page, cls, student, actions, said));
  }
  return [
    student,
    studentJobs(page, student, line?.jobs ?? 0, said, cls.period),
    budget === null
      ? `${hours(line?.gpu_hours ?? 0)} (no class budget)`
      : meter(
          line?.gpu_hours ?? 0,
          line?.gpu_hours_limit ?? budget,
          `${student}'s GPU-hours`,
          hours
        ),
    extra ? `+${gpus(extra)} h` : '–',
    h('span', { class: 'nbjobs-RowActions' }, actions, said)
  ];
}

/** The button that takes a student out of a class: it first says, beside it, what the
 * removal does, and removes only when that is confirmed there. */
function removeButton(
  page: Page,
  cls: IClass,
  student: string,
  actions: HTMLElement,
  said: HTMLElement
): HTMLElement {
  const remove = h('button', { type: 'button', 'data-action': 'remove' }, 'Remove');
  remove.addEventListener('click', () => {
    const yes = h(
      'button',
      { type: 'button', 'data-action': 'confirm-remove' },
      `Remove ${student}`
    );
    const no = h('button', { type: 'button', 'data-action': 'keep' }, 'Keep');
    const box = h(
      'span',
      { class: 'nbjobs-Confirm', role: 'group', 'aria-label': `Remove ${student}?` },
      `Remove ${student} from ${cls.name}? They lose its flavors and its ${cls.gpu_hours === null ? 'queue' : 'GPU-hour budget'}; their account, files and jobs stay.`,
      yes,
      no
    );
    askInPlace(
      actions,
      box,
      { yes: 'confirm-remove', no: 'keep' },
      async () => {
        await page.api.call(
          'DELETE',
          `classes/${encodeURIComponent(cls.name)}/students`,
          {},
          { students: [student] }
        );
        await classesView(page, `Removed ${student} from ${cls.name}.`);
      },
      error => page.failIn(said, error),
      remove
    );
  });
  return remove;
}

/** The button that deletes a class made in the dashboard: it first says, in its place,
 * what the deletion does, and deletes only when that is confirmed there. */
function deleteClassButton(page: Page, cls: IClass, status: HTMLElement): HTMLElement {
  const drop = h('button', { type: 'button', 'data-action': 'delete-class' }, `Delete ${cls.name}`);
  drop.addEventListener('click', () => {
    const yes = h(
      'button',
      { type: 'button', 'data-action': 'confirm-delete-class' },
      `Delete ${cls.name}`
    );
    const no = h('button', { type: 'button', 'data-action': 'keep-class' }, 'Keep it');
    const box = h(
      'span',
      { class: 'nbjobs-Confirm', role: 'group', 'aria-label': `Delete class ${cls.name}?` },
      `Delete class ${cls.name}? Its ${cls.students.length} student(s) lose its flavors and ` +
        `${cls.gpu_hours === null ? 'queue' : 'GPU-hour budget'}; their accounts, files and jobs stay.`,
      yes,
      no
    );
    askInPlace(
      drop,
      box,
      { yes: 'confirm-delete-class', no: 'keep-class' },
      async () => {
        await page.api.delete(`classes/${encodeURIComponent(cls.name)}`);
        await classesView(page, `Deleted class ${cls.name}.`);
      },
      error => page.failIn(status, error)
    );
  });
  return drop;
}

/** A student's job count, a button that lists their latest jobs under it, each a link
 * to the job's own page (its details, log and result, the page's full width). */
export function studentJobs(
  page: Page,
  student: string,
  count: number,
  said: HTMLElement,
  period = 'week'
): HTMLElement {
  const cell = h('span', { class: 'nbjobs-StudentJobs' });
  const toggle = h(
    'button',
    { type: 'button', 'data-action': 'student-jobs', 'aria-expanded': 'false' },
    `${count} ran`
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
        list.replaceChildren(
          // the count is of the jobs that ran in the period (the one rule every figure
          // follows); the list is the latest, whatever became of them
          h(
            'p',
            { class: 'nbjobs-Hint' },
            `${count} ran in ${periodWords(period)} (a job that never started counts in none). ` +
              `${student}'s latest jobs, whatever their state:`
          ),
          found.jobs.length
            ? table(
                ['Job', 'State', 'Flavor', 'Submitted'],
                found.jobs.map(j => [
                  h(
                    'a',
                    {
                      href: jobHref(j.id),
                      'data-action': 'open-job',
                      title: 'its details, log and result, read-only'
                    },
                    `${j.name} (${j.id})`
                  ),
                  j.state.replace('_', ' '),
                  j.flavor,
                  when(j.submitted_at)
                ]),
                `${student}'s latest jobs`
              )
            : h('p', { class: 'nbjobs-Hint' }, `${student} has no jobs.`)
        );
      } catch (error) {
        page.failIn(said, error);
      }
    })();
  });
  cell.append(toggle, list);
  return cell;
}

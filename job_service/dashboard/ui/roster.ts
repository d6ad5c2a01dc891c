/** The Classes view's forms: a roster pasted or read from a CSV file, previewed row by
 * row; a new class. */

import { ApiError, IClass, IFlavor, IRosterProblem } from './api';
import { h, table } from './dom';
import { rosterNames } from './format';
import { Page } from './page';
import { classesView } from './classes';

/** A roster: pasted names or a CSV file, previewed row by row, the service's refusals
 * shown on their rows. `send` returns the sentence to show when it worked. */
export function rosterForm(
  page: Page,
  label: string,
  verb: string,
  send: (names: string[]) => Promise<string>,
  status: HTMLElement,
  extra: HTMLElement[] = [],
  /** the class the students would join; null: a new one */
  joining: string | null = null
): HTMLElement {
  const id = `nbjobs-roster-${Math.random().toString(36).slice(2)}`;
  const text = h('textarea', {
    id,
    rows: '3',
    placeholder: 'one user name per line, or choose a CSV file'
  }) as HTMLTextAreaElement;
  const file = h('input', {
    type: 'file',
    accept: '.csv,.txt,text/csv',
    'aria-label': `${label}: CSV file`
  }) as HTMLInputElement;
  const preview = h('div', { class: 'nbjobs-Preview' });
  // "ok" only once the service said it would take that name (a name's form, a name
  // listed twice, someone in another class or who teaches): asked as the list changes
  let asked = 0;
  const show = (problems: IRosterProblem[] | null = null, failed = false): void =>
    showPreview(preview, label, rosterNames(text.value), problems, failed);
  let later = 0;
  const check = (): void => {
    const names = rosterNames(text.value);
    show(null);
    window.clearTimeout(later);
    if (!names.length) {
      return;
    }
    const mine = ++asked;
    later = window.setTimeout(() => {
      void page.api
        .post<{ problems: IRosterProblem[] }>('roster-check', {
          students: names,
          class_name: joining
        })
        .then(answer => mine === asked && show(answer.problems))
        .catch(() => mine === asked && show(null, true)); // checked again when sent
    }, 300);
  };
  text.addEventListener('input', check);
  fillFromFile(file, text, check);
  const go = h('button', { type: 'submit' }, verb);
  const form = h(
    'form',
    { class: 'nbjobs-Roster', 'aria-label': label },
    h('h4', {}, label),
    ...extra,
    h('label', { for: id }, 'Students'),
    text,
    file,
    preview,
    go
  );
  form.addEventListener('submit', event => {
    event.preventDefault();
    void (async () => {
      try {
        const done = await send(rosterNames(text.value));
        await classesView(page, done);
      } catch (error) {
        page.failIn(status, error);
        if (error instanceof ApiError && error.problems.length) {
          show(error.problems);
        }
      }
    })();
  });
  show();
  return form;
}

export function createClassForm(page: Page, flavors: IFlavor[], status: HTMLElement): HTMLElement {
  const name = h('input', {
    type: 'text',
    id: 'nbjobs-class-name',
    required: '',
    maxlength: '63',
    placeholder: 'e.g. physics-101'
  }) as HTMLInputElement;
  const budget = h('input', {
    type: 'number',
    id: 'nbjobs-class-hours',
    min: '0',
    step: '0.5',
    placeholder: 'none'
  }) as HTMLInputElement;
  const period = h(
    'select',
    { id: 'nbjobs-class-period' },
    ...['week', 'day', 'month'].map(p => h('option', { value: p }, p))
  ) as HTMLSelectElement;
  const boxes = flavors.map(
    f =>
      h('input', {
        type: 'checkbox',
        value: f.name,
        id: `nbjobs-flavor-${f.name}`
      }) as HTMLInputElement
  );
  const extra = [
    h('label', { for: 'nbjobs-class-name' }, 'Name'),
    name,
    h(
      'fieldset',
      {},
      h('legend', {}, 'Flavors its students may use (none ticked: as usual)'),
      ...flavors.map((f, i) =>
        h(
          'label',
          { for: `nbjobs-flavor-${f.name}`, class: 'nbjobs-Check' },
          boxes[i],
          ` ${f.display_name} (${f.name})`
        )
      )
    ),
    h('label', { for: 'nbjobs-class-hours' }, 'GPU-hours per student'),
    budget,
    h('label', { for: 'nbjobs-class-period' }, 'per'),
    period
  ];
  return rosterForm(
    page,
    'Create a class',
    'Create class',
    async students => {
      const made = await page.api.post<IClass>('classes', {
        name: name.value.trim(),
        students,
        flavors: boxes.filter(b => b.checked).map(b => b.value),
        gpu_hours: budget.value === '' ? null : Number(budget.value),
        period: period.value
      });
      page.invitations = made.invitations;
      return `Created class ${name.value.trim()} with ${students.length} student(s).`;
    },
    status,
    extra
  );
}

/** The roster's preview: each name and what the service said of it (``problems``; null:
 * not answered yet, or ``failed`` to answer), the refused rows marked. */
function showPreview(
  preview: HTMLElement,
  label: string,
  names: string[],
  problems: IRosterProblem[] | null,
  failed: boolean
): void {
  const why = new Map((problems ?? []).map(p => [p.index, p.reason]));
  preview.replaceChildren(
    names.length
      ? table(
          ['#', 'User name', 'Problem'],
          names.map((name, i) => [
            String(i + 1),
            name,
            why.get(i) ?? (problems !== null ? 'ok' : failed ? 'not checked yet' : 'checking…')
          ]),
          `${label}: preview`
        )
      : h('p', { class: 'nbjobs-Hint' }, 'Nobody listed yet.')
  );
  for (const [i] of why) {
    preview.querySelectorAll('tbody tr')[i]?.classList.add('nbjobs-Bad');
  }
}

/** A CSV file chosen in ``file`` fills the roster's field, which is then checked. */
function fillFromFile(file: HTMLInputElement, text: HTMLTextAreaElement, check: () => void): void {
  file.addEventListener('change', () => {
    const chosen = file.files?.[0];
    if (chosen) {
      void chosen.text().then(content => {
        text.value = content;
        check();
      });
    }
  });
}

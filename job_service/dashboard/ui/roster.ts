/** The Classes view's forms: a roster pasted or read from a CSV file, previewed row by
 * row; a new class. */

import { ApiError, IClass, IFlavor, IRosterChecked } from './api';
import { h, table, withUnit } from './dom';
import { periodWords, rosterNames } from './format';
import { failIn, Page } from './page';
import { classesView } from './classes';

/** A roster: pasted names or a CSV file, previewed row by row (who joins, who has no
 * account yet, who is in the class already, who the service would refuse and why) and
 * summed up beside the button before anything is sent; the service's refusal is said
 * there too. `send` returns the sentence to show when it worked. */
export function rosterForm(
  page: Page,
  label: string,
  verb: string,
  send: (names: string[]) => Promise<string>,
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
  const summary = h('span', { class: 'nbjobs-Hint', 'data-role': 'roster-summary' });
  const said = h('p', { class: 'nbjobs-FormSaid', role: 'alert' });
  // the service's last answer: what a refusal on sending leaves of it (who is new, who
  // is in the class already) stays said
  let last: IRosterChecked | null = null;
  const show = (answer: IRosterChecked | null = null, failed = false): void => {
    last = answer;
    const names = rosterNames(text.value);
    showPreview(preview, label, names, answer, failed, joining);
    summary.textContent = sumUp(names.length, answer, joining);
  };
  const check = checker(page, text, joining, show, said);
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
    h('div', { class: 'nbjobs-RosterGo' }, go, summary),
    said
  );
  form.addEventListener('submit', event => {
    event.preventDefault();
    said.textContent = '';
    void (async () => {
      try {
        const done = await send(rosterNames(text.value));
        await classesView(page, done);
      } catch (error) {
        failIn(said, error);
        if (error instanceof ApiError && error.problems.length) {
          const refused = new Set(error.problems.map(p => p.index));
          const kept = (indexes: number[] = []) => indexes.filter(i => !refused.has(i));
          show({
            problems: error.problems,
            already: kept(last?.already),
            new_accounts: kept(last?.new_accounts)
          });
        }
      }
    })();
  });
  show();
  return form;
}

/** What asks the service what each name would do (a name's form, a name listed twice,
 * someone in another class or who teaches, who has no account) as the list changes, a
 * moment after the last change, and shows the latest answer. */
function checker(
  page: Page,
  text: HTMLTextAreaElement,
  joining: string | null,
  show: (answer: IRosterChecked | null, failed?: boolean) => void,
  said: HTMLElement
): () => void {
  let asked = 0;
  let later = 0;
  return () => {
    const names = rosterNames(text.value);
    show(null);
    said.textContent = '';
    window.clearTimeout(later);
    if (!names.length) {
      return;
    }
    const mine = ++asked;
    later = window.setTimeout(() => {
      void page.api
        .post<IRosterChecked>('roster-check', { students: names, class_name: joining })
        .then(answer => mine === asked && show(answer))
        .catch(() => mine === asked && show(null, true)); // checked again when sent
    }, 300);
  };
}

export function createClassForm(page: Page, flavors: IFlavor[]): HTMLElement {
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
    ...['week', 'day', 'month'].map(p => h('option', { value: p }, periodWords(p)))
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
    withUnit(budget, 'GPU-hours'),
    h('label', { for: 'nbjobs-class-period' }, 'in'),
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
    extra
  );
}

/** The roster's preview: each name and what sending it would do (``answer``; null:
 * not answered yet, or ``failed`` to answer), the refused rows marked. */
function showPreview(
  preview: HTMLElement,
  label: string,
  names: string[],
  answer: IRosterChecked | null,
  failed: boolean,
  joining: string | null
): void {
  const why = new Map((answer?.problems ?? []).map(p => [p.index, p.reason]));
  const already = new Set(answer?.already ?? []);
  const fresh = new Set(answer?.new_accounts ?? []);
  const joins = joining === null ? 'joins the new class' : `joins ${joining}`;
  const outcome = (i: number): string => {
    if (why.has(i)) {
      return `refused: ${why.get(i)}`;
    }
    if (answer === null) {
      return failed ? 'not checked yet' : 'checking…';
    }
    if (already.has(i)) {
      return `already in ${joining}: no change`;
    }
    return fresh.has(i) ? `${joins}: a new account, with an invitation` : joins;
  };
  preview.replaceChildren(
    names.length
      ? table(
          ['#', 'User name', 'What happens'],
          names.map((name, i) => [String(i + 1), name, outcome(i)]),
          `${label}: preview`
        )
      : h('p', { class: 'nbjobs-Hint' }, 'Nobody listed yet.')
  );
  const rows = preview.querySelectorAll('tbody tr');
  for (const [i] of why) {
    rows[i]?.classList.add('nbjobs-Bad');
  }
  for (const i of already) {
    rows[i]?.classList.add('nbjobs-Same');
  }
}

/** The preview in one line, beside the button: how many join, how many are new
 * accounts, in the class already, refused. */
export function sumUp(
  count: number,
  answer: IRosterChecked | null,
  joining: string | null
): string {
  if (!count || answer === null) {
    return '';
  }
  const refused = new Set(answer.problems.map(p => p.index)).size;
  const joins = count - refused - answer.already.length;
  const parts = [`${joins} to add`];
  if (answer.new_accounts.length) {
    parts[0] += ` (${answer.new_accounts.length} new account${answer.new_accounts.length === 1 ? '' : 's'}, invited)`;
  }
  if (answer.already.length) {
    parts.push(`${answer.already.length} already in ${joining}`);
  }
  if (refused) {
    parts.push(
      `${refused} refused: nothing changes until ${refused === 1 ? 'it is' : 'they are'} fixed`
    );
  }
  return parts.join(' · ');
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

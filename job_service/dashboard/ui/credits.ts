/** The dashboard's Credits: each account's balance and statement; grants (admins). */

import { ICreditAccount, ICreditStatement } from './api';
import { Child, h, table, withUnit } from './dom';
import { creditText, when } from './format';
import { Page } from './page';

export async function creditsView(page: Page, said = '', open = ''): Promise<void> {
  let accounts: ICreditAccount[];
  try {
    accounts = await page.api.get<ICreditAccount[]>('credits');
  } catch (error) {
    page.fail(error);
    return;
  }
  const status = h('p', { class: 'nbjobs-Status', role: 'status' }, said);
  const shown = h('section', { class: 'nbjobs-Statement', 'aria-live': 'polite' });
  const grants = Boolean(page.me?.admin || page.me?.teacher);
  const rows = accounts.map(a => {
    const show = h('button', { type: 'button', 'data-action': 'statement' }, 'Statement');
    show.addEventListener('click', () => void statement(page, a.account, shown));
    const cells: Child[] = [
      a.pays_for_you ? h('span', {}, a.account, h('em', {}, ' (pays for your jobs)')) : a.account,
      creditText(a.balance),
      creditText(a.held),
      creditText(a.available),
      creditText(a.standing),
      creditText(a.granted),
      creditText(a.charged),
      show
    ];
    if (grants) {
      cells.push(grantForm(page, a.account, status));
    }
    return cells;
  });
  const headers = ['Account', 'Balance', 'Held', 'Available', 'Standing', 'Granted', 'Charged', ''];
  if (grants) {
    headers.push('Grant');
  }
  page.main.replaceChildren(
    h('h2', {}, 'Credits'),
    h(
      'p',
      {},
      "Jobs on flavors with a price are paid from an account: the user's own, else their class's, else their group's. A job holds its worst case (its time limit × its GPUs × the price) while it waits and runs, and is charged what it cost once it ends. Every grant and charge stays on the account's statement."
    ),
    status,
    rows.length
      ? table(headers, rows, 'Credit accounts')
      : h('p', {}, 'No credit accounts yet: jobs on priced flavors need credits.'),
    ...(page.me?.admin
      ? [h('h3', {}, 'Grant credits to another account'), newGrantForm(page, status)]
      : []),
    shown
  );
  if (open) {
    await statement(page, open, shown);
  }
}

/** An amount and a note, and a button that grants them to `account`. */
export function grantForm(page: Page, account: string, status: HTMLElement): HTMLElement {
  const amount = h('input', {
    type: 'number',
    step: '0.5',
    value: '10',
    'aria-label': `Credits for ${account}`
  }) as HTMLInputElement;
  const note = h('input', {
    type: 'text',
    maxlength: '200',
    placeholder: 'why',
    'aria-label': `Why ${account} gets them`
  }) as HTMLInputElement;
  const give = h('button', { type: 'button', 'data-action': 'grant' }, 'Grant');
  give.addEventListener('click', () => void grant(page, account, amount.value, note.value, status));
  return h('span', { class: 'nbjobs-Grant' }, withUnit(amount, 'credits'), note, give);
}

/** Admins: credits for an account not listed yet (a user's, a class's, a group's). */
export function newGrantForm(page: Page, status: HTMLElement): HTMLElement {
  const account = h('input', {
    type: 'text',
    id: 'nbjobs-account',
    placeholder: 'user:ada, class:ml101, group:physics',
    required: ''
  }) as HTMLInputElement;
  const amount = h('input', {
    type: 'number',
    id: 'nbjobs-amount',
    step: '0.5',
    value: '10'
  }) as HTMLInputElement;
  const note = h('input', {
    type: 'text',
    id: 'nbjobs-note',
    maxlength: '200'
  }) as HTMLInputElement;
  const form = h(
    'form',
    { class: 'nbjobs-Controls', 'aria-label': 'Grant credits' },
    h('label', { for: 'nbjobs-account' }, 'Account'),
    account,
    h('label', { for: 'nbjobs-amount' }, 'Amount'),
    withUnit(amount, 'credits'),
    h('label', { for: 'nbjobs-note' }, 'Why'),
    note,
    h('button', { type: 'submit' }, 'Grant')
  );
  form.addEventListener('submit', event => {
    event.preventDefault();
    void grant(page, account.value.trim(), amount.value, note.value, status);
  });
  return form;
}

export async function grant(
  page: Page,
  account: string,
  amount: string,
  note: string,
  status: HTMLElement
): Promise<void> {
  try {
    await page.api.post(`credits/${encodeURIComponent(account)}/grants`, {
      amount: Number(amount),
      note
    });
    await creditsView(page, `Granted ${amount} credits to ${account}.`, account);
  } catch (error) {
    page.failIn(status, error);
  }
}

/** An account's grants and charges, oldest first, with a CSV download. */
export async function statement(page: Page, account: string, into: HTMLElement): Promise<void> {
  let found: ICreditStatement;
  try {
    found = await page.api.get<ICreditStatement>(`credits/${encodeURIComponent(account)}`);
  } catch (error) {
    into.replaceChildren(
      h('p', { class: 'nbjobs-Error', role: 'alert' }, (error as Error).message)
    );
    return;
  }
  const csv = h('button', { type: 'button', id: 'nbjobs-statement-csv' }, 'Download CSV');
  csv.addEventListener('click', () => {
    void (async () => {
      const text = await page.api.text(`credits/${encodeURIComponent(account)}`, {
        format: 'csv'
      });
      const link = document.createElement('a');
      link.href = URL.createObjectURL(new Blob([text], { type: 'text/csv' }));
      link.download = `nbjobs-credits-${account.replace(':', '-')}.csv`;
      link.click();
      URL.revokeObjectURL(link.href);
    })();
  });
  const rows = found.entries.map(e => [
    when(e.at),
    e.kind,
    (e.amount > 0 ? '+' : '') + creditText(e.amount),
    creditText(e.balance),
    e.job_id ?? '–',
    e.by,
    e.note
  ]);
  into.replaceChildren(
    h('h3', {}, `Statement of ${account}`),
    h(
      'p',
      {},
      `Standing credits ${creditText(found.account.standing)}; balance now ${creditText(found.account.balance)}, of which ${creditText(found.account.held)} held for jobs not ended. `,
      csv
    ),
    rows.length
      ? table(
          ['When', 'Kind', 'Amount', 'Balance', 'Job', 'By', 'Note'],
          rows,
          `Statement of ${account}`
        )
      : h('p', {}, 'No grants or charges yet.')
  );
}

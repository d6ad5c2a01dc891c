/** The dashboard's Users view (admins): what becomes of a deleted user's jobs,
 * definitions, settings, folder and account (nbjobs.yaml's users.on_delete), the users
 * retired so far, and deleting one here. */

import { Api, IDeletedUser, IUsersView } from './api';
import { h, table } from './dom';
import { when } from './format';
import { failIn, Page } from './page';

/** What nbjobs does when a user goes, in a sentence. */
export function policyText(view: Pick<IUsersView, 'on_delete' | 'check_every' | 'in_hub'>): string {
  const what =
    view.on_delete === 'remove'
      ? 'their jobs, definitions, notification settings and folder are removed (their GPU time stays in usage reports)'
      : 'their jobs, definitions, notification settings and folder are archived for admins under a name no user can have (ada/deleted-…), the folder moved to .nbjobs-deleted under the storage root';
  const noticed = view.in_hub
    ? `A user deleted in the hub is noticed within ${Math.round(view.check_every)} s, one made again under the same name at once`
    : 'Without a hub, users are deleted here only';
  return `${noticed}: their running jobs are cancelled, the OS account nbjobs made for them is removed, and ${what} (users.on_delete: ${view.on_delete} in nbjobs.yaml). A new user of the same name starts with nothing of theirs.`;
}

/** What became of one retired user's things, in words. */
export function outcomeText(user: IDeletedUser): string {
  const parts = [
    `${user.jobs} job(s)${user.cancelled ? ` (${user.cancelled} cancelled)` : ''}`,
    `${user.definitions} definition(s)`,
    `${user.settings} notification setting(s)`
  ].join(', ');
  const done =
    user.action === 'remove' ? `${parts} removed` : `${parts} archived as ${user.archived_as}`;
  const folder = user.folder
    ? `; folder moved to ${user.folder}`
    : user.action === 'remove'
      ? '; folder removed'
      : '';
  const account = user.account ? `; OS account ${user.account} removed` : '';
  return `${done}${folder}${account}`;
}

/** The view's content; `redraw` draws it again with a sentence on top. */
export async function usersView(
  api: Api,
  redraw: (said: string) => void,
  said = ''
): Promise<HTMLElement[]> {
  const view = await api.get<IUsersView>('dashboard/users');
  const status = h('p', { class: 'nbjobs-Status', role: 'status' }, said);
  const input = h('input', {
    type: 'text',
    id: 'nbjobs-delete-user',
    required: '',
    placeholder: 'user name'
  }) as HTMLInputElement;
  const form = h(
    'form',
    { class: 'nbjobs-Drain', 'aria-label': 'Delete a user' },
    h('label', { for: 'nbjobs-delete-user' }, 'Delete a user '),
    input,
    h('button', { type: 'submit', 'data-action': 'delete-user' }, 'Delete')
  );
  form.addEventListener('submit', event => {
    event.preventDefault();
    const name = input.value.trim();
    const what = view.on_delete === 'remove' ? 'removes' : 'archives';
    if (
      !name ||
      !window.confirm(
        `Delete ${name}${view.in_hub ? ' from the hub' : ''}? This cancels their jobs and ${what} their jobs, definitions, settings and folder.`
      )
    ) {
      return;
    }
    void (async () => {
      try {
        const done = await api.delete<IDeletedUser>(`dashboard/users/${encodeURIComponent(name)}`);
        redraw(`Deleted ${done.name}: ${outcomeText(done)}.`);
      } catch (error) {
        failIn(status, error);
      }
    })();
  });
  const rows = view.deleted.map(user => [
    user.name,
    when(user.noticed_at),
    user.why,
    outcomeText(user),
    user.problems ? h('span', { class: 'nbjobs-Error' }, user.problems) : 'none'
  ]);
  return [
    h('h2', {}, 'Users'),
    status,
    h('p', { class: 'nbjobs-Hint' }, policyText(view)),
    form,
    h('h3', {}, 'Deleted users'),
    rows.length
      ? table(['User', 'Noticed', 'Why', 'What was done', 'Left to do'], rows, 'Deleted users')
      : h('p', {}, 'No user has been deleted.')
  ];
}

/** The Users view in the page: drawn there when it is still the one shown. */
export async function usersPage(page: Page, said = ''): Promise<void> {
  let content: HTMLElement[];
  try {
    content = await usersView(page.api, again => void usersPage(page, again), said);
  } catch (error) {
    page.fail(error);
    return;
  }
  if (page.view === 'users') {
    page.main.replaceChildren(...content);
  }
}

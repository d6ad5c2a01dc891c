/**
 * Notifications in JupyterLab: where a user is told about their jobs (an email address,
 * a webhook) and on which events, with the latest messages and what became of them.
 * The same setting as `nbjobs notify` (all of the user's jobs); the service checks the
 * address and the host against what its admins allow and says why when it refuses. A new
 * address gets a code by mail; the dialog asks for it, and mail goes there only once it
 * is entered.
 */
import { Dialog, Notification, showDialog } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';

import { type NbjobsAPI, NbjobsError } from './api';
import type { Translate } from './translate';
import {
  DEFAULT_EVENTS,
  eventChoices,
  messageLine,
  savedMessage,
  settingsBody
} from './notifysettings';
import type { INotification, INotifySettings, INotifySettingsInfo, NotifyEvent } from './types';

/** Every channel there is (an older service, which does not say its own, offers both). */
const ALL_CHANNELS: readonly string[] = ['email', 'webhook'];

/** What the form starts from: a saved setting, or what was typed before a refusal. */
type FormStart = INotifySettings & Partial<Pick<INotifySettingsInfo, 'email_confirmed'>>;

/** The form: the user's setting, editable, and the latest messages below it. */
export class NotifyForm extends Widget {
  constructor(
    settings: FormStart | null,
    latest: INotification[],
    trans: Translate,
    error: string | null = null,
    scope: string | null = null,
    /** the channels the service can send on: only these are offered */
    channels: readonly string[] = ALL_CHANNELS
  ) {
    super();
    this.addClass('nbjobs-NotifyForm');
    this._email = document.createElement('input');
    this._email.type = 'email';
    this._email.name = 'email';
    this._email.placeholder = trans('you@example.org');
    this._email.value = settings?.email ?? '';
    this._webhook = document.createElement('input');
    this._webhook.type = 'url';
    this._webhook.name = 'webhook';
    this._webhook.placeholder = 'https://';
    this._webhook.value = settings?.webhook ?? '';
    this._format = formatChoice(settings);

    const events = this._eventChoices(settings, trans);

    this._error = document.createElement('div');
    this._error.className = 'nbjobs-NotifyForm-error';
    this._error.setAttribute('role', 'alert');
    this._error.textContent = error ?? '';
    this._error.hidden = !error;
    // the reason was about what was typed then: it goes once the user changes it
    this.node.addEventListener('input', () => {
      this._error.hidden = true;
    });

    this._unconfirmed = this._confirmation(settings, trans);

    const recent = latestMessages(latest, trans);

    const hint = document.createElement('p');
    hint.className = 'nbjobs-NotifyForm-hint';
    hint.textContent =
      (scope
        ? trans(
            'For the runs of "%1" only; while it has no setting of its own, yours for all jobs applies.',
            scope
          )
        : trans('For all your jobs.')) +
      ' ' +
      trans(
        'Leave a field empty to stop that channel; your admins decide which addresses and hosts are allowed.'
      );
    const email = channels.includes('email');
    const webhook = channels.includes('webhook');
    if (!email && !webhook) {
      // nothing to set: say so, and what still tells the user
      hint.textContent = trans(
        'This nbjobs sends no email or webhook messages: your admins have set up neither. JupyterLab tells you when a job ends while it is open.'
      );
      this.node.append(hint, recent);
      this.sendsNothing = true;
      return;
    }
    this.node.append(
      hint,
      ...(email ? [field(trans('Email me at'), this._email), this._unconfirmed] : []),
      ...(webhook
        ? [field(trans('Webhook'), this._webhook), field(trans('Webhook format'), this._format)]
        : []),
      events,
      this._error,
      recent
    );
  }

  /** Which events tell the user, and after how long in the queue. */
  private _eventChoices(settings: FormStart | null, trans: Translate): HTMLFieldSetElement {
    const events = document.createElement('fieldset');
    events.className = 'nbjobs-NotifyForm-events';
    const legend = document.createElement('legend');
    legend.textContent = trans('Tell me when a job of mine');
    events.append(legend);
    const chosen = settings?.on ?? DEFAULT_EVENTS;
    for (const [event, label] of eventChoices(trans)) {
      const box = document.createElement('input');
      box.type = 'checkbox';
      box.name = event;
      box.checked = chosen.includes(event);
      this._events.set(event, box);
      const row = document.createElement('label');
      row.className = 'nbjobs-NotifyForm-event';
      row.append(box, ` ${label}`);
      if (event === 'queued_long') {
        this._minutes = document.createElement('input');
        this._minutes.type = 'number';
        this._minutes.name = 'queue_minutes';
        this._minutes.min = '1';
        this._minutes.value = String(settings?.queue_minutes ?? 30);
        row.append(' ', this._minutes, ` ${trans('minutes')}`);
      }
      events.append(row);
    }
    return events;
  }

  /** Where to enter the code mailed to an address not confirmed yet (hidden when none). */
  private _confirmation(settings: FormStart | null, trans: Translate): HTMLDivElement {
    // an address not confirmed yet: where to enter the code mailed to it
    const unconfirmed = document.createElement('div');
    unconfirmed.className = 'nbjobs-NotifyForm-confirm';
    this._code.name = 'code';
    this._code.placeholder = 'ABCDE-FGHJK';
    this._code.autocomplete = 'one-time-code';
    if (settings?.email && settings.email_confirmed === false) {
      const says = document.createElement('p');
      says.textContent = trans(
        'Not confirmed yet: nbjobs mailed a code to %1. Nothing else is sent there until you enter it.',
        settings.email
      );
      unconfirmed.append(says, field(trans('Code from the mail'), this._code));
    } else {
      unconfirmed.hidden = true;
    }
    return unconfirmed;
  }

  /** The service has no channel to offer: the form only shows the latest messages. */
  sendsNothing = false;

  /** What the form holds, as the service's request body. */
  getValue(): INotifySettings {
    const on = [...this._events].filter(([, box]) => box.checked).map(([event]) => event);
    const minutes = Number(this._minutes?.value);
    return settingsBody(
      this._email.value,
      this._webhook.value,
      this._format.value as INotifySettings['webhook_format'],
      on,
      Number.isFinite(minutes) && minutes > 0 ? Math.round(minutes) : null
    );
  }

  /** The code typed from the confirmation mail ('' when none). */
  get code(): string {
    return this._unconfirmed.hidden ? '' : this._code.value.trim();
  }

  private _email: HTMLInputElement;
  private _unconfirmed: HTMLDivElement;
  private _code = document.createElement('input');
  private _webhook: HTMLInputElement;
  private _format: HTMLSelectElement;
  private _minutes: HTMLInputElement | null = null;
  private _events = new Map<NotifyEvent, HTMLInputElement>();
  private _error: HTMLDivElement;
}

/** The webhook's format: JSON, Slack or Microsoft Teams. */
function formatChoice(settings: FormStart | null): HTMLSelectElement {
  const format = document.createElement('select');
  format.name = 'webhook_format';
  for (const [value, label] of [
    ['json', 'JSON'],
    ['slack', 'Slack'],
    ['teams', 'Microsoft Teams']
  ]) {
    format.append(new Option(label, value, false, settings?.webhook_format === value));
  }
  return format;
}

/** A labelled field of the form. */
function field(label: string, input: HTMLElement): HTMLLabelElement {
  const row = document.createElement('label');
  row.className = 'nbjobs-NotifyForm-field';
  const text = document.createElement('span');
  text.textContent = label;
  row.append(text, input);
  return row;
}

/** The latest messages and what became of them. */
function latestMessages(latest: INotification[], trans: Translate): HTMLDivElement {
  const recent = document.createElement('div');
  recent.className = 'nbjobs-NotifyForm-latest';
  const heading = document.createElement('h3');
  heading.textContent = trans('Latest messages');
  recent.append(heading);
  if (!latest.length) {
    const none = document.createElement('p');
    none.textContent = trans('None yet.');
    recent.append(none);
  } else {
    const list = document.createElement('ul');
    for (const message of latest) {
      const item = document.createElement('li');
      item.dataset.state = message.state;
      item.textContent = messageLine(message, trans);
      list.append(item);
    }
    recent.append(list);
  }
  return recent;
}

/**
 * Show the user's notification setting; save it when asked. A refusal (an address or
 * host the admins do not allow, no mail set up) shows the service's sentence in the
 * dialog, with what was typed kept. A save says so (and that the address is confirmed,
 * when a code was entered). Resolves to the saved setting, or null.
 */
export async function notificationsDialog(
  api: NbjobsAPI,
  trans: Translate,
  definition: { id: string; name: string } | null = null
): Promise<INotifySettingsInfo | null> {
  const loaded = await loadSettings(api, trans, definition);
  if (loaded === null) {
    return null;
  }
  const { channels, latest, own } = loaded;
  let settings = loaded.settings;
  let error: string | null = null;
  /** a code was entered and the service took it: the address is confirmed */
  let confirmed = false;
  const title = definition
    ? trans('Notifications for "%1"', definition.name)
    : trans('Notifications');
  for (;;) {
    const form = new NotifyForm(settings, latest, trans, error, definition?.name ?? null, channels);
    if (form.sendsNothing) {
      await showDialog({
        title,
        body: form,
        buttons: [Dialog.okButton({ label: trans('Close') })]
      });
      return null;
    }
    const reset = Dialog.createButton({
      label: trans('Use my usual setting'),
      displayType: 'default',
      actions: ['nbjobs-reset']
    });
    const result = await showDialog({
      title,
      body: form,
      buttons: [
        Dialog.cancelButton({ label: trans('Cancel') }),
        ...(definition && own ? [reset] : []),
        Dialog.okButton({ label: trans('Save') })
      ]
    });
    if (definition && result.button.actions.includes('nbjobs-reset')) {
      try {
        await api.removeNotifySettings({ definition: definition.id });
        return null;
      } catch (failure) {
        error = failure instanceof NbjobsError ? failure.message : String(failure);
        continue;
      }
    }
    if (!result.button.accept || result.value === null) {
      return null;
    }
    try {
      if (form.code) {
        await api.confirmAddress(form.code);
        confirmed = true;
      }
      const body = definition ? { ...result.value, definition_id: definition.id } : result.value;
      const saved = await api.saveNotifySettings(body);
      if (saved.email && saved.email_confirmed === false) {
        // the code is on its way: the dialog again, with where to enter it
        settings = saved;
        error = null;
        continue;
      }
      Notification.success(savedMessage(saved, confirmed, trans), { autoClose: 6000 });
      return saved;
    } catch (failure) {
      // again, with what was typed and the reason
      settings = { ...result.value };
      error = failure instanceof NbjobsError ? failure.message : String(failure);
    }
  }
}

/** What the dialog starts from: the setting (the definition's own, else the user's), the
 * channels the service sends on, the latest messages; null when the service said no
 * (said to the user). */
async function loadSettings(
  api: NbjobsAPI,
  trans: Translate,
  definition: { id: string; name: string } | null
): Promise<{
  settings: FormStart | null;
  channels: readonly string[];
  latest: INotification[];
  /** the definition has a setting of its own */
  own: boolean;
} | null> {
  try {
    const [all, messages, me] = await Promise.all([
      api.notifySettings(),
      api.notifications(5),
      api.me().catch(() => null) // an older service: both channels offered, as before
    ]);
    const channels = me?.notify_channels ?? ALL_CHANNELS;
    const users = all.find(s => !s.job_id && !s.definition_id) ?? null;
    const scoped = definition ? all.find(s => s.definition_id === definition.id) : undefined;
    // a definition without its own starts from the user's, to change what differs
    return { settings: scoped ?? users, channels, latest: messages, own: Boolean(scoped) };
  } catch (error) {
    await showDialog({
      title: trans('Notifications'),
      body: error instanceof NbjobsError ? error.message : String(error),
      buttons: [Dialog.okButton({ label: trans('Close') })]
    });
    return null;
  }
}

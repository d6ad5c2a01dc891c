/**
 * What the Notifications dialog shows and sends, apart from the dialog itself (so it
 * can be tested without a browser).
 */
import type { Translate } from './translate';
import type { INotification, INotifySettings, INotifySettingsInfo, NotifyEvent } from './types';

/** The events a user may choose, in the order the dialog lists them. */
export function eventChoices(trans: Translate): [NotifyEvent, string][] {
  return [
    ['failed', trans('fails')],
    ['timed_out', trans('runs out of time')],
    ['succeeded', trans('succeeds')],
    ['cancelled', trans('is cancelled')],
    ['queued_long', trans('waits in the queue longer than')],
    ['run_refused', trans('a scheduled run of mine is refused')]
  ];
}

/** What the service chooses when a user names no events. */
export const DEFAULT_EVENTS: NotifyEvent[] = ['failed', 'timed_out', 'run_refused'];

/** The request body for what the form holds (empty fields stop that channel). */
export function settingsBody(
  email: string,
  webhook: string,
  format: INotifySettings['webhook_format'],
  on: NotifyEvent[],
  queueMinutes: number | null
): INotifySettings {
  return {
    email: email.trim() || null,
    webhook: webhook.trim() || null,
    webhook_format: format,
    on,
    ...(on.includes('queued_long') && queueMinutes ? { queue_minutes: queueMinutes } : {})
  };
}

/** One latest message as a line: when, what, where, and how it went. */
export function messageLine(message: INotification, trans: Translate): string {
  const when = new Date(message.created_at).toLocaleString();
  const outcome =
    message.state === 'sent'
      ? trans('sent')
      : message.state === 'failed'
        ? trans(
            'not sent: %1',
            message.attempts[message.attempts.length - 1]?.error ?? trans('gave up')
          )
        : message.state === 'held'
          ? trans('held: more came than you are sent at once; they follow in one summary')
          : message.state === 'summarised'
            ? trans('sent in a summary')
            : trans('waiting to be sent (attempt %1)', message.attempts.length + 1);
  return `${message.subject}: ${message.channel} to ${message.target}, ${outcome} (${when})`;
}

/**
 * What a save says: that the address is confirmed when the code from the mail was just
 * entered (as `nbjobs notify --confirm` says it), else that the settings were saved.
 */
export function savedMessage(
  saved: Pick<INotifySettingsInfo, 'email' | 'email_confirmed'>,
  confirmedNow: boolean,
  trans: Translate
): string {
  if (confirmedNow && saved.email && saved.email_confirmed !== false) {
    return trans(
      '%1 is confirmed: mail about your jobs goes there. Notification settings saved.',
      saved.email
    );
  }
  return trans('Notification settings saved.');
}

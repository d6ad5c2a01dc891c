import { describe, expect, it } from 'vitest';

import {
  DEFAULT_EVENTS,
  eventChoices,
  messageLine,
  savedMessage,
  settingsBody
} from '../src/notifysettings';
import { plain } from '../src/translate';
import type { INotification } from '../src/types';

describe('settingsBody', () => {
  it('stops a channel left empty and trims what was typed', () => {
    expect(settingsBody('  ada@uni.example ', '', 'json', ['failed'], null)).toEqual({
      email: 'ada@uni.example',
      webhook: null,
      webhook_format: 'json',
      on: ['failed']
    });
  });

  it('sends the minutes only with the long-wait event', () => {
    expect(settingsBody('', 'https://h/x', 'slack', ['queued_long'], 45).queue_minutes).toBe(45);
    expect(settingsBody('', 'https://h/x', 'slack', ['failed'], 45)).not.toHaveProperty(
      'queue_minutes'
    );
  });
});

describe('eventChoices', () => {
  it('offers every event the service knows, the defaults among them', () => {
    const events = eventChoices(plain).map(([event]) => event);
    expect(events).toHaveLength(6);
    for (const event of DEFAULT_EVENTS) {
      expect(events).toContain(event);
    }
  });
});

describe('messageLine', () => {
  const message: INotification = {
    id: '1',
    user: 'ada',
    job_id: 'ab12',
    event: 'failed',
    channel: 'email',
    target: 'ada@uni.example',
    subject: 'nbjobs: train.ipynb failed',
    state: 'failed',
    attempts: [
      { at: '2026-11-25T10:00:00Z', ok: false, error: 'connection refused' },
      { at: '2026-11-25T10:01:00Z', ok: false, error: 'the mail server refused ada@uni.example' }
    ],
    created_at: '2026-11-25T10:00:00Z'
  };

  it('says why a message was not sent: its last attempt', () => {
    const line = messageLine(message, plain);
    expect(line).toContain('nbjobs: train.ipynb failed');
    expect(line).toContain('email to ada@uni.example');
    expect(line).toContain('not sent: the mail server refused ada@uni.example');
  });

  it('counts the attempt a pending message waits for', () => {
    const pending = {
      ...message,
      state: 'pending' as const,
      attempts: message.attempts.slice(0, 1)
    };
    expect(messageLine(pending, plain)).toContain('waiting to be sent (attempt 2)');
  });

  it('says a message past the rate limit is held for a summary, and when it went in one', () => {
    const held = { ...message, state: 'held' as const, attempts: [] };
    expect(messageLine(held, plain)).toContain('held: more came than you are sent at once');
    const summarised = { ...held, state: 'summarised' as const };
    expect(messageLine(summarised, plain)).toContain('sent in a summary');
  });
});

describe('savedMessage', () => {
  it('says the address is confirmed once the mailed code was entered', () => {
    const saved = { email: 'ada@uni.example', email_confirmed: true };
    expect(savedMessage(saved, true, plain)).toBe(
      'ada@uni.example is confirmed: mail about your jobs goes there. Notification settings saved.'
    );
  });

  it('says only that the settings were saved when no code was entered', () => {
    const saved = { email: 'ada@uni.example', email_confirmed: true };
    expect(savedMessage(saved, false, plain)).toBe('Notification settings saved.');
    expect(savedMessage({ email: null, email_confirmed: null }, true, plain)).toBe(
      'Notification settings saved.'
    );
  });
});

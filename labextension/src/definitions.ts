/**
 * The Jobs panel's Schedules view: the user's job definitions (what runs by itself,
 * when it runs next, how its last run went), with Run now, Pause / Resume, History
 * and Delete. The history lists each run: when, which version, what its job became,
 * how long it took, and what changed in its parameters (or why it did not run).
 */
import { Dialog, Notification, showDialog } from '@jupyterlab/apputils';

import { NbjobsError, type NbjobsAPI } from './api';
import { formatLimit } from './format';
import { notificationsDialog } from './notify';
import { windowWords } from './schedule';
import type { Translate } from './translate';
import type { IDefinition, IDefinitionRun } from './types';

export interface IDefinitionActions {
  /** open a run's job (its details tab) */
  openJob(id: string): Promise<void>;
  /** edit it in the Submit dialog; the edited definition, or null when cancelled */
  edit(definition: IDefinition): Promise<IDefinition | null>;
}

/** A drawn definition: its row, and how to draw it again as the service now says. */
interface IDefinitionRow {
  node: HTMLLIElement;
  update(definition: IDefinition): void;
}

export class DefinitionsView {
  readonly node: HTMLDivElement;

  constructor(
    private readonly api: NbjobsAPI,
    private readonly trans: Translate,
    private readonly actions: IDefinitionActions
  ) {
    this.node = document.createElement('div');
    this.node.className = 'nbjobs-Definitions';
    this._status = document.createElement('div');
    this._status.className = 'nbjobs-Definitions-notice';
    this._status.setAttribute('role', 'status');
    this._list = document.createElement('ul');
    this._list.className = 'nbjobs-Definitions-list';
    this._list.setAttribute('aria-label', trans('Your job definitions'));
    this.node.append(this._status, this._list);
  }

  /**
   * Ask the service again and draw what it says. One drawing at a time: a refresh asked
   * while one runs (a pushed change during Run now's) draws once more after it.
   */
  refresh(): Promise<void> {
    if (this._drawing) {
      this._again = true;
      return this._drawing;
    }
    this._drawing = (async () => {
      do {
        this._again = false;
        await this._draw();
      } while (this._again);
    })().finally(() => {
      this._drawing = null;
    });
    return this._drawing;
  }

  private _drawing: Promise<void> | null = null;
  private _again = false;

  private async _draw(): Promise<void> {
    let definitions: IDefinition[];
    try {
      definitions = await this.api.definitions();
    } catch (error) {
      this._say(error instanceof NbjobsError ? error.message : String(error));
      return;
    }
    this._say(
      definitions.length
        ? null
        : this.trans(
            'No schedules yet. In the Submit Job dialog choose "On a schedule", or run `nbjobs schedule create NOTEBOOK --flavor F --every day --at 02:00` in a terminal.'
          )
    );
    // a row that stays keeps its elements, updated in place: a click that lands while
    // a pushed change redraws the list (its press on one button, its release on the
    // button drawn in its place) is not lost
    const rows = definitions.map(d => {
      const kept = this._rows.get(d.id);
      if (kept) {
        kept.update(d);
        return kept.node;
      }
      const made = this._row(d);
      this._rows.set(d.id, made);
      return made.node;
    });
    const ids = new Set(definitions.map(d => d.id));
    for (const id of [...this._rows.keys()].filter(id => !ids.has(id))) {
      this._rows.delete(id);
    }
    const now = Array.from(this._list.children);
    if (now.length !== rows.length || rows.some((row, i) => now[i] !== row)) {
      this._list.replaceChildren(...rows);
    }
  }

  /** The rows drawn, by definition id. */
  private _rows = new Map<string, IDefinitionRow>();

  private _say(message: string | null): void {
    this._status.textContent = message ?? '';
    this._status.hidden = !message;
  }

  /** A definition's row: its lines, its buttons (which act on the definition as last
   * drawn) and its history, redrawn in place by ``update``. */
  private _row(first: IDefinition): IDefinitionRow {
    const trans = this.trans;
    let definition = first;
    const row = document.createElement('li');
    row.className = 'nbjobs-Definition';
    row.dataset.definitionId = definition.id;
    let lines = definitionLines(definition, trans);
    const buttons = document.createElement('div');
    buttons.className = 'nbjobs-Definition-actions';
    const button = (label: string, act: () => Promise<void>, confirm?: string) =>
      this._button(label, act, confirm);
    const history = document.createElement('div');
    history.className = 'nbjobs-Definition-history';
    history.hidden = true;
    const showHistory = async () => {
      const runs = await this.api.definitionRuns(definition.id);
      history.replaceChildren(this._history(runs));
      history.hidden = false;
    };
    const pause = button('', async () => {
      await this.api.definitionAction(definition.id, definition.paused ? 'resume' : 'pause');
      await this.refresh();
    });
    buttons.append(
      button(trans('Run now'), () => this._runNow(definition)),
      pause,
      button(trans('Edit'), async () => {
        if (await this.actions.edit(definition)) {
          await this.refresh();
        }
      }),
      button(trans('Notify…'), async () => {
        await notificationsDialog(this.api, trans, { id: definition.id, name: definition.name });
      }),
      button(trans('History'), async () => {
        if (history.hidden) {
          await showHistory();
        } else {
          history.hidden = true;
        }
      }),
      button(
        trans('Delete'),
        async () => {
          await this.api.deleteDefinition(definition.id);
          await this.refresh();
        },
        trans(
          'Delete "%1"? It will not run again; its past runs, their jobs and outputs stay.',
          definition.name
        )
      )
    );
    const label = () => {
      pause.textContent = definition.paused ? trans('Resume') : trans('Pause');
    };
    label();
    row.append(...lines, buttons, history);
    return {
      node: row,
      update: (changed: IDefinition) => {
        if (JSON.stringify(changed) === JSON.stringify(definition)) {
          return;
        }
        definition = changed;
        const fresh = definitionLines(definition, trans);
        lines.forEach((line, i) => line.replaceWith(fresh[i]));
        lines = fresh;
        label();
        if (!history.hidden) {
          void showHistory(); // its runs changed with it
        }
      }
    };
  }

  /** A definition's button; with ``confirm``, asked first; a refusal said above the list. */
  private _button(label: string, act: () => Promise<void>, confirm?: string): HTMLButtonElement {
    const b = document.createElement('button');
    b.type = 'button';
    b.className = 'jp-Button jp-mod-minimal nbjobs-Button';
    b.textContent = label;
    b.addEventListener('click', async () => {
      if (confirm) {
        const answer = await showDialog({
          title: label,
          body: confirm,
          buttons: [Dialog.cancelButton(), Dialog.warnButton({ label })]
        });
        if (!answer.button.accept) {
          return;
        }
      }
      b.disabled = true;
      try {
        await act();
      } catch (error) {
        this._say(error instanceof NbjobsError ? error.message : String(error));
      } finally {
        b.disabled = false;
      }
    });
    return b;
  }

  /** Run a definition now; say where its job is, or why it did not start. */
  private async _runNow(definition: IDefinition): Promise<void> {
    const trans = this.trans;
    const run = await this.api.definitionAction(definition.id, 'run');
    await this.refresh();
    if (run.state !== 'submitted') {
      this._say(trans('The run did not start: %1', run.reason ?? run.state));
    } else {
      // said where the user looks, with the way to its job
      const jobId = run.job_id;
      Notification.info(trans('"%1" runs now.', definition.name), {
        autoClose: 6000,
        actions: jobId
          ? [{ label: trans('Show job'), callback: () => void this.actions.openJob(jobId) }]
          : []
      });
    }
  }

  /** The runs, newest first, one line each (the panel is narrow for a table). */
  private _history(runs: IDefinitionRun[]): HTMLElement {
    const trans = this.trans;
    if (!runs.length) {
      const none = document.createElement('p');
      none.textContent = trans('No runs yet.');
      return none;
    }
    const list = document.createElement('ol');
    list.className = 'nbjobs-Definition-runs';
    list.setAttribute('aria-label', trans('Runs, newest first'));
    for (const run of runs) {
      const item = document.createElement('li');
      item.dataset.runId = run.id;
      const when = document.createElement('span');
      when.className = 'nbjobs-Definition-runWhen';
      when.textContent = localTime(run.scheduled_for);
      const what = [
        run.kind === 'manual'
          ? trans('run now')
          : run.kind === 'catch_up'
            ? trans('caught up')
            : '',
        `v${run.version}`
      ].filter(Boolean);
      item.append(when, ` · ${what.join(' · ')} · `);
      if (run.job_id) {
        const link = document.createElement('button');
        link.type = 'button';
        link.className = 'nbjobs-JobDetail-link';
        link.textContent = runState(run, trans);
        link.title = trans('Job %1', run.job_id);
        const id = run.job_id;
        link.addEventListener('click', () => void this.actions.openJob(id));
        item.append(link);
      } else {
        item.append(runState(run, trans));
      }
      if (typeof run.duration_seconds === 'number') {
        item.append(` · ${formatLimit(run.duration_seconds, trans)}`);
      }
      const changed = Object.entries(run.parameters_changed ?? {}).map(
        ([name, [before, after]]) => `${name}: ${JSON.stringify(before)} → ${JSON.stringify(after)}`
      );
      const why = run.reason ?? changed.join(', ');
      if (why) {
        const note = document.createElement('div');
        note.className = 'nbjobs-Definition-runWhy';
        note.textContent = why;
        item.append(note);
      }
      list.append(item);
    }
    return list;
  }

  private _status: HTMLDivElement;
  private _list: HTMLUListElement;
}

/** A run's state as the user reads it: its job's state once it has one. */
export function runState(run: IDefinitionRun, trans: Translate): string {
  if (run.job_state) {
    return run.job_state.replace('_', ' ');
  }
  switch (run.state) {
    case 'refused':
      return trans('refused');
    case 'skipped':
      return trans('skipped');
    case 'starting':
      return trans('starting');
    default:
      return trans('submitted');
  }
}

function localTime(iso: string): string {
  return new Date(iso).toLocaleString(undefined, {
    month: 'short',
    day: 'numeric',
    hour: '2-digit',
    minute: '2-digit'
  });
}

/** A definition's lines: its name (paused or not), when it runs, its flavor, notebook
 * and its next and last runs. */
function definitionLines(definition: IDefinition, trans: Translate): HTMLDivElement[] {
  const name = document.createElement('div');
  name.className = 'nbjobs-Definition-name';
  name.textContent = definition.name;
  if (definition.paused) {
    const badge = document.createElement('span');
    badge.className = 'nbjobs-Definition-paused';
    badge.textContent = trans('paused');
    name.append(' ', badge);
  }
  const when = document.createElement('div');
  when.className = 'nbjobs-Definition-when';
  const schedule = definition.schedule;
  const window = schedule
    ? windowWords(schedule.start_at, schedule.end_at, schedule.timezone, trans)
    : '';
  when.textContent = schedule
    ? schedule.description + (window ? `, ${window}` : '')
    : trans('runs when you ask (Run now)');
  const facts = document.createElement('div');
  facts.className = 'nbjobs-Definition-facts';
  const parts = [`${definition.flavor} · ${definition.path}`];
  if (definition.next_run_at) {
    parts.push(trans('next %1', localTime(definition.next_run_at)));
  }
  if (definition.last_run) {
    parts.push(trans('last: %1', runState(definition.last_run, trans)));
  }
  facts.textContent = parts.join(' · ');
  return [name, when, facts];
}

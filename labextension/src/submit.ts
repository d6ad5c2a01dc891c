/**
 * The Submit Job dialog: pick a flavor, adjust parameters, name the job, send.
 *
 * The dialog stays open until the job service accepts the job; a refusal is
 * shown inside it as the service's own sentence, so the user can fix the
 * choice and press Enter again.
 */
import { Dialog } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';

import { NbjobsError } from './api';
import {
  defaultFlavor,
  flavorAvailability,
  flavorNodesNote,
  flavorResources,
  kernelChoice,
  placeText,
  roomWarning
} from './format';
import {
  type IParameter,
  type JSONValue,
  checkValue,
  parseParameterCell,
  pythonRepr
} from './params';
import type { Translate } from './translate';
import { type Every, browserTimezone, cronFor, dayIn, everyChoices, windowFor } from './schedule';
import type {
  IDefinition,
  IFlavor,
  IJob,
  IOutputDefaults,
  IScheduleSpec,
  ISubmitRequest,
  OutputLocation
} from './types';

const LAST_FLAVOR = 'nbjobs:last-flavor';

/** The flavor of the user's last submission in this browser that needed no approval;
 * null: none, or no storage. */
export function lastFlavor(): string | null {
  try {
    return localStorage.getItem(LAST_FLAVOR);
  } catch {
    return null; // storage off (a private window's settings): the usual default
  }
}

/** Remember the flavor just submitted to (one that needed no approval), for the next
 * Submit dialog. */
export function rememberFlavor(name: string): void {
  try {
    localStorage.setItem(LAST_FLAVOR, name);
  } catch {
    // storage off or full: the next dialog picks as it would have
  }
}

/** What a re-run starts from: the job it repeats (its flavor, parameters and name). */
export interface IPrefill {
  flavor: string;
  /** as the API sent them: parsed from JSON, so each is a JSON value */
  parameters: { [name: string]: unknown };
  name: string;
  /** the kernel it was given instead of the notebook's */
  kernel?: string | null;
  outputs?: OutputLocation;
  html?: boolean;
  /** a definition being edited: its schedule (null: it runs when asked) */
  schedule?: {
    cron: string;
    timezone: string;
    start_at?: string | null;
    end_at?: string | null;
    catch_up?: 'once' | 'skip';
  } | null;
}

/** What the dialog knows besides the flavors. */
export interface ISubmitContext {
  /** the kernel the notebook names (metadata.kernelspec.name); null: none named */
  notebookKernel?: string | null;
  /** where results go by default (null: an older service, which offers no choice) */
  outputs?: IOutputDefaults | null;
  /** offer "On a schedule" beside "Run now" (a new submission; not a re-run) */
  schedules?: boolean;
  /** the notebook's size as saved (bytes): its result is at least as big */
  notebookBytes?: number | null;
}

export class SubmitForm extends Widget {
  constructor(
    readonly path: string,
    private readonly flavors: IFlavor[],
    parameterSource: string | null,
    private readonly trans: Translate,
    private readonly prefill: IPrefill | null = null,
    private readonly context: ISubmitContext = {}
  ) {
    super();
    this.addClass('nbjobs-SubmitForm');
    const form = document.createElement('form');
    // Enter submits through the dialog; a native submit would reload the page.
    form.addEventListener('submit', event => event.preventDefault());

    const notebook = document.createElement('p');
    notebook.className = 'nbjobs-SubmitForm-notebook';
    notebook.textContent = trans('Run %1 as a job on:', path);
    form.append(notebook);
    // At the top, so a refusal is seen without scrolling a long form.
    this._error = document.createElement('div');
    this._error.className = 'nbjobs-SubmitForm-error';
    this._error.setAttribute('role', 'alert');
    this._error.hidden = true;
    form.append(this._error);

    form.append(this._flavorChoice());
    this._parameters = parameterSource === null ? null : parseParameterCell(parameterSource);
    form.append(this._parameterFields());

    const nameLabel = document.createElement('label');
    nameLabel.className = 'nbjobs-SubmitForm-name';
    nameLabel.textContent = trans('Job name (optional)');
    this._name = document.createElement('input');
    this._name.type = 'text';
    this._name.className = 'jp-mod-styled';
    this._name.maxLength = 255;
    this._name.placeholder = path.replace(/^.*\//, '').replace(/\.ipynb$/, '');
    this._name.value = prefill?.name ?? '';
    nameLabel.append(this._name);
    form.append(nameLabel);
    form.append(this._kernelField());
    if (context.schedules) {
      form.append(this._whenFields());
    }
    if (context.outputs) {
      form.append(this._outputFields(context.outputs));
    }
    // The kernel choice depends on the flavor: a flavor lacking the notebook's asks.
    for (const input of this._flavorInputs) {
      input.addEventListener('change', () => {
        this._showKernels();
        this._showNodesNotes();
      });
    }
    this._showKernels();

    this.node.append(form);
  }

  /** The request to send, or null after marking what must be fixed. */
  request(): ISubmitRequest | null {
    this.showError(null);
    const flavor = this._flavorInputs.find(input => input.checked)?.value;
    if (!flavor) {
      this.showError(this.trans('Pick a flavor to run the job on.'));
      return null;
    }
    const parameters: { [name: string]: JSONValue } = {};
    let firstBad: HTMLInputElement | null = null;
    for (const [parameter, input, message] of this._parameterInputs) {
      const checked = checkValue(parameter.name, parameter.kind, input.value, this.trans);
      input.setAttribute('aria-invalid', String(!checked.ok));
      message.textContent = checked.ok ? '' : checked.error;
      message.hidden = checked.ok;
      if (!checked.ok) {
        firstBad = firstBad ?? input;
        continue;
      }
      // Only values the user changed are passed; the cell keeps the rest.
      if (JSON.stringify(checked.value) !== JSON.stringify(parameter.value)) {
        parameters[parameter.name] = checked.value;
      }
    }
    if (firstBad) {
      firstBad.focus();
      return null;
    }
    const request: ISubmitRequest = { path: this.path, flavor, parameters };
    const name = this._name.value.trim();
    if (name) {
      request.name = name;
    }
    if (!this._kernelRow.hidden) {
      if (!this._kernel.value) {
        this.showError(
          this.trans(
            'Flavor %1 has no kernel to run this notebook on; pick another flavor.',
            flavor
          )
        );
        return null;
      }
      request.kernel = this._kernel.value;
    }
    if (this._outputs && this._html) {
      request.outputs = this._outputs.value as OutputLocation;
      request.html = this._html.checked;
    }
    return request;
  }

  /**
   * The schedule asked for, or null for "Run now"; undefined after marking what must
   * be fixed (call after `request()`).
   */
  schedule(): IScheduleSpec | null | undefined {
    if (!this._scheduled?.checked || !this._every || !this._time || !this._cron || !this._zone) {
      return null;
    }
    const found = cronFor(
      this._every.value as Every,
      this._time.value,
      this._cron.value,
      this.trans
    );
    if ('error' in found) {
      this.showError(found.error);
      return undefined;
    }
    const zone = this._zone.value.trim();
    const window = windowFor(
      this._first?.value ?? '',
      this._last?.value ?? '',
      zone || browserTimezone(),
      this.trans
    );
    if ('error' in window) {
      this.showError(window.error);
      return undefined;
    }
    // an edit keeps what the dialog does not show (catch_up, set by the command line)
    const catchUp = this.prefill?.schedule?.catch_up;
    return {
      cron: found.cron,
      timezone: zone || null,
      ...window,
      ...(catchUp ? { catch_up: catchUp } : {})
    };
  }

  /** Show the server's sentence (or clear it). */
  showError(message: string | null): void {
    this._error.textContent = message ?? '';
    this._error.hidden = !message;
    if (message) {
      this._error.scrollIntoView({ block: 'nearest' });
    }
  }

  /** Grey the form out while the request is on its way. */
  setBusy(busy: boolean): void {
    this.node.classList.toggle('nbjobs-mod-busy', busy);
    this.node.setAttribute('aria-busy', String(busy));
  }

  private _flavorChoice(): HTMLElement {
    const trans = this.trans;
    const fieldset = document.createElement('fieldset');
    fieldset.className = 'nbjobs-FlavorList';
    const legend = document.createElement('legend');
    legend.textContent = trans('Flavor');
    fieldset.append(legend);
    if (this.flavors.length === 0) {
      const none = document.createElement('p');
      none.textContent = trans(
        'No flavor is available to you. Ask your admin or teacher for access.'
      );
      fieldset.append(none);
      return fieldset;
    }
    const again = this.flavors.find(f => f.name === this.prefill?.flavor && !f.unavailable);
    // a re-run or an edit: what it ran on; a new submission: what the user picked last
    const preselected = again ?? defaultFlavor(this.flavors, this.prefill ? null : lastFlavor());
    for (const flavor of this.flavors) {
      const label = document.createElement('label');
      label.className = 'nbjobs-Flavor';
      label.dataset.flavor = flavor.name;
      const input = document.createElement('input');
      input.type = 'radio';
      input.name = 'nbjobs-flavor';
      input.value = flavor.name;
      input.disabled = Boolean(flavor.unavailable);
      input.checked = flavor === preselected;
      const text = document.createElement('span');
      text.className = 'nbjobs-Flavor-text';
      const title = document.createElement('span');
      title.className = 'nbjobs-Flavor-title';
      title.textContent =
        flavor.display_name && flavor.display_name !== flavor.name
          ? trans('%1 (%2)', flavor.display_name, flavor.name)
          : flavor.name;
      const resources = document.createElement('span');
      resources.className = 'nbjobs-Flavor-resources';
      resources.textContent = flavorResources(flavor, trans);
      const availability = document.createElement('span');
      availability.className = 'nbjobs-Flavor-availability';
      availability.dataset.free = String(flavor.available > 0 && !flavor.unavailable);
      availability.textContent = flavorAvailability(flavor, trans);
      text.append(title, resources, availability);
      if (flavor.description) {
        const description = document.createElement('span');
        description.className = 'nbjobs-Flavor-description';
        description.textContent = flavor.description;
        text.append(description);
      }
      const nodesNote = flavorNodesNote(flavor, trans);
      if (nodesNote) {
        // what a job on several nodes must do, said only for the flavor picked
        const note = document.createElement('span');
        note.className = 'nbjobs-Flavor-nodes';
        note.textContent = nodesNote;
        note.hidden = !input.checked;
        text.append(note);
        this._nodesNotes.push([input, note]);
      }
      label.classList.toggle('nbjobs-mod-disabled', input.disabled);
      label.append(input, text);
      fieldset.append(label);
      this._flavorInputs.push(input);
    }
    return fieldset;
  }

  private _kernelField(): HTMLElement {
    const row = document.createElement('label');
    row.className = 'nbjobs-SubmitForm-kernel';
    this._kernelNote = document.createElement('span');
    this._kernelNote.className = 'nbjobs-SubmitForm-kernelNote';
    this._kernel = document.createElement('select');
    this._kernel.className = 'jp-mod-styled';
    this._kernel.name = 'nbjobs-kernel';
    row.append(this._kernelNote, this._kernel);
    row.hidden = true;
    this._kernelRow = row;
    return row;
  }

  /** Offer the selected flavor's kernels when it lacks the notebook's (or one was chosen). */
  private _showKernels(): void {
    const name = this._flavorInputs.find(input => input.checked)?.value;
    const flavor = this.flavors.find(f => f.name === name);
    const notebookKernel = this.context.notebookKernel || 'python3';
    const chosen = this._kernel.value || this.prefill?.kernel;
    const kernels = kernelChoice(flavor, notebookKernel, chosen);
    this._kernelRow.hidden = kernels === null;
    if (kernels === null || !flavor) {
      return;
    }
    this._kernelNote.textContent = kernels.some(
      k => k.toLowerCase() === notebookKernel.toLowerCase()
    )
      ? this.trans('Kernel')
      : this.trans(
          "This notebook's kernel “%1” is not available on %2. Run it on:",
          notebookKernel,
          flavor.display_name || flavor.name
        );
    this._kernel.replaceChildren(
      ...kernels.map(kernel => {
        const option = document.createElement('option');
        option.value = option.textContent = kernel;
        return option;
      })
    );
    const keep = kernels.find(k => k.toLowerCase() === (chosen ?? '').toLowerCase());
    const python = kernels.find(k => k.toLowerCase() === 'python3');
    this._kernel.value = keep ?? python ?? kernels[0] ?? '';
  }

  /** The note of a flavor on several nodes shows while that flavor is picked. */
  private _showNodesNotes(): void {
    for (const [input, note] of this._nodesNotes) {
      note.hidden = !input.checked;
    }
  }

  /** "Run now" or "On a schedule": every day at, on weekdays at, ..., or cron. */
  private _whenFields(): HTMLElement {
    const trans = this.trans;
    const fieldset = document.createElement('fieldset');
    fieldset.className = 'nbjobs-SubmitForm-when';
    const legend = document.createElement('legend');
    legend.textContent = trans('When');
    const choice = (label: string, checked: boolean) => {
      const wrap = document.createElement('label');
      const input = document.createElement('input');
      input.type = 'radio';
      input.name = 'nbjobs-when';
      input.checked = checked;
      wrap.append(input, document.createTextNode(label));
      return [wrap, input] as const;
    };
    const editing = this.prefill?.schedule;
    const [nowLabel, now] = choice(
      editing === undefined ? trans('Run now') : trans('When asked (Run now)'),
      !editing
    );
    const [laterLabel, later] = choice(trans('On a schedule'), Boolean(editing));
    now.value = 'now';
    later.value = 'schedule';
    this._scheduled = later;
    const row = document.createElement('div');
    row.className = 'nbjobs-SubmitForm-schedule';
    this._every = everySelect(trans);
    this._time = document.createElement('input');
    this._time.type = 'text';
    this._time.className = 'jp-mod-styled';
    this._time.name = 'nbjobs-time';
    this._time.value = '02:00';
    this._time.size = 5;
    this._time.setAttribute('aria-label', trans('Time (HH:MM)'));
    this._cron = document.createElement('input');
    this._cron.type = 'text';
    this._cron.className = 'jp-mod-styled';
    this._cron.name = 'nbjobs-cron';
    this._cron.placeholder = '0 2 * * *';
    this._cron.setAttribute('aria-label', trans('Cron expression'));
    this._zone = document.createElement('input');
    this._zone.type = 'text';
    this._zone.className = 'jp-mod-styled';
    this._zone.name = 'nbjobs-timezone';
    this._zone.value = editing?.timezone ?? browserTimezone();
    if (editing) {
      this._every.value = 'cron';
      this._cron.value = editing.cron;
    }
    this._zone.setAttribute('aria-label', trans('Time zone'));
    const zoneLabel = document.createElement('span');
    zoneLabel.textContent = trans('time zone');
    // its first and last day, on the schedule's clock (both optional)
    const zone = editing?.timezone || browserTimezone();
    this._first = dayInput('nbjobs-first-day', trans('First day'), editing?.start_at, zone);
    this._last = dayInput('nbjobs-last-day', trans('Last day'), editing?.end_at, zone);
    const days = dayRange(this._first, this._last, trans);
    row.append(this._every, this._time, this._cron, zoneLabel, this._zone, days);
    const show = () => {
      row.hidden = !later.checked;
      const cron = this._every!.value === 'cron';
      this._cron!.hidden = !cron;
      this._time!.hidden = cron;
    };
    for (const input of [now, later]) {
      input.addEventListener('change', show);
    }
    this._every.addEventListener('change', show);
    show();
    const note = document.createElement('p');
    note.className = 'nbjobs-Parameters-note';
    note.textContent = trans(
      'A schedule saves this submission as a job definition: it runs by itself, and you find it under Schedules in the Jobs panel.'
    );
    fieldset.append(legend, nowLabel, laterLabel, row, note);
    return fieldset;
  }

  private _outputFields(defaults: IOutputDefaults): HTMLElement {
    const trans = this.trans;
    const fieldset = document.createElement('fieldset');
    fieldset.className = 'nbjobs-SubmitForm-outputs';
    const legend = document.createElement('legend');
    legend.textContent = trans('Result');
    const where = document.createElement('label');
    where.textContent = trans('Save the executed notebook');
    this._outputs = document.createElement('select');
    this._outputs.className = 'jp-mod-styled';
    this._outputs.name = 'nbjobs-outputs';
    const folder = this.path.includes('/') ? this.path.replace(/\/[^/]*$/, '/') : '';
    for (const [value, label] of [
      ['beside', trans('next to the notebook')],
      ['folder', trans('in %1 next to it', `${folder}${defaults.folder}/`)]
    ]) {
      const option = document.createElement('option');
      option.value = value;
      option.textContent = label;
      this._outputs.append(option);
    }
    this._outputs.value = this.prefill?.outputs ?? defaults.location;
    where.append(this._outputs);
    const html = document.createElement('label');
    html.className = 'nbjobs-SubmitForm-html';
    this._html = document.createElement('input');
    this._html.type = 'checkbox';
    this._html.name = 'nbjobs-html';
    this._html.checked = this.prefill?.html ?? defaults.html;
    html.append(this._html, document.createTextNode(trans('Also save an HTML copy')));
    fieldset.append(legend, where, html);
    if (defaults.where) {
      fieldset.append(...this._placeLines(defaults));
    }
    return fieldset;
  }

  /**
   * Where the result lands as people know it (the share on a cluster, the folder on one
   * machine) and the room left there; a warning when the notebook alone would not fit.
   */
  private _placeLines(defaults: IOutputDefaults): HTMLElement[] {
    const place = document.createElement('p');
    place.className = 'nbjobs-SubmitForm-where';
    const folder = this.path.includes('/') ? '/' + this.path.replace(/\/[^/]*$/, '') : '';
    place.textContent = placeText(`${defaults.where}${folder}`, defaults.free_bytes, this.trans);
    const told = roomWarning(defaults.free_bytes, this.context.notebookBytes, this.trans);
    if (told === null) {
      return [place];
    }
    const warning = document.createElement('p');
    warning.className = 'nbjobs-SubmitForm-warning';
    warning.setAttribute('role', 'status');
    warning.textContent = told;
    return [place, warning];
  }

  private _parameterFields(): HTMLElement {
    const trans = this.trans;
    const fieldset = document.createElement('fieldset');
    fieldset.className = 'nbjobs-Parameters';
    const legend = document.createElement('legend');
    legend.textContent = trans('Parameters');
    fieldset.append(legend);
    const note = document.createElement('p');
    note.className = 'nbjobs-Parameters-note';
    if (this._parameters === null) {
      note.textContent = trans('This notebook has no cell tagged "parameters"; it runs as saved.');
      fieldset.append(note);
      return fieldset;
    }
    note.textContent = this._parameters.parameters.length
      ? trans('From the cell tagged "parameters". Changed values replace the defaults.')
      : trans('The "parameters" cell has no simple assignments to change.');
    fieldset.append(note);
    for (const parameter of this._parameters.parameters) {
      const row = document.createElement('label');
      row.className = 'nbjobs-Parameter';
      const name = document.createElement('span');
      name.className = 'nbjobs-Parameter-name';
      name.textContent = parameter.name;
      const input = document.createElement('input');
      input.type = 'text';
      input.className = 'jp-mod-styled';
      input.name = parameter.name;
      // A re-run starts from the values the job ran with.
      const before = this.prefill?.parameters[parameter.name];
      input.value = before === undefined ? parameter.text : pythonRepr(before as JSONValue);
      input.spellcheck = false;
      const kind = document.createElement('span');
      kind.className = 'nbjobs-Parameter-kind';
      kind.textContent = parameter.kind === 'none' ? trans('any') : parameter.kind;
      const message = document.createElement('span');
      message.className = 'nbjobs-Parameter-error';
      message.hidden = true;
      row.append(name, input, kind, message);
      fieldset.append(row);
      this._parameterInputs.push([parameter, input, message]);
    }
    if (this._parameters.skipped.length) {
      const skipped = document.createElement('p');
      skipped.className = 'nbjobs-Parameters-note';
      skipped.textContent = trans(
        'Kept as written: %1',
        this._parameters.skipped.map(s => s.split('\n')[0]).reduce((a, b) => trans('%1; %2', a, b))
      );
      fieldset.append(skipped);
    }
    return fieldset;
  }

  private _parameters: ReturnType<typeof parseParameterCell> | null;
  private _flavorInputs: HTMLInputElement[] = [];
  private _nodesNotes: [HTMLInputElement, HTMLSpanElement][] = [];
  private _parameterInputs: [IParameter, HTMLInputElement, HTMLSpanElement][] = [];
  private _name: HTMLInputElement;
  private _error: HTMLDivElement;
  private _kernelRow!: HTMLLabelElement;
  private _kernelNote!: HTMLSpanElement;
  private _kernel!: HTMLSelectElement;
  private _outputs: HTMLSelectElement | null = null;
  private _html: HTMLInputElement | null = null;
  private _scheduled: HTMLInputElement | null = null;
  private _every: HTMLSelectElement | null = null;
  private _first: HTMLInputElement | null = null;
  private _last: HTMLInputElement | null = null;
  private _time: HTMLInputElement | null = null;
  private _cron: HTMLInputElement | null = null;
  private _zone: HTMLInputElement | null = null;
}

/** A dialog that sends the job before it closes, and stays open on a refusal. */
export class SubmitDialog extends Dialog<IJob | null> {
  constructor(
    private readonly form: SubmitForm,
    /** sends the request; null when what it saved is no job (an edited definition) */
    private readonly send: (request: ISubmitRequest) => Promise<IJob | null>,
    trans: Translate,
    title?: string,
    /** how a submission with a schedule is saved (as a job definition) */
    private readonly save?: (
      request: ISubmitRequest,
      schedule: IScheduleSpec
    ) => Promise<IDefinition>
  ) {
    const buttons = [
      Dialog.cancelButton({ label: trans('Cancel') }),
      Dialog.okButton({ label: trans('Submit'), ariaLabel: trans('Submit the job') })
    ];
    super({
      title: title ?? trans('Submit Job'),
      body: form,
      buttons,
      defaultButton: 1,
      focusNodeSelector: 'input[name="nbjobs-flavor"]:checked, input'
    });
    this.addClass('nbjobs-SubmitDialog');
    this._buttonList = buttons;
  }

  /** The job the service accepted, once the dialog closed with Submit. */
  get job(): IJob | null {
    return this._job;
  }

  /** The definition saved instead, when the user chose "On a schedule". */
  get definition(): IDefinition | null {
    return this._definition;
  }

  resolve(index?: number): void {
    const button = this._buttonList[index ?? 1];
    if (!button?.accept) {
      super.resolve(index);
      return;
    }
    if (this._sending) {
      return;
    }
    const request = this.form.request();
    if (request === null) {
      return;
    }
    const schedule = this.form.schedule();
    if (schedule === undefined) {
      return;
    }
    this._sending = true;
    this.form.setBusy(true);
    const sent: Promise<void> =
      schedule && this.save
        ? this.save(request, schedule).then(definition => {
            this._definition = definition;
          })
        : this.send(request).then(job => {
            this._job = job;
            // The next Submit dialog starts from it, unless its jobs wait for a person's
            // yes: one such job is asked for on purpose, the next starts where it was.
            if (job?.state !== 'pending_approval') {
              rememberFlavor(request.flavor);
            }
          });
    sent
      .then(() => {
        super.resolve(index ?? 1);
      })
      .catch(error => {
        this.form.showError(error instanceof NbjobsError ? error.message : String(error));
      })
      .finally(() => {
        this._sending = false;
        this.form.setBusy(false);
      });
  }

  private _buttonList: Dialog.IButton[];
  private _job: IJob | null = null;
  private _definition: IDefinition | null = null;
  private _sending = false;
}

/** How often a schedule runs: every day, on weekdays, ..., or a cron expression. */
function everySelect(trans: Translate): HTMLSelectElement {
  const every = document.createElement('select');
  every.className = 'jp-mod-styled';
  every.name = 'nbjobs-every';
  for (const [value, label] of everyChoices(trans)) {
    const option = document.createElement('option');
    option.value = value;
    option.textContent = label;
    every.append(option);
  }
  return every;
}

/** A schedule's first or last day, shown on its clock (``zone``). */
function dayInput(
  name: string,
  label: string,
  at: string | null | undefined,
  zone: string
): HTMLInputElement {
  const input = document.createElement('input');
  input.type = 'date';
  input.className = 'jp-mod-styled';
  input.name = name;
  input.setAttribute('aria-label', label);
  if (at) {
    input.value = dayIn(at, zone);
  }
  return input;
}

/** "from FIRST until LAST (either may stay empty)" */
function dayRange(
  first: HTMLInputElement,
  last: HTMLInputElement,
  trans: Translate
): HTMLDivElement {
  const days = document.createElement('div');
  days.className = 'nbjobs-SubmitForm-days';
  const words = (text: string, className = '') => {
    const span = document.createElement('span');
    span.className = className;
    span.textContent = text;
    return span;
  };
  days.append(
    words(trans('from')),
    first,
    words(trans('until')),
    last,
    words(trans('(either may stay empty)'), 'nbjobs-SubmitForm-optional')
  );
  return days;
}

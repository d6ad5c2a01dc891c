/**
 * How the Jobs panel and the Submit dialog put jobs and flavors into words.
 *
 * Pure functions of the API's JSON and the current time, so they are tested
 * without a browser.
 */
import { type Translate, plain } from './translate';
import { FINAL_STATES, type IFlavor, type IJob, type JobState } from './types';

/** Whether the job is over. */
export function isFinal(state: JobState): boolean {
  return FINAL_STATES.has(state);
}

/** Whether the job has not started: waiting for approval or in the queue. */
export function isWaiting(state: JobState): boolean {
  return state === 'queued' || state === 'pending_approval';
}

/** Whether the job is waiting or computing (the panel should poll briskly). */
export function isActive(state: JobState): boolean {
  return !isFinal(state);
}

/** A duration for people: `45s`, `3m 07s`, `2h 05m`, `3d 4h` (units translated). */
export function formatDuration(seconds: number, trans: Translate = plain): string {
  const s = Math.max(0, Math.floor(seconds));
  if (s < 60) {
    return trans('%1s', s);
  }
  const pad = (n: number) => String(n).padStart(2, '0');
  if (s < 3600) {
    return trans('%1m %2s', Math.floor(s / 60), pad(s % 60));
  }
  if (s < 86400) {
    return trans('%1h %2m', Math.floor(s / 3600), pad(Math.floor((s % 3600) / 60)));
  }
  return trans('%1d %2h', Math.floor(s / 86400), Math.floor((s % 86400) / 3600));
}

/**
 * A limit as people write it: `45 s`, `30 min`, `1 h 30 min`, `4 h`, `2 days`,
 * `1 day 6 h` (a running clock uses formatDuration; a limit is a round number).
 */
export function formatLimit(seconds: number, trans: Translate = plain): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) {
    return trans('%1 s', s);
  }
  if (s < 3600) {
    const m = Math.floor(s / 60);
    const rest = s % 60;
    return rest ? trans('%1 min %2 s', m, rest) : trans('%1 min', m);
  }
  if (s < 86400) {
    const h = Math.floor(s / 3600);
    const m = Math.floor((s % 3600) / 60);
    return m ? trans('%1 h %2 min', h, m) : trans('%1 h', h);
  }
  const d = Math.floor(s / 86400);
  const h = Math.floor((s % 86400) / 3600);
  const days = d === 1 ? trans('1 day') : trans('%1 days', d);
  return h ? trans('%1 %2 h', days, h) : days;
}

/** Short facts in a row, `a · b · c`; the separator is the translator's. */
export function joinFacts(parts: string[], trans: Translate = plain): string {
  return parts.reduce((joined, part) => trans('%1 · %2', joined, part));
}

/**
 * Seconds the job has been in its current phase: waiting since submission
 * while queued, running since it started, and its run time once over.
 */
export function elapsedSeconds(job: IJob, now: Date): number {
  const from = Date.parse(
    isWaiting(job.state) || !job.started_at ? job.submitted_at : job.started_at
  );
  const to = job.finished_at ? Date.parse(job.finished_at) : now.getTime();
  return Math.max(0, (to - from) / 1000);
}

/** The job's state in a few words, with the queue position while it waits. */
export function stateLabel(job: IJob, trans: Translate = plain): string {
  switch (job.state) {
    case 'pending_approval':
      return trans('Awaiting approval');
    case 'queued':
      return job.queue_position
        ? trans('Queued, #%1 in line', job.queue_position)
        : trans('Queued');
    case 'starting':
      return trans('Starting');
    case 'running':
      return trans('Running');
    case 'succeeded':
      return trans('Succeeded');
    case 'failed':
      return trans('Failed');
    case 'cancelled':
      return trans('Cancelled');
    case 'timed_out':
      return trans('Timed out');
  }
}

/** Cells done out of all, as a fraction in [0, 1]; null before the runner counted them. */
export function progressFraction(job: IJob): number | null {
  const { cells_done, cells_total } = job.progress;
  if (!cells_total) {
    return null;
  }
  return Math.min(1, Math.max(0, cells_done / cells_total));
}

/**
 * The cell running now, as the job's log names it when the cell starts: `code cell 3
 * of 5` while two are done (the runner counts the author's code cells from 1); `all 5
 * code cells ran` once the last is done; null before the first cell starts (the kernel
 * is starting) or before the runner counted them.
 */
export function progressLabel(job: IJob, trans: Translate = plain): string | null {
  const { cells_done, cells_total, current_cell } = job.progress;
  if (!cells_total || (current_cell === null && cells_done === 0)) {
    return null;
  }
  if (cells_done >= cells_total) {
    return trans('all %1 code cells ran', cells_total);
  }
  return trans('code cell %1 of %2', cells_done + 1, cells_total);
}

/** `2 of 5 code cells done` (what the progress bar shows), or null before they are counted. */
export function progressDone(job: IJob, trans: Translate = plain): string | null {
  const { cells_done, cells_total } = job.progress;
  if (!cells_total) {
    return null;
  }
  return trans('%1 of %2 code cells done', Math.min(cells_done, cells_total), cells_total);
}

/** How many nodes a job of the flavor spans (1 from a service that does not say). */
export function flavorNodes(flavor: Pick<IFlavor, 'nodes'>): number {
  return flavor.nodes ?? 1;
}

/**
 * What a flavor gives: `1 × A100 GPU · 8 CPU · 32Gi memory · up to 1 h`; one on several
 * nodes says what each node has: `2 nodes × 1 A100 GPU · 8 CPU per node · …`.
 */
export function flavorResources(flavor: IFlavor, trans: Translate = plain): string {
  const parts: string[] = [];
  const nodes = flavorNodes(flavor);
  if (nodes > 1) {
    // whole GPUs only: a flavor on several nodes cannot share one (nbjobs.yaml refuses it)
    const type =
      (flavor.simulated ? ` ${trans('simulated')}` : '') +
      (flavor.gpu_type ? ` ${flavor.gpu_type}` : '');
    parts.push(
      flavor.gpus > 0
        ? trans('%1 nodes × %2%3 GPU', nodes, flavor.gpus, type)
        : trans('%1 nodes, no GPU', nodes)
    );
  } else if (flavor.gpus > 0) {
    // Simulated GPUs (trying nbjobs without one) say so wherever the GPU is named.
    const type =
      (flavor.simulated ? ` ${trans('simulated')}` : '') +
      (flavor.gpu_type ? ` ${flavor.gpu_type}` : '');
    const fraction = flavor.fraction;
    parts.push(
      typeof fraction === 'number'
        ? trans('%1 of one%2 GPU', formatFraction(fraction), type)
        : flavor.shared
          ? trans('shared%1 GPU', type)
          : trans('%1 ×%2 GPU', flavor.gpus, type)
    );
  } else {
    parts.push(trans('no GPU'));
  }
  if (flavor.cpu) {
    parts.push(nodes > 1 ? trans('%1 CPU per node', flavor.cpu) : trans('%1 CPU', flavor.cpu));
  }
  if (flavor.memory) {
    parts.push(
      nodes > 1 ? trans('%1 memory per node', flavor.memory) : trans('%1 memory', flavor.memory)
    );
  }
  if (flavor.time_limit) {
    parts.push(trans('up to %1', formatLimit(flavor.time_limit, trans)));
  }
  const perHour = flavor.credits_per_hour;
  if (typeof perHour === 'number') {
    // what a job of it holds on the account until it ends: its worst case
    parts.push(
      flavor.time_limit
        ? trans(
            '%1 credits an hour, at most %2 a job',
            formatCredits(perHour),
            formatCredits((perHour * flavor.time_limit) / 3600)
          )
        : trans('%1 credits an hour', formatCredits(perHour))
    );
  }
  return joinFacts(parts, trans);
}

/**
 * What a flavor on several nodes means for the job, said under it once it is picked;
 * null for a flavor on one node.
 */
export function flavorNodesNote(flavor: IFlavor, trans: Translate = plain): string | null {
  const nodes = flavorNodes(flavor);
  if (nodes <= 1) {
    return null;
  }
  return trans(
    'Runs on %1 nodes that start together; your script gets MASTER_ADDR, MASTER_PORT, WORLD_SIZE and NODE_RANK (torchrun reads them).',
    nodes
  );
}

/**
 * Live availability: `2 of 4 GPUs free · 3 waiting` for a GPU flavor,
 * `1 free now · no queue` for one without GPUs, or why the flavor cannot run.
 */
export function flavorAvailability(flavor: IFlavor, trans: Translate = plain): string {
  if (flavor.unavailable) {
    return flavor.unavailable;
  }
  const capacity = capacityText(flavor, trans);
  // Drained nodes: say how much of the flavor is in maintenance (the service's words).
  return flavor.maintenance ? joinFacts([capacity, flavor.maintenance], trans) : capacity;
}

function capacityText(flavor: IFlavor, trans: Translate): string {
  const waiting = flavor.queued > 0 ? trans('%1 waiting', flavor.queued) : trans('no queue');
  if (flavor.placement) {
    // An engine (KAI Scheduler, Volcano) decides: no count nbjobs cannot know.
    return joinFacts([flavor.placement, waiting], trans);
  }
  const freeGpus = flavor.free_gpus;
  const totalGpus = flavor.total_gpus;
  if (
    typeof flavor.fraction === 'number' &&
    typeof freeGpus === 'number' &&
    typeof totalGpus === 'number'
  ) {
    const slices =
      totalGpus === 1
        ? trans('%1 of 1 slice free', freeGpus)
        : trans('%1 of %2 slices free', freeGpus, totalGpus);
    return joinFacts(
      [freeGpus > 0 ? slices : trans('%1: a job will wait', slices), waiting],
      trans
    );
  }
  if (flavor.gpus > 0 && typeof freeGpus === 'number' && typeof totalGpus === 'number') {
    const gpus =
      totalGpus === 1
        ? trans('%1 of 1 GPU free', freeGpus)
        : trans('%1 of %2 GPUs free', freeGpus, totalGpus);
    // Free GPUs may still be too few for this flavor (it needs 2, 1 is free).
    const free = flavor.available > 0 ? gpus : trans('%1: a job will wait', gpus);
    const nodes = flavorNodes(flavor);
    // a job on several nodes takes GPUs on each: say how many in all
    const takes = nodes > 1 ? [trans('a job takes %1', nodes * flavor.gpus)] : [];
    return joinFacts([free, ...takes, waiting], trans);
  }
  const free =
    flavor.available > 0
      ? trans('%1 free now', flavor.available)
      : trans('none free now: a job will wait');
  return joinFacts([free, waiting], trans);
}

/** A share of a GPU as people say it: `a quarter`, `half`, `0.15`. */
export function formatFraction(fraction: number): string {
  const named: Record<string, string> = {
    '0.5': 'half',
    '0.25': 'a quarter',
    '0.75': 'three quarters'
  };
  return named[String(fraction)] ?? String(Math.round(fraction * 1000) / 1000);
}

/** The flavor to pre-select: the one picked last (``preferred``) while it is usable, else
 * the first that can start now, else the first usable. */
export function defaultFlavor(flavors: IFlavor[], preferred: string | null = null): IFlavor | null {
  const usable = flavors.filter(f => !f.unavailable);
  // the one the user picked last, while it can run here (busy or not: the dialog says so)
  const chosen = preferred ? usable.find(f => f.name === preferred) : undefined;
  return chosen ?? usable.find(f => f.available > 0) ?? usable[0] ?? null;
}

/** A byte count for people: "512 B", "3.2 KiB", "1.5 MiB", "2 GiB". */
/** The job's warning for its owner, while it runs (its GPUs idle under the flavor's
 *  idle_gpu policy; else, on a cluster with Kueue, that its queue runs on borrowed GPUs
 *  Kueue may take back); null when there is none or the job has ended. */
export function jobWarning(job: IJob): string | null {
  if (isActive(job.state) && job.warning) {
    return job.warning;
  }
  return job.state === 'running' && job.borrowing ? job.borrowing : null;
}

export function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  const shown = unit === 0 || value >= 10 ? Math.round(value).toString() : value.toFixed(1);
  return `${shown.replace(/\.0$/, '')} ${units[unit]}`;
}

/** Credits as people read a price: whole when whole, else to the cent. */
export function formatCredits(value: number): string {
  const rounded = Math.round(value * 100) / 100;
  return Number.isInteger(rounded) ? rounded.toString() : rounded.toFixed(2);
}

/** Where a result is written, as people know the place, and the room left there. */
export function placeText(where: string, freeBytes: number | null, trans: Translate): string {
  return freeBytes === null
    ? trans('Written in %1', where)
    : trans('Written in %1 (%2 free there)', where, formatBytes(freeBytes));
}

/**
 * A warning when the notebook alone (`notebookBytes`, as saved) is bigger than the room
 * left where its result goes: the result is at least as big. Null: it fits, or either
 * is unknown.
 */
export function roomWarning(
  freeBytes: number | null,
  notebookBytes: number | null | undefined,
  trans: Translate
): string | null {
  if (freeBytes === null || notebookBytes === null || notebookBytes === undefined) {
    return null;
  }
  if (freeBytes >= notebookBytes) {
    return null;
  }
  return trans(
    'Only %1 is free where the result goes, and the notebook alone is %2: its result may not be saved. Free some space (or ask your admin) before it ends.',
    formatBytes(freeBytes),
    formatBytes(notebookBytes)
  );
}

/** What one of a job's buttons may do now: enabled, or disabled with the reason. */
export interface IActionState {
  enabled: boolean;
  /** the tooltip: what it does, or why it cannot */
  why: string;
}

/** Every action of a job's row, each enabled or saying why not (`me`: who is looking,
 * null where the Lab does not know, as in a plain `jupyter lab`). */
export function jobActions(
  job: IJob,
  me: string | null,
  trans: Translate = plain
): Record<'cancel' | 'rerun' | 'output' | 'log' | 'remove', IActionState> {
  const active = isActive(job.state);
  const waiting = isWaiting(job.state);
  const theirs = me !== null && job.user !== me;
  const owner = trans('belongs to %1', job.user);
  const ok = (why: string): IActionState => ({ enabled: true, why });
  const no = (why: string): IActionState => ({ enabled: false, why });
  const output = (): IActionState => {
    if (theirs) {
      return no(trans('%1: the output is in their folder', owner));
    }
    if (waiting) {
      return no(trans('waiting: no output yet'));
    }
    if (active) {
      return no(trans('running: see the log'));
    }
    if (!job.started_at) {
      return no(trans('no output: the job never started'));
    }
    return ok(
      job.state === 'failed' && job.error && job.error.cell_index !== null
        ? trans('Open the output at the failing cell')
        : trans('Open the output notebook')
    );
  };
  return {
    cancel: active
      ? ok(theirs ? trans("Cancel %1's job", job.user) : trans('Cancel'))
      : no(trans('ended: nothing to cancel')),
    rerun: theirs
      ? no(trans('%1: its owner re-runs it', owner))
      : active
        ? no(waiting ? trans('waiting: cancel it first') : trans('running: cancel it first'))
        : ok(trans('Re-run')),
    output: output(),
    log: waiting ? no(trans('waiting: no log yet')) : ok(trans('View log')),
    remove: theirs
      ? no(owner)
      : active
        ? no(trans('still active: cancel it first'))
        : ok(trans('Remove from list'))
  };
}

/** Whether a job matches what was typed in the panel's search box and the state chosen:
 * words (all must match) against its name, notebook path, id, flavor, owner and state. */
export function jobMatches(
  job: IJob,
  search: string,
  show: 'all' | 'active' | 'ended' | 'failed'
): boolean {
  if (show === 'active' && !isActive(job.state)) {
    return false;
  }
  if (show === 'ended' && isActive(job.state)) {
    return false;
  }
  if (show === 'failed' && job.state !== 'failed' && job.state !== 'timed_out') {
    return false;
  }
  const haystack = [job.name, job.path, job.id, job.flavor, job.user, job.state]
    .join(' ')
    .toLowerCase();
  return search
    .toLowerCase()
    .split(/\s+/)
    .filter(Boolean)
    .every(word => haystack.includes(word));
}

/** The nodes of a job on several: how many, and that each rank has its own log (the log
 *  tab picks which); null for a job on one node. */
export function jobNodes(job: Pick<IJob, 'nodes'>, trans: Translate = plain): string | null {
  const nodes = job.nodes ?? 1;
  return nodes > 1
    ? trans('%1 (ranks 0 to %2, each with a log of its own)', nodes, nodes - 1)
    : null;
}

/** When a job was submitted, short: `14:02` today, `Nov 24 14:02` before. */
export function submittedAt(iso: string, now: Date = new Date()): string {
  const when = new Date(iso);
  // One formatter each, made once: `toLocale…String` makes one per call, which is
  // most of what drawing a page of rows costs.
  clockFormat ??= new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit' });
  dayFormat ??= new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric' });
  const time = clockFormat.format(when);
  if (when.toDateString() === now.toDateString()) {
    return time;
  }
  return `${dayFormat.format(when)} ${time}`;
}

let clockFormat: Intl.DateTimeFormat | undefined;
let dayFormat: Intl.DateTimeFormat | undefined;

/** Where a job's result went: next to its notebook, or in a folder next to it. */
export function outputLocation(job: Pick<IJob, 'path' | 'output_path'>): 'beside' | 'folder' {
  const folder = (path: string) => path.replace(/[^/]*$/, '');
  return folder(job.output_path) === folder(job.path) ? 'beside' : 'folder';
}

/**
 * The kernels the dialog offers for `flavor`, or null when the notebook's own runs
 * there (or nbjobs cannot tell): only a kernel the flavor lacks needs a choice.
 */
export function kernelChoice(
  flavor: IFlavor | undefined,
  notebookKernel: string | null | undefined,
  chosen?: string | null
): string[] | null {
  const kernels = flavor?.kernels;
  if (!kernels) {
    return null;
  }
  const has = (name: string) => kernels.some(k => k.toLowerCase() === name.toLowerCase());
  if (!chosen && has(notebookKernel || 'python3')) {
    return null;
  }
  return kernels;
}

function localTime(iso: string): string {
  return new Date(iso).toLocaleString();
}

/**
 * What happened to the job on its way through the queue, one line per step, from
 * what the job records: submitted, how long it waited (and for what, while it
 * waits), sent back by the cluster, started where, ended how and after how long.
 */
export function queueHistory(job: IJob, now: Date, trans: Translate): string[] {
  const at = (iso: string) => Date.parse(iso);
  const lines = [trans('submitted %1', localTime(job.submitted_at))];
  if (job.started_at) {
    lines.push(
      trans(
        'waited %1 in the queue',
        formatLimit((at(job.started_at) - at(job.submitted_at)) / 1000, trans)
      )
    );
  } else if (!job.finished_at) {
    const waited = formatLimit((now.getTime() - at(job.submitted_at)) / 1000, trans);
    const place = job.queue_position ? trans(', #%1 in the queue', job.queue_position) : '';
    lines.push(trans('waiting for %1 so far%2', waited, place));
  }
  if (job.requeues) {
    lines.push(
      job.requeues === 1
        ? trans(
            'sent back to the queue once by the cluster (evicted or preempted), then started again'
          )
        : trans(
            'sent back to the queue %1 times by the cluster (evicted or preempted)',
            job.requeues
          )
    );
  }
  if (job.started_at) {
    lines.push(
      job.node
        ? trans('started %1 on %2', localTime(job.started_at), job.node)
        : trans('started %1', localTime(job.started_at))
    );
  }
  if (job.finished_at) {
    const ran = job.started_at
      ? trans(' after %1', formatLimit((at(job.finished_at) - at(job.started_at)) / 1000, trans))
      : trans(' without starting');
    lines.push(trans('%1 %2%3', stateLabel(job, trans), localTime(job.finished_at), ran));
  }
  return lines;
}

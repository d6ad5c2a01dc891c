/**
 * The page bench/panel_bench.py measures in chromium (bundled by esbuild there).
 *
 * It mounts the real Jobs panel (`JobsPanel` over a real `JobsModel`) with
 * `Widget.attach`, the smallest setup that runs it outside JupyterLab: strings go
 * through `plain` (no translator), the API is a stand-in that answers `GET jobs`
 * from generated jobs as the service would (newest first, `before`, `more`), and
 * the buttons' actions do nothing. Beside it, the baseline: a plain list of
 * equally tall `<div>` rows, built at once.
 *
 * Every measure resolves to milliseconds; the Python side takes medians and ratios.
 */
import { Widget } from '@lumino/widgets';

import type { NbjobsAPI } from '../labextension/src/api';
import { DEFAULT_QUERY, type IJobQuery, matchesQuery } from '../labextension/src/joblist';
import { JobsModel } from '../labextension/src/model';
import { FIRST_ROWS, type IJobActions, JobsPanel } from '../labextension/src/panel';
import { plain } from '../labextension/src/translate';
import type { IJob, IJobList, IMe, JobState } from '../labextension/src/types';

const ENDED: JobState[] = ['succeeded', 'succeeded', 'succeeded', 'failed', 'cancelled', 'timed_out'];
const FLAVORS = ['cpu', 't4', 'a100', 'a100x8'];

/** `count` ended jobs, newest first, of a few users, as the service would list them. */
function generateJobs(count: number): IJob[] {
  const jobs: IJob[] = [];
  const start = Date.parse('2026-03-01T08:00:00Z');
  for (let i = count; i > 0; i--) {
    const submitted = start + i * 600_000;
    const state = ENDED[i % ENDED.length];
    jobs.push({
      id: i.toString(16).padStart(12, '0'),
      user: i % 5 === 0 ? 'bob' : 'ada',
      name: `experiment ${i}`,
      path: `projects/run-${i % 37}/train.ipynb`,
      output_path: `projects/run-${i % 37}/train-${i}.ipynb`,
      flavor: FLAVORS[i % FLAVORS.length],
      state,
      queue_position: null,
      waiting_reason: null,
      progress: { cells_done: 12, cells_total: 12, current_cell: null },
      parameters: { lr: 0.001 * (i % 7), epochs: 10 },
      priority: 0,
      gpus: [],
      submitted_at: new Date(submitted).toISOString(),
      started_at: new Date(submitted + 30_000).toISOString(),
      finished_at: new Date(submitted + 300_000 + (i % 11) * 1000).toISOString(),
      exit_code: state === 'succeeded' ? 0 : 1,
      message: state === 'succeeded' ? null : `the job ${state.replace('_', ' ')}`,
      error: null,
      rerun_of: null,
      time_limit: 3600
    });
  }
  return jobs;
}

/** `GET jobs` and `GET me` as the job service answers them, from memory. */
class StandInAPI {
  constructor(private readonly all: IJob[]) {}

  async jobs(
    query: IJobQuery = DEFAULT_QUERY,
    page: { limit?: number; before?: string | null } = {}
  ): Promise<IJobList> {
    const limit = page.limit ?? 100;
    const matching = this.all.filter(job => matchesQuery(job, query));
    const start = page.before ? matching.findIndex(job => job.id === page.before) + 1 : 0;
    // A copy per answer, as JSON from the network would be: new objects every poll.
    const jobs = matching.slice(start, start + limit).map(job => ({ ...job }));
    return { jobs, total: matching.length, limit, offset: 0, more: start + limit < matching.length };
  }

  async me(): Promise<IMe> {
    return { name: 'ada', admin: false, teacher: false, groups: [], classes: [] };
  }
}

const nothing = async (): Promise<void> => undefined;
const actions: IJobActions = {
  cancel: nothing,
  rerun: nothing,
  openOutput: nothing,
  viewLog: nothing,
  remove: nothing,
  showDetails: nothing
};

/** A fresh host of the Lab's left side bar's size. */
function host(): HTMLElement {
  document.getElementById('host')?.remove();
  const node = document.createElement('div');
  node.id = 'host';
  document.body.append(node);
  return node;
}

/** When the frame after now has been painted (its rAF, then the task after it). */
function painted(): Promise<number> {
  return new Promise(resolve =>
    requestAnimationFrame(() => setTimeout(() => resolve(performance.now()), 0))
  );
}

function nextFrame(): Promise<number> {
  return new Promise(resolve => requestAnimationFrame(resolve));
}

let mounted: { panel: JobsPanel; model: JobsModel } | null = null;

/**
 * Mount the panel over `count` jobs and wait until its rows are painted: the first
 * page, or (`all`) every page, loaded with "Show older jobs" one after another.
 */
async function mountPanel(count: number, all: boolean): Promise<number> {
  unmount();
  const api = new StandInAPI(generateJobs(count));
  const where = host();
  const began = performance.now();
  const model = new JobsModel(api as unknown as NbjobsAPI);
  const panel = new JobsPanel(model, actions, plain, null, 'ada');
  const loaded = new Promise<void>(resolve => {
    const check = () => {
      if (model.loaded && model.jobs.length > 0) {
        model.changed.disconnect(check);
        resolve();
      }
    };
    model.changed.connect(check);
  });
  // As the Lab's side bar does: attached hidden, then shown (the panel polls when shown).
  panel.hide();
  Widget.attach(panel, where);
  panel.show();
  await loaded;
  while (all && model.hasOlder) {
    await model.loadOlder();
  }
  const expected = all ? count : Math.min(count, 100);
  const rows = () => panel.node.querySelectorAll('.nbjobs-Job').length;
  if (all) {
    await until(() => rows() === expected);
  }
  // The first screen: what the panel draws before its first frame (FIRST_ROWS rows)
  const shown = rows();
  lastShown = shown;
  if (shown < Math.min(expected, FIRST_ROWS)) {
    throw new Error(`the panel shows ${shown} rows of ${count} jobs`);
  }
  const done = await painted();
  mounted = { panel, model };
  // and every row of the page, made just after that frame (waited for by allRows)
  lastAllRows = until(() => rows() === expected).then(() => performance.now() - began);
  return done - began;
}

/** How many rows the last mountPanel's first frame showed. */
let lastShown = 0;

function firstFrameRows(): number {
  return lastShown;
}

/** The job ids of the rows the panel shows, top to bottom. */
function rowIds(): string[] {
  return [...document.querySelectorAll<HTMLElement>('.nbjobs-Job')].map(
    row => row.dataset.jobId ?? ''
  );
}

/** When the last mountPanel had made every row of what it loaded (ms from its start). */
let lastAllRows: Promise<number> = Promise.resolve(NaN);

function allRows(): Promise<number> {
  return lastAllRows;
}

/** Resolves once `test()` holds, looked at every frame. */
async function until(test: () => boolean): Promise<void> {
  for (let frames = 0; !test(); frames++) {
    if (frames > 600) {
      throw new Error('the panel never showed every row');
    }
    await nextFrame();
  }
}

/** A poll of the mounted panel: the newest page asked again and drawn. */
async function poll(): Promise<number> {
  const model = mounted!.model;
  await painted();
  const began = performance.now();
  await model.refresh();
  return (await painted()) - began;
}

/** The height of the mounted panel's first row, for the baseline's rows. */
function rowHeight(): number {
  const row = mounted!.panel.node.querySelector('.nbjobs-Job') as HTMLElement;
  return row.getBoundingClientRect().height;
}

/** The baseline: `count` plain rows of `height` px with a line of text each, painted. */
async function mountPlain(count: number, height: number): Promise<number> {
  unmount();
  const where = host();
  const began = performance.now();
  const list = document.createElement('div');
  list.className = 'plain-list';
  for (let i = count; i > 0; i--) {
    const row = document.createElement('div');
    row.className = 'plain-row';
    row.style.height = `${height}px`;
    row.textContent = `experiment ${i} · train.ipynb · succeeded`;
    list.append(row);
  }
  where.append(list);
  const done = await painted();
  return done - began;
}

/** The scrolled list of what is mounted: the panel's job list, or the plain list. */
function scroller(): HTMLElement {
  const node = document.querySelector('.nbjobs-JobList, .plain-list');
  if (!node) {
    throw new Error('nothing is mounted');
  }
  return node as HTMLElement;
}

/**
 * Scroll the mounted list from top to bottom, `step` px a frame, as a quick fling
 * would: the time between frames (ms), one per step.
 */
async function scroll(step: number): Promise<number[]> {
  const node = scroller();
  node.scrollTop = 0;
  await painted();
  const frames: number[] = [];
  let last = await nextFrame();
  while (node.scrollTop + node.clientHeight < node.scrollHeight - 1) {
    node.scrollTop += step;
    const now = await nextFrame();
    frames.push(now - last);
    last = now;
  }
  return frames;
}

/** Turn `content-visibility: auto` of rows and their groups off (or on again), to see
 * what it buys. */
function contentVisibility(on: boolean): void {
  document.getElementById('no-cv')?.remove();
  if (!on) {
    const style = document.createElement('style');
    style.id = 'no-cv';
    style.textContent =
      '.nbjobs-Job, .nbjobs-JobList-group { content-visibility: visible !important; }';
    document.head.append(style);
  }
}

/** Two painted frames with nothing to do: what came before (an unmount) is done. */
async function settle(): Promise<number> {
  await painted();
  await painted();
  return 0;
}

function unmount(): void {
  if (mounted) {
    mounted.panel.dispose();
    mounted.model.dispose();
    mounted = null;
  }
  document.getElementById('host')?.remove();
}

(window as unknown as { nbjobsBench: unknown }).nbjobsBench = {
  mountPanel,
  allRows,
  firstFrameRows,
  rowIds,
  mountPlain,
  poll,
  rowHeight,
  scroll,
  contentVisibility,
  settle,
  unmount
};

import { describe, expect, it } from 'vitest';

import {
  defaultFlavor,
  elapsedSeconds,
  flavorAvailability,
  flavorNodesNote,
  flavorResources,
  formatBytes,
  formatDuration,
  placeText,
  roomWarning,
  formatLimit,
  jobActions,
  jobMatches,
  jobNodes,
  jobWarning,
  joinFacts,
  kernelChoice,
  outputLocation,
  queueHistory,
  progressDone,
  progressFraction,
  progressLabel,
  stateLabel
} from '../src/format';
import { type Translate, plain } from '../src/translate';
import type { IFlavor, IJob } from '../src/types';

/** A translator that marks every message it was asked for, to see what goes through it. */
const marked: Translate = (msgid, ...args) => `«${plain(msgid, ...args)}»`;

function job(overrides: Partial<IJob>): IJob {
  return {
    id: 'abc123',
    user: 'ada',
    name: 'train',
    path: 'train.ipynb',
    output_path: 'train.out.ipynb',
    flavor: 'a100',
    state: 'queued',
    queue_position: null,
    waiting_reason: null,
    progress: { cells_done: 0, cells_total: 0, current_cell: null },
    parameters: {},
    priority: 0,
    gpus: [],
    submitted_at: '2024-05-01T10:00:00Z',
    started_at: null,
    finished_at: null,
    exit_code: null,
    message: null,
    error: null,
    rerun_of: null,
    time_limit: null,
    ...overrides
  };
}

function flavor(overrides: Partial<IFlavor>): IFlavor {
  return {
    name: 'a100',
    display_name: '1 × A100',
    description: '',
    gpus: 1,
    gpu_type: 'A100',
    shared: false,
    cpu: '8',
    memory: '32Gi',
    time_limit: 3600,
    available: 2,
    queued: 0,
    unavailable: null,
    ...overrides
  };
}

describe('formatDuration', () => {
  it.each([
    [0, '0s'],
    [45.9, '45s'],
    [187, '3m 07s'],
    [7500, '2h 05m'],
    [3 * 86400 + 4 * 3600 + 59, '3d 4h'],
    [-5, '0s']
  ])('%s seconds is %s', (seconds, text) => {
    expect(formatDuration(seconds)).toBe(text);
  });

  it('puts its units through the translator', () => {
    const german: Translate = (msgid, ...args) =>
      plain({ '%1s': '%1 Sek.', '%1m %2s': '%1 Min. %2 Sek.' }[msgid] ?? msgid, ...args);
    expect(formatDuration(45, german)).toBe('45 Sek.');
    expect(formatDuration(187, german)).toBe('3 Min. 07 Sek.');
    expect(formatDuration(7500, marked)).toBe('«2h 05m»');
    expect(formatDuration(3 * 86400, marked)).toBe('«3d 0h»');
  });
});

describe('joinFacts', () => {
  it('joins with the translated separator', () => {
    expect(joinFacts(['a', 'b', 'c'])).toBe('a · b · c');
    expect(joinFacts(['a', 'b'], marked)).toBe('«a · b»');
    expect(joinFacts(['only'], marked)).toBe('only');
  });
});

describe('elapsedSeconds', () => {
  const now = new Date('2024-05-01T10:10:00Z');

  it('counts waiting from submission while queued', () => {
    expect(elapsedSeconds(job({ state: 'queued' }), now)).toBe(600);
  });

  it('counts running from the start', () => {
    const running = job({ state: 'running', started_at: '2024-05-01T10:09:30Z' });
    expect(elapsedSeconds(running, now)).toBe(30);
  });

  it('stops at the end for a finished job', () => {
    const done = job({
      state: 'succeeded',
      started_at: '2024-05-01T10:01:00Z',
      finished_at: '2024-05-01T10:03:05Z'
    });
    expect(elapsedSeconds(done, now)).toBe(125);
  });

  it('uses the submission time for a job cancelled before it started', () => {
    const cancelled = job({ state: 'cancelled', finished_at: '2024-05-01T10:00:20Z' });
    expect(elapsedSeconds(cancelled, now)).toBe(20);
  });
});

describe('formatLimit', () => {
  it('writes a limit as people do', () => {
    expect(formatLimit(45)).toBe('45 s');
    expect(formatLimit(1800)).toBe('30 min');
    expect(formatLimit(90)).toBe('1 min 30 s');
    expect(formatLimit(5400)).toBe('1 h 30 min');
    expect(formatLimit(4 * 3600)).toBe('4 h');
    expect(formatLimit(86400)).toBe('1 day');
    expect(formatLimit(2 * 86400 + 6 * 3600)).toBe('2 days 6 h');
  });
});

describe('stateLabel', () => {
  it('shows the queue position while waiting', () => {
    expect(stateLabel(job({ state: 'queued', queue_position: 3 }))).toBe('Queued, #3 in line');
    expect(stateLabel(job({ state: 'queued' }))).toBe('Queued');
  });

  it('says a job waits for a person to approve it', () => {
    expect(stateLabel(job({ state: 'pending_approval' }))).toBe('Awaiting approval');
  });

  it('names every other state', () => {
    const states = [
      'starting',
      'running',
      'succeeded',
      'failed',
      'cancelled',
      'timed_out'
    ] as const;
    expect(states.map(state => stateLabel(job({ state })))).toEqual([
      'Starting',
      'Running',
      'Succeeded',
      'Failed',
      'Cancelled',
      'Timed out'
    ]);
  });
});

describe('progress', () => {
  it('names the running cell as the log does, and counts the cells done for the bar', () => {
    // two cells done, the third running: the log's line for it is "code cell 3 of 5"
    const running = job({
      state: 'running',
      progress: { cells_done: 2, cells_total: 5, current_cell: 3 }
    });
    expect(progressFraction(running)).toBe(0.4);
    expect(progressLabel(running)).toBe('code cell 3 of 5');
    expect(progressDone(running)).toBe('2 of 5 code cells done');
  });

  it('is unknown before the runner counted the cells, and while the kernel starts', () => {
    expect(progressFraction(job({ state: 'starting' }))).toBeNull();
    expect(progressLabel(job({ state: 'starting' }))).toBeNull();
    expect(progressDone(job({ state: 'starting' }))).toBeNull();
    const kernel = job({
      state: 'running',
      progress: { cells_done: 0, cells_total: 5, current_cell: null }
    });
    expect(progressLabel(kernel)).toBeNull();
    expect(progressDone(kernel)).toBe('0 of 5 code cells done');
  });

  it('never goes past the end', () => {
    const odd = job({ progress: { cells_done: 7, cells_total: 5, current_cell: null } });
    expect(progressFraction(odd)).toBe(1);
    expect(progressLabel(odd)).toBe('all 5 code cells ran');
    expect(progressDone(odd)).toBe('5 of 5 code cells done');
  });
});

describe('flavors', () => {
  it('says what a flavor gives', () => {
    expect(flavorResources(flavor({}))).toBe('1 × A100 GPU · 8 CPU · 32Gi memory · up to 1 h');
    expect(
      flavorResources(
        flavor({ gpus: 0, gpu_type: null, cpu: null, memory: null, time_limit: null })
      )
    ).toBe('no GPU');
    expect(flavorResources(flavor({ shared: true, gpu_type: 'A100 MIG 1g.10gb' }))).toContain(
      'shared A100 MIG 1g.10gb GPU'
    );
  });

  it('says what a job of a priced flavor may cost, when credits are on', () => {
    expect(flavorResources(flavor({ credits_per_hour: 2.5, time_limit: 4 * 3600 }))).toBe(
      '1 × A100 GPU · 8 CPU · 32Gi memory · up to 4 h · 2.50 credits an hour, at most 10 a job'
    );
    expect(flavorResources(flavor({ credits_per_hour: 2, time_limit: null }))).toContain(
      '2 credits an hour'
    );
    expect(flavorResources(flavor({ credits_per_hour: null }))).not.toContain('credits');
  });

  it('says what is free, what waits, or why it cannot run', () => {
    expect(flavorAvailability(flavor({ available: 2, queued: 0 }))).toBe('2 free now · no queue');
    expect(flavorAvailability(flavor({ available: 0, queued: 3 }))).toBe(
      'none free now: a job will wait · 3 waiting'
    );
    expect(flavorAvailability(flavor({ unavailable: 'needs 4 GPU(s)' }))).toBe('needs 4 GPU(s)');
  });

  it('counts free GPUs, not job slots, for a GPU flavor', () => {
    const gpus = (overrides: Partial<IFlavor>) =>
      flavorAvailability(
        flavor({ free_gpus: 2, total_gpus: 4, available: 2, queued: 3, ...overrides })
      );
    expect(gpus({})).toBe('2 of 4 GPUs free · 3 waiting');
    expect(gpus({ queued: 0 })).toBe('2 of 4 GPUs free · no queue');
    expect(gpus({ free_gpus: 0, available: 0 })).toBe(
      '0 of 4 GPUs free: a job will wait · 3 waiting'
    );
    // Two GPUs per job, one free: the GPU is free, the job still waits.
    expect(gpus({ gpus: 2, free_gpus: 1, available: 0, queued: 0 })).toBe(
      '1 of 4 GPUs free: a job will wait · no queue'
    );
    expect(gpus({ free_gpus: 1, total_gpus: 1, queued: 0 })).toBe('1 of 1 GPU free · no queue');
    expect(gpus({ unavailable: 'needs 8 GPU(s)' })).toBe('needs 8 GPU(s)');
    // a job on two nodes of two GPUs takes four of them
    expect(gpus({ gpus: 2, nodes: 2, free_gpus: 4, available: 1, queued: 0 })).toBe(
      '4 of 4 GPUs free · a job takes 4 · no queue'
    );
  });

  it('says what each node of a flavor on several nodes has', () => {
    expect(flavorResources(flavor({ nodes: 2 }))).toBe(
      '2 nodes × 1 A100 GPU · 8 CPU per node · 32Gi memory per node · up to 1 h'
    );
    expect(
      flavorResources(
        flavor({ nodes: 4, gpus: 8, gpu_type: null, cpu: null, memory: null, time_limit: null })
      )
    ).toBe('4 nodes × 8 GPU');
    expect(
      flavorResources(
        flavor({ nodes: 2, gpus: 0, gpu_type: null, cpu: null, memory: null, time_limit: null })
      )
    ).toBe('2 nodes, no GPU');
    expect(flavorResources(flavor({ nodes: 2 }), marked)).toContain('«2 nodes × 1 A100 GPU»');
    // one node (or a service that does not say) reads as before
    expect(flavorResources(flavor({ nodes: 1 }))).toBe(flavorResources(flavor({})));
    expect(flavorResources(flavor({ nodes: 1 }))).not.toContain('node');
  });

  it('notes what a job on several nodes gets, and nothing for one node', () => {
    expect(flavorNodesNote(flavor({ nodes: 2 }))).toBe(
      'Runs on 2 nodes that start together; your script gets MASTER_ADDR, MASTER_PORT, WORLD_SIZE and NODE_RANK (torchrun reads them).'
    );
    expect(flavorNodesNote(flavor({ nodes: 3 }), marked)).toMatch(/^«Runs on 3 nodes/);
    expect(flavorNodesNote(flavor({ nodes: 1 }))).toBeNull();
    expect(flavorNodesNote(flavor({}))).toBeNull();
  });

  it('says when the GPUs are simulated', () => {
    expect(
      flavorResources(
        flavor({ simulated: true, gpu_type: null, cpu: null, memory: null, time_limit: null })
      )
    ).toBe('1 × simulated GPU');
  });

  it('says how much of a flavor is in maintenance', () => {
    const drained = flavor({
      free_gpus: 2,
      total_gpus: 4,
      available: 2,
      queued: 0,
      maintenance: '1 of 3 A100 nodes in maintenance'
    });
    expect(flavorAvailability(drained)).toBe(
      '2 of 4 GPUs free · no queue · 1 of 3 A100 nodes in maintenance'
    );
  });

  it('counts slices of a shared GPU and says so for a fraction flavor', () => {
    const quarter = (overrides: Partial<IFlavor>) =>
      flavor({
        fraction: 0.25,
        free_gpus: 3,
        total_gpus: 4,
        available: 3,
        queued: 0,
        ...overrides
      });
    expect(flavorAvailability(quarter({}))).toBe('3 of 4 slices free · no queue');
    expect(flavorAvailability(quarter({ free_gpus: 0, available: 0, queued: 2 }))).toBe(
      '0 of 4 slices free: a job will wait · 2 waiting'
    );
    expect(flavorResources(quarter({}))).toBe(
      'a quarter of one A100 GPU · 8 CPU · 32Gi memory · up to 1 h'
    );
    expect(flavorResources(quarter({ fraction: 0.143, gpu_type: null }))).toContain(
      '0.143 of one GPU'
    );
  });

  it('names the engine that queues a flavor instead of counting what it cannot see', () => {
    const kai = flavor({
      fraction: 0.5,
      free_gpus: null,
      total_gpus: null,
      queued: 2,
      placement: 'queued by KAI Scheduler, queue physics-101: it decides when a job starts'
    });
    expect(flavorAvailability(kai)).toBe(
      'queued by KAI Scheduler, queue physics-101: it decides when a job starts · 2 waiting'
    );
  });

  it('falls back to job slots where GPUs are not counted', () => {
    // A CPU flavor, or a backend that cannot see its GPUs.
    expect(
      flavorAvailability(flavor({ gpus: 0, free_gpus: null, total_gpus: null, available: 1 }))
    ).toBe('1 free now · no queue');
    expect(flavorAvailability(flavor({ free_gpus: null, total_gpus: null, available: 3 }))).toBe(
      '3 free now · no queue'
    );
  });

  it('puts every word of the availability through the translator', () => {
    const text = flavorAvailability(
      flavor({ free_gpus: 2, total_gpus: 4, available: 2, queued: 3 }),
      marked
    );
    expect(text).toBe('««2 of 4 GPUs free» · «3 waiting»»');
    expect(flavorResources(flavor({}), marked)).toBe(
      '««««1 × A100 GPU» · «8 CPU»» · «32Gi memory»» · «up to «1 h»»»'
    );
  });

  it('pre-selects the first flavor that can start now', () => {
    const busy = flavor({ name: 'busy', available: 0 });
    const broken = flavor({ name: 'broken', unavailable: 'no' });
    const free = flavor({ name: 'free', available: 1 });
    expect(defaultFlavor([broken, busy, free])?.name).toBe('free');
    expect(defaultFlavor([broken, busy])?.name).toBe('busy');
    expect(defaultFlavor([broken])).toBeNull();
  });

  it('pre-selects the flavor picked last while it can run here, busy or not', () => {
    const busy = flavor({ name: 'busy', available: 0 });
    const broken = flavor({ name: 'broken', unavailable: 'no' });
    const free = flavor({ name: 'free', available: 1 });
    expect(defaultFlavor([broken, busy, free], 'busy')?.name).toBe('busy');
    expect(defaultFlavor([broken, busy, free], 'broken')?.name).toBe('free');
    expect(defaultFlavor([busy, free], 'gone')?.name).toBe('free');
  });
});

describe('formatBytes', () => {
  it('says sizes the way people read them', () => {
    expect(formatBytes(512)).toBe('512 B');
    expect(formatBytes(1024)).toBe('1 KiB');
    expect(formatBytes(1536)).toBe('1.5 KiB');
    expect(formatBytes(3 * 1024 * 1024)).toBe('3 MiB');
    expect(formatBytes(150 * 1024 * 1024)).toBe('150 MiB');
    expect(formatBytes(5 * 1024 ** 4)).toBe('5 TiB');
  });
});

describe('jobWarning', () => {
  const base = { state: 'running', warning: 'its GPUs have been idle (below 5 %) for 30 min' };
  it('shows the service warning while the job runs', () => {
    expect(jobWarning(base as unknown as IJob)).toBe(
      'its GPUs have been idle (below 5 %) for 30 min'
    );
  });
  it('shows nothing once the job ended, or when there is none', () => {
    expect(jobWarning({ ...base, state: 'cancelled' } as unknown as IJob)).toBeNull();
    expect(jobWarning({ ...base, warning: null } as unknown as IJob)).toBeNull();
    expect(jobWarning({ state: 'running' } as unknown as IJob)).toBeNull();
  });
  it('says a running job runs on GPUs its queue borrowed, the idle warning first', () => {
    const borrowing = 'running while its queue team-a uses 1 GPU(s) borrowed from the cohort';
    expect(jobWarning({ state: 'running', borrowing } as unknown as IJob)).toBe(borrowing);
    expect(jobWarning({ ...base, borrowing } as unknown as IJob)).toBe(base.warning);
    expect(jobWarning({ state: 'queued', borrowing } as unknown as IJob)).toBeNull();
  });
});

describe('jobNodes', () => {
  it('says how many nodes a job spans and that each rank has a log', () => {
    expect(jobNodes(job({ nodes: 2 }))).toBe('2 (ranks 0 to 1, each with a log of its own)');
    expect(jobNodes(job({ nodes: 4 }), marked)).toBe(
      '«4 (ranks 0 to 3, each with a log of its own)»'
    );
    expect(jobNodes(job({ nodes: 1 }))).toBeNull();
    expect(jobNodes(job({}))).toBeNull(); // a service that does not say: one node
  });
});

describe('jobActions', () => {
  const base = { name: 'train', started_at: '2026-11-25T10:00:00Z', user: 'ada' };

  it('offers only what works, and says why not', () => {
    const running = jobActions(job({ ...base, state: 'running' }), 'ada');
    expect(running.cancel.enabled).toBe(true);
    expect(running.rerun).toEqual({ enabled: false, why: 'running: cancel it first' });
    expect(running.output).toEqual({ enabled: false, why: 'running: see the log' });
    expect(running.remove.enabled).toBe(false);

    const waiting = jobActions(job({ ...base, state: 'queued', started_at: null }), 'ada');
    expect(waiting.log).toEqual({ enabled: false, why: 'waiting: no log yet' });
    expect(waiting.rerun.why).toBe('waiting: cancel it first');

    const never = jobActions(job({ ...base, state: 'failed', started_at: null }), 'ada');
    expect(never.output).toEqual({ enabled: false, why: 'no output: the job never started' });
    expect(never.cancel).toEqual({ enabled: false, why: 'ended: nothing to cancel' });
    expect(never.rerun.enabled).toBe(true);

    const done = jobActions(job({ ...base, state: 'succeeded' }), 'ada');
    expect(done.output).toEqual({ enabled: true, why: 'Open the output notebook' });
  });

  it("says whose another user's job is", () => {
    const hers = jobActions(job({ ...base, state: 'succeeded' }), 'admin');
    expect(hers.rerun).toEqual({ enabled: false, why: 'belongs to ada: its owner re-runs it' });
    expect(hers.output.why).toBe('belongs to ada: the output is in their folder');
    expect(hers.remove).toEqual({ enabled: false, why: 'belongs to ada' });
    const running = jobActions(job({ ...base, state: 'running' }), 'admin');
    expect(running.cancel).toEqual({ enabled: true, why: "Cancel ada's job" });
  });
});

describe('jobMatches', () => {
  const one = job({
    name: 'clean data',
    path: 'work/clean.ipynb',
    id: 'f00d',
    state: 'failed',
    user: 'ada'
  });

  it('matches every typed word against name, notebook, id, flavor and owner', () => {
    expect(jobMatches(one, '', 'all')).toBe(true);
    expect(jobMatches(one, 'CLEAN work/', 'all')).toBe(true);
    expect(jobMatches(one, 'f00d ada', 'all')).toBe(true);
    expect(jobMatches(one, 'clean bob', 'all')).toBe(false);
  });

  it('filters by what became of the job', () => {
    expect(jobMatches(one, '', 'failed')).toBe(true);
    expect(jobMatches(one, '', 'ended')).toBe(true);
    expect(jobMatches(one, '', 'active')).toBe(false);
    expect(jobMatches(job({ state: 'pending_approval' }), '', 'active')).toBe(true);
  });
});

describe('outputLocation', () => {
  it('tells a result next to its notebook from one in an outputs folder', () => {
    expect(outputLocation({ path: 'a/train.ipynb', output_path: 'a/train.2026.ipynb' })).toBe(
      'beside'
    );
    expect(outputLocation({ path: 'train.ipynb', output_path: 'train.2026.ipynb' })).toBe('beside');
    expect(outputLocation({ path: 'a/train.ipynb', output_path: 'a/nbjobs-outputs/t.ipynb' })).toBe(
      'folder'
    );
    expect(outputLocation({ path: 'train.ipynb', output_path: 'out/t.ipynb' })).toBe('folder');
  });
});

describe('kernelChoice', () => {
  const gpu = flavor({ kernels: ['python3', 'ir'] });
  it("asks nothing when the flavor has the notebook's kernel (compared as Jupyter does)", () => {
    expect(kernelChoice(gpu, 'IR')).toBeNull();
    expect(kernelChoice(gpu, null)).toBeNull(); // no kernel named: python3
  });
  it("offers the flavor's kernels when it lacks the notebook's, or one was chosen before", () => {
    expect(kernelChoice(gpu, 'julia-1.10')).toEqual(['python3', 'ir']);
    expect(kernelChoice(gpu, 'python3', 'ir')).toEqual(['python3', 'ir']);
  });
  it('asks nothing when nbjobs cannot tell what the flavor has', () => {
    expect(kernelChoice(flavor({ kernels: null }), 'julia-1.10')).toBeNull();
    expect(kernelChoice(undefined, 'julia-1.10')).toBeNull();
  });
});

describe('queueHistory', () => {
  const now = new Date('2024-05-01T10:30:00Z');
  it('says how long a queued job has waited and where it stands', () => {
    const lines = queueHistory(job({ queue_position: 2 }), now, plain);
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/^submitted /);
    expect(lines[1]).toBe('waiting for 30 min so far, #2 in the queue');
  });
  it("tells a finished job's wait, disruptions, start and end", () => {
    const lines = queueHistory(
      job({
        state: 'succeeded',
        started_at: '2024-05-01T10:05:00Z',
        finished_at: '2024-05-01T11:05:00Z',
        node: 'gpu-node-3',
        requeues: 2
      }),
      now,
      plain
    );
    expect(lines[1]).toBe('waited 5 min in the queue');
    expect(lines[2]).toBe('sent back to the queue 2 times by the cluster (evicted or preempted)');
    expect(lines[3]).toMatch(/^started .* on gpu-node-3$/);
    expect(lines[4]).toMatch(/^Succeeded .* after 1 h$/);
  });
  it('says a job that ended in the queue never started', () => {
    const lines = queueHistory(
      job({ state: 'cancelled', finished_at: '2024-05-01T10:10:00Z' }),
      now,
      plain
    );
    expect(lines).toHaveLength(2);
    expect(lines[1]).toMatch(/^Cancelled .* without starting$/);
  });
});

describe('where a result goes', () => {
  it('names the place as people know it, with the room left there', () => {
    const where = 'nfs.example.org:/export/home/ada/work';
    expect(placeText(where, 5 * 1024 ** 3, plain)).toBe(`Written in ${where} (5 GiB free there)`);
    expect(placeText('/srv/nbjobs/ada', null, plain)).toBe('Written in /srv/nbjobs/ada');
  });

  it('warns only when the notebook alone is bigger than the room left', () => {
    expect(roomWarning(10 * 1024 ** 2, 3 * 1024 ** 2, plain)).toBeNull();
    expect(roomWarning(3 * 1024 ** 2, 3 * 1024 ** 2, plain)).toBeNull();
    expect(roomWarning(null, 3 * 1024 ** 2, plain)).toBeNull();
    expect(roomWarning(10, null, plain)).toBeNull();
    expect(roomWarning(512 * 1024, 40 * 1024 ** 2, plain)).toBe(
      'Only 512 KiB is free where the result goes, and the notebook alone is 40 MiB: its ' +
        'result may not be saved. Free some space (or ask your admin) before it ends.'
    );
  });
});

import { describe, expect, it } from 'vitest';

import type { INodeView } from '../api';
import { drainWords } from '../nodes';
import { nodeState } from '../overview';
import { sumUp } from '../roster';

const slot = (id: string, drained = false) => ({ id, drained, drain: null, jobs: [] });

/** One machine with four GPUs (one machine lists them one by one). */
const machine: INodeView = {
  node: 'vm',
  gpus: [{ gpu_type: 'T4', resource: 'local', total: 4, allocated: 1 }],
  drained: false,
  drain: null,
  jobs: [],
  gpu_slots: [slot('0'), slot('1'), slot('2'), slot('3')],
  cancellable: 1
};

describe('drainWords', () => {
  it('says every GPU of the machine leaves and running jobs go on', () => {
    expect(drainWords(machine, null, false, 1)).toBe(
      'Drain vm? 4 GPUs leave the pool (0 stay): no new job starts on them until you ' +
        'undrain the node. The 1 job(s) running there keep running until they end. ' +
        'Jobs without a GPU go on.'
    );
  });

  it('says one GPU leaves, the others stay, and cancelled jobs are not queued again', () => {
    const words = drainWords(machine, slot('2'), true, 1);
    expect(words).toContain('Drain GPU 2 of vm? 1 GPU leaves the pool (3 stay)');
    expect(words).toContain('cancelled now, not queued again');
  });

  it('counts GPUs already drained as out of the pool', () => {
    const one = { ...machine, gpu_slots: [slot('0', true), slot('1'), slot('2'), slot('3')] };
    expect(drainWords(one, null, false, 0)).toContain('3 GPUs leave the pool (0 stay)');
    expect(drainWords(one, slot('1'), false, 0)).toContain('1 GPU leaves the pool (2 stay)');
  });

  it('says nothing of CPU jobs for a cluster node, drained whole', () => {
    const node = { ...machine, node: 'gpu-1', gpu_slots: [] };
    expect(drainWords(node, null, false, 0)).toBe(
      'Drain gpu-1? 4 GPUs leave the pool (0 stay): no new job starts on them until you ' +
        'undrain the node. No job runs there now.'
    );
  });
});

describe('sumUp', () => {
  const problem = (index: number) => ({ index, student: 'x', reason: 'no' });

  it('counts who joins, who is new, who is in the class and who is refused', () => {
    const answer = { problems: [problem(2)], already: [0], new_accounts: [1] };
    expect(sumUp(3, answer, 'physics-101')).toBe(
      '1 to add (1 new account, invited) · 1 already in physics-101 · ' +
        '1 refused: nothing changes until it is fixed'
    );
  });

  it('says nothing before the service answered', () => {
    expect(sumUp(3, null, 'physics-101')).toBe('');
  });
});

describe('nodeState (the Overview)', () => {
  const row = (drained: boolean, drained_gpus: string[]) =>
    ({ drained, drained_gpus }) as unknown as Parameters<typeof nodeState>[0];

  it('names the GPUs drained one by one instead of saying the machine is open', () => {
    expect(nodeState(row(false, []))).toBe('open');
    expect(nodeState(row(false, ['2']))).toBe('open but GPU 2: drained, no new jobs');
    expect(nodeState(row(false, ['1', '3']))).toBe('open but GPUs 1, 3: drained, no new jobs');
    expect(nodeState(row(true, []))).toBe('drained: no new jobs');
  });
});

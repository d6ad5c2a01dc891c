import { describe, expect, it } from 'vitest';

import {
  MAX_SAMPLES,
  NBSP,
  NO_VALUE,
  SPARK_HEIGHT,
  SPARK_WIDTH,
  describeTelemetry as describeWithNbsp,
  formatBytesOrNone as bytesWithNbsp,
  formatGpuHours as gpuHoursWithNbsp,
  formatPercent as percentWithNbsp,
  formatUsedOf as usedOfWithNbsp,
  hasGpu,
  mergeSamples,
  niceMax,
  sparklineArea,
  sparklinePath,
  summaryFacts as factsWithNbsp
} from '../src/telemetry';
import { type Translate, plain } from '../src/translate';
import type { IJobMetrics, ITelemetrySample, ITelemetrySummary } from '../src/types';

const GiB = 1024 ** 3;
const MiB = 1024 ** 2;
const T0 = Date.parse('2025-03-01T10:00:00Z');

/**
 * The same functions with plain spaces where they hold a number and its unit together
 * (a no-break space): the expectations below read as people read the words.
 */
function spaced<A extends unknown[], R>(f: (...args: A) => R): (...args: A) => R {
  return (...args: A) => JSON.parse(JSON.stringify(f(...args)).replace(/\u00a0/g, ' '));
}
const describeTelemetry = spaced(describeWithNbsp);
const formatBytesOrNone = spaced(bytesWithNbsp);
const formatGpuHours = spaced(gpuHoursWithNbsp);
const formatPercent = spaced(percentWithNbsp);
const formatUsedOf = spaced(usedOfWithNbsp);
const summaryFacts = spaced(factsWithNbsp);

/** A translator that marks every message it was asked for, to see what goes through it. */
const marked: Translate = (msgid, ...args) => `«${plain(msgid, ...args)}»`;

function sample(second: number, overrides: Partial<ITelemetrySample> = {}): ITelemetrySample {
  return {
    at: new Date(T0 + second * 1000).toISOString(),
    gpu_utilization_percent: 40,
    gpu_memory_used_bytes: 3 * GiB,
    gpu_memory_total_bytes: 16 * GiB,
    cpu_percent: 95,
    memory_bytes: 800 * MiB,
    gpus: [],
    ...overrides
  };
}

function cpuSample(second: number, overrides: Partial<ITelemetrySample> = {}): ITelemetrySample {
  return sample(second, {
    gpu_utilization_percent: null,
    gpu_memory_used_bytes: null,
    gpu_memory_total_bytes: null,
    ...overrides
  });
}

function summary(overrides: Partial<ITelemetrySummary> = {}): ITelemetrySummary {
  return {
    samples: 310,
    gpu_busy_seconds: 18.6,
    gpu_allocated_seconds: 310,
    gpu_utilization_mean_percent: 6,
    gpu_utilization_peak_percent: 40,
    gpu_memory_peak_bytes: 3.2 * GiB,
    gpu_memory_total_bytes: 16 * GiB,
    cpu_mean_percent: 85.4,
    cpu_peak_percent: 110,
    memory_peak_bytes: 1.25 * GiB,
    gpus: [],
    ...overrides
  };
}

function metrics(overrides: Partial<IJobMetrics> = {}): IJobMetrics {
  return {
    job_id: 'abc123',
    state: 'running',
    interval_seconds: 10,
    samples: [],
    summary: null,
    hint: null,
    ...overrides
  };
}

const GPU_JOB = { gpus: ['0'] };
const CPU_JOB = { gpus: [] };

/** The path's points, as numbers: [[command, x, y], ...]. */
function points(path: string): [string, number, number][] {
  return [...path.matchAll(/([MLZ])(?:(-?[\d.]+),(-?[\d.]+))?/g)].map(m => [
    m[1],
    Number(m[2]),
    Number(m[3])
  ]);
}

describe('sparklinePath', () => {
  it('runs from the first sample at the left to the last at the right, 0 at the bottom', () => {
    const path = sparklinePath(
      [
        { t: T0, v: 0 },
        { t: T0 + 5000, v: 50 },
        { t: T0 + 10000, v: 100 }
      ],
      100,
      24,
      100
    );
    // One unit of room at the top and the bottom, so a line at 0 or at the top shows whole.
    expect(path).toBe('M0,23L50,12L100,1');
  });

  it('places samples by their time, not their order (a thinned stretch is wider)', () => {
    const path = sparklinePath(
      [
        { t: T0, v: 10 },
        { t: T0 + 1000, v: 10 },
        { t: T0 + 4000, v: 10 }
      ],
      100,
      24,
      100
    );
    expect(points(path).map(p => p[1])).toEqual([0, 25, 100]);
  });

  it('breaks the line where a value is missing', () => {
    const path = sparklinePath(
      [
        { t: T0, v: 20 },
        { t: T0 + 1000, v: 30 },
        { t: T0 + 2000, v: null },
        { t: T0 + 3000, v: 40 },
        { t: T0 + 4000, v: 50 }
      ],
      100,
      24,
      100
    );
    expect(path.match(/M/g)).toHaveLength(2);
    expect(path.startsWith('M0,')).toBe(true);
    expect(path).toContain('M75,');
  });

  it('draws a value alone between gaps, and a single sample, as a dot', () => {
    const alone = sparklinePath(
      [
        { t: T0, v: null },
        { t: T0 + 1000, v: 60 },
        { t: T0 + 2000, v: null }
      ],
      100,
      24,
      100
    );
    expect(alone).toBe('M50,9.8L50,9.8');
    // One sample: no span of time to spread over; it sits at the right edge.
    expect(sparklinePath([{ t: T0, v: 100 }], 100, 24, 100)).toBe('M100,1L100,1');
  });

  it('keeps values past the top (or below 0) inside the box', () => {
    const path = sparklinePath(
      [
        { t: T0, v: -5 },
        { t: T0 + 1000, v: 250 }
      ],
      100,
      24,
      100
    );
    expect(path).toBe('M0,23L100,1');
  });

  it('is empty without any reading, and survives a scale of 0 and bad times', () => {
    expect(sparklinePath([])).toBe('');
    expect(
      sparklinePath([
        { t: T0, v: null },
        { t: T0 + 1000, v: null }
      ])
    ).toBe('');
    expect(
      sparklinePath(
        [
          { t: T0, v: 0 },
          { t: T0 + 1000, v: 0 }
        ],
        100,
        24,
        0
      )
    ).toBe('M0,23L100,23');
    expect(
      sparklinePath(
        [
          { t: NaN, v: 3 },
          { t: T0, v: 50 }
        ],
        100,
        24,
        100
      )
    ).toBe('M100,12L100,12');
  });

  it('uses the default box of the job view', () => {
    const path = sparklinePath([
      { t: T0, v: 0 },
      { t: T0 + 1000, v: 100 }
    ]);
    expect(path).toBe(`M0,${SPARK_HEIGHT - 1}L${SPARK_WIDTH},1`);
  });
});

describe('sparklineArea', () => {
  it('closes each stretch down to the bottom edge', () => {
    const area = sparklineArea(
      [
        { t: T0, v: 0 },
        { t: T0 + 1000, v: 100 },
        { t: T0 + 2000, v: null },
        { t: T0 + 3000, v: 50 },
        { t: T0 + 4000, v: 50 }
      ],
      100,
      24,
      100
    );
    expect(area).toBe('M0,24L0,23L25,1L25,24ZM75,24L75,12L100,12L100,24Z');
  });

  it('leaves out a dot (no area under a single value)', () => {
    expect(sparklineArea([{ t: T0, v: 50 }], 100, 24, 100)).toBe('');
  });
});

describe('numbers for people', () => {
  it('holds a number and its unit together with a no-break space', () => {
    expect(percentWithNbsp(42)).toBe(`42${NBSP}%`);
    expect(percentWithNbsp(0.5)).toBe(`<${NBSP}1${NBSP}%`);
    expect(bytesWithNbsp(3.2 * GiB)).toBe(`3.2${NBSP}GiB`);
    expect(usedOfWithNbsp(3.2 * GiB, 16 * GiB)).toBe(`3.2${NBSP}/${NBSP}16${NBSP}GiB`);
    expect(gpuHoursWithNbsp(1)).toBe(`<${NBSP}0.001`);
  });

  it('formats percentages, a trace and unknown values', () => {
    expect(formatPercent(42.4)).toBe('42 %');
    expect(formatPercent(99.6)).toBe('100 %');
    expect(formatPercent(0)).toBe('0 %');
    expect(formatPercent(0.3)).toBe('< 1 %');
    expect(formatPercent(230)).toBe('230 %'); // CPU: 100 % is one core
    expect(formatPercent(null)).toBe(NO_VALUE);
    expect(formatPercent(undefined)).toBe(NO_VALUE);
    expect(formatPercent(NaN)).toBe(NO_VALUE);
  });

  it('formats bytes, or says none was measured', () => {
    expect(formatBytesOrNone(800 * MiB)).toBe('800 MiB');
    expect(formatBytesOrNone(3.25 * GiB)).toBe('3.3 GiB');
    expect(formatBytesOrNone(0)).toBe('0 B');
    expect(formatBytesOrNone(null)).toBe(NO_VALUE);
  });

  it('formats memory used of a size, naming a shared unit once', () => {
    expect(formatUsedOf(3.2 * GiB, 16 * GiB)).toBe('3.2 / 16 GiB');
    expect(formatUsedOf(512 * MiB, 16 * GiB)).toBe('512 MiB / 16 GiB');
    expect(formatUsedOf(3.2 * GiB, null)).toBe('3.2 GiB');
    expect(formatUsedOf(3.2 * GiB, 0)).toBe('3.2 GiB');
    expect(formatUsedOf(null, 16 * GiB)).toBe(NO_VALUE);
  });

  it('formats GPU-seconds as GPU-hours at a precision that says something', () => {
    expect(formatGpuHours(3600)).toBe('1');
    expect(formatGpuHours(45000)).toBe('12.5');
    expect(formatGpuHours(900)).toBe('0.25');
    expect(formatGpuHours(310)).toBe('0.086');
    expect(formatGpuHours(18.6)).toBe('0.005');
    expect(formatGpuHours(2)).toBe('< 0.001');
    expect(formatGpuHours(0)).toBe('0');
    expect(formatGpuHours(null)).toBe(NO_VALUE);
  });

  it('rounds a scale up to a round number a little above the peak', () => {
    expect(niceMax(800 * MiB)).toBe(1e9);
    expect(niceMax(90)).toBe(100);
    expect(niceMax(3)).toBe(5);
    expect(niceMax(0)).toBe(1);
    expect(niceMax(null)).toBe(1);
  });
});

describe('describeTelemetry', () => {
  it('says in one quiet line that telemetry is off', () => {
    const view = describeTelemetry(metrics({ interval_seconds: null }), GPU_JOB);
    expect(view).toEqual({
      kind: 'off',
      line: 'Telemetry is off for this job',
      sparks: [],
      facts: [],
      hint: null
    });
  });

  it('says quietly that nothing was sampled yet: GPU readings for a GPU job', () => {
    expect(describeTelemetry(metrics(), GPU_JOB).line).toBe('No GPU readings yet');
    expect(describeTelemetry(metrics(), CPU_JOB).line).toBe('No readings yet');
    const ended = describeTelemetry(metrics({ state: 'succeeded' }), GPU_JOB);
    expect(ended.kind).toBe('none');
    expect(ended.line).toBe('No readings were taken while this job ran');
  });

  it('says why an ended job has no readings, never that they are still to come', () => {
    // readings asked while it ran (the answer says running), the job has ended since
    const asked = metrics({ state: 'running' });
    const quick = {
      ...GPU_JOB,
      state: 'succeeded' as const,
      started_at: '2026-11-30T10:00:00Z',
      finished_at: '2026-11-30T10:00:04Z'
    };
    const view = describeTelemetry(asked, quick);
    expect(view.kind).toBe('none');
    expect(view.line).toBe(
      'No readings: this job ended after 4s, before its first reading (one every 10s)'
    );
    const never = { ...GPU_JOB, state: 'cancelled' as const, started_at: null };
    expect(describeTelemetry(asked, never).line).toBe(
      'No readings: this job was cancelled before it started'
    );
    const long = { ...quick, finished_at: '2026-11-30T10:05:00Z' };
    expect(describeTelemetry(asked, long).line).toBe('No readings were taken while this job ran');
  });

  it("shows an ended job's summary from readings asked while it ran", () => {
    const asked = metrics({ state: 'running', summary: summary({ samples: 3 }) });
    const view = describeTelemetry(asked, { ...GPU_JOB, state: 'failed' });
    expect(view.kind).toBe('summary');
    expect(view.line).toBeNull();
    expect(view.facts.map(f => f.key)).toContain('gpu');
  });

  it('draws four sparklines with the latest values for a running GPU job', () => {
    const samples = [
      sample(0, { gpu_utilization_percent: 10 }),
      sample(10, { gpu_utilization_percent: 90, gpu_memory_used_bytes: 4 * GiB }),
      sample(20, { gpu_utilization_percent: 42.4, cpu_percent: 130, memory_bytes: 1.5 * GiB })
    ];
    const view = describeTelemetry(metrics({ samples }), GPU_JOB);
    expect(view.kind).toBe('live');
    expect(view.sparks.map(s => [s.key, s.label, s.latest])).toEqual([
      ['gpu', 'GPU', '42 %'],
      ['gpuMemory', 'GPU memory', '3 / 16 GiB'],
      ['cpu', 'CPU', '130 %'],
      ['memory', 'Memory', '1.5 GiB']
    ]);
    const [gpu, gpuMemory, cpu] = view.sparks;
    expect(gpu.description).toBe(
      'GPU utilisation: 42 % now, peak 90 % over the last 20s (3 readings)'
    );
    expect(gpuMemory.description).toBe(
      'GPU memory used (of 16 GiB): 3 GiB now, peak 4 GiB over the last 20s (3 readings)'
    );
    // GPU utilisation on a 0-100 scale: 90 % is near the top.
    expect(points(gpu.line)[1]).toEqual(['L', 50, 2.6]);
    // CPU past one core: the scale is two cores, 130 % a little above the middle.
    expect(points(cpu.line)[2]).toEqual(['L', 100, 6.6]);
    expect(cpu.description).toContain('130 % now');
    for (const spark of view.sparks) {
      expect(spark.line.startsWith('M0,')).toBe(true);
      expect(spark.area.endsWith('Z')).toBe(true);
    }
  });

  it('shows CPU and memory only for a CPU-only job', () => {
    const samples = [cpuSample(0), cpuSample(5, { cpu_percent: 12.2 })];
    const view = describeTelemetry(metrics({ samples }), CPU_JOB);
    expect(view.sparks.map(s => s.key)).toEqual(['cpu', 'memory']);
    expect(view.sparks[0].latest).toBe('12 %');
  });

  it('shows a GPU reading that is missing as a dash, not as 0', () => {
    const samples = [sample(0), sample(10, { gpu_utilization_percent: null })];
    const view = describeTelemetry(metrics({ samples }), GPU_JOB);
    expect(view.sparks[0].latest).toBe(NO_VALUE);
    expect(view.sparks[0].line.match(/M/g)).toHaveLength(1);
    const none = describeTelemetry(
      metrics({ samples: [sample(0, { gpu_utilization_percent: null })] }),
      GPU_JOB
    );
    expect(none.sparks[0].description).toBe('GPU utilisation: no reading (1 reading)');
    expect(none.sparks[0].line).toBe('');
  });

  it('keeps the hint of a running job that uses its GPU little', () => {
    const hint = 'GPU busy 6 % on average: a CPU or a smaller GPU flavor would do';
    const view = describeTelemetry(metrics({ samples: [sample(0)], hint }), GPU_JOB);
    expect(view.kind).toBe('live');
    expect(view.hint).toBe(hint);
  });

  it('sums up an ended GPU job, with the hint', () => {
    const hint = 'GPU busy 6 % on average: a CPU or a smaller GPU flavor would do';
    const view = describeTelemetry(
      metrics({ state: 'succeeded', samples: [sample(0)], summary: summary(), hint }),
      GPU_JOB
    );
    expect(view.kind).toBe('summary');
    expect(view.sparks).toEqual([]);
    expect(view.hint).toBe(hint);
    expect(view.facts.map(f => [f.label, f.value])).toEqual([
      ['GPU busy', '6 % on average, peak 40 %'],
      ['GPU memory', 'peak 3.2 GiB of 16 GiB'],
      ['GPU-hours', '0.005 busy of 0.086'],
      ['CPU', '85 % on average, peak 110 %'],
      ['Memory', 'peak 1.3 GiB']
    ]);
    expect(view.facts[2].title).toBe('GPU time held 5m 10s (what usage counts), measured busy 18s');
    expect(view.facts[0].title).toBe('GPU utilisation: 6 % on average, peak 40 %');
  });

  it('sums up an ended CPU-only job with CPU and memory only', () => {
    const cpuOnly = summary({
      gpu_busy_seconds: null,
      gpu_allocated_seconds: null,
      gpu_utilization_mean_percent: null,
      gpu_utilization_peak_percent: null,
      gpu_memory_peak_bytes: null,
      gpu_memory_total_bytes: null
    });
    const job = metrics({ state: 'failed', samples: [cpuSample(0)], summary: cpuOnly });
    const view = describeTelemetry(job, CPU_JOB);
    expect(view.facts.map(f => f.key)).toEqual(['cpu', 'memory']);
    expect(view.hint).toBeNull();
  });

  it('lists each GPU of a multi-GPU job', () => {
    const gpus = ['0', '1'].map((index, i) => ({
      index,
      name: 'T4',
      utilization_mean_percent: i ? 2 : 55,
      utilization_peak_percent: i ? 4 : 97,
      memory_peak_bytes: GiB,
      memory_total_bytes: 16 * GiB,
      busy_seconds: 0,
      allocated_seconds: 300
    }));
    const facts = summaryFacts(summary({ gpus }), true);
    expect(
      facts.filter(f => f.key.startsWith('gpu-')).map(f => [f.label, f.value, f.title])
    ).toEqual([
      ['GPU 0', '55 % on average, peak 97 %', 'GPU 0 (T4)'],
      ['GPU 1', '2 % on average, peak 4 %', 'GPU 1 (T4)']
    ]);
  });

  it('shows unknown summary figures as dashes', () => {
    const facts = summaryFacts(
      summary({
        gpu_utilization_mean_percent: null,
        gpu_utilization_peak_percent: null,
        gpu_memory_peak_bytes: null,
        gpu_busy_seconds: null,
        gpu_allocated_seconds: null,
        memory_peak_bytes: null
      }),
      true
    );
    expect(facts.map(f => f.value)).toEqual([
      NO_VALUE,
      NO_VALUE,
      NO_VALUE,
      '85 % on average, peak 110 %',
      NO_VALUE
    ]);
  });

  it('puts every sentence through the translator', () => {
    const live = describeTelemetry(metrics({ samples: [sample(0)] }), GPU_JOB, marked);
    expect(live.sparks[0].label).toBe('«GPU»');
    expect(live.sparks[0].description.startsWith('«')).toBe(true);
    expect(describeTelemetry(metrics(), GPU_JOB, marked).line).toBe('«No GPU readings yet»');
    const ended = describeTelemetry(
      metrics({ state: 'succeeded', summary: summary() }),
      GPU_JOB,
      marked
    );
    for (const fact of ended.facts) {
      expect(fact.label).toMatch(/^«.*»$/);
      expect(fact.value).toMatch(/^«.*»$/);
    }
  });
});

describe('hasGpu', () => {
  it('knows a GPU job by its GPUs, its summary or its readings', () => {
    expect(hasGpu(metrics(), GPU_JOB)).toBe(true);
    expect(hasGpu(metrics(), CPU_JOB)).toBe(false);
    expect(hasGpu(metrics({ samples: [cpuSample(0)] }), CPU_JOB)).toBe(false);
    expect(hasGpu(metrics({ samples: [sample(0)] }), CPU_JOB)).toBe(true);
    expect(hasGpu(metrics({ summary: summary() }), CPU_JOB)).toBe(true);
  });
});

describe('mergeSamples', () => {
  it('adds only the samples newer than those known', () => {
    const known = [sample(0), sample(10)];
    const merged = mergeSamples(known, [sample(10), sample(20)]);
    expect(merged.map(s => s.at)).toEqual([sample(0).at, sample(10).at, sample(20).at]);
    expect(mergeSamples(known, [])).toBe(known);
  });

  it('keeps the newest samples when there are too many', () => {
    const many = Array.from({ length: MAX_SAMPLES }, (_, i) => sample(i));
    const merged = mergeSamples(many, [sample(MAX_SAMPLES), sample(MAX_SAMPLES + 1)]);
    expect(merged).toHaveLength(MAX_SAMPLES);
    expect(merged[0].at).toBe(sample(2).at);
    expect(merged[merged.length - 1].at).toBe(sample(MAX_SAMPLES + 1).at);
  });
});

describe('GPU-hours on the card', () => {
  it('are what the job counts for, as usage counts them, even without GPU readings', () => {
    const metrics = {
      job_id: 'a',
      state: 'succeeded',
      interval_seconds: 10,
      samples: [],
      hint: null,
      summary: {
        samples: 30,
        since: null,
        until: null,
        gpu_busy_seconds: null,
        gpu_allocated_seconds: null,
        gpu_utilization_mean_percent: null,
        gpu_utilization_peak_percent: null,
        gpu_memory_peak_bytes: null,
        gpu_memory_total_bytes: null,
        cpu_mean_percent: 90,
        cpu_peak_percent: 100,
        memory_peak_bytes: 1024,
        gpus: []
      }
    } as unknown as IJobMetrics;
    // simulated GPUs: no readings, but 5 minutes on one GPU counted
    const view = describeTelemetry(metrics, { gpus: ['0'], gpu_hours: 5 / 60 });
    const hours = view.facts.find(f => f.key === 'gpuHours');
    expect(hours?.value).toBe('0.083 (no busy readings)');
  });
});

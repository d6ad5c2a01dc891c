/**
 * What the job view says about a job's telemetry (`GET jobs/{id}/metrics`):
 * sparklines of a running job's GPU, GPU memory, CPU and memory, the summary
 * of one that ended, or one quiet line when there is nothing to show.
 *
 * Pure functions of the API's JSON, so the words, numbers and SVG paths are
 * tested without a browser; `TelemetryView` (telemetryview.ts) draws them.
 */
import { formatBytes, formatDuration, isFinal } from './format';
import { type Translate, plain } from './translate';
import type { IJob, IJobMetrics, ITelemetrySample, ITelemetrySummary } from './types';

/** A sparkline's drawing box (SVG user units; the SVG stretches it to its box). */
export const SPARK_WIDTH = 100;
export const SPARK_HEIGHT = 18;
/** The most samples the view keeps for a running job (the service keeps 720). */
export const MAX_SAMPLES = 720;
/** Shown for a value nobody measured. */
export const NO_VALUE = '–';
/** Between a number and its unit, so that a narrow panel never puts them on two lines. */
export const NBSP = '\u00a0';

/** One value of a series at a time (ms since the epoch); null: not measured. */
export interface IPoint {
  t: number;
  v: number | null;
}

/** The four series of a running job, in the order they are shown. */
export type SeriesKey = 'gpu' | 'gpuMemory' | 'cpu' | 'memory';

/** One sparkline, ready to draw. */
export interface ISpark {
  key: SeriesKey;
  /** its name, shown before it: `GPU` */
  label: string;
  /** the latest value, shown beside its name: `42 %` */
  latest: string;
  /** the same in a sentence with the numbers, for aria-label and title */
  description: string;
  /** the SVG path of its line, and of the area under it */
  line: string;
  area: string;
}

/** One figure of an ended job's summary: `GPU busy` — `6 % on average, peak 40 %`. */
export interface IFact {
  key: string;
  label: string;
  value: string;
  /** the figure with its exact numbers */
  title: string;
}

export interface ITelemetryView {
  /**
   * `off`: telemetry is off; `none`: nothing sampled (yet); `live`: sparklines;
   * `summary`: the figures of a job that ended
   */
  kind: 'off' | 'none' | 'live' | 'summary';
  /** the quiet line for `off` and `none` */
  line: string | null;
  sparks: ISpark[];
  facts: IFact[];
  /** the service's plain word when the job used its GPUs little */
  hint: string | null;
}

/** What the view knows of the job: its GPUs, and (where known) its state and times. */
export type TelemetryJob = Pick<IJob, 'gpus'> &
  Partial<Pick<IJob, 'gpu_hours' | 'state' | 'started_at' | 'finished_at'>>;

/** What to show for a job's telemetry. */
export function describeTelemetry(
  metrics: IJobMetrics,
  job: TelemetryJob,
  trans: Translate = plain
): ITelemetryView {
  const hint = metrics.hint || null;
  const empty = { sparks: [], facts: [], hint };
  const gpu = hasGpu(metrics, job);
  if (metrics.interval_seconds === null && !metrics.samples.length && !metrics.summary?.samples) {
    return { kind: 'off', line: trans('Telemetry is off for this job'), ...empty };
  }
  // The readings may be from before the job ended (asked while it ran): an ended job is
  // never described as waiting for its first reading.
  const ended = isFinal(metrics.state) || (job.state !== undefined && isFinal(job.state));
  const summary = metrics.summary;
  if (ended && summary && summary.samples > 0) {
    const facts = summaryFacts(summary, gpu, trans, job.gpu_hours ?? null);
    return { kind: 'summary', line: null, sparks: [], facts, hint };
  }
  if (!metrics.samples.length) {
    const line = ended
      ? endedWithoutReadings(job, metrics.interval_seconds, trans)
      : gpu
        ? trans('No GPU readings yet')
        : trans('No readings yet');
    return { kind: 'none', line, ...empty };
  }
  const lines = sparks(metrics.samples, gpu, trans);
  return { kind: 'live', line: null, sparks: lines, facts: [], hint };
}

/**
 * Why an ended job has no readings: it never started, or it ended before the first
 * reading was due (they are taken every `interval` seconds from its start).
 */
export function endedWithoutReadings(
  job: TelemetryJob,
  interval: number | null,
  trans: Translate = plain
): string {
  if (job.started_at === null) {
    return job.state === 'cancelled'
      ? trans('No readings: this job was cancelled before it started')
      : trans('No readings: this job ended before it started');
  }
  const ran =
    job.started_at && job.finished_at
      ? (Date.parse(job.finished_at) - Date.parse(job.started_at)) / 1000
      : NaN;
  if (interval && Number.isFinite(ran) && ran < interval + 1) {
    return trans(
      'No readings: this job ended after %1, before its first reading (one every %2)',
      formatDuration(Math.max(0, ran), trans),
      formatDuration(interval, trans)
    );
  }
  return trans('No readings were taken while this job ran');
}

/**
 * Whether the job has GPUs to show: it was given some, or its readings have
 * GPU figures. A CPU-only job shows CPU and memory only.
 */
export function hasGpu(metrics: IJobMetrics, job: Pick<IJob, 'gpus'>): boolean {
  if (job.gpus.length > 0) {
    return true;
  }
  const summary = metrics.summary;
  if (summary && (summary.gpu_allocated_seconds || summary.gpus?.length)) {
    return true;
  }
  return metrics.samples.some(
    s =>
      isNumber(s.gpu_utilization_percent) ||
      isNumber(s.gpu_memory_used_bytes) ||
      (s.gpus?.length ?? 0) > 0
  );
}

/** The sparklines of a running job's samples (oldest first). */
export function sparks(
  samples: ITelemetrySample[],
  gpu: boolean,
  trans: Translate = plain
): ISpark[] {
  const times = samples.map(s => Date.parse(s.at));
  const series = (pick: (s: ITelemetrySample) => number | null | undefined): IPoint[] =>
    samples.map((s, i) => ({ t: times[i], v: numberOr(pick(s)) }));
  const span = spanText(times, trans);
  const result: ISpark[] = [];

  if (gpu) {
    const util = series(s => s.gpu_utilization_percent);
    const utilWhat = trans('GPU utilisation');
    result.push(spark('gpu', trans('GPU'), util, 100, span, formatPercent, utilWhat, trans));
    const used = series(s => s.gpu_memory_used_bytes);
    const total = lastNumber(series(s => s.gpu_memory_total_bytes));
    const what =
      total === null
        ? trans('GPU memory used')
        : trans('GPU memory used (of %1)', formatBytes(total));
    const gpuMemory = spark(
      'gpuMemory',
      trans('GPU memory'),
      used,
      total ?? niceMax(peak(used)),
      span,
      formatBytesOrNone,
      what,
      trans
    );
    gpuMemory.latest = formatUsedOf(used[used.length - 1]?.v, total);
    result.push(gpuMemory);
  }
  const cpu = series(s => s.cpu_percent);
  // 100 % is one core busy: the scale grows by whole cores past the first.
  const cpuTop = Math.max(100, Math.ceil((peak(cpu) ?? 0) / 100) * 100);
  const cpuWhat = trans('CPU use (100 % is one core)');
  result.push(spark('cpu', trans('CPU'), cpu, cpuTop, span, formatPercent, cpuWhat, trans));
  const memory = series(s => s.memory_bytes);
  const memoryTop = niceMax(peak(memory));
  const memoryWhat = trans('Memory used');
  result.push(
    spark('memory', trans('Memory'), memory, memoryTop, span, formatBytesOrNone, memoryWhat, trans)
  );
  return result;
}

function spark(
  key: SeriesKey,
  label: string,
  points: IPoint[],
  max: number,
  span: string,
  format: (value: number | null) => string,
  what: string,
  trans: Translate
): ISpark {
  const last = points.length ? points[points.length - 1].v : null;
  const top = peak(points);
  const description =
    top === null
      ? trans('%1: no reading %2', what, span)
      : trans('%1: %2 now, peak %3 %4', what, format(last), format(top), span);
  return {
    key,
    label,
    latest: format(last),
    description,
    line: sparklinePath(points, SPARK_WIDTH, SPARK_HEIGHT, max),
    area: sparklineArea(points, SPARK_WIDTH, SPARK_HEIGHT, max)
  };
}

/** `over the last 2m 10s (14 readings)`, or `(1 reading)`. */
function spanText(times: number[], trans: Translate): string {
  const valid = times.filter(t => Number.isFinite(t));
  const count = times.length === 1 ? trans('1 reading') : trans('%1 readings', times.length);
  if (valid.length < 2) {
    return trans('(%1)', count);
  }
  const seconds = (Math.max(...valid) - Math.min(...valid)) / 1000;
  return trans('over the last %1 (%2)', formatDuration(seconds, trans), count);
}

/** The figures of an ended job's summary; GPU figures only for a GPU job. */
export function summaryFacts(
  summary: ITelemetrySummary,
  gpu: boolean,
  trans: Translate = plain,
  /** the GPU-hours the job counts for (the job's own figure, as usage counts it) */
  charged: number | null = null
): IFact[] {
  const facts: IFact[] = gpu ? gpuFacts(summary, trans, charged) : [];
  const meanPeak = (mean: number | null, top: number | null) => meanAndPeak(mean, top, trans);
  const [cpuMean, cpuTop] = exactValues(summary.cpu_mean_percent, summary.cpu_peak_percent);
  facts.push({
    key: 'cpu',
    label: trans('CPU'),
    value: meanPeak(summary.cpu_mean_percent, summary.cpu_peak_percent),
    title: trans('CPU use (100 % is one core): %1 % on average, peak %2 %', cpuMean, cpuTop)
  });
  facts.push({
    key: 'memory',
    label: trans('Memory'),
    value:
      summary.memory_peak_bytes === null
        ? NO_VALUE
        : trans('peak %1', formatBytesOrNone(summary.memory_peak_bytes)),
    title: trans(
      'The most memory its processes held: %1 bytes',
      summary.memory_peak_bytes ?? NO_VALUE
    )
  });
  return facts;
}

// -- drawing --------------------------------------------------------------------

/**
 * The SVG path of a sparkline: the values over time in a `width` × `height` box,
 * 0 at the bottom and `max` at the top (values past it are drawn at the top).
 * A missing value breaks the line; a value alone between gaps is a dot (a
 * zero-length segment, drawn with round caps). Time runs from the first sample
 * (left) to the last (right); one sample alone sits at the right edge.
 */
export function sparklinePath(
  points: IPoint[],
  width: number = SPARK_WIDTH,
  height: number = SPARK_HEIGHT,
  max = 100
): string {
  return segments(points, width, height, max)
    .map(segment => {
      const [first, ...rest] = segment;
      const moves = (rest.length ? rest : [first]).map(([x, y]) => `L${x},${y}`);
      return `M${first[0]},${first[1]}${moves.join('')}`;
    })
    .join('');
}

/** The area under a sparkline's line (closed down to the bottom edge), for a light fill. */
export function sparklineArea(
  points: IPoint[],
  width: number = SPARK_WIDTH,
  height: number = SPARK_HEIGHT,
  max = 100
): string {
  const bottom = num(height);
  return segments(points, width, height, max)
    .filter(segment => segment.length > 1)
    .map(segment => {
      const line = segment.map(([x, y]) => `L${x},${y}`).join('');
      return `M${segment[0][0]},${bottom}${line}L${segment[segment.length - 1][0]},${bottom}Z`;
    })
    .join('');
}

/** The measured stretches of a series, as [x, y] in the box (numbers as short text). */
function segments(
  points: IPoint[],
  width: number,
  height: number,
  max: number
): [string, string][][] {
  const times = points.map(p => p.t).filter(t => Number.isFinite(t));
  if (!times.length) {
    return [];
  }
  const start = Math.min(...times);
  const span = Math.max(...times) - start;
  // A unit of room at the top and bottom, so a line at 0 or at max shows whole.
  const inset = 1;
  const scale = max > 0 && Number.isFinite(max) ? max : 1;
  const result: [string, string][][] = [];
  let current: [string, string][] = [];
  for (const { t, v } of points) {
    if (!isNumber(v) || !Number.isFinite(t)) {
      if (current.length) {
        result.push(current);
      }
      current = [];
      continue;
    }
    const x = span > 0 ? ((t - start) / span) * width : width;
    const share = Math.min(1, Math.max(0, v / scale));
    const y = height - inset - share * (height - 2 * inset);
    current.push([num(x), num(y)]);
  }
  if (current.length) {
    result.push(current);
  }
  return result;
}

/** A coordinate as short text: at most one decimal, no trailing `.0`. */
function num(value: number): string {
  return String(Math.round(value * 10) / 10);
}

// -- numbers for people -------------------------------------------------------

/**
 * A percentage for people: `42 %`, `< 1 %` for a trace, `0 %`, `–` when unknown
 * (the number and `%` held together by a no-break space).
 */
export function formatPercent(value: number | null | undefined): string {
  if (!isNumber(value)) {
    return NO_VALUE;
  }
  if (value > 0 && value < 1) {
    return `<${NBSP}1${NBSP}%`;
  }
  return `${Math.round(value)}${NBSP}%`;
}

/** A byte count for people (`3.2 GiB`, held together), `–` when unknown. */
export function formatBytesOrNone(value: number | null | undefined): string {
  return isNumber(value) ? unbroken(formatBytes(Math.max(0, value))) : NO_VALUE;
}

/**
 * Memory used out of a size, short enough to sit beside a sparkline:
 * `3.2 / 16 GiB` (one unit named once when both share it), `512 MiB / 16 GiB`,
 * `3.2 GiB` without a size, `–` when unknown.
 */
export function formatUsedOf(
  used: number | null | undefined,
  total: number | null | undefined
): string {
  if (!isNumber(used)) {
    return NO_VALUE;
  }
  if (!isNumber(total) || total <= 0) {
    return formatBytesOrNone(used);
  }
  const [usedNumber, usedUnit] = formatBytes(used).split(' ');
  const [totalNumber, totalUnit] = formatBytes(total).split(' ');
  const text =
    usedUnit === totalUnit
      ? `${usedNumber} / ${totalNumber} ${totalUnit}`
      : `${usedNumber} ${usedUnit} / ${totalNumber} ${totalUnit}`;
  return unbroken(text);
}

/**
 * GPU-seconds as GPU-hours for people: `0.25`, `12.5`, `0.004` for a short job,
 * `< 0.001` for a few seconds, `0`; `–` when unknown.
 */
export function formatGpuHours(seconds: number | null | undefined): string {
  if (!isNumber(seconds)) {
    return NO_VALUE;
  }
  const hours = Math.max(0, seconds) / 3600;
  if (hours === 0) {
    return '0';
  }
  if (hours < 0.001) {
    return `<${NBSP}0.001`;
  }
  const digits = hours < 0.1 ? 3 : hours < 10 ? 2 : 1;
  return trimZeros(hours.toFixed(digits));
}

function unbroken(text: string): string {
  return text.replace(/ /g, NBSP);
}

function trimZeros(text: string): string {
  return text.includes('.') ? text.replace(/0+$/, '').replace(/\.$/, '') : text;
}

/** Samples known so far followed by newer ones, at most {@link MAX_SAMPLES} (the newest). */
export function mergeSamples(
  known: ITelemetrySample[],
  newer: ITelemetrySample[]
): ITelemetrySample[] {
  const last = known.length ? Date.parse(known[known.length - 1].at) : -Infinity;
  const fresh = newer.filter(s => !(Date.parse(s.at) <= last));
  const all = fresh.length ? known.concat(fresh) : known;
  return all.length > MAX_SAMPLES ? all.slice(all.length - MAX_SAMPLES) : all;
}

/** A round top for a scale that starts at 0: a little above the peak. */
export function niceMax(top: number | null): number {
  if (!isNumber(top) || top <= 0) {
    return 1;
  }
  const raised = top * 1.1;
  const magnitude = 10 ** Math.floor(Math.log10(raised));
  const step = [1, 2, 2.5, 5, 10].find(s => s * magnitude >= raised) ?? 10;
  return step * magnitude;
}

function peak(points: IPoint[]): number | null {
  let top: number | null = null;
  for (const { v } of points) {
    if (isNumber(v) && (top === null || v > top)) {
      top = v;
    }
  }
  return top;
}

function lastNumber(points: IPoint[]): number | null {
  for (let i = points.length - 1; i >= 0; i--) {
    const v = points[i].v;
    if (isNumber(v)) {
      return v;
    }
  }
  return null;
}

function numberOr(value: number | null | undefined): number | null {
  return isNumber(value) ? value : null;
}

function isNumber(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value);
}

/** "12 % on average, peak 80 %" */
function meanAndPeak(mean: number | null, top: number | null, trans: Translate): string {
  return mean === null && top === null
    ? NO_VALUE
    : trans('%1 on average, peak %2', formatPercent(mean), formatPercent(top));
}

/** Each value to a tenth, for a tooltip. */
function exactValues(...values: (number | null)[]): string[] {
  return values.map(v => (isNumber(v) ? String(Math.round(v * 10) / 10) : NO_VALUE));
}

/** The GPU figures of a summary: busy, memory, GPU-hours, and each GPU of several. */
function gpuFacts(summary: ITelemetrySummary, trans: Translate, charged: number | null): IFact[] {
  const facts: IFact[] = [];
  const meanPeak = (mean: number | null, top: number | null) => meanAndPeak(mean, top, trans);
  const [mean, top] = exactValues(
    summary.gpu_utilization_mean_percent,
    summary.gpu_utilization_peak_percent
  );
  facts.push({
    key: 'gpu',
    label: trans('GPU busy'),
    value: meanPeak(summary.gpu_utilization_mean_percent, summary.gpu_utilization_peak_percent),
    title: trans('GPU utilisation: %1 % on average, peak %2 %', mean, top)
  });
  const memory = summary.gpu_memory_peak_bytes;
  const size = summary.gpu_memory_total_bytes;
  facts.push({
    key: 'gpuMemory',
    label: trans('GPU memory'),
    value:
      memory === null
        ? NO_VALUE
        : size
          ? trans('peak %1 of %2', formatBytesOrNone(memory), formatBytesOrNone(size))
          : trans('peak %1', formatBytesOrNone(memory)),
    title: trans(
      'The most memory one of its GPUs held: %1 bytes (of %2)',
      memory ?? NO_VALUE,
      size ?? NO_VALUE
    )
  });
  const busy = summary.gpu_busy_seconds;
  // what it counts for, as usage and budgets count it (the job's own figure); the
  // readings' sampled time only where the service did not say
  const held = charged !== null ? charged * 3600 : summary.gpu_allocated_seconds;
  facts.push({
    key: 'gpuHours',
    label: trans('GPU-hours'),
    value:
      held === null
        ? NO_VALUE
        : busy === null
          ? trans('%1 (no busy readings)', formatGpuHours(held))
          : trans('%1 busy of %2', formatGpuHours(busy), formatGpuHours(held)),
    title: trans(
      'GPU time held %1 (what usage counts), measured busy %2',
      formatDuration(held ?? 0, trans),
      formatDuration(busy ?? 0, trans)
    )
  });
  const perGpu = summary.gpus ?? [];
  if (perGpu.length > 1) {
    for (const one of perGpu.slice(0, 8)) {
      facts.push({
        key: `gpu-${one.index}`,
        label: trans('GPU %1', one.index),
        value: meanPeak(one.utilization_mean_percent, one.utilization_peak_percent),
        title: one.name ? trans('GPU %1 (%2)', one.index, one.name) : trans('GPU %1', one.index)
      });
    }
  }
  return facts;
}

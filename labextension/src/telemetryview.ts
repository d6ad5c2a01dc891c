/**
 * A job's telemetry in its row of the Jobs panel: live sparklines while it runs,
 * its summary (and the service's hint) once it ended, or one quiet line.
 *
 * It asks `GET jobs/{id}/metrics` once a sample interval while the job runs and
 * the view is open (never faster than every 5 s: `planMetricsPoll`), for the
 * samples newer than those it has; once more when the job ends, for the final
 * summary; and not at all while nobody sees it.
 */
import { Poll } from '@lumino/polling';

import { type NbjobsAPI, NbjobsError } from './api';
import { isActive, isFinal } from './format';
import { IDLE_MAX, planMetricsPoll } from './pollpolicy';
import {
  type ISpark,
  type ITelemetryView,
  SPARK_HEIGHT,
  SPARK_WIDTH,
  describeTelemetry,
  mergeSamples
} from './telemetry';
import type { Translate } from './translate';
import type { IJob, IJobMetrics } from './types';

const SVG = 'http://www.w3.org/2000/svg';

export class TelemetryView {
  readonly node: HTMLDivElement;

  constructor(
    private readonly api: NbjobsAPI,
    private readonly trans: Translate
  ) {
    this.node = document.createElement('div');
    this.node.className = 'nbjobs-Telemetry';
    this.node.hidden = true;
  }

  /**
   * The readings' Poll, made the first time they are shown: most rows of a list never
   * open them, and a Poll for each of a hundred rows was a good part of the panel's
   * first paint (bench/panel_bench.py).
   */
  private get _poll(): Poll {
    if (this._poller === null) {
      this._poller = new Poll({
        factory: () => this._fetch(),
        frequency: { interval: IDLE_MAX, backoff: true, max: IDLE_MAX },
        standby: 'when-hidden',
        auto: false,
        name: 'nbjobs:metrics'
      });
      if (this._disposed) {
        this._poller.dispose();
      }
    }
    return this._poller;
  }

  /**
   * The job as the panel last saw it; `shown`: its readings are open in a panel
   * that is on screen. Fetches what is missing and (re)plans the polling.
   */
  update(job: IJob, shown: boolean): void {
    const first = this._job === null;
    this._job = job;
    this._shown = shown;
    this.node.setAttribute('aria-label', this.trans('Resource use of job %1', job.name));
    this.node.hidden = !shown || this._gone;
    if (!shown || this._gone) {
      void this._poller?.stop();
      return;
    }
    const metrics = this._metrics;
    // Nothing yet, or the answer is from before the job ended: its summary is final now.
    const stale =
      metrics === null
        ? !this._asking && !this._refused
        : isActive(metrics.state) && isFinal(job.state);
    if (first || stale) {
      void this._refresh();
    } else {
      this._plan();
    }
  }

  dispose(): void {
    this._disposed = true;
    this._poller?.dispose();
  }

  private async _refresh(): Promise<void> {
    if (this._poll.isDisposed) {
      return;
    }
    if (this._poll.state.phase === 'stopped' || this._poll.state.phase === 'constructed') {
      await this._poll.start();
    }
    await this._poll.refresh();
  }

  private async _fetch(): Promise<void> {
    const job = this._job;
    if (!job) {
      return;
    }
    const known = this._metrics;
    // While it runs, only what is new; the summary and hint come whole every time.
    const since = known && known.samples.length ? known.samples[known.samples.length - 1].at : null;
    this._asking = true;
    const asked = ++this._asked;
    let answer: IJobMetrics;
    try {
      answer = await this.api.metrics(job.id, since);
    } catch (error) {
      this._asking = false;
      if (error instanceof NbjobsError && error.status === 404) {
        // The job was forgotten: its row goes with the next look at the list.
        this._gone = true;
        this.node.hidden = true;
        void this._poll.stop();
        return;
      }
      if (error instanceof NbjobsError && error.kind !== 'unreachable') {
        // The service said why (a damaged record): say it quietly, ask no more.
        this._refused = true;
        if (!known) {
          this._quiet(error.message);
        }
        void this._poll.stop();
        return;
      }
      if (!known) {
        this._quiet(this.trans('No readings yet'));
      }
      throw error; // the Poll backs off; the panel says when the service is down
    }
    this._asking = false;
    if (asked < this._answered) {
      return; // a later question was answered first (asked again as the job ended)
    }
    this._answered = asked;
    const latest = this._metrics;
    const samples = latest ? mergeSamples(latest.samples, answer.samples) : answer.samples;
    this._metrics = { ...answer, samples };
    this._render();
    this._plan();
  }

  private _plan(): void {
    const plan = planMetricsPoll({
      shown: this._shown && !this._gone,
      state: this._metrics?.state ?? this._job?.state ?? 'queued',
      intervalSeconds: this._metrics ? this._metrics.interval_seconds : undefined
    });
    if (!plan.run) {
      void this._poll.stop();
      return;
    }
    // A long sample interval may exceed the backoff's usual ceiling: the ceiling follows.
    const max = Math.max(IDLE_MAX, plan.interval);
    this._poll.frequency = { interval: plan.interval, backoff: true, max };
    if (this._poll.state.phase === 'stopped' || this._poll.state.phase === 'constructed') {
      void this._poll.start();
    }
  }

  private _render(): void {
    if (!this._metrics || !this._job) {
      return;
    }
    const view = describeTelemetry(this._metrics, this._job, this.trans);
    this.node.dataset.kind = view.kind;
    const parts: HTMLElement[] = [];
    if (view.line) {
      parts.push(quietLine(view.line));
    }
    if (view.sparks.length) {
      parts.push(sparkGrid(view.sparks, this.trans));
    }
    if (view.facts.length) {
      parts.push(factList(view, this.trans));
    }
    if (view.hint) {
      const hint = document.createElement('div');
      hint.className = 'nbjobs-Telemetry-hint';
      hint.textContent = view.hint;
      parts.push(hint);
    }
    this.node.replaceChildren(...parts);
  }

  private _quiet(text: string): void {
    this.node.dataset.kind = 'none';
    this.node.replaceChildren(quietLine(text));
  }

  private _job: IJob | null = null;
  private _metrics: IJobMetrics | null = null;
  private _shown = false;
  private _gone = false;
  private _asking = false;
  /** the number of the latest question asked, and of the latest answer shown */
  private _asked = 0;
  private _answered = 0;
  /** the service refused to say (and why is shown): no more asking */
  private _refused = false;
  private _poller: Poll | null = null;
  private _disposed = false;
}

function quietLine(text: string): HTMLDivElement {
  const line = document.createElement('div');
  line.className = 'nbjobs-Telemetry-line';
  line.textContent = text;
  return line;
}

/** The sparklines, each between its name and its latest value. */
function sparkGrid(sparks: ISpark[], trans: Translate): HTMLElement {
  const grid = document.createElement('ul');
  grid.className = 'nbjobs-Telemetry-sparks';
  grid.setAttribute('aria-label', trans('Live readings'));
  for (const spark of sparks) {
    const item = document.createElement('li');
    item.className = 'nbjobs-Spark';
    item.dataset.series = spark.key;
    item.title = spark.description;

    const label = document.createElement('span');
    label.className = 'nbjobs-Spark-label';
    label.textContent = spark.label;
    const value = document.createElement('span');
    value.className = 'nbjobs-Spark-value';
    value.textContent = spark.latest;

    const svg = document.createElementNS(SVG, 'svg');
    svg.setAttribute('class', 'nbjobs-Spark-chart');
    svg.setAttribute('viewBox', `0 0 ${SPARK_WIDTH} ${SPARK_HEIGHT}`);
    svg.setAttribute('preserveAspectRatio', 'none');
    svg.setAttribute('role', 'img');
    svg.setAttribute('aria-label', spark.description);
    const title = document.createElementNS(SVG, 'title');
    title.textContent = spark.description;
    const area = document.createElementNS(SVG, 'path');
    area.setAttribute('class', 'nbjobs-Spark-area');
    area.setAttribute('d', spark.area);
    const line = document.createElementNS(SVG, 'path');
    line.setAttribute('class', 'nbjobs-Spark-line');
    line.setAttribute('d', spark.line);
    // The box stretches to the card's width: keep the stroke's width in pixels.
    line.setAttribute('vector-effect', 'non-scaling-stroke');
    svg.append(title, area, line);

    item.append(label, svg, value);
    grid.append(item);
  }
  return grid;
}

/** An ended job's figures as a description list. */
function factList(view: ITelemetryView, trans: Translate): HTMLElement {
  const list = document.createElement('dl');
  list.className = 'nbjobs-Telemetry-facts';
  list.setAttribute('aria-label', trans('What the job used'));
  for (const fact of view.facts) {
    const term = document.createElement('dt');
    term.textContent = fact.label;
    const value = document.createElement('dd');
    value.textContent = fact.value;
    value.title = fact.title;
    value.dataset.fact = fact.key;
    list.append(term, value);
  }
  return list;
}

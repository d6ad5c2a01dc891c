/** The dashboard's building blocks: elements, tables, meters, and what its views share
 * (the refresh period, the series' colours, how a redraw keeps what a view said). */

import { gpus } from './format';

/** Colours for the breakdown's series; each series also has its own pattern of dashes in
 * the legend and the table beside the chart, so no reader depends on colour alone. */
export const COLOURS = [
  '#1f6feb',
  '#d9480f',
  '#2b8a3e',
  '#862e9c',
  '#e67700',
  '#0b7285',
  '#c2255c',
  '#5c940d'
];
export const SERIES_SHOWN = 7;
export const REFRESH_MS = 10_000;
/** how long after a pushed change a view draws again: a burst draws once */
export const REDRAW_DELAY_MS = 500;

export type Child = Node | string | null | undefined | false;

/**
 * What a redraw after a pushed change passes as what the view says: whatever it says at
 * the moment it is drawn again (its last move or decision, or a mistake to mend such as a
 * rejection without a reason), not what it said when the redraw began.
 */
export const AS_IT_IS = Symbol('as it is');
export type Said = string | typeof AS_IT_IS;

/** Whether someone is typing in the view (a reason, a roster): a redraw would wipe it. */
export function typing(): boolean {
  return !!document.activeElement?.closest(
    '#nbjobs-main input, #nbjobs-main textarea, #nbjobs-main select'
  );
}

export function h(
  tag: string,
  attrs: Record<string, string> = {},
  ...children: Child[]
): HTMLElement {
  const element = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    element.setAttribute(key, value);
  }
  for (const child of children) {
    if (child !== null && child !== undefined && child !== false) {
      element.append(child);
    }
  }
  return element;
}

export function meta(name: string): string {
  return document.querySelector<HTMLMetaElement>(`meta[name="${name}"]`)?.content ?? '';
}

export function table(headers: string[], rows: Child[][], label: string): HTMLElement {
  return h(
    'table',
    { class: 'nbjobs-Table', 'aria-label': label },
    h('thead', {}, h('tr', {}, ...headers.map(text => h('th', { scope: 'col' }, text)))),
    h('tbody', {}, ...rows.map(cells => h('tr', {}, ...cells.map(cell => h('td', {}, cell)))))
  );
}

/** A bar of `part` out of `whole` with the numbers written beside it. */
export function meter(
  part: number,
  whole: number,
  label: string,
  show: (n: number) => string = gpus
): HTMLElement {
  const percent = whole > 0 ? Math.min(100, (100 * part) / whole) : 0;
  const bar = h('span', { class: 'nbjobs-Meter-fill' });
  bar.style.width = `${percent}%`;
  return h(
    'span',
    {
      class: 'nbjobs-Meter',
      role: 'img',
      'aria-label': `${label}: ${show(part)} of ${show(whole)}`
    },
    h('span', { class: 'nbjobs-Meter-track' }, bar),
    h('span', { class: 'nbjobs-Meter-text' }, `${show(part)} / ${show(whole)}`)
  );
}

/**
 * A number field with its unit written after it ("GPU-hours", "credits"), the unit also
 * in the field's accessible name, so nobody has to guess what the number counts.
 */
export function withUnit(input: HTMLInputElement, unit: string): HTMLElement {
  const label = input.getAttribute('aria-label');
  if (label) {
    input.setAttribute('aria-label', `${label}, in ${unit}`);
  }
  return h('span', { class: 'nbjobs-WithUnit' }, input, h('span', { class: 'nbjobs-Unit' }, unit));
}

/**
 * Ask in place of `shown` before an action, as the Remove, Delete class and Drain buttons
 * do: `box` (the question, with the buttons whose `data-action` is `yes` and `no`) takes
 * `shown`'s place with its no focused; no puts `shown` back and focuses `back`; yes runs
 * `act`, and when that fails puts `shown` back and hands the error to `failed`.
 */
export function askInPlace(
  shown: HTMLElement,
  box: HTMLElement,
  buttons: { yes: string; no: string },
  act: () => Promise<void>,
  failed: (error: unknown) => void,
  back: HTMLElement = shown
): void {
  const yes = box.querySelector(`[data-action="${buttons.yes}"]`) as HTMLElement;
  const no = box.querySelector(`[data-action="${buttons.no}"]`) as HTMLElement;
  const restore = (): void => {
    box.replaceWith(shown);
    back.focus();
  };
  no.addEventListener('click', restore);
  yes.addEventListener('click', () => {
    void act().catch((error: unknown) => {
      restore();
      failed(error);
    });
  });
  shown.replaceWith(box);
  no.focus();
}

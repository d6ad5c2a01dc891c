/**
 * nbjobs' icons, drawn with JupyterLab's icon classes (`jp-icon3`) so they
 * follow the light and dark themes.
 */
import { LabIcon } from '@jupyterlab/ui-components';

/** A stack of job cards: the Jobs panel's tab. */
export const jobsIcon = new LabIcon({
  name: 'nbjobs:jobs',
  svgstr: `<svg xmlns="http://www.w3.org/2000/svg" width="16" viewBox="0 0 24 24">
  <g class="jp-icon3" fill="#616161">
    <path d="M4 5h12v2H4zM4 11h16v2H4zM4 17h10v2H4z"/>
    <circle cx="19" cy="6" r="2"/>
    <circle cx="17.5" cy="18" r="2"/>
  </g>
</svg>`
});

/** A paper plane: send the notebook off as a job. */
export const submitIcon = new LabIcon({
  name: 'nbjobs:submit',
  svgstr: `<svg xmlns="http://www.w3.org/2000/svg" width="16" viewBox="0 0 24 24">
  <g class="jp-icon3" fill="#616161">
    <path d="M2.5 20.5 22 12 2.5 3.5l-.01 6.6L16 12 2.49 13.9z"/>
  </g>
</svg>`
});

/** A small line chart: a job's GPU, CPU and memory use. */
export const usageIcon = new LabIcon({
  name: 'nbjobs:usage',
  svgstr: `<svg xmlns="http://www.w3.org/2000/svg" width="16" viewBox="0 0 24 24">
  <g class="jp-icon3" fill="#616161">
    <path d="M3 19h18v2H3z"/>
    <path d="m4.4 16.6-1.4-1.4 5.5-5.5 4 4 6.1-6.9 1.5 1.3-7.5 8.5-4.1-4.1z"/>
  </g>
</svg>`
});

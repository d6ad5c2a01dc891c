/** Where the job service's dashboard is, seen from a JupyterLab under a hub. */

/** The hub's name for the job service (hub_config's SERVICE_NAME). */
export const SERVICE_NAME = 'nbjobs';

/**
 * The dashboard's URL from the hub's page options (`hubHost`, `hubPrefix`), or null
 * without a hub (a plain `jupyter lab` runs its job service in-process, with no page).
 */
export function dashboardUrl(hubHost: string, hubPrefix: string): string | null {
  if (!hubPrefix) {
    return null;
  }
  // The hub lives at {base_url}hub/; its services at {base_url}services/{name}/.
  const base = hubPrefix.replace(/hub\/?$/, '');
  return `${hubHost}${base.endsWith('/') ? base : `${base}/`}services/${SERVICE_NAME}/`;
}

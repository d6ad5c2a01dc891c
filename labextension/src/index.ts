/**
 * nbjobs' JupyterLab extension: the Submit Job button and the Jobs panel.
 *
 * This first version only registers the plugin and checks that the nbjobs
 * server extension answers; the UI arrives with the Lab extension issue.
 */
import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

const PLUGIN_ID = 'nbjobs:plugin';

/** Ask the server extension whether it is loaded; resolves to its version or null. */
export async function serverVersion(): Promise<string | null> {
  const settings = ServerConnection.makeSettings();
  const url = URLExt.join(settings.baseUrl, 'nbjobs', 'api', 'health');
  try {
    const response = await ServerConnection.makeRequest(url, {}, settings);
    if (!response.ok) {
      return null;
    }
    const body = (await response.json()) as { version?: string };
    return body.version ?? null;
  } catch {
    return null;
  }
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: 'Submit notebooks as GPU jobs and follow them.',
  autoStart: true,
  activate: (app: JupyterFrontEnd): void => {
    void serverVersion().then(version => {
      if (version === null) {
        console.warn(
          'nbjobs: the server extension is not answering; is nbjobs installed in the server environment?'
        );
      } else {
        console.info(`nbjobs ${version} is active`);
      }
    });
  }
};

export default plugin;

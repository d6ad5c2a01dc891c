/**
 * Sending a notebook to the job service from Lab: saved first when its cells changed,
 * the Submit dialog filled in from the notebook (its parameters cell, its kernel) and the
 * flavors the user may use; a re-run and a definition's edit through the same dialog.
 */
import type { JupyterFrontEnd } from '@jupyterlab/application';
import { Dialog, Notification, showDialog, showErrorMessage } from '@jupyterlab/apputils';
import type { IDefaultFileBrowser } from '@jupyterlab/filebrowser';
import type { INotebookTracker } from '@jupyterlab/notebook';
import { ServerConnection } from '@jupyterlab/services';

import { type NbjobsAPI, NbjobsError } from './api';
import { outputLocation } from './format';
import { kernelName, parametersSource } from './notebookjson';
import { SubmitDialog, SubmitForm } from './submit';
import type { Translate } from './translate';
import type { IDefinition, IJob, IOutputDefaults, IScheduleSpec, ISubmitRequest } from './types';

/** Whether the open notebook's cells differ from its file's (true when unsure). */
async function cellsDiffer(app: JupyterFrontEnd, path: string, open: unknown): Promise<boolean> {
  const cells = (nb: unknown) =>
    JSON.stringify(
      (
        ((nb as { cells?: unknown[] })?.cells ?? []) as { cell_type?: string; source?: unknown }[]
      ).map(c => [c.cell_type, Array.isArray(c.source) ? c.source.join('') : c.source])
    );
  try {
    const saved = await app.serviceManager.contents.get(path, { content: true, type: 'notebook' });
    return cells(saved.content) !== cells(open);
  } catch {
    return true;
  }
}

/** The path of the notebook the command should submit, or null. */
export function notebookToSubmit(
  fromFileBrowser: boolean,
  notebooks: INotebookTracker,
  fileBrowser: IDefaultFileBrowser | null
): string | null {
  if (fromFileBrowser) {
    const item = fileBrowser ? Array.from(fileBrowser.selectedItems())[0] : undefined;
    return item && item.type === 'notebook' ? item.path : null;
  }
  return notebooks.currentWidget?.context.path ?? null;
}

/** Save if needed, ask for flavor and parameters, send; the accepted job or null. */
export async function submitNotebook(
  app: JupyterFrontEnd,
  api: NbjobsAPI,
  notebooks: INotebookTracker,
  path: string,
  trans: Translate
): Promise<IJob | IDefinition | null> {
  if (!(await saveFirst(app, notebooks, path, trans))) {
    return null;
  }
  let notebook: unknown;
  let notebookBytes: number | null = null;
  let flavors;
  try {
    const contents = app.serviceManager.contents;
    [notebook, flavors] = await Promise.all([
      contents.get(path, { content: true, type: 'notebook' }).then(m => {
        notebookBytes = typeof m.size === 'number' ? m.size : null;
        return m.content;
      }),
      api.flavors()
    ]);
  } catch (error) {
    let message: string;
    if (error instanceof NbjobsError) {
      message = error.message;
    } else if (error instanceof ServerConnection.ResponseError && error.response.status === 404) {
      // Open in Lab, but its file was moved or deleted on the server.
      message = trans(
        '%1 is not saved as a file on the server (was it moved or deleted?). A job runs the saved file: save the notebook (File ▸ Save Notebook As…), then submit it again.',
        path
      );
    } else {
      message = trans('Could not read %1; save it and try again.', path);
    }
    await showErrorMessage(trans('Submit Job'), message);
    return null;
  }
  const localPath = app.serviceManager.contents.localPath(path);
  const form = new SubmitForm(localPath, flavors, parametersSource(notebook), trans, null, {
    notebookKernel: kernelName(notebook),
    outputs: await outputDefaults(api),
    schedules: true,
    notebookBytes
  });
  const dialog = new SubmitDialog(
    form,
    request => api.submit(request),
    trans,
    undefined,
    (request, schedule) => api.createDefinition({ ...request, schedule })
  );
  await dialog.launch();
  return dialog.job ?? dialog.definition;
}

/** The notebook open at ``path`` saved when its cells changed (a job runs the saved
 * file); false when it could not be (said to the user). */
async function saveFirst(
  app: JupyterFrontEnd,
  notebooks: INotebookTracker,
  path: string,
  trans: Translate
): Promise<boolean> {
  const open = notebooks.find(panel => panel.context.path === path);
  if (open) {
    if (!open.context.isReady || !open.context.contentsModel) {
      await showErrorMessage(
        trans('Submit Job'),
        trans('Save this notebook to a file first; a job runs the saved file.')
      );
      return false;
    }
    if (open.context.model.dirty) {
      // Lab marks a notebook changed when a kernel fills in its metadata: say "saved"
      // only when the cells the job runs differ from the file's.
      const edited = await cellsDiffer(app, path, open.context.model.toJSON());
      try {
        await open.context.save();
      } catch (error) {
        // Lab has shown why the save failed (or the user cancelled it); a job
        // must not run an older copy than the one on screen.
        if ((error as Error)?.name !== 'ModalCancelError') {
          Notification.error(
            trans(
              '%1 was not submitted: it could not be saved. Fix what stopped the save (see the message), then submit again.',
              path
            ),
            { autoClose: false }
          );
        }
        return false;
      }
      if (edited) {
        Notification.info(trans('Saved %1 before submitting it.', path), { autoClose: 4000 });
      }
    }
  }
  return true;
}

/** Edit a job definition in the Submit dialog, filled in as it is; saved as a new version. */
export async function editDefinitionDialog(
  app: JupyterFrontEnd,
  api: NbjobsAPI,
  definition: IDefinition,
  trans: Translate
): Promise<IDefinition | null> {
  let notebook: unknown = null;
  let flavors;
  try {
    [notebook, flavors] = await Promise.all([
      app.serviceManager.contents
        .get(definition.path, { content: true, type: 'notebook' })
        .then(m => m.content)
        .catch(() => null), // moved or deleted: its parameters are edited as saved
      api.flavors()
    ]);
  } catch (error) {
    await showErrorMessage(
      trans('Edit'),
      error instanceof NbjobsError ? error.message : String(error)
    );
    return null;
  }
  const form = new SubmitForm(
    definition.path,
    flavors,
    parametersSource(notebook),
    trans,
    {
      flavor: definition.flavor,
      parameters: definition.parameters,
      name: definition.name,
      schedule: definition.schedule
        ? {
            cron: definition.schedule.cron,
            timezone: definition.schedule.timezone,
            start_at: definition.schedule.start_at,
            end_at: definition.schedule.end_at,
            catch_up: definition.schedule.catch_up
          }
        : null
    },
    { notebookKernel: kernelName(notebook), schedules: true }
  );
  const change = (request: ISubmitRequest, schedule: IScheduleSpec | null) =>
    api.updateDefinition(definition.id, {
      flavor: request.flavor,
      parameters: { ...definition.parameters, ...(request.parameters ?? {}) },
      name: request.name ?? definition.name,
      ...(request.kernel ? { kernel: request.kernel } : {}),
      schedule
    });
  let saved: IDefinition | null = null;
  const dialog = new SubmitDialog(
    form,
    async request => {
      saved = await change(request, null); // no schedule: it runs when asked
      return null;
    },
    trans,
    trans('Edit "%1"', definition.name),
    async (request, schedule) => (saved = await change(request, schedule))
  );
  await dialog.launch();
  return saved;
}

/** Re-run a job through the Submit dialog, pre-filled with what it ran with. */
export async function rerunDialog(
  app: JupyterFrontEnd,
  api: NbjobsAPI,
  job: IJob,
  trans: Translate
): Promise<IJob | null> {
  if (job.kind === 'script' || job.kind === 'command') {
    // No notebook to read and no parameters cell to offer: the same script or command
    // again, on the same flavor and with the same parameters (nbjobs rerun does likewise).
    const what = job.kind === 'command' ? trans('the command "%1"', job.command ?? '') : job.path;
    if (
      !(await confirm(
        trans('Re-run %1?', what),
        trans('It runs again on %1 with the same parameters; its log goes next to it.', job.flavor),
        trans('Re-run'),
        trans('Cancel')
      ))
    ) {
      return null;
    }
    return report(api.rerun(job.id), trans);
  }
  let notebook: unknown;
  let flavors;
  try {
    [notebook, flavors] = await Promise.all([
      app.serviceManager.contents
        .get(job.path, { content: true, type: 'notebook' })
        .then(m => m.content),
      api.flavors()
    ]);
  } catch (error) {
    await showErrorMessage(
      trans('Re-run'),
      error instanceof NbjobsError
        ? error.message
        : trans(
            '%1 cannot be read any more (moved or deleted?); a re-run runs its current version.',
            job.path
          )
    );
    return null;
  }
  const source = parametersSource(notebook);
  const form = new SubmitForm(
    job.path,
    flavors,
    source,
    trans,
    {
      flavor: job.flavor,
      parameters: job.parameters,
      name: job.name,
      kernel: job.kernel,
      outputs: outputLocation(job),
      html: Boolean(job.html_path)
    },
    { notebookKernel: kernelName(notebook), outputs: await outputDefaults(api) }
  );
  const dialog = new SubmitDialog(
    form,
    request =>
      api.rerun(job.id, {
        flavor: request.flavor,
        // without a parameters cell the dialog shows none: the job's stay as they were
        ...(source === null ? {} : { parameters: request.parameters ?? {} }),
        name: request.name ?? job.name,
        ...(request.kernel ? { kernel: request.kernel } : {}),
        ...(request.outputs ? { outputs: request.outputs, html: request.html } : {})
      }),
    trans,
    trans('Re-run')
  );
  await dialog.launch();
  return dialog.job;
}

/** Where results go by default; null from a service too old to say (no choice offered). */
export async function outputDefaults(api: NbjobsAPI): Promise<IOutputDefaults | null> {
  try {
    return (await api.me()).outputs ?? null;
  } catch {
    return null;
  }
}

/** Ask before an action that cannot be undone; true when the user goes ahead. */
export async function confirm(
  title: string,
  body: string,
  yes: string,
  no: string
): Promise<boolean> {
  const result = await showDialog({
    title,
    body,
    buttons: [Dialog.cancelButton({ label: no }), Dialog.warnButton({ label: yes })]
  });
  return result.button.accept;
}

/** Await an API call; show its failure as a notification and resolve to null. */
export async function report<T>(call: Promise<T>, trans: Translate): Promise<T | null> {
  try {
    return await call;
  } catch (error) {
    Notification.error(
      error instanceof NbjobsError
        ? error.message
        : trans('Something went wrong: %1', String(error)),
      { autoClose: 8000 }
    );
    return null;
  }
}

/**
 * nbjobs' JupyterLab extension: Submit Job (notebook toolbar, command palette,
 * file browser menu), the Jobs panel, the job log viewer and notifications
 * when a job ends.
 *
 * It talks only to this server's `{base_url}nbjobs/api/` (the server
 * extension), so it works the same in a plain `jupyter lab` and in a hub.
 */
import {
  ILayoutRestorer,
  type JupyterFrontEnd,
  type JupyterFrontEndPlugin
} from '@jupyterlab/application';
import {
  Dialog,
  ICommandPalette,
  Notification,
  WidgetTracker,
  showDialog,
  showErrorMessage
} from '@jupyterlab/apputils';
import type { MainAreaWidget } from '@jupyterlab/apputils';
import { IDefaultFileBrowser } from '@jupyterlab/filebrowser';
import { ILauncher } from '@jupyterlab/launcher';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { PageConfig } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';
import { ITranslator, nullTranslator } from '@jupyterlab/translation';

import { NbjobsAPI, NbjobsError } from './api';
import { elapsedSeconds, formatDuration, outputLocation } from './format';
import { dashboardUrl } from './dashboard';
import { type IDetailActions, type JobDetail, createDetailWidget } from './detail';
import { submitIcon } from './icons';
import { type LogView, createLogWidget } from './logview';
import { EventStream } from './events';
import { JobsPage } from './jobspage';
import { JobsModel } from './model';
import { JobsPanel } from './panel';
import { kernelName, parametersSource } from './notebookjson';
import { notificationsDialog } from './notify';
import { SubmitDialog, SubmitForm } from './submit';
import { DOMAIN, type Translate } from './translate';
import type {
  IDefinition,
  IFlavor,
  IJob,
  IOutputDefaults,
  IScheduleSpec,
  ISubmitRequest
} from './types';

const PLUGIN_ID = 'nbjobs:plugin';

/** Command ids. */
export namespace CommandIDs {
  export const submit = 'nbjobs:submit';
  export const showJobs = 'nbjobs:show-jobs';
  export const openDashboard = 'nbjobs:open-dashboard';
  export const openJobsPage = 'nbjobs:open-jobs-page';
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: 'Submit notebooks as GPU jobs and follow them.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ITranslator, ICommandPalette, IDefaultFileBrowser, ILayoutRestorer, ILauncher],
  activate: (
    app: JupyterFrontEnd,
    notebooks: INotebookTracker,
    translator: ITranslator | null,
    palette: ICommandPalette | null,
    fileBrowser: IDefaultFileBrowser | null,
    restorer: ILayoutRestorer | null,
    launcher: ILauncher | null
  ): void => {
    const bundle = (translator ?? nullTranslator).load(DOMAIN);
    const trans: Translate = (msgid, ...args) => bundle.__(msgid, ...(args as string[]));
    const api = new NbjobsAPI(trans, app.serviceManager.serverSettings);
    const model = new JobsModel(api);
    // changes pushed by the service: the lists ask again when something changed
    const events = new EventStream(signal => api.events(signal));
    model.listen(events);
    events.start();
    const logs = new WidgetTracker<MainAreaWidget<LogView>>({ namespace: 'nbjobs-logs' });
    const details = new WidgetTracker<MainAreaWidget<JobDetail>>({ namespace: 'nbjobs-jobs' });
    const me = PageConfig.getOption('hubUser') || null;

    const actions = {
      cancel: async (job: IJob) => {
        // A queued job loses nothing; a running one stops where it is: ask first.
        if (
          (job.state === 'running' || job.state === 'starting') &&
          !(await confirm(
            trans('Cancel job "%1"?', job.name),
            trans('It stops now; its output keeps the cells that ran.'),
            trans('Cancel job'),
            trans('Keep running')
          ))
        ) {
          return;
        }
        await report(api.cancel(job.id), trans);
        await model.refresh();
      },
      notifications: async () => {
        if (await notificationsDialog(api, trans)) {
          Notification.success(trans('Notification settings saved.'), { autoClose: 4000 });
        }
      },
      rerun: async (job: IJob) => {
        // The Submit dialog, filled in as the job ran: change the flavor, a parameter or
        // the name, or send it as it was.
        const again = await rerunDialog(app, api, job, trans);
        if (again) {
          Notification.info(trans('Job "%1" queued again.', again.name), { autoClose: 4000 });
        }
        await model.refresh();
      },
      remove: async (job: IJob) => {
        if (
          !(await confirm(
            trans('Remove job "%1" from the list?', job.name),
            trans('Its record and log go; its output notebook stays in your folder.'),
            trans('Remove'),
            trans('Keep it')
          ))
        ) {
          return;
        }
        // Gone from older pages too, which the poll does not ask for again.
        if (
          (await report(
            api.remove(job.id).then(() => true),
            trans
          )) !== null
        ) {
          model.forget(job.id);
        }
        await model.refresh();
      },
      openOutput: (job: IJob) => openOutput(app, api, job),
      openFullView: () => app.commands.execute(CommandIDs.openJobsPage) as Promise<void>,
      editDefinition: (definition: IDefinition) =>
        editDefinitionDialog(app, api, definition, trans),
      showJobById: async (id: string) => {
        const known = model.find(id);
        try {
          await actions.showDetails(known ?? (await api.job(id)));
        } catch (error) {
          Notification.error(error instanceof NbjobsError ? error.message : String(error), {
            autoClose: 6000
          });
        }
      },
      showDetails: async (job: IJob) => {
        const existing = details.find(w => w.content.job.id === job.id);
        if (existing) {
          app.shell.activateById(existing.id);
          return;
        }
        // What each flavor gives, as the Submit dialog says it (none when unreachable), and
        // where the user's results are written, as they know the place.
        const [flavors, place] = await Promise.all([
          api.flavors().catch(() => [] as IFlavor[]),
          outputDefaults(api).then(outputs => outputs?.where || null)
        ]);
        const opened = details.find(w => w.content.job.id === job.id);
        if (opened) {
          // opened by a second click while the flavors were on their way
          app.shell.activateById(opened.id);
          return;
        }
        // the job as the model holds it now: a poll that answered while the flavors were
        // on their way is not followed by another, and the tab would show the old state
        const fresh = model.find(job.id) ?? job;
        const widget = createDetailWidget(fresh, detailActions(flavors, place), trans, me);
        await details.add(widget);
        app.shell.add(widget, 'main');
        app.shell.activateById(widget.id);
      },
      viewLog: async (job: IJob) => {
        const existing = logs.find(w => w.content.job.id === job.id);
        if (existing) {
          app.shell.activateById(existing.id);
          return;
        }
        const widget = createLogWidget(api, job, trans);
        await logs.add(widget);
        app.shell.add(widget, 'main');
        app.shell.activateById(widget.id);
      }
    };

    /** What a job's details do: open what it ran and made, and act on it. */
    const detailActions = (flavors: IFlavor[], place: string | null): IDetailActions => ({
      place,
      openPath: path => void app.commands.execute('docmanager:open', { path }),
      openOutput: j => openOutput(app, api, j),
      viewLog: j => actions.viewLog(j),
      download: path => download(app, path, trans),
      flavor: name => flavors.find(f => f.name === name) ?? null,
      showJob: id => void actions.showJobById(id),
      rerun: j => actions.rerun(j),
      cancel: j => actions.cancel(j),
      remove: j => actions.remove(j)
    });

    const dashboard = dashboardUrl(
      PageConfig.getOption('hubHost'),
      PageConfig.getOption('hubPrefix')
    );
    // Who is looking (under a hub): another user's jobs (an admin's or teacher's list)
    // say whose they are, and offer only what makes sense for them.
    const panel = new JobsPanel(model, actions, trans, dashboard, me);
    // Open detail tabs follow the poll.
    model.changed.connect(() => {
      details.forEach(widget => {
        const now = model.find(widget.content.job.id);
        if (now) {
          widget.content.setJob(now);
        }
      });
    });
    app.shell.add(panel, 'left', { rank: 650 });
    restorer?.add(panel, 'nbjobs-jobs-panel');

    const showJobs = () => app.shell.activateById(panel.id);
    app.commands.addCommand(CommandIDs.showJobs, {
      label: trans('Show Jobs'),
      caption: trans('Open the Jobs panel'),
      execute: showJobs
    });

    app.commands.addCommand(CommandIDs.submit, {
      label: trans('Submit Job'),
      caption: trans('Run this notebook as a job on a GPU flavor'),
      icon: submitIcon,
      isEnabled: args =>
        args.from === 'filebrowser' ? fileBrowser !== null : notebooks.currentWidget !== null,
      execute: async args => {
        const path = notebookToSubmit(args.from === 'filebrowser', notebooks, fileBrowser);
        if (path === null) {
          await showErrorMessage(
            trans('Submit Job'),
            trans('Open a notebook (or select one in the file browser) to submit it as a job.')
          );
          return;
        }
        const sent = await submitNotebook(app, api, notebooks, path, trans);
        if (sent && 'schedule' in sent) {
          Notification.success(
            sent.schedule
              ? trans('Saved "%1": %2.', sent.name, sent.schedule.description)
              : trans('Saved "%1".', sent.name),
            {
              autoClose: 6000,
              actions: [
                {
                  label: trans('Show Schedules'),
                  callback: () => {
                    app.shell.activateById(panel.id);
                    panel.showSchedules();
                  }
                }
              ]
            }
          );
        } else if (sent) {
          Notification.success(trans('Job "%1" submitted to flavor %2.', sent.name, sent.flavor), {
            autoClose: 5000,
            actions: [{ label: trans('Show Jobs'), callback: showJobs }]
          });
          await model.refresh();
        }
      }
    });

    app.commands.addCommand(CommandIDs.openDashboard, {
      label: trans('Open nbjobs Dashboard'),
      caption: trans('GPUs, queues and usage, in a new browser tab'),
      isVisible: () => dashboard !== null,
      execute: () => {
        if (dashboard) {
          window.open(dashboard, '_blank', 'noopener');
        }
      }
    });

    palette?.addItem({ command: CommandIDs.submit, category: 'nbjobs' });
    if (dashboard) {
      palette?.addItem({ command: CommandIDs.openDashboard, category: 'nbjobs' });
    }
    palette?.addItem({ command: CommandIDs.showJobs, category: 'nbjobs' });

    // The Notebook Jobs page: the jobs in a full-width table, with a model of its own.
    let page: JobsPage | null = null;
    const openJobsPage = async (): Promise<void> => {
      if (page && !page.isDisposed) {
        app.shell.activateById(page.id);
        return;
      }
      const [flavors, place] = await Promise.all([
        api.flavors().catch(() => [] as IFlavor[]),
        outputDefaults(api).then(outputs => outputs?.where || null)
      ]);
      const pageModel = new JobsModel(api);
      pageModel.listen(events);
      const many = async (
        jobs: IJob[],
        question: [string, string, string, string],
        call: (job: IJob) => Promise<unknown>
      ): Promise<void> => {
        if (!(await confirm(...question))) {
          return;
        }
        // each on its own: one refused (it ended meanwhile) stops none of the others
        const failed = (
          await Promise.all(
            jobs.map(job =>
              call(job).then(
                () => null,
                (error: unknown) => error
              )
            )
          )
        ).filter(error => error !== null);
        if (failed.length) {
          const why = failed[0];
          Notification.error(
            trans(
              '%1 of %2 could not be done: %3',
              failed.length,
              jobs.length,
              why instanceof NbjobsError ? why.message : String(why)
            ),
            { autoClose: 8000 }
          );
        }
        await Promise.all([pageModel.refresh(), model.refresh()]);
      };
      page = new JobsPage(
        pageModel,
        {
          details: detailActions(flavors, place),
          cancelMany: jobs =>
            many(
              jobs,
              [
                trans('Cancel %1 job(s)?', jobs.length),
                trans(
                  'Waiting ones lose nothing; running ones stop now and keep the cells that ran.'
                ),
                trans('Cancel them'),
                trans('Keep them')
              ],
              job => api.cancel(job.id)
            ),
          removeMany: jobs =>
            many(
              jobs,
              [
                trans('Delete %1 job(s) from the list?', jobs.length),
                trans('Their records and logs go; their output notebooks stay in your folder.'),
                trans('Delete them'),
                trans('Keep them')
              ],
              job =>
                api.remove(job.id).then(() => {
                  pageModel.forget(job.id);
                  model.forget(job.id);
                })
            )
        },
        trans,
        me
      );
      page.title.icon = submitIcon;
      app.shell.add(page, 'main');
      app.shell.activateById(page.id);
    };
    app.commands.addCommand(CommandIDs.openJobsPage, {
      label: trans('Notebook Jobs'),
      caption: trans('Every job in a full-width table: sort, select, cancel, delete'),
      icon: submitIcon,
      execute: openJobsPage
    });
    palette?.addItem({ command: CommandIDs.openJobsPage, category: 'nbjobs' });
    launcher?.add({ command: CommandIDs.openJobsPage, category: 'Other', rank: 10 });

    model.approved.connect((_, jobs) => {
      for (const job of jobs) {
        // The service's words say who approved it ("approved by tess"), until the job ends.
        const who = job.message?.startsWith('approved by') ? job.message : trans('approved');
        Notification.info(trans('Job "%1": %2.', job.name, who), {
          autoClose: 8000,
          actions: [{ label: trans('Show Jobs'), callback: showJobs }]
        });
      }
    });
    model.ended.connect((_, jobs) => {
      for (const job of jobs) {
        notifyEnded(
          job,
          trans,
          () => void openOutput(app, api, job),
          () => void actions.viewLog(job)
        );
      }
    });
    // One look at startup: are jobs running whose end the user should hear about?
    void model.refresh();
  }
};

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
function notebookToSubmit(
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
async function submitNotebook(
  app: JupyterFrontEnd,
  api: NbjobsAPI,
  notebooks: INotebookTracker,
  path: string,
  trans: Translate
): Promise<IJob | IDefinition | null> {
  const open = notebooks.find(panel => panel.context.path === path);
  if (open) {
    if (!open.context.isReady || !open.context.contentsModel) {
      await showErrorMessage(
        trans('Submit Job'),
        trans('Save this notebook to a file first; a job runs the saved file.')
      );
      return null;
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
        return null;
      }
      if (edited) {
        Notification.info(trans('Saved %1 before submitting it.', path), { autoClose: 4000 });
      }
    }
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

/** Edit a job definition in the Submit dialog, filled in as it is; saved as a new version. */
async function editDefinitionDialog(
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
async function rerunDialog(
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
async function outputDefaults(api: NbjobsAPI): Promise<IOutputDefaults | null> {
  try {
    return (await api.me()).outputs ?? null;
  } catch {
    return null;
  }
}

/** Save a file of the user's folder to their computer, as the file browser's Download does. */
async function download(app: JupyterFrontEnd, path: string, trans: Translate): Promise<void> {
  try {
    const url = await app.serviceManager.contents.getDownloadUrl(path);
    const link = document.createElement('a');
    link.href = url;
    link.download = path.replace(/^.*\//, '');
    document.body.append(link);
    link.click();
    link.remove();
  } catch {
    Notification.error(trans('%1 cannot be downloaded (moved or deleted?).', path), {
      autoClose: 6000
    });
  }
}

/**
 * Open a job's executed notebook; a failed one at its failing cell. It is marked
 * trusted first (its owner ran that code), so its HTML and JavaScript outputs show.
 */
async function openOutput(app: JupyterFrontEnd, api: NbjobsAPI, job: IJob): Promise<void> {
  try {
    if (job.output_path.endsWith('.ipynb')) {
      await api.trust(job.id); // a script's output is its log: nothing to trust
    }
  } catch (error) {
    // Opened untrusted, as any notebook: its rich outputs wait for Trust Notebook.
    console.warn(`nbjobs: could not mark ${job.output_path} trusted:`, error);
  }
  const widget = await app.commands.execute('docmanager:open', { path: job.output_path });
  const index = job.error?.cell_index;
  if (!(widget instanceof NotebookPanel) || index === null || index === undefined) {
    return;
  }
  await widget.context.ready;
  await widget.revealed;
  const notebook = widget.content;
  const cell = notebook.widgets[index];
  if (cell) {
    notebook.activeCellIndex = index;
    await notebook.scrollToCell(cell, 'center');
  }
}

/** A notification for a job that ended, with what the user may want next. */
function notifyEnded(job: IJob, trans: Translate, openIt: () => void, showLog: () => void): void {
  const took = formatDuration(elapsedSeconds(job, new Date()), trans);
  const open = { label: trans('Open output'), callback: openIt };
  const log = { label: trans('View log'), callback: showLog };
  switch (job.state) {
    case 'succeeded':
      // long enough to reach for "Open output" after looking up from other work; it
      // stays in the notification list after
      Notification.success(trans('Job "%1" succeeded after %2.', job.name, took), {
        autoClose: 30000,
        actions: [open]
      });
      break;
    case 'failed':
      // A job that never started (a missing kernel, a bad image) has no output to open.
      Notification.error(
        trans('Job "%1" failed: %2', job.name, job.message ?? trans('see its log')),
        { autoClose: false, actions: job.started_at ? [open, log] : [log] }
      );
      break;
    case 'timed_out':
      Notification.warning(trans('Job "%1" reached its time limit and was stopped.', job.name), {
        autoClose: false,
        actions: job.started_at ? [open, log] : [log]
      });
      break;
    case 'cancelled':
      Notification.info(trans('Job "%1" was cancelled.', job.name), {
        autoClose: 5000,
        actions: job.started_at ? [open] : []
      });
      break;
  }
}

/** Ask before an action that cannot be undone; true when the user goes ahead. */
async function confirm(title: string, body: string, yes: string, no: string): Promise<boolean> {
  const result = await showDialog({
    title,
    body,
    buttons: [Dialog.cancelButton({ label: no }), Dialog.warnButton({ label: yes })]
  });
  return result.button.accept;
}

/** Await an API call; show its failure as a notification and resolve to null. */
async function report<T>(call: Promise<T>, trans: Translate): Promise<T | null> {
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

export default plugin;

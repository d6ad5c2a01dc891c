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
  ICommandPalette,
  Notification,
  WidgetTracker,
  showErrorMessage
} from '@jupyterlab/apputils';
import type { MainAreaWidget } from '@jupyterlab/apputils';
import { IDefaultFileBrowser } from '@jupyterlab/filebrowser';
import { ILauncher } from '@jupyterlab/launcher';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { PageConfig } from '@jupyterlab/coreutils';
import { ITranslator, nullTranslator } from '@jupyterlab/translation';

import { NbjobsAPI, NbjobsError } from './api';
import { elapsedSeconds, formatDuration } from './format';
import { dashboardUrl } from './dashboard';
import { type IDetailActions, type JobDetail, createDetailWidget } from './detail';
import { submitIcon } from './icons';
import { type LogView, createLogWidget } from './logview';
import { EventStream } from './events';
import { JobsPage } from './jobspage';
import { JobsModel } from './model';
import { type IJobActions, JobsPanel } from './panel';
import { notificationsDialog } from './notify';
import {
  confirm,
  editDefinitionDialog,
  notebookToSubmit,
  outputDefaults,
  report,
  rerunDialog,
  submitNotebook
} from './submitflow';
import { DOMAIN, type Translate } from './translate';
import type { IFlavor, IJob } from './types';

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
    const ext = startExtension(app, translator);
    const actions = jobActions(ext);
    const dashboard = dashboardUrl(
      PageConfig.getOption('hubHost'),
      PageConfig.getOption('hubPrefix')
    );
    // Who is looking (under a hub): another user's jobs (an admin's or teacher's list)
    // say whose they are, and offer only what makes sense for them.
    const panel = new JobsPanel(ext.model, actions, ext.trans, dashboard, ext.me);
    // Open detail tabs follow the poll.
    ext.model.changed.connect(() => {
      ext.details.forEach(widget => {
        const now = ext.model.find(widget.content.job.id);
        if (now) {
          widget.content.setJob(now);
        }
      });
    });
    app.shell.add(panel, 'left', { rank: 650 });
    restorer?.add(panel, 'nbjobs-jobs-panel');
    const showJobs = () => app.shell.activateById(panel.id);
    addCommands(ext, actions, { panel, showJobs, dashboard, notebooks, fileBrowser });
    const add = (command: string) => palette?.addItem({ command, category: 'nbjobs' });
    add(CommandIDs.submit);
    if (dashboard) {
      add(CommandIDs.openDashboard);
    }
    add(CommandIDs.showJobs);
    add(CommandIDs.openJobsPage);
    launcher?.add({ command: CommandIDs.openJobsPage, category: 'Other', rank: 10 });
    announce(ext, actions, showJobs);
    // One look at startup: are jobs running whose end the user should hear about?
    void ext.model.refresh();
  }
};

/** What the extension's parts share once it is activated. */
interface IExtension {
  app: JupyterFrontEnd;
  api: NbjobsAPI;
  /** the jobs the panel shows, asked again when the service says something changed */
  model: JobsModel;
  events: EventStream;
  trans: Translate;
  /** the hub user looking (null: a plain `jupyter lab`) */
  me: string | null;
  details: WidgetTracker<MainAreaWidget<JobDetail>>;
  logs: WidgetTracker<MainAreaWidget<LogView>>;
}

function startExtension(app: JupyterFrontEnd, translator: ITranslator | null): IExtension {
  const bundle = (translator ?? nullTranslator).load(DOMAIN);
  const trans: Translate = (msgid, ...args) => bundle.__(msgid, ...(args as string[]));
  const api = new NbjobsAPI(trans, app.serviceManager.serverSettings);
  const model = new JobsModel(api);
  // changes pushed by the service: the lists ask again when something changed
  const events = new EventStream(signal => api.events(signal));
  model.listen(events);
  events.start();
  return {
    app,
    api,
    model,
    events,
    trans,
    me: PageConfig.getOption('hubUser') || null,
    details: new WidgetTracker<MainAreaWidget<JobDetail>>({ namespace: 'nbjobs-jobs' }),
    logs: new WidgetTracker<MainAreaWidget<LogView>>({ namespace: 'nbjobs-logs' })
  };
}

/** What the panel, the details tabs and the Jobs page do to a job. */
function jobActions(ext: IExtension): IJobActions {
  const { app, api, model, trans } = ext;
  const actions: IJobActions = {
    cancel: job => cancelJob(ext, job),
    notifications: async () => {
      await notificationsDialog(api, trans); // says itself what was saved
    },
    rerun: async job => {
      // The Submit dialog, filled in as the job ran: change the flavor, a parameter or
      // the name, or send it as it was.
      const again = await rerunDialog(app, api, job, trans);
      if (again) {
        Notification.info(trans('Job "%1" queued again.', again.name), { autoClose: 4000 });
      }
      await model.refresh();
    },
    remove: job => removeJob(ext, job),
    openOutput: job => openOutput(app, api, job),
    openFullView: () => app.commands.execute(CommandIDs.openJobsPage) as Promise<void>,
    editDefinition: definition => editDefinitionDialog(app, api, definition, trans),
    showJobById: async id => {
      try {
        await actions.showDetails(model.find(id) ?? (await api.job(id)));
      } catch (error) {
        Notification.error(error instanceof NbjobsError ? error.message : String(error), {
          autoClose: 6000
        });
      }
    },
    showDetails: job => showDetails(ext, actions, job),
    viewLog: job => viewLog(ext, job)
  };
  return actions;
}

async function cancelJob(ext: IExtension, job: IJob): Promise<void> {
  const { trans } = ext;
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
  await report(ext.api.cancel(job.id), trans);
  await ext.model.refresh();
}

async function removeJob(ext: IExtension, job: IJob): Promise<void> {
  const { trans } = ext;
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
      ext.api.remove(job.id).then(() => true),
      trans
    )) !== null
  ) {
    ext.model.forget(job.id);
  }
  await ext.model.refresh();
}

/** A job's details tab: the one open already, or a new one. */
async function showDetails(ext: IExtension, actions: IJobActions, job: IJob): Promise<void> {
  const { app, details } = ext;
  const existing = details.find(w => w.content.job.id === job.id);
  if (existing) {
    app.shell.activateById(existing.id);
    return;
  }
  // What each flavor gives, as the Submit dialog says it (none when unreachable), and
  // where the user's results are written, as they know the place.
  const [flavors, place] = await flavorsAndPlace(ext.api);
  const opened = details.find(w => w.content.job.id === job.id);
  if (opened) {
    // opened by a second click while the flavors were on their way
    app.shell.activateById(opened.id);
    return;
  }
  // the job as the model holds it now: a poll that answered while the flavors were
  // on their way is not followed by another, and the tab would show the old state
  const fresh = ext.model.find(job.id) ?? job;
  const widget = createDetailWidget(
    fresh,
    detailActions(ext, actions, flavors, place),
    ext.trans,
    ext.me
  );
  await details.add(widget);
  app.shell.add(widget, 'main');
  app.shell.activateById(widget.id);
}

/** The flavors the user may use (none when the service is unreachable) and where their
 * results go by default, as they know the place. */
function flavorsAndPlace(api: NbjobsAPI): Promise<[IFlavor[], string | null]> {
  return Promise.all([
    api.flavors().catch(() => [] as IFlavor[]),
    outputDefaults(api).then(outputs => outputs?.where || null)
  ]);
}

/** A job's log tab: the one open already, or a new one. */
async function viewLog(ext: IExtension, job: IJob): Promise<void> {
  const existing = ext.logs.find(w => w.content.job.id === job.id);
  if (existing) {
    ext.app.shell.activateById(existing.id);
    return;
  }
  const widget = createLogWidget(ext.api, job, ext.trans);
  await ext.logs.add(widget);
  ext.app.shell.add(widget, 'main');
  ext.app.shell.activateById(widget.id);
}

/** What a job's details do: open what it ran and made, and act on it. */
function detailActions(
  ext: IExtension,
  actions: IJobActions,
  flavors: IFlavor[],
  place: string | null
): IDetailActions {
  const { app, api, trans } = ext;
  return {
    place,
    openPath: path => void app.commands.execute('docmanager:open', { path }),
    openOutput: j => openOutput(app, api, j),
    viewLog: j => actions.viewLog(j),
    download: path => download(app, path, trans),
    flavor: name => flavors.find(f => f.name === name) ?? null,
    showJob: id => void actions.showJobById?.(id),
    rerun: j => actions.rerun(j),
    cancel: j => actions.cancel(j),
    remove: j => actions.remove(j)
  };
}

/** Where the commands act: the panel, the notebooks and the file browser. */
interface ICommandPlaces {
  panel: JobsPanel;
  showJobs: () => void;
  /** the dashboard's address (null: none here) */
  dashboard: string | null;
  notebooks: INotebookTracker;
  fileBrowser: IDefaultFileBrowser | null;
}

function addCommands(ext: IExtension, actions: IJobActions, places: ICommandPlaces): void {
  const { app, trans } = ext;
  const { notebooks, fileBrowser, dashboard } = places;
  app.commands.addCommand(CommandIDs.showJobs, {
    label: trans('Show Jobs'),
    caption: trans('Open the Jobs panel'),
    execute: places.showJobs
  });
  app.commands.addCommand(CommandIDs.submit, {
    label: trans('Submit Job'),
    caption: trans('Run this notebook as a job on a GPU flavor'),
    icon: submitIcon,
    isEnabled: args =>
      args.from === 'filebrowser' ? fileBrowser !== null : notebooks.currentWidget !== null,
    execute: args => submitCommand(ext, places, args.from === 'filebrowser')
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
  app.commands.addCommand(CommandIDs.openJobsPage, {
    label: trans('Notebook Jobs'),
    caption: trans('Every job in a full-width table: sort, select, cancel, delete'),
    icon: submitIcon,
    execute: jobsPageOpener(ext, actions)
  });
}

/** Submit Job: the open notebook (or the one selected in the file browser), then a word
 * that says what was sent, with the way to see it. */
async function submitCommand(
  ext: IExtension,
  places: ICommandPlaces,
  fromFileBrowser: boolean
): Promise<void> {
  const { app, api, trans } = ext;
  const path = notebookToSubmit(fromFileBrowser, places.notebooks, places.fileBrowser);
  if (path === null) {
    await showErrorMessage(
      trans('Submit Job'),
      trans('Open a notebook (or select one in the file browser) to submit it as a job.')
    );
    return;
  }
  const sent = await submitNotebook(app, api, places.notebooks, path, trans);
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
              app.shell.activateById(places.panel.id);
              places.panel.showSchedules();
            }
          }
        ]
      }
    );
  } else if (sent) {
    Notification.success(trans('Job "%1" submitted to flavor %2.', sent.name, sent.flavor), {
      autoClose: 5000,
      actions: [{ label: trans('Show Jobs'), callback: places.showJobs }]
    });
    await ext.model.refresh();
  }
}

/** The Notebook Jobs page: the jobs in a full-width table, with a model of its own;
 * opened once, shown again after. */
function jobsPageOpener(ext: IExtension, actions: IJobActions): () => Promise<void> {
  const { app, api, trans } = ext;
  let page: JobsPage | null = null;
  return async () => {
    if (page && !page.isDisposed) {
      app.shell.activateById(page.id);
      return;
    }
    const [flavors, place] = await flavorsAndPlace(api);
    const pageModel = new JobsModel(api);
    pageModel.listen(ext.events);
    const many = (
      jobs: IJob[],
      question: [string, string, string, string],
      call: (job: IJob) => Promise<unknown>
    ) => actOnMany(ext, [pageModel, ext.model], jobs, question, call);
    page = new JobsPage(
      pageModel,
      {
        details: detailActions(ext, actions, flavors, place),
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
                ext.model.forget(job.id);
              })
          )
      },
      trans,
      ext.me
    );
    page.title.icon = submitIcon;
    app.shell.add(page, 'main');
    app.shell.activateById(page.id);
  };
}

/** One action on several jobs after one question: each on its own (one refused, as it
 * ended meanwhile, stops none of the others), the first refusal said. */
async function actOnMany(
  ext: IExtension,
  models: JobsModel[],
  jobs: IJob[],
  question: [string, string, string, string],
  call: (job: IJob) => Promise<unknown>
): Promise<void> {
  if (!(await confirm(...question))) {
    return;
  }
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
      ext.trans(
        '%1 of %2 could not be done: %3',
        failed.length,
        jobs.length,
        why instanceof NbjobsError ? why.message : String(why)
      ),
      { autoClose: 8000 }
    );
  }
  await Promise.all(models.map(m => m.refresh()));
}

/** Notifications of what happened to the user's jobs: approved, ended. */
function announce(ext: IExtension, actions: IJobActions, showJobs: () => void): void {
  const { app, api, trans } = ext;
  ext.model.approved.connect((_, jobs) => {
    for (const job of jobs) {
      // The service's words say who approved it ("approved by tess"), until the job ends.
      const who = job.message?.startsWith('approved by') ? job.message : trans('approved');
      Notification.info(trans('Job "%1": %2.', job.name, who), {
        autoClose: 8000,
        actions: [{ label: trans('Show Jobs'), callback: showJobs }]
      });
    }
  });
  ext.model.ended.connect((_, jobs) => {
    for (const job of jobs) {
      notifyEnded(
        job,
        trans,
        () => void openOutput(app, api, job),
        () => void actions.viewLog(job)
      );
    }
  });
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
 * Open a job's executed notebook, without starting a kernel; a failed one at its failing
 * cell. It is marked trusted first (its owner ran that code), so its HTML and JavaScript
 * outputs show.
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
  // A result is read, not run: it opens with no kernel (the toolbar's kernel picker
  // starts one when the user wants to run a cell again).
  const widget = await app.commands.execute('docmanager:open', {
    path: job.output_path,
    kernelPreference: { shouldStart: false }
  });
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

export default plugin;

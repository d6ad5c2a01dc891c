/**
 * The JSON bodies of nbjobs' REST API, by the names the extension uses.
 *
 * Every type here is generated from api/openapi.yaml into api/openapi.d.ts (`jlpm
 * build:types`; `jlpm lint:check` fails when that file is behind the spec), which the
 * dashboard imports too: nothing of the API is written twice.
 */
import type * as api from '../../api/openapi';
import * as contract from './contract';

export type JobState = api.JobState;

/** The states a job never leaves (the service's, from contract.ts). */
export const FINAL_STATES: ReadonlySet<JobState> = new Set<JobState>(contract.FINAL_STATES);

/** A flavor the user may pick, with what is free right now. */
export type IFlavor = api.FlavorInfo;
export type IProgress = api.Progress;
export type IJobError = api.JobError;
/** One job, as `GET nbjobs/api/jobs` lists it. */
export type IJob = api.Job;
export type IJobList = api.JobList;
/** `GET nbjobs/api/me`: who the user is to nbjobs, so the panel offers what the API allows. */
export type IMe = api.Me;
/** `POST nbjobs/api/jobs` */
export type ISubmitRequest = api.SubmitRequest;
/** Where results go unless a submission says otherwise (nbjobs.yaml's `outputs`). */
export type IOutputDefaults = api.OutputDefaults;
export type OutputLocation = api.OutputDefaults['location'];
/** One GPU in one telemetry sample (null: the runner could not read it). */
export type IGpuReading = api.GpuReading;
/** What a job used at one moment; GPU figures are over the job's GPUs together. */
export type ITelemetrySample = api.TelemetrySample;
/** One GPU over the whole run. */
export type IGpuSummary = api.GpuSummary;
/** What a job used over its run so far (final once it ended). */
export type ITelemetrySummary = api.TelemetrySummary;
/** `GET nbjobs/api/jobs/{id}/metrics`: a job's telemetry series, summary and hint. */
export type IJobMetrics = api.JobMetrics;
/** When a definition runs by itself (`POST nbjobs/api/definitions`'s `schedule`). */
export type IScheduleSpec = api.ScheduleSpec;
/** `POST nbjobs/api/definitions`: a submission saved, with or without a schedule. */
export type IDefinitionRequest = api.DefinitionRequest;
/** One run of a definition, with what its job became. */
export type IDefinitionRun = api.DefinitionRun;
/** A job definition as its latest version says. */
export type IDefinition = api.Definition;
/** `PUT api/notifications/settings`: where and when a user is told about jobs. */
export type INotifySettings = api.NotifySettings;
/** `GET api/notifications/settings`: the same, as the service keeps it. */
export type INotifySettingsInfo = api.NotifySettingsInfo;
/** What a notification may be about (`nbjobs notify --on`). */
export type NotifyEvent = api.NotifySettingsInfo['on'][number];
/** One message of `GET api/notifications`, with its attempts. */
export type INotification = api.Notification;

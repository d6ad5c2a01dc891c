/**
 * Strings go through JupyterLab's translator, in nbjobs' own domain.
 *
 * The pure modules take a `Translate` function so they can be tested without
 * JupyterLab; the plugin passes `translator.load('nbjobs').__`.
 */

/** The translation domain of every nbjobs string. */
export const DOMAIN = 'nbjobs';

/** gettext's `__`: a message with `%1`, `%2`… placeholders, and their values. */
export type Translate = (msgid: string, ...args: unknown[]) => string;

/** The untranslated message with its placeholders filled in. */
export const plain: Translate = (msgid, ...args) =>
  msgid.replace(/%(\d+)/g, (whole, n) => {
    const index = Number(n) - 1;
    return index < args.length ? String(args[index]) : whole;
  });

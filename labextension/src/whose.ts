/**
 * The "whose jobs" choice of the Jobs panel and the Notebook Jobs page: hidden until
 * the service says the user is an admin or a teacher, then Mine / My classes /
 * Everyone, preset to what the service lists by default.
 */
import type { NbjobsAPI } from './api';
import { DEFAULT_QUERY, type Scope, defaultScope, scopeChoices } from './joblist';
import type { Translate } from './translate';
import type { IMe } from './types';

export class WhoseSelect {
  readonly node = document.createElement('select');

  constructor(
    private readonly trans: Translate,
    className: string
  ) {
    this.node.className = `jp-mod-styled ${className}`;
    this.node.setAttribute('aria-label', trans('Whose jobs'));
    this.node.hidden = true;
  }

  /** The scope to ask for: null for the service's own default (the query stays plain). */
  get scope(): Scope | null {
    const whose = this.node.hidden ? null : (this.node.value as Scope);
    return whose === this._default ? null : whose;
  }

  /** Whether a choice is shown that lists other people's jobs. */
  get othersChosen(): boolean {
    return !this.node.hidden && this.node.value !== 'mine';
  }

  /** Offer the choices the service gives this user; whether any were offered. */
  async learn(api: NbjobsAPI): Promise<boolean> {
    let me: IMe;
    try {
      me = await api.me();
    } catch {
      return false; // a service without api/me: no choice offered, the default list stays
    }
    const choices = scopeChoices(me);
    if (choices.length === 0 || this.node.options.length) {
      return false;
    }
    const labels: Record<Scope, string> = {
      mine: this.trans('Mine'),
      classes: this.trans('My classes'),
      all: this.trans('Everyone')
    };
    for (const scope of choices) {
      this.node.append(new Option(labels[scope], scope));
    }
    this._default = defaultScope(me);
    this.node.value = this._default;
    this.node.hidden = false;
    return true;
  }

  private _default: Scope | null = DEFAULT_QUERY.scope;
}

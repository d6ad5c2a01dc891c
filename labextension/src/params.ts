/**
 * The notebook's `parameters` cell, as the Submit dialog shows it.
 *
 * A parameters cell (papermill's convention: the code cell tagged
 * `parameters`) holds simple assignments such as `steps = 20`. The dialog
 * offers each one for editing, pre-filled with its value, and checks what the
 * user types against the kind of the default before anything is sent: the job
 * service receives JSON values and injects them as Python assignments.
 */
import { type Translate, plain } from './translate';

/** A JSON value, as the REST API carries parameters. */
export type JSONValue =
  null | boolean | number | string | JSONValue[] | { [key: string]: JSONValue };

/** What a parameter holds, from its default; typed values must keep it. */
export type ValueKind = 'int' | 'float' | 'str' | 'bool' | 'none' | 'list' | 'dict';

/** One `name = literal` assignment of the parameters cell. */
export interface IParameter {
  name: string;
  kind: ValueKind;
  value: JSONValue;
  /** the text the dialog shows for editing (a string's text without quotes) */
  text: string;
}

/** What the parameters cell offers, and the lines it cannot offer (kept as written). */
export interface IParameterCell {
  parameters: IParameter[];
  skipped: string[];
}

/** The result of reading a typed value. */
export type Checked = { ok: true; value: JSONValue } | { ok: false; error: string };

/**
 * Read a parameters cell's source into editable parameters.
 *
 * Statements that are not a plain assignment of a literal (`x = np.ones(3)`,
 * imports, `a, b = 1, 2`) are listed in `skipped`: the job still runs them
 * with their written values.
 */
export function parseParameterCell(source: string): IParameterCell {
  const parameters: IParameter[] = [];
  const skipped: string[] = [];
  for (const statement of splitStatements(source)) {
    const match = /^([A-Za-z_][A-Za-z0-9_]*)\s*(?::[^=]+)?=(?!=)\s*([\s\S]+)$/.exec(statement);
    if (!match) {
      skipped.push(statement);
      continue;
    }
    const [, name, literal] = match;
    let value: JSONValue;
    try {
      value = parseLiteral(literal);
    } catch {
      skipped.push(statement);
      continue;
    }
    const kind = kindOf(value, literal);
    const existing = parameters.findIndex(p => p.name === name);
    if (existing >= 0) {
      parameters.splice(existing, 1); // the last assignment wins, as in Python
    }
    parameters.push({ name, kind, value, text: editorText(value, kind) });
  }
  return { parameters, skipped };
}

/**
 * Check what the user typed for a parameter of this kind.
 *
 * Strings are taken as typed; everything else is a Python or JSON literal
 * (`True` and `true` both work) of the default's kind; an int is accepted for
 * a float, and a parameter whose default is `None` takes any literal.
 */
export function checkValue(
  name: string,
  kind: ValueKind,
  text: string,
  trans: Translate = plain
): Checked {
  if (kind === 'str') {
    return { ok: true, value: text };
  }
  const trimmed = text.trim();
  let value: JSONValue;
  try {
    value = parseLiteral(trimmed);
  } catch {
    return { ok: false, error: expectation(name, kind, trans) };
  }
  const got = kindOf(value, trimmed);
  const fits = kind === 'none' || got === kind || (kind === 'float' && got === 'int');
  if (!fits) {
    return { ok: false, error: expectation(name, kind, trans) };
  }
  if (got === 'int' && !Number.isSafeInteger(value as number)) {
    return {
      ok: false,
      error: trans('%1 is too large a whole number to pass exactly', name)
    };
  }
  return { ok: true, value };
}

/** Write a value the way Python would (for the editor and the job's record). */
export function pythonRepr(value: JSONValue): string {
  if (value === null) {
    return 'None';
  }
  if (typeof value === 'boolean') {
    return value ? 'True' : 'False';
  }
  if (typeof value === 'number') {
    return String(value);
  }
  if (typeof value === 'string') {
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) {
    return `[${value.map(pythonRepr).join(', ')}]`;
  }
  const items = Object.entries(value).map(([k, v]) => `${JSON.stringify(k)}: ${pythonRepr(v)}`);
  return `{${items.join(', ')}}`;
}

// -- helpers ------------------------------------------------------------------

function expectation(name: string, kind: ValueKind, trans: Translate): string {
  switch (kind) {
    case 'int':
      return trans('%1 must be a whole number, like 20', name);
    case 'float':
      return trans('%1 must be a number, like 0.5', name);
    case 'bool':
      return trans('%1 must be True or False', name);
    case 'list':
      return trans('%1 must be a list, like [1, 2, 3]', name);
    case 'dict':
      return trans('%1 must be a dict with string keys, like {"a": 1}', name);
    default:
      return trans(
        '%1 must be a literal: a number, "text", True, False, None, a list or a dict',
        name
      );
  }
}

function editorText(value: JSONValue, kind: ValueKind): string {
  return kind === 'str' ? (value as string) : pythonRepr(value);
}

function kindOf(value: JSONValue, literal: string): ValueKind {
  if (value === null) {
    return 'none';
  }
  if (typeof value === 'boolean') {
    return 'bool';
  }
  if (typeof value === 'number') {
    return /^[+-]?[\d_]+$/.test(literal.trim()) ? 'int' : 'float';
  }
  if (typeof value === 'string') {
    return 'str';
  }
  return Array.isArray(value) ? 'list' : 'dict';
}

/** Split source into logical statements: joined over open brackets, comments dropped. */
function splitStatements(source: string): string[] {
  const statements: string[] = [];
  let current = '';
  let depth = 0;
  for (const rawLine of source.split(/\r?\n/)) {
    const line = stripComment(rawLine);
    current += (current ? '\n' : '') + line;
    depth += bracketBalance(line);
    if (depth <= 0) {
      for (const part of splitSemicolons(current)) {
        if (part.trim()) {
          statements.push(part.trim());
        }
      }
      current = '';
      depth = 0;
    }
  }
  if (current.trim()) {
    statements.push(current.trim());
  }
  return statements;
}

/** Visit a line's characters outside string literals. */
function outsideStrings(line: string, visit: (ch: string, index: number) => boolean | void): void {
  let quote: string | null = null;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i];
    if (quote) {
      if (ch === '\\') {
        i++;
      } else if (ch === quote) {
        quote = null;
      }
      continue;
    }
    if (ch === '"' || ch === "'") {
      quote = ch;
      continue;
    }
    if (visit(ch, i) === true) {
      return;
    }
  }
}

function stripComment(line: string): string {
  let end = line.length;
  outsideStrings(line, (ch, i) => {
    if (ch === '#') {
      end = i;
      return true;
    }
  });
  return line.slice(0, end).trimEnd();
}

function bracketBalance(line: string): number {
  let balance = 0;
  outsideStrings(line, ch => {
    if ('([{'.includes(ch)) {
      balance++;
    } else if (')]}'.includes(ch)) {
      balance--;
    }
  });
  return balance;
}

function splitSemicolons(text: string): string[] {
  const parts: string[] = [];
  let start = 0;
  outsideStrings(text, (ch, i) => {
    if (ch === ';') {
      parts.push(text.slice(start, i));
      start = i + 1;
    }
  });
  parts.push(text.slice(start));
  return parts;
}

/**
 * Parse a Python (or JSON) literal: numbers, strings, True/False/None
 * (true/false/null too), lists, tuples (as lists) and dicts with string keys.
 * Throws on anything else.
 */
export function parseLiteral(text: string): JSONValue {
  const parser = new LiteralParser(text);
  const value = parser.value();
  parser.end();
  return value;
}

class LiteralParser {
  private pos = 0;

  constructor(private readonly text: string) {}

  value(): JSONValue {
    this.space();
    const ch = this.text[this.pos];
    if (ch === '[' || ch === '(') {
      return this.sequence(ch === '[' ? ']' : ')');
    }
    if (ch === '{') {
      return this.dict();
    }
    if (ch === '"' || ch === "'") {
      return this.string();
    }
    const word = /^[A-Za-z_]+/.exec(this.text.slice(this.pos));
    if (word) {
      const known: Record<string, JSONValue> = {
        True: true,
        False: false,
        None: null,
        true: true,
        false: false,
        null: null
      };
      if (!(word[0] in known)) {
        throw new Error(`not a literal: ${word[0]}`);
      }
      this.pos += word[0].length;
      return known[word[0]];
    }
    return this.number();
  }

  end(): void {
    this.space();
    if (this.pos !== this.text.length) {
      throw new Error('unexpected text after the value');
    }
  }

  private space(): void {
    while (this.pos < this.text.length && /\s/.test(this.text[this.pos])) {
      this.pos++;
    }
  }

  private number(): number {
    const match = /^[+-]?(\d[\d_]*)?(\.\d*)?([eE][+-]?\d+)?/.exec(this.text.slice(this.pos));
    const raw = match ? match[0] : '';
    if (!/\d/.test(raw)) {
      throw new Error('not a number');
    }
    this.pos += raw.length;
    const value = Number(raw.replace(/_/g, ''));
    if (!Number.isFinite(value)) {
      throw new Error('not a finite number');
    }
    return value;
  }

  private string(): string {
    const quote = this.text[this.pos];
    const triple = this.text.startsWith(quote.repeat(3), this.pos);
    const close = triple ? quote.repeat(3) : quote;
    this.pos += close.length;
    let out = '';
    const escapes: Record<string, string> = {
      n: '\n',
      t: '\t',
      r: '\r',
      '\\': '\\',
      "'": "'",
      '"': '"',
      '0': '\0'
    };
    while (this.pos < this.text.length) {
      if (this.text.startsWith(close, this.pos)) {
        this.pos += close.length;
        return out;
      }
      const ch = this.text[this.pos];
      if (ch === '\n' && !triple) {
        break;
      }
      if (ch === '\\') {
        const next = this.text[this.pos + 1];
        const unicode = /^u([0-9a-fA-F]{4})/.exec(this.text.slice(this.pos + 1));
        if (unicode) {
          out += String.fromCharCode(parseInt(unicode[1], 16));
          this.pos += 6;
          continue;
        }
        out += next in escapes ? escapes[next] : '\\' + next;
        this.pos += 2;
        continue;
      }
      out += ch;
      this.pos++;
    }
    throw new Error('unterminated string');
  }

  private sequence(close: string): JSONValue[] {
    this.pos++;
    const items: JSONValue[] = [];
    for (;;) {
      this.space();
      if (this.text[this.pos] === close) {
        this.pos++;
        return items;
      }
      items.push(this.value());
      this.space();
      if (this.text[this.pos] === ',') {
        this.pos++;
      } else if (this.text[this.pos] !== close) {
        throw new Error('expected , or the closing bracket');
      }
    }
  }

  private dict(): { [key: string]: JSONValue } {
    this.pos++;
    const out: { [key: string]: JSONValue } = {};
    for (;;) {
      this.space();
      if (this.text[this.pos] === '}') {
        this.pos++;
        return out;
      }
      const key = this.value();
      if (typeof key !== 'string') {
        throw new Error('dict keys must be strings');
      }
      this.space();
      if (this.text[this.pos] !== ':') {
        throw new Error('expected :');
      }
      this.pos++;
      out[key] = this.value();
      this.space();
      if (this.text[this.pos] === ',') {
        this.pos++;
      } else if (this.text[this.pos] !== '}') {
        throw new Error('expected , or }');
      }
    }
  }
}

import { describe, expect, it } from 'vitest';

import { checkValue, parseLiteral, parseParameterCell, pythonRepr } from '../src/params';

describe('parseParameterCell', () => {
  it('offers each simple assignment with its kind and editor text', () => {
    const cell = parseParameterCell(
      [
        'steps = 20  # how many',
        'learning_rate = 0.1',
        "model_name = 'resnet # 50'",
        'use_gpu = True',
        'seed = None',
        'layers = [64, 128]',
        'opts = {"momentum": 0.9, \'nesterov\': False}'
      ].join('\n')
    );

    expect(cell.skipped).toEqual([]);
    expect(cell.parameters.map(p => [p.name, p.kind, p.text])).toEqual([
      ['steps', 'int', '20'],
      ['learning_rate', 'float', '0.1'],
      ['model_name', 'str', 'resnet # 50'],
      ['use_gpu', 'bool', 'True'],
      ['seed', 'none', 'None'],
      ['layers', 'list', '[64, 128]'],
      ['opts', 'dict', '{"momentum": 0.9, "nesterov": False}']
    ]);
    expect(cell.parameters[6].value).toEqual({ momentum: 0.9, nesterov: false });
  });

  it('joins statements over brackets and splits them at semicolons', () => {
    const cell = parseParameterCell('sizes = [\n  1,\n  2,  # two\n]\na = 1; b = "x;y"');

    expect(cell.parameters.map(p => [p.name, p.value])).toEqual([
      ['sizes', [1, 2]],
      ['a', 1],
      ['b', 'x;y']
    ]);
  });

  it('keeps what it cannot edit as written, and the last assignment wins', () => {
    const cell = parseParameterCell(
      'import numpy as np\nx = np.ones(3)\na, b = 1, 2\nn: int = 5\nn = 6\nflag == True'
    );

    expect(cell.parameters.map(p => [p.name, p.value])).toEqual([['n', 6]]);
    expect(cell.skipped).toEqual([
      'import numpy as np',
      'x = np.ones(3)',
      'a, b = 1, 2',
      'flag == True'
    ]);
  });

  it('reads negative, exponent, underscore and tuple literals', () => {
    expect(parseLiteral('-3')).toBe(-3);
    expect(parseLiteral('1e-3')).toBe(0.001);
    expect(parseLiteral('1_000')).toBe(1000);
    expect(parseLiteral('(1, "a")')).toEqual([1, 'a']);
    expect(parseLiteral("'it\\'s'")).toBe("it's");
    expect(() => parseLiteral('1 2')).toThrow();
    expect(() => parseLiteral('{1: 2}')).toThrow();
  });
});

describe('checkValue', () => {
  it('accepts values of the default kind and turns them into JSON values', () => {
    expect(checkValue('steps', 'int', ' 50 ')).toEqual({ ok: true, value: 50 });
    expect(checkValue('lr', 'float', '1')).toEqual({ ok: true, value: 1 });
    expect(checkValue('lr', 'float', '2.5e-3')).toEqual({ ok: true, value: 0.0025 });
    expect(checkValue('on', 'bool', 'false')).toEqual({ ok: true, value: false });
    expect(checkValue('name', 'str', ' as typed ')).toEqual({ ok: true, value: ' as typed ' });
    expect(checkValue('seed', 'none', '[1, "a"]')).toEqual({ ok: true, value: [1, 'a'] });
    expect(checkValue('d', 'dict', "{'a': None}")).toEqual({ ok: true, value: { a: null } });
  });

  it('refuses the wrong kind with a sentence naming the parameter', () => {
    expect(checkValue('steps', 'int', '2.5')).toEqual({
      ok: false,
      error: 'steps must be a whole number, like 20'
    });
    expect(checkValue('steps', 'int', 'twenty')).toMatchObject({ ok: false });
    expect(checkValue('lr', 'float', '"0.1"')).toEqual({
      ok: false,
      error: 'lr must be a number, like 0.5'
    });
    expect(checkValue('on', 'bool', '1')).toEqual({ ok: false, error: 'on must be True or False' });
    expect(checkValue('xs', 'list', '{}')).toMatchObject({ ok: false });
    expect(checkValue('seed', 'none', 'np.nan')).toMatchObject({ ok: false });
    expect(checkValue('big', 'int', '12345678901234567890')).toEqual({
      ok: false,
      error: 'big is too large a whole number to pass exactly'
    });
  });

  it('translates its messages', () => {
    const upper = (msg: string, ...args: unknown[]) =>
      msg.toUpperCase().replace('%1', String(args[0]));

    expect(checkValue('n', 'bool', 'x', upper)).toEqual({
      ok: false,
      error: 'n MUST BE TRUE OR FALSE'
    });
  });
});

describe('pythonRepr', () => {
  it('writes values the way Python reads them', () => {
    expect(pythonRepr({ a: [true, null, 'x"y'] })).toBe('{"a": [True, None, "x\\"y"]}');
  });
});

import { describe, expect, it } from 'vitest';

// parametersSource is pure; importing it through submit.ts would pull in JupyterLab.
import { kernelName, parametersSource } from '../src/notebookjson';

describe('parametersSource', () => {
  it('finds the code cell tagged parameters, with its source joined', () => {
    const notebook = {
      cells: [
        { cell_type: 'markdown', metadata: { tags: ['parameters'] }, source: 'not me' },
        { cell_type: 'code', metadata: {}, source: 'x = 0' },
        {
          cell_type: 'code',
          metadata: { tags: ['setup', 'parameters'] },
          source: ['a = 1\n', 'b = 2']
        }
      ]
    };
    expect(parametersSource(notebook)).toBe('a = 1\nb = 2');
  });

  it('is null without one', () => {
    expect(
      parametersSource({ cells: [{ cell_type: 'code', metadata: {}, source: '' }] })
    ).toBeNull();
    expect(parametersSource(null)).toBeNull();
  });
});

describe('kernelName', () => {
  it('is the kernel the notebook names, or null', () => {
    expect(kernelName({ metadata: { kernelspec: { name: 'ir', display_name: 'R' } } })).toBe('ir');
    expect(kernelName({ metadata: {} })).toBeNull();
    expect(kernelName({ metadata: { kernelspec: { name: 3 } } })).toBeNull();
    expect(kernelName(null)).toBeNull();
  });
});

/**
 * Reading a notebook's saved JSON (as the contents API returns it).
 */

/** The code cell tagged `parameters` in a notebook's JSON, or null. */
export function parametersSource(notebook: unknown): string | null {
  const cells = (notebook as { cells?: unknown[] } | null)?.cells;
  if (!Array.isArray(cells)) {
    return null;
  }
  for (const cell of cells as {
    cell_type?: string;
    metadata?: { tags?: unknown };
    source?: string | string[];
  }[]) {
    const tags = cell.metadata?.tags;
    if (cell.cell_type === 'code' && Array.isArray(tags) && tags.includes('parameters')) {
      return Array.isArray(cell.source) ? cell.source.join('') : (cell.source ?? '');
    }
  }
  return null;
}

/** The kernel a notebook's JSON names (`metadata.kernelspec.name`), or null. */
export function kernelName(notebook: unknown): string | null {
  const name = (notebook as { metadata?: { kernelspec?: { name?: unknown } } } | null)?.metadata
    ?.kernelspec?.name;
  return typeof name === 'string' && name ? name : null;
}

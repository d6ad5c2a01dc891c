/**
 * Drawing again without taking the ground from under the pointer: a view that redraws
 * from fresh elements on every change (a job's progress) would replace the button a user
 * is pressing, and the press and the release, landing on two different buttons, make no
 * click. ``patchChildren`` keeps every node that looks the same as its fresh drawing.
 */

/** Elements that act: kept only when wholly the same (their listeners are the old ones). */
const ACTS = new Set(['A', 'BUTTON', 'INPUT', 'SELECT', 'TEXTAREA']);

/**
 * Make ``parent``'s children look like ``fresh``, keeping each that already looks the same,
 * and, inside an element that does not act and has the same tag and attributes, its
 * children likewise. A kept element keeps its listeners: what they act on must be read
 * when they run (the job as it is now), not when they were made.
 */
export function patchChildren(parent: Node, fresh: readonly Node[]): void {
  const old = Array.from(parent.childNodes);
  const next = fresh.map((node, i) => patched(old[i], node));
  if (next.length !== old.length || next.some((node, i) => node !== old[i])) {
    (parent as ParentNode).replaceChildren(...next);
  }
}

function patched(old: Node | undefined, fresh: Node): Node {
  if (!old) {
    return fresh;
  }
  if (old.isEqualNode(fresh)) {
    return old;
  }
  if (
    old instanceof Element &&
    fresh instanceof Element &&
    !ACTS.has(old.tagName) &&
    old.cloneNode(false).isEqualNode(fresh.cloneNode(false))
  ) {
    patchChildren(old, Array.from(fresh.childNodes));
    return old;
  }
  return fresh;
}

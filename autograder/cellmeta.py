"""Cell metadata: give back to a submission the nbgrader metadata an editor took away.

Why: nbgrader finds the answer and test cells by their `metadata.nbgrader`. Colab (and some
other editors) drop that metadata on save, and a cell copied from another assignment carries a
grade_id this gradebook does not know; either way nbgrader stops with a KeyError and the
student gets could_not_grade. Here, before nbgrader sees the notebook:

- a cell whose grade_id is not in this notebook's release loses its nbgrader metadata (it is run
  as an ordinary cell) and the instructor is told;
- an answer cell whose nbgrader flags were changed (marked as graded, with points, or locked)
  gets the release's metadata back, and the instructor is told: nbgrader refuses a notebook
  whose answer cell claims points, and the student would lose the whole grade;
- a release cell whose grade_id is missing from the submission gets its metadata back on the
  student's cell that matches it: locked cells by identical content; answer cells by position
  (the one cell of the same type between the neighbouring matched cells) or else by signature
  (the only candidate holding the stub's `def name(` / `class name` line). Nothing is guessed
  when the match is ambiguous: those cells stay ordinary, and missing tests are restored by
  nbgrader from the gradebook as for a deleted cell.
"""
import copy
import re

# The nbgrader settings that make a cell an answer cell; an answer cell must keep the release's.
_FLAGS = ("grade", "solution", "locked", "points", "task")
_SIGNATURE = re.compile(r"^\s*(def|class)\s+([A-Za-z_][A-Za-z0-9_]*)", re.M)


def _meta(cell):
    meta = cell.get("metadata", {}).get("nbgrader")
    return meta if isinstance(meta, dict) else None


def _signatures(source):
    return {m.group(0).strip() for m in _SIGNATURE.finditer(source)}


def _assign(cell, release_cell):
    cell.setdefault("metadata", {})["nbgrader"] = copy.deepcopy(release_cell.metadata["nbgrader"])


def restore(nb, release):
    """Fix nb in place against its release; returns sentences for problems.csv."""
    problems = []
    rel_cells = [c for c in release.cells if _meta(c) and _meta(c).get("grade_id")]
    known = {_meta(c)["grade_id"] for c in rel_cells}
    for cell in nb.cells:
        meta = _meta(cell)
        if meta and meta.get("grade_id") and meta["grade_id"] not in known:
            del cell.metadata["nbgrader"]
            problems.append(f"a cell marked '{meta['grade_id'][:80]}' does not belong to this "
                            "notebook (copied from another assignment?); it was run as an "
                            "ordinary cell")
    answers = {_meta(c)["grade_id"]: c for c in rel_cells if _meta(c).get("solution")}
    for cell in nb.cells:
        meta = _meta(cell)
        release_cell = answers.get(meta.get("grade_id")) if meta else None
        if release_cell is not None and any(meta.get(k) != _meta(release_cell).get(k) for k in _FLAGS):
            _assign(cell, release_cell)
            problems.append(f"the answer cell '{meta['grade_id'][:80]}' had its nbgrader settings changed "
                            "(graded, points or locked); the release's were used")
    present = {_meta(c)["grade_id"] for c in nb.cells if _meta(c) and _meta(c).get("grade_id")}
    missing = [c for c in rel_cells if _meta(c)["grade_id"] not in present]
    if not missing:
        return problems
    restored = 0
    free = lambda c: _meta(c) is None  # noqa: E731 - cells nbgrader would not recognise
    for rc in missing:  # locked cells first: they anchor the positions of the answer cells
        if _meta(rc).get("locked") and not _meta(rc).get("solution"):
            for cell in nb.cells:
                if free(cell) and cell.cell_type == rc.cell_type and cell.source.strip() == rc.source.strip():
                    _assign(cell, rc)
                    restored += 1
                    break
    position = {_meta(c)["grade_id"]: i for i, c in enumerate(nb.cells) if _meta(c)}
    rel_order = [_meta(c)["grade_id"] for c in rel_cells]
    for rc in missing:
        if not _meta(rc).get("solution") or _meta(rc)["grade_id"] in position:
            continue
        k = rel_order.index(_meta(rc)["grade_id"])
        before = [position[g] for g in rel_order[:k] if g in position]
        after = [position[g] for g in rel_order[k + 1:] if g in position]
        lo, hi = (max(before) if before else -1), (min(after) if after else len(nb.cells))
        between = [i for i in range(lo + 1, hi) if free(nb.cells[i])
                   and nb.cells[i].cell_type == rc.cell_type]
        if len(between) != 1:
            sigs = _signatures(rc.source)
            pool = between if between else [i for i, c in enumerate(nb.cells) if free(c)
                                             and c.cell_type == rc.cell_type]
            between = [i for i in pool if sigs and sigs <= _signatures(nb.cells[i].source)]
        if len(between) == 1:
            _assign(nb.cells[between[0]], rc)
            position[_meta(rc)["grade_id"]] = between[0]
            restored += 1
    if restored:
        problems.append(f"this notebook had lost nbgrader's cell metadata (saved with Colab or "
                        f"another editor?): {restored} of {len(missing)} cell(s) were matched "
                        "to the release by their content and graded")
    return problems

"""Cell metadata: give back to a submission the nbgrader metadata an editor took away.

Why: nbgrader finds the answer and test cells by their `metadata.nbgrader`. Colab (and some
other editors) drop that metadata on save, and a cell copied from another assignment carries a
grade_id this gradebook does not know; either way nbgrader stops with a KeyError and the
student gets could_not_grade. Here, before nbgrader sees the notebook:

- a cell whose grade_id is not in this notebook's release loses its nbgrader metadata (it is run
  as an ordinary cell) and the instructor is told;
- every cell carrying a grade_id the release knows (answer, test, locked read-only, markdown
  task cells) gets exactly the release's nbgrader metadata back, whatever the submission set
  (solution, grade, locked, points, task, checksum, cell_type), and the cell type the release
  has (a test cell made markdown is code again); the instructor is told
  in one sentence per notebook. nbgrader refuses a notebook whose answer cell claims points or
  whose test cell claims to be an answer ("Inconsistent checksums"), and the student would
  lose the whole grade;
- a release cell whose grade_id is missing from the submission gets its metadata back on the
  student's cell that matches it: locked cells by identical content; answer cells by position
  (the one cell of the same type between the neighbouring matched cells) or else by signature
  (the only candidate holding the stub's `def name(` / `class name` line). Nothing is guessed
  when the match is ambiguous: those cells stay ordinary, and missing tests are restored by
  nbgrader from the gradebook as for a deleted cell.
"""
import copy
import re

# The nbgrader settings that say what a cell is; a change to one of them is reported (the rest,
# checksum and schema_version, are put back silently: nbgrader recomputes the checksum anyway).
_BOOLS = ("grade", "solution", "locked", "task")
_NAMED = 5  # grade_ids listed in the sentence before "…"
_SIGNATURE = re.compile(r"^\s*(def|class)\s+([A-Za-z_][A-Za-z0-9_]*)", re.M)


def _meta(cell):
    meta = cell.get("metadata", {}).get("nbgrader")
    return meta if isinstance(meta, dict) else None


def _signatures(source):
    return {m.group(0).strip() for m in _SIGNATURE.finditer(source)}


def _assign(cell, release_cell):
    cell.setdefault("metadata", {})["nbgrader"] = copy.deepcopy(release_cell.metadata["nbgrader"])


def _points(meta):
    try:
        return float(meta.get("points"))
    except (TypeError, ValueError):
        return meta.get("points")


def _changes(cell, release_cell):
    """What a student changed in the settings that say what a cell is, in words."""
    meta, rel = _meta(cell), _meta(release_cell)
    what = [k for k in _BOOLS if bool(meta.get(k)) != bool(rel.get(k))]
    if _points(meta) != _points(rel):
        what.append("points")
    if "cell_type" in meta and meta["cell_type"] != rel.get("cell_type", release_cell.cell_type):
        what.append("cell_type")
    if cell.get("cell_type") != release_cell.cell_type:
        what.append(f"turned into a {cell.get('cell_type')} cell")
    return what


def _retype(cell, release_cell):
    """Give a cell the release's cell type, as a valid cell of that type (what nbgrader's
    OverwriteCells does too; a locked cell's source is then put back by nbgrader's checksum)."""
    cell.cell_type = release_cell.cell_type
    if cell.cell_type == "code":
        cell.pop("attachments", None)
        cell["outputs"], cell["execution_count"] = [], None
    else:
        cell.pop("outputs", None)
        cell.pop("execution_count", None)


def _changed_sentence(changed):
    named = "; ".join(f"'{gid[:80]}': {', '.join(what)}" for gid, what in changed[:_NAMED])
    if len(changed) > _NAMED:
        named += "; …"
    if len(changed) == 1:
        return (f"the cell '{changed[0][0][:80]}' had its nbgrader settings changed "
                f"({', '.join(changed[0][1])}); the release's were put back and it was graded as released")
    return (f"the nbgrader settings of {len(changed)} cells had been changed ({named}); "
            "the release's were put back and they were graded as released")


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
    by_id = {_meta(c)["grade_id"]: c for c in rel_cells}
    changed = []
    for cell in nb.cells:
        meta = _meta(cell)
        release_cell = by_id.get(meta.get("grade_id")) if meta else None
        if release_cell is None:
            continue
        what = _changes(cell, release_cell)
        if meta != _meta(release_cell):
            _assign(cell, release_cell)
        if cell.get("cell_type") != release_cell.cell_type:
            _retype(cell, release_cell)
        if what:
            changed.append((meta["grade_id"], what))
    if changed:
        problems.append(_changed_sentence(changed))
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

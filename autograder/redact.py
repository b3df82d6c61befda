"""Redact: what a student may see of a graded notebook.

Why: nbgrader's autograded notebook holds the full source of every test cell (restored from the
gradebook, hidden tests included), and the feedback HTML shows it, plus tracebacks that quote
hidden lines. Hidden tests are reused every year; they are as secret as the solutions.

Here, before nbgrader renders the feedback:
- the hidden region of each test cell is replaced by one comment line;
- every error output of a test cell is reduced to `Name: message`. For `GradingError` and
  `TamperError` (course_utils.grading) that message is the one student-facing sentence the check
  wrote, the mistake catalogue's diagnosis included; other errors keep only their name and a
  short message;
- any output that quotes a secret line (a notebook can print `In[...]`) is removed, and long
  each cell's output is cut to a small budget (CELL_TEXT characters of text, CELL_IMAGES of
  images), with a visible note where it was cut (nbgrader's LimitOutput counts lines only);
and after rendering, `leaks()` scans the HTML for secret lines: feedback that still quotes one is
withheld rather than sent.

Hidden regions are removed by where they are (`strip_hidden`). The text scans go by text, so
they use `secret_lines()`: the hidden lines minus everything the student already has, i.e. any
text visible in the release notebook (a hidden test may repeat a visible line word for word, e.g.
the setup of the visible test it extends; counting that line as secret withheld every student's
feedback, honest ones included).
"""
import html
import json
import re

from nbformat import NotebookNode

BEGIN = "### BEGIN HIDDEN TESTS"
END = "### END HIDDEN TESTS"
PLACEHOLDER = "# (hidden tests: run by the grader, not shown)"
GRADING_ENAMES = ("GradingError", "TamperError")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def hidden_lines(source):
    """The meaningful lines inside hidden-test regions of a cell source."""
    lines, inside = [], False
    for line in source.splitlines():
        if BEGIN in line:
            inside = True
            continue
        if END in line:
            inside = False
            continue
        if inside and len(line.strip()) >= 12:
            lines.append(line.strip())
    return lines


def visible_text(nb):
    """Everything of a notebook outside its hidden-test regions: for a release, what the student
    already has (every cell's source, markdown included)."""
    return "\n".join(strip_hidden(cell.source) for cell in nb.cells)


def secret_lines(source_nb, release_nb=None):
    """The hidden lines of source_nb that the student of release_nb has not seen: the lines of
    its hidden-test regions (`hidden_lines`) minus every one that appears anywhere in the
    release's visible text (the scans match text, so a hidden line found inside a visible line
    is not secret either). Without a release, every hidden line is secret."""
    visible = visible_text(release_nb) if release_nb is not None else ""
    secret = []
    for cell in source_nb.cells:
        for line in hidden_lines(cell.source):
            if line not in visible and line not in secret:
                secret.append(line)
    return secret


def strip_hidden(source):
    out, inside = [], False
    for line in source.splitlines():
        if BEGIN in line:
            inside = True
            out.append(line[: len(line) - len(line.lstrip())] + PLACEHOLDER)
            continue
        if END in line:
            inside = False
            continue
        if not inside:
            out.append(line)
    return "\n".join(out)


def _one_line(output):
    ename = output.get("ename", "Error")
    evalue = _ANSI.sub("", str(output.get("evalue", ""))).strip()
    if ename not in GRADING_ENAMES and ename not in ("Timeout", "KernelDied", "NotRun"):
        evalue = evalue.splitlines()[0][:300] if evalue else ""
        if not evalue:
            evalue = "a test failed (no message)"
    output["evalue"] = evalue
    output["traceback"] = [f"{ename}: {evalue}"]
    return output


def _output_text(output):
    parts = [str(output.get("text", "")), str(output.get("evalue", ""))]
    parts += [str(x) for x in output.get("traceback", [])]
    for value in (output.get("data") or {}).values():
        parts.append(value if isinstance(value, str) else str(value))
    return "\n".join(parts)


MAX_TEXT = 10_000
MAX_DATA = 2 * 2**20


def _cap(output):
    """Keep feedback readable: long printed text is cut, oversized rich outputs dropped."""
    if output.get("output_type") == "stream" and len(output.get("text", "")) > MAX_TEXT:
        n = len(output["text"])
        output["text"] = output["text"][:MAX_TEXT] + f"\n... output truncated ({n:,} characters in all) ...\n"
    data = output.get("data") or {}
    for key in list(data):
        value = data[key] if isinstance(data[key], str) else json.dumps(data[key])
        if len(value) > (MAX_DATA if key.startswith("image/") else MAX_TEXT * 10):
            del data[key]
            data.setdefault("text/plain", "[a very large output was removed]")
    return output


# Feedback shows at most this much of each cell's output: enough to read a result, too little
# to carry files out (a student's last cell can print base64 of anything the kernel can read).
CELL_TEXT = 4_000
CELL_IMAGES = 2 * 2**20
CUT = "[feedback shows at most {:,} characters of output per cell; {:,} more were cut here]\n"


def _budget_cell(outputs):
    """Apply the per-cell budgets (CELL_TEXT, CELL_IMAGES); say visibly where output was cut."""
    text_left, images_left, cut, kept = CELL_TEXT, CELL_IMAGES, 0, []
    for output in outputs:
        kind = output.get("output_type")
        if kind == "stream":
            text = str(output.get("text", ""))
            if len(text) > text_left:
                cut += len(text) - text_left
                output["text"] = text[:text_left]
            text_left -= len(output["text"])
            if output["text"]:
                kept.append(output)
            continue
        if kind == "error":
            size = len(str(output.get("evalue", ""))) + sum(len(str(t)) for t in output.get("traceback", []))
            if size > text_left:
                cut += size
                evalue = str(output.get("evalue", ""))[:max(text_left, 200)]
                output["evalue"], output["traceback"] = evalue, [f"{output.get('ename', 'Error')}: {evalue}"]
                size = len(evalue) * 2
            text_left = max(0, text_left - size)
            kept.append(output)
            continue
        data = output.get("data") or {}
        for key in list(data):
            value = data[key] if isinstance(data[key], str) else json.dumps(data[key])
            if key.startswith("image/") and key != "image/svg+xml":
                if len(value) > images_left:
                    cut += len(value)
                    del data[key]
                else:
                    images_left -= len(value)
            elif len(value) > text_left:
                cut += len(value) - (text_left if key == "text/plain" else 0)
                if key == "text/plain" and text_left > 0:
                    data[key] = value[:text_left]
                    text_left = 0
                else:
                    del data[key]
            else:
                text_left -= len(value)
        if data or kind not in ("display_data", "execute_result"):
            kept.append(output)
    if cut:
        kept.append(NotebookNode(output_type="stream", name="stdout", text=CUT.format(CELL_TEXT, cut)))
    return kept


def redact_notebook(nb, secret_lines):
    """Redact in place; returns the number of outputs removed for quoting hidden lines."""
    removed = 0
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        is_test = meta.get("grade") and not meta.get("solution")
        if cell.cell_type == "code" and is_test:
            cell.source = strip_hidden(cell.source)
            cell.outputs = [_one_line(o) if o.get("output_type") == "error" else o
                            for o in cell.outputs]
        if cell.cell_type != "code":
            continue
        kept = []
        for output in cell.outputs:
            output = _cap(output)
            text = _output_text(output)
            if any(line in text for line in secret_lines):
                removed += 1
                kept.append(NotebookNode(output_type="stream", name="stdout",
                                         text="[output removed: it quoted the hidden tests]\n"))
            else:
                kept.append(output)
        cell.outputs = _budget_cell(kept)
    return removed


def leaks(html_text, secret_lines):
    """The hidden lines that still appear in rendered HTML (escaped or not)."""
    plain = html.unescape(re.sub(r"<[^>]+>", "", html_text))
    return [line for line in secret_lines if line in html_text or line in plain]

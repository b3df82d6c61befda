"""Feedback page: a student reads the diagnosis, the formulas and the summary without a script.

Why: nbgrader's feedback page was written for a notebook viewer that runs MathJax and scrolls
long lines. The grader's page runs no script (sanitize.py removes them all, rightly), so:
- each failing test cell's one-line diagnosis (redact.py) sat in a `<pre>` that does not wrap and
  was cut at the page's edge, the reason for the lost points invisible;
- every formula read as raw TeX (`$$\\operatorname{softmax}...$$`);
- the page opened on a list of "Test cell (Score: 0.0 / 2.0)" links with no word of what went wrong.

`improve(page, cells)` post-processes the rendered page, before `sanitize.clean_page` (which stays
the last step, so nothing a student wrote can run):
- a style sheet in the head makes every `<pre>` (outputs, error messages, cell sources) wrap;
- `$...$` and `$$...$$` in the markdown cells' rendered text become MathML, converted here with
  latex2mathml (browsers draw MathML natively); the converter's tree is checked against the
  sanitizer's MathML allow-list and serialized here (latex2mathml's own string output un-escapes
  `\\text{<script>}`); a formula that does not convert, or converts to anything outside the
  list, keeps its escaped TeX. Text in `<code>` and `<pre>` is never touched;
- a summary replaces the table of contents: per graded cell, the exercise's title (the exercise
  heading over it, read by course_utils.grading.headings as everywhere else), its grade id, points got / possible and the first error of
  the cell (redacted already: the sentence the check wrote), or "passed". Points come from the
  gradebook rows when the worker passes them (`cells`), so markup a student put in a markdown
  cell cannot change them; otherwise from the page.
"""
import html
import re
import xml.etree.ElementTree as ET

from latex2mathml.converter import convert_to_element

from course_utils.grading.headings import HeadingWalk

from .sanitize import MATHML_ATTRIBUTES, MATHML_TAGS

STYLE = """<style type="text/css">
/* feedback_page.py: every message, output and source line wraps at the page's width */
pre, div.output_area pre, div.output_subarea pre, div.input_area pre, div.highlight pre,
.rendered_html pre, .fb-summary td {
  white-space: pre-wrap !important;
  overflow-wrap: anywhere !important;
  word-break: normal !important;
}
div.output_subarea { max-width: 100%; min-width: 0; }
math { font-size: 1.1em; }
math[display="block"] { display: block; margin: 0.5em 0; overflow-x: auto; max-width: 100%; }
.fb-summary { width: 100%; margin: 0.6em 0 0.2em 0; border-collapse: collapse; table-layout: fixed; }
.fb-summary th, .fb-summary td { padding: 0.35em 0.6em; border-top: 1px solid #ddd; vertical-align: top; text-align: left; }
.fb-summary th { background: #f5f5f5; }
.fb-summary col.fb-ex { width: 34%; } .fb-summary col.fb-pts { width: 9%; }
.fb-summary .fb-title { font-weight: bold; display: block; }
.fb-summary tr.fb-passed td.fb-diag { color: #2b7a2b; }
.fb-summary tr.fb-failed td.fb-diag { color: #b02a1f; }
.fb-summary td.fb-pts { white-space: nowrap !important; }
</style>
"""

_TOKEN = re.compile(r"<!--.*?-->|<(?:[^>\"']|\"[^\"]*\"|'[^']*')*>", re.S)
_TAG = re.compile(r"<\s*(/?)\s*([A-Za-z][\w:-]*)")
_RAW = {"pre", "code", "script", "style", "textarea", "math", "kbd", "samp"}
# Inline math as pandoc reads it: `$` not followed by a space opens, `$` not after a space and not
# before a digit closes, so "costs $5 and $10" stays prose (markdown drops the backslash of `\$`).
_MATH = re.compile(r"\$\$(?P<display>.+?)\$\$"
                   r"|(?<![\\$])\$(?P<inline>(?!\s)[^$\n]*?(?:\n(?!\n)[^$\n]*?)*)(?<![\s\\])\$(?!\d)", re.S)
_CHARREF = re.compile(r"&#x([0-9A-Fa-f]+);")
_HEADING = re.compile(r"<h([1-6])[^>]*>(.*?)</h\1>", re.S | re.I)
_CELL_START = re.compile(r'<div class="cell border-box-sizing')
_ANCHOR = re.compile(r'<a name="([^"]+)"[^>]*>\s*</a>\s*<div class="panel-heading">(.*?)</div>', re.S)
_SCORE = re.compile(r"Score:\s*(-?[\d.]+)\s*/\s*(-?[\d.]+)")
_ERROR = re.compile(r'<div class="output_subarea output_text output_error">\s*<pre>(.*?)</pre>', re.S)
_TOC = re.compile(r'<div id="toc">(.*?)</div>', re.S)
_STUDENT_ENAMES = ("GradingError: ", "TamperError: ")


def _decode(text):
    return _CHARREF.sub(lambda m: chr(int(m.group(1), 16)), text) if text else text


def _checked(element):
    """A copy of latex2mathml's tree with only allowed tags and attributes; None if a tag is not."""
    tag = element.tag.split("}")[-1]
    if tag not in MATHML_TAGS:
        return None
    allowed = MATHML_ATTRIBUTES.get(tag, set())
    out = ET.Element(tag, {k: v for k, v in element.attrib.items() if k in allowed})
    out.text = _decode(element.text)
    for child in element:
        copy = _checked(child)
        if copy is None:
            return None
        copy.tail = _decode(child.tail)
        out.append(copy)
    return out


def tex_to_mathml(tex, display=False):
    """MathML for a TeX formula (its source kept as an annotation), or None if it does not convert."""
    try:
        root = _checked(convert_to_element(tex, display="block" if display else "inline"))
    except Exception:  # noqa: BLE001 - latex2mathml raises many kinds on bad TeX; keep the TeX
        return None
    if root is None or root.tag != "math":
        return None
    semantics = ET.Element("semantics")
    children = list(root)
    if len(children) == 1 and children[0].tag == "mrow":
        semantics.append(children[0])
    else:
        row = ET.SubElement(semantics, "mrow")
        row.text = root.text
        row.extend(children)
    annotation = ET.SubElement(semantics, "annotation", {"encoding": "application/x-tex"})
    annotation.text = tex
    math = ET.Element("math", {"display": "block" if display else "inline"})
    math.append(semantics)
    return ET.tostring(math, encoding="unicode", short_empty_elements=False)


def _math_in_text(text):
    """Formulas in one HTML text node (escaped text) to MathML; the rest unchanged."""
    if "$" not in text:
        return text

    def one(match):
        display = match.group("display") is not None
        tex = html.unescape(match.group("display") if display else match.group("inline")).strip()
        if not tex:
            return match.group(0)
        return tex_to_mathml(tex, display) or match.group(0)
    return _MATH.sub(one, text)


def render_math(fragment, everywhere=False):
    """Formulas in the markdown cells' rendered text (or, with everywhere, in all of `fragment`)
    become MathML; text inside code, pre, script, style and math elements stays as it is."""
    out, pos = [], 0
    md_depth = 0      # open <div>s since entering a markdown cell's rendered text (0: outside)
    raw_depth = 0     # open code-like elements
    for token in _TOKEN.finditer(fragment):
        text = fragment[pos:token.start()]
        out.append(_math_in_text(text) if (everywhere or md_depth) and not raw_depth else text)
        tag = token.group(0)
        out.append(tag)
        pos = token.end()
        m = _TAG.match(tag)
        if not m or tag.endswith("/>"):
            continue
        closing, name = m.group(1) == "/", m.group(2).lower()
        if name in _RAW:
            raw_depth = max(0, raw_depth - 1) if closing else raw_depth + 1
        elif name == "div":
            if md_depth:
                md_depth += -1 if closing else 1
            elif not closing and re.search(r"""class\s*=\s*["'][^"']*\btext_cell_render\b""", tag):
                md_depth = 1
    text = fragment[pos:]
    out.append(_math_in_text(text) if (everywhere or md_depth) and not raw_depth else text)
    return "".join(out)


def _plain(fragment):
    return html.unescape(re.sub(r"<[^>]*>", "", fragment)).strip()


def _number(text):
    value = float(text)
    return f"{value:g}"


def summary_rows(page, cells=None):
    """[{grade_id, title, score, max_score, message}] in the page's order.

    cells: the worker's gradebook rows of this notebook ({grade_id, score, max_score}); when given
    they decide which cells are listed and their points."""
    known = {c["grade_id"]: c for c in cells} if cells is not None else None
    rows, seen, walk = [], set(), HeadingWalk()
    starts = [m.start() for m in _CELL_START.finditer(page)] + [len(page)]
    for begin, end in zip(starts, starts[1:]):
        chunk = page[begin:end]
        if chunk.startswith('<div class="cell border-box-sizing text_cell'):
            for heading in _HEADING.finditer(chunk):
                walk.see(int(heading.group(1)),
                         _plain(re.sub(r'<a class="anchor-link".*?</a>', "", heading.group(2), flags=re.S)))
        for anchor in _ANCHOR.finditer(chunk):
            gid, heading = html.unescape(anchor.group(1)), anchor.group(2)
            score = _SCORE.search(heading)
            if gid.startswith("comment-") or gid in seen or not score:
                continue
            if known is not None and gid not in known:
                continue
            seen.add(gid)
            got, possible = float(score.group(1)), float(score.group(2))
            if known is not None:
                got, possible = float(known[gid]["score"]), float(known[gid]["max_score"])
            error = _ERROR.search(chunk, anchor.end())
            message = _plain(error.group(1)) if error else ""
            for prefix in _STUDENT_ENAMES:
                if message.startswith(prefix):
                    message = message[len(prefix):]
            if not message and known is not None:  # a partly credited cell: the judge's sentence
                message = str(known[gid].get("partial_message", ""))
            title = walk.current.shown if walk.current else None
            rows.append({"grade_id": gid, "title": title, "score": got, "max_score": possible,
                         "message": message})
    for gid, c in (known or {}).items():  # graded, but not found on the page
        if gid not in seen:
            rows.append({"grade_id": gid, "title": None, "score": float(c["score"]),
                         "max_score": float(c["max_score"]), "message": ""})
    return rows


def _diagnosis(row):
    if row["score"] >= row["max_score"]:
        return "passed", "fb-passed"
    return row["message"] or "no points (the cell gave no message)", "fb-failed"


def summary_html(rows, extra_items=""):
    if not rows:
        return ""
    lines = ['<div id="summary" class="fb-summary-box">',
             '<table class="fb-summary"><colgroup><col class="fb-ex" /><col class="fb-pts" /><col />'
             "</colgroup>",
             "<thead><tr><th>Exercise</th><th>Points</th><th>What the tests found</th></tr></thead><tbody>"]
    for row in rows:
        diagnosis, cls = _diagnosis(row)
        gid = html.escape(row["grade_id"])
        title = render_math(html.escape(row["title"]), everywhere=True) if row["title"] else ""
        lines.append(
            f'<tr class="{cls}"><td>'
            + (f'<span class="fb-title">{title}</span>' if title else "")
            + f'<a href="#{gid}"><code>{gid}</code></a></td>'
            f'<td class="fb-pts">{_number(row["score"])} / {_number(row["max_score"])}</td>'
            f'<td class="fb-diag">{html.escape(diagnosis)}</td></tr>')
    lines.append("</tbody></table>")
    if extra_items:
        lines.append(f"<ul>{extra_items}</ul>")
    lines.append("</div>")
    return "\n".join(lines)


def improve(page, cells=None):
    """The rendered feedback page, readable without scripts (see the module's docstring).

    Run before sanitize.clean_page, never after."""
    rows = summary_rows(page, cells)
    head_end = page.find("</head>")
    if head_end >= 0:
        page = page[:head_end] + STYLE + page[head_end:]
    page = render_math(page)
    toc = _TOC.search(page)
    if rows:
        # the toc's own links are in the summary; its late-penalty and comment lines are kept
        extra = "".join(li for li in re.findall(r"<li\b.*?</li>", toc.group(1), re.S)
                        if "late-penalty" in li or ">Comment<" in li) if toc else ""
        block = summary_html(rows, extra)
        if toc:
            page = page[:toc.start()] + block + page[toc.end():]
        else:
            body = re.search(r"<body[^>]*>", page, re.I)
            at = body.end() if body else 0
            page = page[:at] + block + page[at:]
    return page

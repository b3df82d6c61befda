"""Sanitize: a feedback page in which nothing a student wrote can run.

Why: nbgrader's feedback template renders a student's markdown as raw HTML (`<script>`,
`<img onerror>`, `javascript:` links, `<meta http-equiv=refresh>` stay live), and output metadata
reaches attributes unescaped (a PNG whose `width` is `1 onerror=alert(5)`). Escaping piecemeal
misses cases, so the whole rendered page goes through a maintained HTML sanitizer (nh3, the
binding of Rust's ammonia) with an allow-list:

- the body keeps text, markdown's tags, tables, code, links (http, https, mailto, in-page `#`)
  and images only as `data:image/...` URIs; every `on*` attribute, script, style sheet, form,
  frame, SVG and meta element of the body is removed;
- the head is rebuilt: the template's own style sheets (never student text), the title, and a
  Content-Security-Policy that forbids every script and every network load, as a second wall;
- MathJax is dropped with the other scripts; feedback_page.py has already turned the formulas into
  MathML, which browsers draw without a script. MathML passes as presentation elements with their
  layout attributes only: no `annotation-xml` (it can hold HTML), no `maction`, no `href`, no
  `on*`; the element's text is escaped like any other.
"""
import html
import re

import nh3

CSP = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; font-src data:; "
       "base-uri 'none'; form-action 'none'")
# MathML (from feedback_page.py's latex2mathml), presentation only.
MATHML_TAGS = {"math", "semantics", "annotation", "mrow", "mi", "mn", "mo", "ms", "mtext", "mspace",
               "msub", "msup", "msubsup", "mfrac", "msqrt", "mroot", "mstyle", "merror", "mpadded",
               "mphantom", "menclose", "munder", "mover", "munderover", "mtable", "mtr", "mtd",
               "mmultiscripts", "mprescripts", "none"}
_MATHML_COMMON = {"mathvariant", "mathsize", "mathcolor", "mathbackground", "displaystyle",
                  "scriptlevel", "dir"}
MATHML_ATTRIBUTES = {tag: set(_MATHML_COMMON) for tag in MATHML_TAGS}
MATHML_ATTRIBUTES["math"] |= {"display"}
MATHML_ATTRIBUTES["annotation"] = {"encoding"}
MATHML_ATTRIBUTES["mo"] |= {"stretchy", "fence", "form", "separator", "lspace", "rspace", "minsize",
                            "maxsize", "symmetric", "largeop", "movablelimits", "accent"}
MATHML_ATTRIBUTES["mfrac"] |= {"linethickness"}
for _tag in ("mover", "munder", "munderover"):
    MATHML_ATTRIBUTES[_tag] |= {"accent", "accentunder"}
for _tag in ("mspace", "mpadded"):
    MATHML_ATTRIBUTES[_tag] |= {"width", "height", "depth", "lspace", "voffset"}
for _tag in ("mtable", "mtr", "mtd"):
    MATHML_ATTRIBUTES[_tag] |= {"columnalign", "rowalign", "columnspacing", "rowspacing",
                                "columnlines", "rowlines", "frame", "columnspan", "rowspan"}
MATHML_ATTRIBUTES["menclose"] |= {"notation"}

_TAGS = (set(nh3.ALLOWED_TAGS) - {"map", "area"}) | MATHML_TAGS
_ATTRIBUTES = {tag: set(attrs) for tag, attrs in nh3.ALLOWED_ATTRIBUTES.items() if tag in _TAGS}
_ATTRIBUTES.update({tag: set(attrs) for tag, attrs in MATHML_ATTRIBUTES.items()})
_ATTRIBUTES["*"] = {"class", "id", "title", "style"}
_ATTRIBUTES["a"] = {"href", "name"}
_STYLE = {"color", "background-color", "text-align", "font-weight", "font-style", "font-size",
          "width", "max-width", "height", "max-height", "padding", "margin", "border",
          "border-collapse", "vertical-align", "white-space", "display"}
_IMAGE_URI = re.compile(r"^data:image/(png|jpeg|gif|webp|svg\+xml)[;,]", re.I)
_LINK = re.compile(r"^(https?:|mailto:|#)", re.I)


def _attribute(tag, name, value):
    """URLs: images only as data: URIs, links only to the web, mail or this page."""
    if name == "src":
        return value if tag == "img" and _IMAGE_URI.match(value.strip()) else None
    if name == "href":
        return value if _LINK.match(value.strip()) else None
    return value


def clean_body(fragment):
    return nh3.clean(fragment, tags=_TAGS, clean_content_tags={"script", "style"},
                     attributes=_ATTRIBUTES, attribute_filter=_attribute,
                     url_schemes={"http", "https", "mailto", "data"}, filter_style_properties=_STYLE)


def clean_page(page):
    """The sanitized page: rebuilt head (template CSS, title, CSP), sanitized body."""
    head_end = page.find("</head>")
    head = page[:head_end] if head_end >= 0 else ""
    rest = page[head_end + len("</head>"):] if head_end >= 0 else page
    title = re.search(r"<title>(.*?)</title>", head, re.S)
    styles = re.findall(r"<style[^>]*>.*?</style>", head, re.S | re.I)
    body = re.search(r"<body[^>]*>(.*)</body>", rest, re.S | re.I)
    return ("<!DOCTYPE html>\n<html>\n<head>\n<meta charset=\"utf-8\" />\n"
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\" />\n"
            f"<title>{html.escape(html.unescape(title.group(1)) if title else '')}</title>\n"
            + "\n".join(styles) + "\n</head>\n<body>\n"
            + clean_body(body.group(1) if body else rest) + "\n</body>\n</html>\n")

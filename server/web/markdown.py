"""Statement Markdown to HTML: CommonMark with tables, math kept as TeX in `.math` elements (KaTeX
renders them in the browser; without JavaScript the TeX stays readable) and code highlighted by
Pygments on the server. Raw HTML in statements is not passed through."""

from __future__ import annotations

from functools import lru_cache

from markdown_it import MarkdownIt
from mdit_py_plugins.dollarmath import dollarmath_plugin
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

_FORMATTER = HtmlFormatter(nowrap=True)


def _highlight(code: str, lang: str, _attrs: str) -> str:
    try:
        lexer = get_lexer_by_name(lang or "text")
    except ClassNotFound:
        lexer = get_lexer_by_name("text")
    # starting with <pre tells markdown-it not to wrap it again
    # tabindex: a code block that scrolls sideways must be reachable by keyboard (WCAG 2.1.1)
    return f'<pre class="highlight" tabindex="0"><code>{highlight(code, lexer, _FORMATTER)}</code></pre>\n'


@lru_cache(maxsize=1)
def _renderer() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "highlight": _highlight, "linkify": False})
    md.enable("table")
    md.use(dollarmath_plugin, allow_space=True, double_inline=True)
    return md


@lru_cache(maxsize=256)
def render_markdown(text: str) -> str:
    """HTML for `text` (cached: statements change only with a new problem version)."""
    return _renderer().render(text)


def pygments_css() -> str:
    """The stylesheet of the highlighting classes."""
    return HtmlFormatter().get_style_defs(".highlight")


def split_section(text: str, heading: str) -> tuple[str, str]:
    """(`## heading` section, the rest of `text`): the section runs from its heading line to the
    next `## ` heading or the end; ("", text) when there is no such heading. Headings inside
    fenced code blocks are not headings."""
    lines = text.splitlines(keepends=True)
    fenced, start, end = False, None, len(lines)
    for index, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if fenced or not line.startswith("## "):
            continue
        if start is None and stripped[3:].strip() == heading:
            start = index
        elif start is not None:
            end = index
            break
    if start is None:
        return "", text
    return "".join(lines[start:end]), "".join(lines[:start] + lines[end:])


def highlight_python(source: str) -> str:
    """`source` as highlighted HTML with line numbers (Pygments, `.highlight` classes): for a
    submission's code, which never goes through Markdown (a line of three backticks would end a
    fence there). Every character of `source` is escaped by the formatter."""
    formatter = HtmlFormatter(linenos="table", cssclass="highlight", lineanchors="L", anchorlinenos=True)
    return highlight(source, get_lexer_by_name("python"), formatter)

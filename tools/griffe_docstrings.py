"""A griffe extension for the docs build: slt's docstrings read as plain text in Markdown.

slt's docstrings are plain text with Markdown's code spans, bold and bullets: `code`,
**with**, "* item". Their mathematics is plain text too, and there Markdown would misread it:
the two stars of "lambda_hat(w*) = n beta (E[L_n(w)] - L_n(w*))" would set everything between
them in italics, "<site>" would vanish as an HTML tag, "[a][b]" would be taken for a
cross-reference. This extension escapes those characters outside code spans and code blocks
before mkdocstrings renders a docstring: a lone "*" (not "**", not a bullet), "[" and "]",
"_" at the edge of a word (not inside "restrict_to") and "<" before a letter. The names before
the colon of an "Args:" entry are left as they are (griffe matches them to the signature).
Doctest examples (">>>" lines and their output) become fenced Python code, Sphinx roles
(":class:`RLCT`") plain code spans, and a code span naming an object of slt (`slt.RunPlan`) a
link to its entry in the reference.
"""

import re

import griffe

_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_DOTTED = re.compile(r"slt(?:\.\w+)+")
_ARG_NAME = re.compile(r"^(\s+[\w*][\w*, ]*:)(\s|$)")
_SECTION = re.compile(r"^\s*[A-Z][A-Za-z ]*:\s*$")
_ROLE = re.compile(r":(?:class|func|meth|attr|mod|data|obj):(?=`)")


def _escape_text(text: str) -> str:
    text = re.sub(r"(?<![*\\])\*(?!\*)", r"\\*", text)
    text = re.sub(r"(?<!\\)([\[\]])", r"\\\1", text)
    text = re.sub(r"(?<![\w\\])_|_(?!\w)", r"\\_", text)
    return re.sub(r"<(?=[A-Za-z/])", "&lt;", text)


def _code(span: re.Match) -> str:
    """A code span; one that names an object of slt (`slt.llc`, `slt.samplers.SGLD()`) links to
    its entry in the reference where it has one (an optional cross-reference: plain code
    where the name has no entry, e.g. a private module)."""
    name = span.group(2).strip().removesuffix("()")
    if _DOTTED.fullmatch(name):
        code = span.group(2).strip()
        return f'<autoref identifier="{name}" optional><code>{code}</code></autoref>'
    return span.group(0)


def _escape_line(line: str) -> str:
    if re.match(r"^\s*\* ", line):  # a bullet
        start = line.index("*") + 2
        return line[:start] + _escape_line(line[start:]) if line[start:].strip() else line
    head = ""
    match = _ARG_NAME.match(line)
    if match:
        head, line = line[:match.end(1)], line[match.end(1):]
    pieces, last = [], 0
    for span in _CODE_SPAN.finditer(line):
        pieces += [_escape_text(line[last:span.start()]), _code(span)]
        last = span.end()
    pieces.append(_escape_text(line[last:]))
    return head + "".join(pieces)


def plain_text(docstring: str) -> str:
    """`docstring` with Markdown's special characters escaped where they are plain text, its
    doctest examples (">>>" lines and their output, up to a blank line) fenced as Python code,
    and Sphinx roles (":class:`X`") written as code."""
    docstring = _ROLE.sub("", docstring)
    out, block_indent, doctest_indent, fenced = [], None, None, False
    for line in docstring.splitlines():
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if doctest_indent is not None:
            if stripped and indent >= doctest_indent:
                out.append(line)
                continue
            out.append(" " * doctest_indent + "```")
            doctest_indent = None
        if stripped.startswith("```"):
            fenced = not fenced
            out.append(line)
            continue
        if fenced:
            out.append(line)
            continue
        if stripped.startswith(">>>"):
            doctest_indent = indent
            out += [" " * indent + "```python", line]
            continue
        if block_indent is not None:  # inside an indented code block ("Example::")
            if not stripped or indent >= block_indent:
                out.append(line)
                continue
            block_indent = None
        out.append(line if _SECTION.match(line) else _escape_line(line))
        if stripped.endswith("::"):
            block_indent = indent + 1
    if doctest_indent is not None:
        out.append(" " * doctest_indent + "```")
    return "\n".join(out)


class PlainTextDocstrings(griffe.Extension):
    """Escape each docstring once, as griffe loads its object."""

    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None and not getattr(obj.docstring, "_slt_escaped", False):
            obj.docstring.value = plain_text(obj.docstring.value)
            obj.docstring._slt_escaped = True

"""gcloud's `--filter=EXPRESSION` for the fake's list commands: the subset our code writes, evaluated on
each listed item as gcloud does (client side), with gcloud's error for what it cannot parse.

Supported: terms `key~"regex"`, `key!~"regex"`, `key=value`, `key=(v1 v2 …)`, `key!=value`, `key:value`
(contains, case-insensitive), `key:*` (defined); `NOT term`, `-term`; `AND` (or juxtaposition) and `OR`, which
gcloud refuses to mix without parentheses; parentheses. Keys are dotted paths (`resourceLabels.managed-by`).
A list key matches if any element matches. tests/gcloud checks this against gcloud's own filter engine.
"""

from __future__ import annotations

import re
from typing import Any

from ..core import Ctx, Fail, gcloud_error

_TOKEN = re.compile(r'\s*(?:(?P<paren>[()])|(?P<quoted>"[^"]*"|\'[^\']*\')|(?P<word>[^\s()"\']+))')
_TERM = re.compile(r"(?P<neg>-)?(?P<key>[A-Za-z_][\w.\-]*?)(?P<op>!~|!=|~|=|:)(?P<value>.*)", re.DOTALL)


class FilterError(Exception):
    pass


def _tokens(expression: str) -> list[str]:
    out, position = [], 0
    text = expression.strip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise FilterError(f"Unexpected character [{text[:position]} *HERE* {text[position:]}].")
        token = match.group("paren") or match.group("quoted") or match.group("word")
        # A term is one token even when its value is quoted or parenthesized: key~"re", key=(a b).
        if out and out[-1] not in ("(", ")", "AND", "OR", "NOT") and re.search(r"(!~|!=|~|=|:)$", out[-1]):
            if match.group("quoted"):
                out[-1] += token
                position = match.end()
                continue
            if token == "(":
                close = text.find(")", match.end())
                if close < 0:
                    raise FilterError(f"More tokens expected [{text} *HERE*].")
                out[-1] += text[match.start():close + 1].strip()
                position = close + 1
                continue
        out.append(token)
        position = match.end()
    return out


def _dig(obj: Any, key: str) -> list[Any]:
    values = [obj]
    for part in key.split("."):
        found = []
        for value in values:
            items = value if isinstance(value, list) else [value]
            found += [item.get(part) for item in items if isinstance(item, dict) and part in item]
        values = found
    flat: list[Any] = []
    for value in values:
        flat += value if isinstance(value, list) else [value]
    return flat


def _unquote(value: str) -> str:
    return value[1:-1] if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'" else value


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def _term(token: str, obj: Any) -> bool:
    match = _TERM.fullmatch(token)
    if match is None:
        raise FilterError(f"Term operand expected [{token} *HERE*].")
    key, op, raw = match.group("key"), match.group("op"), match.group("value")
    values = _dig(obj, key)
    if op in ("~", "!~"):
        pattern = re.compile(_unquote(raw))
        found = any(pattern.search(_text(v)) for v in values)
        result = found if op == "~" else not found
    elif op == ":" and raw == "*":
        result = any(v is not None for v in values)
    elif op == ":":
        needle = _unquote(raw).lower()
        result = any(needle in _text(v).lower() for v in values)
    else:
        if raw.startswith("(") and raw.endswith(")"):
            wanted = {_unquote(w) for w in re.split(r"[\s,]+", raw[1:-1].strip()) if w}
        else:
            wanted = {_unquote(raw)}
        found = any(_text(v) in wanted for v in values)
        result = found if op == "=" else not found
    return not result if match.group("neg") else result


def _parse(tokens: list[str], obj: Any) -> bool:
    """Evaluate tokens: OR and AND chains (not mixed without parentheses), NOT, parentheses."""
    position = 0

    def operand() -> bool:
        nonlocal position
        if position >= len(tokens):
            raise FilterError("Term operand expected [*HERE*].")
        token = tokens[position]
        position += 1
        if token == "NOT":
            return not operand()
        if token == "(":
            value = chain()
            if position >= len(tokens) or tokens[position] != ")":
                raise FilterError("Unmatched ( in expression.")
            position += 1
            return value
        return _term(token, obj)

    def chain() -> bool:
        nonlocal position
        values = [operand()]
        joiner = ""
        while position < len(tokens) and tokens[position] != ")":
            word = tokens[position]
            this = word if word in ("AND", "OR") else "AND"
            if word in ("AND", "OR"):
                position += 1
            if joiner and this != joiner:
                raise FilterError("Parenthesis grouping is required when AND and OR are are combined.")
            joiner = this
            values.append(operand())
        return any(values) if joiner == "OR" else all(values)

    value = chain()
    if position != len(tokens):
        raise FilterError(f"Unexpected token [{' '.join(tokens[position:])}].")
    return value


def matches(expression: str, obj: Any) -> bool:
    """True if obj passes the filter (an empty expression passes everything)."""
    if not expression.strip():
        return True
    return _parse(_tokens(expression), obj)


def filtered(ctx: Ctx, items: list[Any]) -> list[Any]:
    """The items a list command prints after its --filter; exit 1 with gcloud's wording on a bad filter."""
    expression = str(ctx.flag("--filter") or "")
    try:
        return [item for item in items if matches(expression, item)]
    except (FilterError, re.error) as exc:
        raise Fail(1, gcloud_error(ctx, str(exc))) from None

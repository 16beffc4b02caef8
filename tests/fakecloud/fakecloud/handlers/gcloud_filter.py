"""gcloud's `--filter=EXPRESSION` for the fake's list commands: the subset our code writes, evaluated on
each listed item as gcloud does (client side), with gcloud's error for what it cannot parse.

Supported: terms `key~"regex"`, `key!~"regex"`, `key=value`, `key=(v1 v2 …)`, `key!=value`, `key:value`
(contains, case-insensitive), `key:*` (defined); `NOT term`, `-term`; `AND` (or juxtaposition) and `OR`, which
gcloud refuses to mix without parentheses; parentheses. Keys are dotted paths (`resourceLabels.managed-by`).

Values as gcloud's engine (core/resource/resource_expr.py) sees them: a key through a list maps the rest of
the key over its items (a missing key is null), and the term holds if any item satisfies it. `~` and `!~`
test strings only: an item that is itself a list (a key through two lists: `nodePools.networkConfig.
additionalNodeNetworkConfigs.network`) never matches a regex, while `=` and `!=` look one list deeper and
compare case-insensitively, whole value against whole word (gcloud 528's current, "deprecated" rule).
tests/gcloud checks this against gcloud's own filter engine.
"""

from __future__ import annotations

import re
from typing import Any

from ..core import Ctx, Fail, gcloud_error

_TOKEN = re.compile(r'\s*(?:(?P<paren>[()])|(?P<quoted>"[^"]*"|\'[^\']*\')|(?P<word>[^\s()"\']+))')
_TERM = re.compile(r"(?P<neg>-)?(?P<key>[A-Za-z_][\w.\-\[\]]*?)(?P<op>!~|!=|~|=|:)(?P<value>.*)", re.DOTALL)


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


def _parts(key: str) -> list[str | None]:
    """`nodePools[].name` -> ["nodePools", None, "name"]: None is an explicit slice, `[]`."""
    out: list[str | None] = []
    for part in key.split("."):
        name = part.replace("[]", "")
        if name:
            out.append(name)
        out.extend([None] * part.count("[]"))
    return out


def _get(obj: Any, parts: list[str | None]) -> Any:
    """resource_property.Get, for dicts and lists: an explicit slice (`[]`) maps the rest of the key over a
    list's items; a name through a list maps over its items only if the first item has that name, and
    otherwise gives that name's truthy values without the rest of the key; missing: None."""
    for index, part in enumerate(parts):
        if obj is None:
            return None
        rest = parts[index + 1:]
        if isinstance(obj, dict):
            if part is None:
                return [_get(obj, [k, *rest]) for k in obj] if rest else obj
            if part not in obj:
                return None
            obj = obj[part]
            continue
        if isinstance(obj, list):
            if part is None:
                return [_get(item, rest) for item in obj] if rest else obj
            if obj and isinstance(obj[0], dict):
                if part in obj[0]:
                    return [_get(item, [part, *rest]) for item in obj]
                return [v for v in (item.get(part) for item in obj if isinstance(item, dict)) if v] or None
            return None
        return None
    return obj


def _values(obj: Any, key: str) -> list[Any]:
    """What a term compares with: the key's value, or the items of a list (one level, as gcloud)."""
    value = _get(obj, _parts(key))
    return value if value and isinstance(value, list) else [value]


def _regex(pattern: re.Pattern[str], value: Any) -> bool | None:
    """`~` on one value: a string is searched, null as ""; a list or dict cannot match (None), a number or
    boolean is searched as Python's repr of it."""
    if isinstance(value, (list, dict)):
        return None
    text = "" if value is None else value if isinstance(value, str) else repr(value)
    return pattern.search(text) is not None


def _word_equal(value: Any, word: str) -> bool:
    """`=` on one value (gcloud's _WordMatch with its deprecated, current rule): a list or dict compares each
    item (a dict its keys and values); a string equals the word ignoring case; null equals ""."""
    if isinstance(value, dict):
        return any(_word_equal(item, word) for item in [*value.keys(), *value.values()] if not isinstance(
            item, (list, dict)))
    items = value if isinstance(value, list) else [value]
    for item in items:
        if isinstance(item, bool) or isinstance(item, (int, float)):
            try:
                if item == float(word):
                    return True
            except ValueError:
                pass
            if (item == 0 and word.lower() == "false") or (item == 1 and word.lower() == "true"):
                return True
            text = re.sub(r"\.0*$", "", repr(item))
        elif item == word:
            return True
        elif item is None:
            if word == "":
                return True
            text = "null"
        else:
            text = item if isinstance(item, str) else repr(item)
        if re.search(f"^{re.escape(word.lower())}$", text.lower(), re.MULTILINE):
            return True
    return False


def _dig(obj: Any, key: str) -> list[Any]:
    values = [obj]
    for part in key.replace("[]", "").split("."):
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
        hits = [_regex(pattern, v) for v in _values(obj, key)]
        result = any(hit is True for hit in hits) if op == "~" else any(hit is False for hit in hits)
    elif op in ("=", "!="):
        if op == "!=" and raw.startswith("("):
            raise FilterError(f"Term operand expected [{token} *HERE*].")  # as gcloud: no list after !=
        if raw.startswith("(") and raw.endswith(")"):
            words = [_unquote(w) for w in re.split(r"[\s,]+", raw[1:-1].strip()) if w]
        else:
            words = [_unquote(raw)]
        equal = [any(_word_equal(v, word) for word in words) for v in _values(obj, key)]
        result = any(equal) if op == "=" else not all(equal)
    elif op == ":" and raw == "*":
        result = any(v is not None for v in values)
    elif op == ":":
        needle = _unquote(raw).lower()
        result = any(needle in _text(v).lower() for v in values)
    else:
        raise FilterError(f"Term operator expected [{token} *HERE*].")
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

"""gcloud's `--filter=EXPRESSION` for the fake's list commands: the subset our code writes, evaluated on
each listed item as gcloud does (client side), with gcloud's error for what it cannot parse.

Supported: terms `key~"regex"`, `key!~"regex"`, `key=value`, `key=(v1 v2 …)`, `key!=value`, `key:value`
(contains, case-insensitive; `key:word*`, `key:*word`, `key:a*b`), `key:*` (any non-empty value); `NOT term`,
`-term`; `AND` (or juxtaposition) and `OR`, which gcloud refuses to mix without parentheses; parentheses.
Keys are dotted paths (`resourceLabels.managed-by`).

Values as gcloud's engine (core/resource/resource_expr.py) sees them: a key through a list maps the rest of
the key over its items (a missing key is null), and the term holds if any item satisfies it. `~` and `!~`
test strings only: an item that is itself a list (a key through two lists: `nodePools.networkConfig.
additionalNodeNetworkConfigs.network`) never matches a regex, while `=` and `!=` look one list deeper and
compare case-insensitively, whole value against whole word (gcloud 528's current, "deprecated" rule); `:`
goes the same way, the word anywhere in the value.
tests/gcloud checks this against gcloud's own filter engine.
"""

from __future__ import annotations

import re
import unicodedata
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


def _searchable(value: Any, *, html: bool = False) -> str:
    """gcloud's NormalizeForSearch: the text (repr of what is not a string) in lower case, accents stripped;
    html: tags dropped."""
    text = (value if isinstance(value, str) else repr(value)).lower()
    if html:
        text = re.sub("<[^>]*>", "", text)
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


def _word_pattern(op: str, word: str) -> re.Pattern[str]:
    """The regex a word matches with (gcloud's deprecated rule, the one in force): `=` the whole text (a line of
    it); `:` contains the word, `word*` starts with it, `*word` ends with it, `a*b` is a whole line from a to b;
    `:*` any text at all."""
    flags = re.IGNORECASE | re.MULTILINE
    if op == ":" and word == "*":
        return re.compile(".", flags)
    normalized = _searchable(word)
    if op != ":":
        return re.compile(f"^{re.escape(normalized)}$", flags)
    parts = normalized.split("*")
    if len(parts) > 2:
        raise FilterError(f"At most one * expected in : patterns [{word}].")
    left, right = (re.escape(part) for part in (parts + [""])[:2])
    if len(parts) == 1:
        return re.compile(left, flags)
    if word.startswith("*"):
        return re.compile(right + "$", flags)
    if word.endswith("*"):
        return re.compile("^" + left, flags)
    return re.compile(f"^{left}.*{right}$", flags)


_NOT_A_NUMBER = object()


def _number(value: Any) -> Any:
    """gcloud's _NumericType: a number as it is, else int() or float() of it (raises if neither takes it)."""
    if isinstance(value, (int, float)):
        return value
    try:
        return int(value)
    except ValueError:
        return float(value)


def _applies(value: Any, op: str, word: str) -> bool:
    """`=`, `!=` or `:` with one value and one operand word, as gcloud's term evaluation: an operand that is a
    number (or true/false, its constants 1/0) first compares the value as a number when it converts to one; a
    literal number that does not match that way is not compared as text."""
    negate = op == "!="
    constant = word.lower() in ("true", "false")
    try:
        _number(word)
        numeric = True
    except ValueError:
        numeric = constant
    if numeric:
        try:
            as_number = _number(value)
        except (TypeError, ValueError):
            as_number = _NOT_A_NUMBER
        if as_number is not _NOT_A_NUMBER:
            if _word_match(as_number, op, word) != negate:
                return True
            if not constant:
                return False
    return _word_match(value, op, word) != negate


def _word_match(value: Any, op: str, word: str) -> bool:
    """`=` and `:` on one value (gcloud's _WordMatch): a list or dict compares each item (a dict its keys and
    values); a number also equals the word as a number, 0/1 equal false/true; null equals "" (and `null`), never
    `:*`; otherwise the text (gcloud's normalized form) is searched with _word_pattern."""
    pattern = _word_pattern(":" if op == ":" else "=", word)
    if isinstance(value, dict):
        items = [*value.keys(), *value.values()]
    else:
        items = value if isinstance(value, list) else [value]
    for item in items:
        if isinstance(item, (int, float)):  # a boolean too, as in Python
            try:
                if item == (int(word) if re.fullmatch(r"[+-]?\d+", word.strip()) else float(word)):
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
            if op == ":" and word == "*":
                continue
            text = "null"
        else:
            text = _searchable(item, html=True)
        if pattern.search(text):
            return True
    return False


def _unquote(value: str) -> str:
    return value[1:-1] if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'" else value


def _term(token: str, obj: Any) -> bool:
    match = _TERM.fullmatch(token)
    if match is None:
        raise FilterError(f"Term operand expected [{token} *HERE*].")
    key, op, raw = match.group("key"), match.group("op"), match.group("value")
    if not raw:
        raise FilterError(f"Term operand expected [{token} *HERE*].")
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
        result = any(_applies(v, op, word) for v in _values(obj, key) for word in words)
    elif op == ":":
        result = any(_applies(v, op, _unquote(raw)) for v in _values(obj, key))
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

"""What an analyst's query would do, read from Neo4j's own plan as structure, plus the two bounds a plan
cannot show: a vector search's k and a regular expression's pattern.

The plan (`EXPLAIN`, nothing runs) is a tree of operators; each operator names its kind and describes its
expressions in its `Details` argument, in Neo4j's canonical form: literals become `$autostring_N` /
`$autoint_N`, names with odd characters are backticked. `details_tokens` reads that text as tokens
(strings, backticked names, parameters, words, punctuation with bracket depth), so an argument holding a
comma, a bracket or a quote never shifts another argument.

Neo4j stops a query only between rows: one expression runs to its end whatever the transaction timeout.
Two kinds are refused here because their cost is not bounded by anything Neo4j enforces:
- a vector search reserves memory for k results before it searches (k = 2e9: OutOfMemoryError). k must be
  a request parameter `$name` whose value is an integer from 1 to VECTOR_K_MAX; nothing else is provably
  bounded (a literal hides behind `$autoint_N`, an expression has any value).
- `=~` runs java.util.regex, a backtracking matcher that never checks for termination: `(x+x+)+y` on 3,000
  x's would run for longer than the universe. Its pattern must be a string literal or a request parameter
  that `regex_problem` accepts (see there); Neo4j evaluates LIMIT and SKIP expressions while planning, so
  the query text is checked before it is planned too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

# Read procedures analysts may call (checked by the name in Neo4j's plan, after it resolved backticks).
READ_PROCEDURES = frozenset(
    {
        "db.labels",
        "db.relationshipTypes",
        "db.propertyKeys",
        "db.schema.visualization",
        "db.schema.nodeTypeProperties",
        "db.schema.relTypeProperties",
        "db.index.fulltext.queryNodes",
        "db.index.fulltext.queryRelationships",
        "db.index.fulltext.listAvailableAnalyzers",
        "db.ping",
        "db.index.vector.queryNodes",
        "db.index.vector.queryRelationships",
    }
)
# Neo4j reserves memory for k results before a vector search (k = 2e9 killed the server's JVM at once, red
# team round 2; k = 2e9 behind a first argument holding a comma, round 3): k must be a parameter, at most this.
VECTOR_K_MAX = 1000
VECTOR_PROCEDURES = ("db.index.vector.queryNodes", "db.index.vector.queryRelationships")
_VECTOR_ARITY = 3  # (index name, k, query vector)

# The regular expressions `=~` may use: at most this long, and of the linear shape regex_problem states.
REGEX_MAX_CHARS = 100


@dataclass(frozen=True)
class Token:
    kind: str  # "word", "param", "string", "name" (backticked), "number", "op"
    text: str
    depth: int  # bracket depth ((, [, {) before the token


_OPS = ("=~", "<>", "<=", ">=", "::", "..", "+=")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(r"[0-9][0-9A-Za-z_.]*")
_OPENERS, _CLOSERS = "([{", ")]}"


class Unreadable(ValueError):
    """Plan text that does not tokenise (an unclosed string or name): treated as not shown to be safe."""


def details_tokens(text: str) -> list[Token]:
    """Tokens of a plan operator's Details text, each with its bracket depth."""
    tokens: list[Token] = []
    depth, i, n = 0, 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c in "'\"":
            end = _string_end(text, i)
            tokens.append(Token("string", text[i:end], depth))
            i = end
        elif c == "`":
            end = _backticked_end(text, i)
            tokens.append(Token("name", text[i:end], depth))
            i = end
        elif c == "$":
            if i + 1 < n and text[i + 1] == "`":
                end = _backticked_end(text, i + 1)
            else:
                m = _WORD.match(text, i + 1)
                end = m.end() if m else i + 1
            tokens.append(Token("param", text[i:end], depth))
            i = end
        elif m := _WORD.match(text, i):
            tokens.append(Token("word", m.group(), depth))
            i = m.end()
        elif m := _NUMBER.match(text, i):
            tokens.append(Token("number", m.group(), depth))
            i = m.end()
        else:
            op = next((o for o in _OPS if text.startswith(o, i)), c)
            if op in _CLOSERS:
                depth -= 1
            tokens.append(Token("op", op, depth))
            if op in _OPENERS:
                depth += 1
            i += len(op)
    return tokens


def _string_end(text: str, start: int) -> int:
    quote, i = text[start], start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == quote:
            return i + 1
        else:
            i += 1
    raise Unreadable(f"an unclosed string in {text[:80]!r}")


def _backticked_end(text: str, start: int) -> int:
    i = start + 1
    while i < len(text):
        if text[i] == "`":
            if text.startswith("``", i):  # an escaped backtick inside the name
                i += 2
                continue
            return i + 1
        i += 1
    raise Unreadable(f"an unclosed name in {text[:80]!r}")


def call_arguments(details: str) -> tuple[str, list[list[Token]]]:
    """A ProcedureCall's Details (`name(arg, arg, ...) :: (yields)`) as its name and its arguments, each the
    tokens between the top-level commas of the first bracket pair."""
    tokens = details_tokens(details)
    name_end = next((i for i, t in enumerate(tokens) if t.text == "(" and t.depth == 0), len(tokens))
    name = "".join(t.text for t in tokens[:name_end])
    args: list[list[Token]] = [[]]
    for t in tokens[name_end + 1 :]:
        if t.depth == 0 and t.text == ")":
            return name, args if any(args) else []
        if t.depth == 1 and t.text == ",":
            args.append([])
        else:
            args[-1].append(t)
    raise Unreadable(f"the procedure call {details[:80]!r} has no closing bracket")


# -- the plan walk ----------------------------------------------------------------------------------


def operators(plan: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """Every operator of the plan, depth first."""
    stack = [plan]
    while stack:
        op = stack.pop()
        yield op
        stack.extend(op.get("children", []))


def operator_kind(op: Mapping[str, Any]) -> str:
    """`Expand(All)@neo4j` -> `Expand`."""
    return str(op.get("operatorType", "")).split("@", 1)[0].split("(", 1)[0]


def details(op: Mapping[str, Any]) -> str:
    return str(op.get("args", {}).get("Details", ""))


def procedure_name(op: Mapping[str, Any]) -> str:
    return details(op).split("(", 1)[0].strip()


def calls_vector_search(plan: Mapping[str, Any]) -> bool:
    return any(
        procedure_name(op) in VECTOR_PROCEDURES for op in operators(plan) if operator_kind(op) == "ProcedureCall"
    )


def vector_k_problem(op: Mapping[str, Any], params: Mapping[str, Any]) -> str | None:
    """A vector search's k (its second argument, read as structure) must be a request parameter holding an
    integer from 1 to VECTOR_K_MAX; anything else is not provably bounded."""
    text = details(op)
    try:
        name, args = call_arguments(text)
    except Unreadable:
        return f"calls {procedure_name(op)} with arguments that cannot be read ({text[:120]!r})"
    k = " ".join(t.text for t in args[1]) if len(args) == _VECTOR_ARITY else "?"
    value = _param_value(args[1], params) if len(args) == _VECTOR_ARITY else None
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= VECTOR_K_MAX:
        return None
    return (
        f"calls {name} with k = {k}; k must be a request parameter from 1 to {VECTOR_K_MAX} (write `$k` and "
        f'send "params": {{"k": 10}}): Neo4j reserves memory for k results before it searches'
    )


def _param_value(arg: list[Token], params: Mapping[str, Any]) -> Any:
    """The request's value of an argument that is exactly one request parameter, else None (`$autoint_N` is
    a literal Neo4j lifted out: its value is not in the request)."""
    if len(arg) != 1 or arg[0].kind != "param" or arg[0].text.startswith("$auto") or arg[0].text.startswith("$`"):
        return None
    return params.get(arg[0].text[1:])


def regex_plan_problem(op: Mapping[str, Any]) -> str | None:
    """Every `=~` in an operator must take its pattern from one literal (`$autostring_N`) or one request
    parameter on its own; check_regex_text has already judged those patterns in the query's text."""
    text = details(op)
    if "=~" not in text:
        return None
    try:
        tokens = details_tokens(text)
    except Unreadable:
        return f"has an expression that cannot be read ({text[:120]!r})"
    for i, t in enumerate(tokens):
        if t.kind == "op" and t.text == "=~":
            rhs = tokens[i + 1] if i + 1 < len(tokens) else None
            after = tokens[i + 2] if i + 2 < len(tokens) else None
            if rhs is None or rhs.kind != "param" or rhs.text.startswith("$`") or not _ends_operand(after):
                return (
                    "matches a regular expression (=~) whose pattern is an expression; the pattern must be one "
                    "string literal or one request parameter, so that it can be checked before it runs"
                )
    return None


_BOUNDARY_OPS = frozenset({")", "]", "}", ",", "|", ";"})
_BOUNDARY_WORDS = frozenset(
    "AS AND OR XOR THEN ELSE END WHEN RETURN WITH ORDER LIMIT SKIP UNION WHERE MATCH OPTIONAL CALL UNWIND".split()
)


def _ends_operand(t: Token | None) -> bool:
    """Nothing that binds tighter than `=~` follows the pattern (`+`, `.`, `[`...): it is the whole operand."""
    return (
        t is None
        or (t.kind == "op" and t.text in _BOUNDARY_OPS)
        or (t.kind == "word" and t.text.upper() in _BOUNDARY_WORDS)
    )


# -- regular expressions in the query text ------------------------------------------------------------

_CYPHER_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "t": "\t", "n": "\n", "r": "\r", "b": "\b", "f": "\f"}
_TEXT_PARAM = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


def check_regex_text(query: str, params: Mapping[str, Any]) -> str | None:
    """Before the query is planned (Neo4j evaluates LIMIT and SKIP expressions while planning): every `=~`
    in the text, wherever it stands (even in a string or a comment: no reading of Cypher here can disagree
    with Neo4j's), must be followed by a string literal or a request parameter, on its own, whose pattern
    regex_problem accepts. Returns why not, or None."""
    start = 0
    while (at := query.find("=~", start)) >= 0:
        start = at + 2
        pattern, end = _operand_after(query, start, params)
        if pattern is None:
            return (
                "matches a regular expression (=~) whose pattern is not one string literal or one request "
                'parameter; write `x =~ $re` and send the pattern in "params"'
            )
        if not _text_operand_ends(query, end):
            return "matches a regular expression (=~) whose pattern is part of a larger expression; use it on its own"
        if problem := regex_problem(pattern):
            return f"matches the regular expression {pattern[:60]!r}, which {problem}"
    return None


def _operand_after(query: str, i: int, params: Mapping[str, Any]) -> tuple[str | None, int]:
    """The pattern written right after `=~` (ASCII spaces allowed) and where it ends, or (None, i)."""
    while i < len(query) and query[i] in " \t\r\n":
        i += 1
    if i < len(query) and query[i] in "'\"":
        return _decode_literal(query, i)
    if m := _TEXT_PARAM.match(query, i):
        value = params.get(m.group(1))
        return (value if isinstance(value, str) else None), m.end()
    return None, i


def _decode_literal(query: str, start: int) -> tuple[str | None, int]:
    """A Cypher string literal's value; None for escapes we do not decode exactly as Neo4j does (\\u...)."""
    quote, out, i = query[start], [], start + 1
    while i < len(query):
        c = query[i]
        if c == quote:
            return "".join(out), i + 1
        if c == "\\":
            nxt = query[i + 1 : i + 2]
            if nxt not in _CYPHER_ESCAPES:
                return None, i
            out.append(_CYPHER_ESCAPES[nxt])
            i += 2
            continue
        out.append(c)
        i += 1
    return None, i


def _text_operand_ends(query: str, i: int) -> bool:
    while i < len(query) and query[i] in " \t\r\n":
        i += 1
    if i == len(query) or query[i] in ")]},|;":
        return True
    word = _WORD.match(query, i)
    return bool(word and word.group().upper() in _BOUNDARY_WORDS)


# A pattern java.util.regex matches in linear time: literal characters, escapes of one character, `.`, `^`,
# `$` and character classes, with at most one quantifier that lets the match choose a length (`*`, `+`, `?`,
# `{m,}`, `{m,n}`; a fixed `{n}` chooses nothing), no groups (inline flags at the start excepted), no
# alternation, no backreferences or lookaround. Java's backtracking then tries each length of that one run
# once and checks the rest of the pattern after it: at most (subject length + 1) x pattern length steps, as
# for CONTAINS. Nested or adjacent quantifiers are what make it exponential ((x+x+)+y) or polynomial
# ((.*a){8}: n^8).
_FLAGS = re.compile(r"\(\?[imsuUd]+\)")
_QUANTIFIER = re.compile(r"(?:[*+?]|\{(\d{1,9})(,(\d{1,9})?)?\})[?+]?")
_ESCAPABLE = frozenset("dDwWsStnrfaebBAzZ") | frozenset(r"\.^$|?*+()[]{}-/'\" &#~!@%=:;,<>`")


def regex_problem(pattern: str) -> str | None:
    """Why `pattern` is refused, or None when it is of the linear shape above."""
    if len(pattern) > REGEX_MAX_CHARS:
        return f"is longer than {REGEX_MAX_CHARS} characters"
    i = m.end() if (m := _FLAGS.match(pattern)) else 0
    choices, atom = 0, False
    while i < len(pattern):
        c = pattern[i]
        if q := _QUANTIFIER.match(pattern, i):
            if not atom:
                return "has a quantifier that follows no single character (nested or adjacent quantifiers)"
            if q.group(1) is None or q.group(2) is not None:  # *, +, ?, {m,} and {m,n} choose a length
                choices += 1
            atom, i = False, q.end()
            continue
        if c in "()|":
            return "has a group or an alternation (only literal text, classes and one quantifier are allowed)"
        if c == "\\":
            if pattern[i + 1 : i + 2] not in _ESCAPABLE or i + 1 >= len(pattern):
                return f"has the escape {pattern[i : i + 2]!r} (backreferences and \\p, \\x, \\u, \\Q are not allowed)"
            atom, i = pattern[i + 1] not in "bBAzZ", i + 2  # an anchor is not a character to repeat
        elif c == "[":
            end = _class_end(pattern, i)
            if end is None:
                return "has a character class that is nested, intersected or not closed"
            atom, i = True, end
        elif c in "{}":
            return "has a brace that is not a quantifier of the form {m}, {m,} or {m,n}"
        else:
            atom, i = c not in "^$", i + 1
    if choices > 1:
        return (
            "has more than one quantifier that chooses a length (*, +, ?, {m,n}): a backtracking matcher may "
            "take the subject's length to that power; use CONTAINS, STARTS WITH or ENDS WITH, or one quantifier"
        )
    return None


def _class_end(pattern: str, start: int) -> int | None:
    """Past the `]` of a flat class `[...]` (no nested class, no `&&`), or None."""
    i = start + 1
    if pattern[i : i + 1] == "^":
        i += 1
    if pattern[i : i + 1] == "]":  # a leading ] is a literal
        i += 1
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            if pattern[i + 1 : i + 2] not in _ESCAPABLE:
                return None
            i += 2
        elif c == "[" or pattern.startswith("&&", i):
            return None
        elif c == "]":
            return i + 1
        else:
            i += 1
    return None


def plan_problem(plan: Mapping[str, Any], read_operators: frozenset[str], params: Mapping[str, Any]) -> str | None:
    """Why a plan is not a bounded read inside the graph, or None; walks every operator."""
    for op in operators(plan):
        kind = operator_kind(op)
        if kind not in read_operators:
            return f"needs the operator {str(op.get('operatorType', '')).split('@', 1)[0]} (not a read of the graph)"
        if kind == "ProcedureCall":
            name = procedure_name(op)
            if name not in READ_PROCEDURES:
                return f"calls the procedure {name or details(op)!r}, which is not one of the allowed read procedures"
            if name in VECTOR_PROCEDURES and (problem := vector_k_problem(op, params)):
                return problem
        if problem := regex_plan_problem(op):
            return problem
    return None


# range() is the one way a short query makes a long list inside one row, and Neo4j Community neither checks
# its timeout nor counts its memory inside an expression (a reduce or list comprehension over
# range(1, 10^10) ran on for minutes after the timeout; 30 million strings in a comprehension ended the JVM:
# red team round 4). So every range() must state its size: integer literals or request parameters, and the
# ranges of one query together at most RANGE_MAX_ELEMENTS elements (their product: nested ranges multiply).
# Other runaway expressions (nested iteration over literal or parameter lists) meet the service's backstop:
# a statement that outlives its timeout is ended by restarting the local Neo4j (service.api.cypher).
RANGE_MAX_ELEMENTS = 1_000_000
# Neo4j reads `range /* c */ (`, `range // c` + newline + `(` and `r\u0061nge(` as range( too: comments may stand
# before the parenthesis and the name may be written with escapes (decoded first, strings included: that can
# only find more calls, never fewer).
_RANGE_CALL = re.compile(r"`?\brange`?(?:\s|/\*.*?\*/|//[^\n]*(?:\n|$))*\(", re.IGNORECASE | re.DOTALL)
_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})|\\U([0-9a-fA-F]{8})")
_INT_LITERAL = re.compile(r"[+-]?\d+")
_INT_PARAM = re.compile(r"\$`?(\w+)`?")
# size(x) or length(p) of a variable, +- a literal: a range over what the statement already holds (a saved
# query's `range(0, length(path))`) is no larger than that, so it amplifies nothing
_HELD_SIZE = re.compile(r"(?:size|length)\s*\(\s*\w+\s*\)(?:\s*[+-]\s*\d+)?", re.IGNORECASE)


def check_range_text(query: str, params: Mapping[str, Any]) -> str | None:
    """Before the query is planned: why its range() calls are refused, or None. Read from the raw text, like
    the regex check (a `range(` inside a string is judged too: no reading here can disagree with Neo4j's)."""
    query = _ESCAPE.sub(lambda m: _char(m.group(1) or m.group(2)), query)
    total = 1
    for match in _RANGE_CALL.finditer(query):
        args = _call_arguments(query, match.end())
        bounds = [_int_argument(a, params) for a in args] if args is not None else None
        if bounds is None or not 2 <= len(bounds) <= 3 or any(b is None for b in bounds):
            return (
                "calls range() with bounds that are not integer literals or request parameters; write "
                'range(1, $n) and send n in "params" (Neo4j cannot stop an expression over a range it has begun)'
            )
        if not any(_HELD_SIZE.fullmatch(a) for a in args):  # type: ignore[union-attr]
            total *= _range_size(*bounds)  # type: ignore[arg-type]
        if total > RANGE_MAX_ELEMENTS:
            return (
                f"iterates ranges of more than {RANGE_MAX_ELEMENTS:,} elements together (nested ranges multiply): "
                f"past the limit of {RANGE_MAX_ELEMENTS:,} per query"
            )
    return None


def _char(hex_digits: str) -> str:
    code = int(hex_digits, 16)
    return chr(code) if code <= 0x10FFFF else "\ufffd"


def _call_arguments(text: str, start: int) -> list[str] | None:
    """The top-level comma-separated arguments of the call whose '(' ends just before `start`."""
    depth, args, begun = 0, [], start
    for i in range(start, len(text)):
        c = text[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:
                return [*args, text[begun:i].strip()]
            depth -= 1
        elif c == "," and depth == 0:
            args.append(text[begun:i].strip())
            begun = i + 1
    return None


def _int_argument(arg: str, params: Mapping[str, Any]) -> int | None:
    if _INT_LITERAL.fullmatch(arg):
        return int(arg)
    if _HELD_SIZE.fullmatch(arg):
        return 0  # the size of a list or path the statement already holds: no more than it built itself
    if m := _INT_PARAM.fullmatch(arg):
        value = params.get(m.group(1))
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    return None


def _range_size(start: int, end: int, step: int = 1) -> int:
    if step == 0:
        return 0  # Neo4j refuses a zero step itself
    return max(0, (end - start) // step + 1)

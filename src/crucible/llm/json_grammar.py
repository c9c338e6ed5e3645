"""The grammar of the JSON a constrained model may write for an answer schema, in EBNF for xgrammar.

It allows what llama.cpp's grammar for the same schema allows (json-schema-to-grammar, which
llama-cpp-python's server and llama.cpp's llama-server build from ``response_format``), written
here from its rules, not taken from it:

- at most one space after ``{``, ``[``, ``:``, ``,``, after an object key, and after every value
  but an ``enum`` constant (so ``"a": 1 ,`` but not ``"el": "Fe" ,``), the last one included;
- numbers with at most 16 digits before the point, after it and in the exponent;
- properties in the order of the schema's ``properties`` (crucible sends them in the order of
  ``required``: :func:`crucible.llm.files.schema_in_answer_order`).

So a model held to it by xgrammar (the transformers backend) and the same model behind llama.cpp's
server choose among the same replies: greedy decoding in either writes the same answer where the
two engines' logits agree, and a small model cannot run on in blank lines or digits. Only the
keywords crucible's answer schemas use are known (``tests/test_answer_schemas.py`` keeps them to
these); anything else is refused rather than silently left unenforced.
"""

from __future__ import annotations

import json
from typing import Any

KNOWN = {"type", "properties", "required", "additionalProperties", "enum", "items", "minItems", "maxItems"}

PRIMITIVES = {
    "space": '" "?',
    "digits15": "[0-9]{0,15}",
    "integral": "[0-9] | [1-9] digits15",
    "decimal": "[0-9]{1,16}",
    "number": '"-"? integral ("." decimal)? ([eE] [-+]? integral)? space',
    "integer": '"-"? integral space',
    "char": '[^"\\\\\\x7F\\x00-\\x1F] | "\\\\" (["\\\\/bfnrt] | "u" [0-9a-fA-F]{4})',
    "string": '"\\"" char* "\\"" space',
    "boolean": '("true" | "false") space',
}


class UnsupportedSchemaError(ValueError):
    """A schema with a keyword this grammar does not enforce."""


def _literal(text: str) -> str:
    return json.dumps(text)  # an EBNF string literal escapes as a JSON string does


def schema_ebnf(schema: dict[str, Any]) -> str:
    """The EBNF (root rule ``root``) of the JSON that follows ``schema``."""
    rules: dict[str, str] = {}

    def rule(name: str, body: str) -> str:
        rules[name] = body
        return name

    def visit(node: Any, name: str) -> str:
        if not isinstance(node, dict):
            raise UnsupportedSchemaError(f"{name}: a schema must be an object, got {node!r}")
        unknown = sorted(set(node) - KNOWN)
        if unknown:
            raise UnsupportedSchemaError(f"{name}: keyword(s) {', '.join(unknown)} not enforced by this grammar")
        if "enum" in node:  # a constant takes no space after it, as in llama.cpp's grammar
            return rule(name, " | ".join(_literal(json.dumps(v)) for v in node["enum"]))
        kind = node.get("type")
        if kind == "object":
            props = node.get("properties", {})
            if set(node.get("required", [])) != set(props) or node.get("additionalProperties", True) is not False:
                raise UnsupportedSchemaError(
                    f"{name}: an object must require every property and forbid others (additionalProperties: false)"
                )
            pairs = [
                f'{_literal(json.dumps(key))} space ":" space {visit(sub, f"{name}-{i}")}'
                for i, (key, sub) in enumerate(props.items())
            ]
            return rule(name, '"{" space ' + ' "," space '.join(pairs) + ' "}" space')
        if kind == "array":
            item = visit(node.get("items", {}), f"{name}-item")
            low, high = int(node.get("minItems", 0)), node.get("maxItems")
            if high is not None and int(high) < max(low, 1):
                return rule(name, '"[" space "]" space')
            more = f"{{{max(low - 1, 0)},{'' if high is None else int(high) - 1}}}"
            items = f'{item} ("," space {item}){more}'
            return rule(name, f'"[" space {items if low else f"({items})?"} "]" space')
        if kind in ("number", "integer", "string", "boolean"):
            return kind
        raise UnsupportedSchemaError(f"{name}: type {kind!r} not enforced by this grammar")

    root = visit(schema, "root")
    if root != "root":  # a bare primitive as the whole answer
        rules["root"] = root
    lines = [f"{name} ::= {body}" for name, body in rules.items()]
    return "\n".join(lines + [f"{name} ::= {body}" for name, body in PRIMITIVES.items()]) + "\n"

"""The Axon lexer and parser: precedence as in Standard ML, positions on every node, and
syntax errors that point at the token."""
import pytest

from axgraph.frontends.axon import AxonSyntaxError
from axgraph.frontends.axon import syntax as s
from axgraph.frontends.axon.lexer import tokenize
from axgraph.frontends.axon.parser import parse, parse_type
from axgraph.frontends.axon.source import Source


def expr(text):
    (decl,) = parse(Source(f"val it = {text}")).decls
    return decl.expr


def shown(e):
    """A fully parenthesised rendering, to read the tree's shape."""
    if isinstance(e, s.Var):
        return e.name
    if isinstance(e, s.Num):
        return repr(e.value)
    if isinstance(e, s.App):
        return f"({shown(e.function)} {shown(e.arg)})"
    if isinstance(e, s.BinOp):
        return f"({shown(e.left)} {e.op} {shown(e.right)})"
    if isinstance(e, s.Neg):
        return f"(~{shown(e.operand)})"
    if isinstance(e, s.Lambda):
        return f"(fn {len(e.params)} => {shown(e.body)})"
    if isinstance(e, s.TupleExpr):
        return "(" + ", ".join(shown(i) for i in e.items) + ")"
    if isinstance(e, s.Annot):
        return f"({shown(e.expr)} : type)"
    if isinstance(e, s.Let):
        return f"(let {len(e.decls)} in {shown(e.body)})"
    if isinstance(e, s.ShapeLiteral):
        return f"[{len(e.shape)}]"
    raise AssertionError(e)


@pytest.mark.parametrize("text, tree", [
    ("dense x w1 @ w2", "(((dense x) w1) @ w2)"),
    ("x @ w + b", "((x @ w) + b)"),
    ("a - b - c", "((a - b) - c)"),
    ("a + b * c", "(a + (b * c))"),
    ("~x * y", "((~x) * y)"),
    ("f (g x) y", "((f (g x)) y)"),
    ("fn x => x + 1", "(fn 1 => (x + 1))"),
    ("(a, b, c)", "(a, b, c)"),
    ("input : f32[B, 784]", "(input : type)"),
    ("let val a = 1 in a end", "(let 1 in a)"),
    ("reshape [n, 2] x", "((reshape [2]) x)"),
    ("sum ~1 x", "((sum -1) x)"),
    ("sum (-1) x", "((sum (~1)) x)"),
    ("f x - 1", "((f x) - 1)"),
    ("2.5e-1 * x", "(0.25 * x)"),
])
def test_precedence_follows_standard_ml(text, tree):
    assert shown(expr(text)) == tree


def test_nested_comments_and_semicolons_are_skipped():
    program = parse(Source("(* a (* nested *) comment *) val a = 1; val b = a (* end *)"))
    assert [d.pattern.name for d in program.decls] == ["a", "b"]


def test_every_node_knows_its_line_and_column():
    (decl,) = parse(Source("\nval y =\n  relu (x @ w)")).decls
    app = decl.expr
    assert (app.span.line, app.span.column, app.span.end_column) == (3, 3, 15)
    assert (app.arg.op_span.line, app.arg.op_span.column) == (3, 11)


def test_fun_declarations_take_patterns_and_a_result_type():
    (decl,) = parse(Source("fun f (x : f32[*b, k]) (h, c) _ : f32[k] = x")).decls
    assert decl.name == "f"
    assert [type(p).__name__ for p in decl.params] == ["PAnnot", "PTuple", "PWild"]
    shape = decl.params[0].type.shape
    assert isinstance(shape[0], s.ShapeSplat) and shape[0].name == "b"
    assert isinstance(decl.result_type, s.TensorTypeExpr)


def test_types_parse_with_arrows_to_the_right_and_tuples_binding_tighter():
    t = parse_type(Source("f32[n] * 'a -> f32[2*n + 1] -> 't[]"))
    assert isinstance(t, s.FunctionTypeExpr) and isinstance(t.arg, s.TupleTypeExpr)
    assert isinstance(t.result, s.FunctionTypeExpr)
    dim = t.result.arg.shape[0]
    assert isinstance(dim, s.DimBinary) and dim.op == "+" and dim.left.op == "*"
    assert t.result.result.dtype == "'t" and t.result.result.shape == ()


def test_names_may_hold_primes_and_digits_but_not_start_with_an_underscore():
    kinds = [(t.kind, t.text) for t in tokenize(Source("x' w1 _a 'b"))]
    assert kinds == [("name", "x'"), ("name", "w1"), ("symbol", "_"), ("name", "a"),
                     ("tyvar", "'b"), ("eof", "")]


@pytest.mark.parametrize("text, message, position", [
    ("val x = input : f32[B, 7", "expected `]` to close the shape", (1, 25)),
    ("val = 3", "expected a pattern", (1, 5)),
    ("val x = (1, 2", "expected `)`", (1, 14)),
    ("val x = 3 $ 4", "unexpected character '$'", (1, 11)),
    ("val x = (* open", "comment is never closed", (1, 9)),
    ("fun f = 3", "at least one parameter", (1, 7)),
    ("val x = y : tensor", "`tensor` is not a type", (1, 13)),
    ("val x = let in 3 end", "a declaration after `let`", (1, 13)),
])
def test_syntax_errors_point_at_the_token(text, message, position):
    with pytest.raises(AxonSyntaxError) as info:
        parse(Source(text))
    assert message in info.value.message
    assert info.value.positions == (position,)
    line, column = position
    assert "\n    " + text.splitlines()[line - 1] in info.value.message
    assert "\n    " + " " * (column - 1) + "^" in info.value.message

"""A recursive-descent parser from tokens to `syntax` nodes.

Precedence, loosest first: `fn p => e` and `e : t`; then `+ -`; then `* / @`; then
prefix `~` (or `-` where an operand starts); then application by juxtaposition, which
binds tightest and associates to the left (`dense x w1 @ w2` is `(dense x w1) @ w2`).
In types, `->` associates to the right and `*` builds tuples, as in Standard ML.
"""
from __future__ import annotations

from typing import Callable, List, Optional, Tuple, TypeVar

from . import syntax as s
from .errors import AxonSyntaxError
from .lexer import Token, tokenize
from .source import Source, Span

_BINARY_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2, "@": 2}
_T = TypeVar("_T")


def parse(source: Source) -> s.Program:
    """The program in `source`; AxonSyntaxError at the first token that does not fit."""
    return _Parser(source).program()


def parse_type(source: Source) -> s.TypeExpr:
    """A type on its own (`f32[B, 784]`), as given for a program's inputs."""
    parser = _Parser(source)
    result = parser.type()
    parser.expect_eof("after the type")
    return result


class _Parser:
    def __init__(self, source: Source):
        self.source = source
        self.tokens = tokenize(source)
        self.index = 0

    # -- token helpers ----------------------------------------------------------------------------
    @property
    def token(self) -> Token:
        return self.tokens[self.index]

    def peek(self, offset: int = 1) -> Token:
        return self.tokens[min(self.index + offset, len(self.tokens) - 1)]

    def advance(self) -> Token:
        token = self.token
        self.index = min(self.index + 1, len(self.tokens) - 1)
        return token

    def accept(self, text: str) -> Optional[Token]:
        return self.advance() if self.token.is_(text) else None

    def fail(self, expected: str, token: Optional[Token] = None) -> AxonSyntaxError:
        token = token or self.token
        found = "the end of the program" if token.kind == "eof" else f"`{token.text}`"
        return AxonSyntaxError(f"expected {expected}, found {found}", [(token.span, "here")],
                               self.source)

    def expect(self, text: str, context: str = "") -> Token:
        if not self.token.is_(text):
            raise self.fail(f"`{text}`{' ' + context if context else ''}")
        return self.advance()

    def expect_name(self, what: str) -> Token:
        if self.token.kind != "name":
            raise self.fail(what)
        return self.advance()

    def expect_eof(self, context: str) -> None:
        if self.token.kind != "eof":
            raise self.fail(f"nothing more {context}")

    def separated(self, item: Callable[[], _T], closing: str) -> List[_T]:
        """Items separated by commas, up to (not including) `closing`; none is fine."""
        items: List[_T] = []
        if self.token.is_(closing):
            return items
        items.append(item())
        while self.accept(","):
            items.append(item())
        return items

    # -- declarations -----------------------------------------------------------------------------
    def program(self) -> s.Program:
        decls = []
        while self.token.kind != "eof":
            if self.accept(";"):
                continue
            decls.append(self.decl())
        return s.Program(tuple(decls))

    def decl(self) -> s.Decl:
        start = self.token
        if self.accept("val"):
            pattern = self.pattern()
            self.expect("=", "after the pattern of `val`")
            expr = self.expr()
            return s.ValDecl(pattern, expr, start.span.to(self.previous_span()))
        if self.accept("fun"):
            name = self.expect_name("the function's name after `fun`")
            params = []
            while not self.token.is_("=") and not self.token.is_(":"):
                params.append(self.atomic_pattern("a parameter, `:` or `=`"))
            if not params:
                raise self.fail("at least one parameter after the function's name")
            result_type = self.type() if self.accept(":") else None
            self.expect("=", "before the function's body")
            body = self.expr()
            return s.FunDecl(name.text, name.span, tuple(params), result_type, body,
                             start.span.to(self.previous_span()))
        raise self.fail("a declaration (`val` or `fun`)")

    def previous_span(self) -> Span:
        return self.tokens[max(self.index - 1, 0)].span

    # -- patterns ---------------------------------------------------------------------------------
    def pattern(self) -> s.Pattern:
        pattern = self.atomic_pattern("a pattern (a name, `_` or a tuple)")
        if self.accept(":"):
            annotation = self.type()
            pattern = s.PAnnot(pattern, annotation, pattern.span.to(annotation.span))
        return pattern

    def atomic_pattern(self, expected: str) -> s.Pattern:
        token = self.token
        if token.kind == "name":
            self.advance()
            return s.PVar(token.text, token.span)
        if self.accept("_"):
            return s.PWild(token.span)
        if self.accept("("):
            items = self.separated(self.pattern, ")")
            close = self.expect(")", "to close the pattern")
            if len(items) == 1:
                return items[0]
            if not items:
                raise AxonSyntaxError("an empty pattern `()` binds nothing; use `_`",
                                      [(token.span.to(close.span), "here")], self.source)
            return s.PTuple(tuple(items), token.span.to(close.span))
        raise self.fail(expected)

    # -- expressions ------------------------------------------------------------------------------
    def expr(self) -> s.Expr:
        if self.token.is_("fn"):
            start = self.advance()
            params = []
            while not self.token.is_("=>"):
                params.append(self.atomic_pattern("a parameter or `=>`"))
            if not params:
                raise self.fail("a parameter after `fn`")
            self.expect("=>")
            body = self.expr()
            return s.Lambda(tuple(params), body, start.span.to(body.span))
        expr = self.infix(0)
        while self.accept(":"):
            annotation = self.type()
            expr = s.Annot(expr, annotation, expr.span.to(annotation.span))
        return expr

    def infix(self, least: int) -> s.Expr:
        left = self.unary()
        while (self.token.kind == "symbol" and self.token.text in _BINARY_PRECEDENCE
               and _BINARY_PRECEDENCE[self.token.text] >= least):
            op = self.advance()
            right = self.infix(_BINARY_PRECEDENCE[op.text] + 1)
            left = s.BinOp(op.text, left, right, left.span.to(right.span), op.span)
        return left

    def unary(self) -> s.Expr:
        if self.token.is_("~") or self.token.is_("-"):
            start = self.advance()
            operand = self.unary()
            return s.Neg(operand, start.span.to(operand.span))
        return self.application()

    def application(self) -> s.Expr:
        expr = self.atom()
        while self.starts_atom():
            arg = self.atom()
            expr = s.App(expr, arg, expr.span.to(arg.span))
        return expr

    def starts_atom(self) -> bool:
        token = self.token
        return token.kind in ("name", "int", "float") or any(
            token.is_(text) for text in ("(", "[", "let"))

    def atom(self) -> s.Expr:
        token = self.token
        if token.kind == "name":
            self.advance()
            return s.Var(token.text, token.span)
        if token.kind == "int":
            self.advance()
            return s.Num(int(token.text), token.span)
        if token.kind == "float":
            self.advance()
            return s.Num(float(token.text), token.span)
        if self.accept("("):
            items = self.separated(self.expr, ")")
            close = self.expect(")", "to close the parenthesis")
            if not items:
                raise AxonSyntaxError("`()` is not a value in Axon", [(token.span.to(close.span), "here")],
                                      self.source)
            if len(items) == 1:
                items[0].span = token.span.to(close.span)  # the parentheses belong to it
                return items[0]
            return s.TupleExpr(tuple(items), token.span.to(close.span))
        if self.accept("["):
            shape = self.shape_items()
            close = self.expect("]", "to close the shape")
            return s.ShapeLiteral(shape, token.span.to(close.span))
        if self.accept("let"):
            decls = []
            while not self.token.is_("in"):
                if self.accept(";"):
                    continue
                if not (self.token.is_("val") or self.token.is_("fun")):
                    raise self.fail("a declaration or `in`")
                decls.append(self.decl())
            if not decls:
                raise self.fail("a declaration after `let`")
            self.expect("in")
            body = self.expr()
            end = self.expect("end", "to close the `let`")
            return s.Let(tuple(decls), body, token.span.to(end.span))
        raise self.fail("an expression")

    # -- types ------------------------------------------------------------------------------------
    def type(self) -> s.TypeExpr:
        start = self.token
        if self.accept("forall"):
            names = []
            while self.token.kind == "name":
                token = self.advance()
                names.append(s.DimName(token.text, token.span))
            if not names:
                raise self.fail("a size name after `forall`")
            self.expect(".", "after the names of `forall`")
            body = self.type()
            return s.ForallTypeExpr(tuple(names), body, start.span.to(body.span))
        left = self.tuple_type()
        if self.accept("->"):
            right = self.type()
            return s.FunctionTypeExpr(left, right, left.span.to(right.span))
        return left

    def tuple_type(self) -> s.TypeExpr:
        items = [self.type_atom()]
        while self.accept("*"):
            items.append(self.type_atom())
        if len(items) == 1:
            return items[0]
        return s.TupleTypeExpr(tuple(items), items[0].span.to(items[-1].span))

    def type_atom(self) -> s.TypeExpr:
        token = self.token
        if token.kind == "name" and self.peek().is_("["):
            return self.tensor_type(token, token.text)
        if token.kind == "tyvar":
            if self.peek().is_("["):
                return self.tensor_type(token, token.text)
            self.advance()
            return s.TypeVarExpr(token.text, token.span)
        if self.accept("("):
            inner = self.type()
            self.expect(")", "to close the type")
            return inner
        if token.kind == "name":
            raise AxonSyntaxError(f"`{token.text}` is not a type: a tensor type is an element type "
                                  f"and a shape, like `f32[n, 10]`", [(token.span, "here")],
                                  self.source)
        raise self.fail("a type (like `f32[n, 10]`, `'a`, or `(t -> t)`)")

    def tensor_type(self, token: Token, dtype: str) -> s.TensorTypeExpr:
        self.advance()
        self.expect("[")
        shape = self.shape_items()
        close = self.expect("]", "to close the shape")
        return s.TensorTypeExpr(dtype, shape, token.span.to(close.span))

    def shape_items(self) -> Tuple[s.ShapeItem, ...]:
        return tuple(self.separated(self.shape_item, "]"))

    def shape_item(self) -> s.ShapeItem:
        if self.token.is_("*"):
            star = self.advance()
            name = self.expect_name("a shape variable's name after `*`")
            return s.ShapeSplat(name.text, star.span.to(name.span))
        if self.token.is_("#"):
            mark = self.advance()
            name = self.expect_name("a size name after `#`")
            return s.DimName(name.text, mark.span.to(name.span), marked=True)
        return self.dim(0)

    def dim(self, least: int) -> s.DimExpr:
        left = self.dim_factor()
        while (self.token.is_("+") or self.token.is_("-") or self.token.is_("*")) and \
                _BINARY_PRECEDENCE[self.token.text] >= least:
            op = self.advance()
            right = self.dim(_BINARY_PRECEDENCE[op.text] + 1)
            left = s.DimBinary(op.text, left, right, left.span.to(right.span))
        return left

    def dim_factor(self) -> s.DimExpr:
        token = self.token
        if token.kind == "int":
            self.advance()
            return s.DimInt(int(token.text), token.span)
        if token.kind == "name":
            self.advance()
            return s.DimName(token.text, token.span)
        if self.accept("_"):
            return s.DimWild(token.span)
        if self.accept("("):
            inner = self.dim(0)
            self.expect(")", "to close the size")
            return inner
        raise self.fail("a size (an int, a name, `_`, or `*name` for a shape variable)")

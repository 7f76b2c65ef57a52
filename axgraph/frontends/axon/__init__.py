"""Axon: a small functional language whose shapes are inferred, compiled to axgraph.

    from axgraph.frontends import axon

    source = '''
    fun dense (x : f32[*b, k]) (w : f32[k, n]) = relu (x @ w)
    fun mlp x w1 w2 = softmax (dense x w1 @ w2)
    val y = mlp (input : f32[B, 784]) (param : f32[784, 512]) (param : f32[512, 10])
    '''
    print(axon.infer(source))          # every binding's type, with symbolic shapes
    program = axon.compile(source)     # its axgraph graph: program.values["y"], ...

Programs are in Standard ML style: `val`, `fun`, `let ... in ... end`, `fn x => e`,
tuples, user-defined and higher-order functions. Types are `f32[d, ...]` with dims that
are expressions (`f32[2*n]`) and shape variables (`f32[*b, k]`, any number of leading
dims). Inference is Hindley-Milner extended with shapes: constraint generation is kept
apart from solving, so an error names every sub-expression that contributed, with a
caret under each.

Errors. `AxonSyntaxError` (the program does not parse), `AxonTypeError` (a value used
as what it is not, an unknown name) and `AxonShapeError` (an `axgraph.ShapeError`:
shapes that cannot fit) carry `positions`, the (line, column) of every contributing
sub-expression, and quote each in their message.
"""
from .builtins import BUILTINS
from .errors import AxonShapeError, AxonSyntaxError, AxonTypeError
from .program import Graph, Inference, Program, Residual, TypeScheme, compile, infer

__all__ = ["infer", "compile", "Inference", "TypeScheme", "Residual", "Program", "Graph",
           "AxonSyntaxError", "AxonTypeError", "AxonShapeError", "BUILTINS"]

"""Walk-through: logistic regression (Nervana Graph v0.4's Logistic_Regression_Part_1 notebook).

    python -m examples.ngraph_v04.walk_through.logistic_regression_part_1

The gradient of the batch-mean loss is divided by ``ng.tensor_size(Y_hat)``,
the size of one example of Y_hat (axes N): 1, as v0.4 counted it.
"""
from __future__ import print_function

import axgraph as ng
import axgraph.transformers as ngt

my_axis = ng.make_axis(length=256).named('my_axis')

ax = ng.make_name_scope().named('ax')
ax.N = ng.make_axis(length=128, batch=True)
ax.C = ng.make_axis(length=4)

alpha = ng.placeholder(axes=())
X = ng.placeholder(axes=[ax.C, ax.N])
Y = ng.placeholder(axes=[ax.N])
W = ng.variable(axes=[ax.C - 1], initial_value=0)

Y_hat = ng.sigmoid(ng.dot(W, X))
L = ng.cross_entropy_binary(Y_hat, Y, out_axes=()) / ng.batch_size(Y_hat)

grad = ng.deriv(L, W)
update = ng.assign(W, W - alpha * grad / ng.tensor_size(Y_hat))

transformer = ngt.make_transformer()
update_fun = transformer.computation([L, W, update], alpha, X, Y)

from examples.ngraph_v04.walk_through import gendata  # noqa: E402

g = gendata.MixtureGenerator([.5, .5], (ax.C.length,))
XS, YS = g.gen_data(ax.N.length, 10)

for i in range(10):
    for xs, ys in zip(XS, YS):
        loss_val, w_val, _ = update_fun(5.0 / (1 + i), xs, ys)
        print("W: %s, loss %s" % (w_val, loss_val))

"""Walk-through: the x + 1 program (Nervana Graph v0.4's Graph_Introduction notebook).

    python -m examples.ngraph_v04.walk_through.graph_introduction
"""
from __future__ import print_function

import axgraph as ng
import axgraph.transformers as ngt

# Build the graph
x = ng.placeholder(axes=())
x_plus_one = x + 1

# Select a transformer
transformer = ngt.make_transformer()

# Define a computation
plus_one = transformer.computation(x_plus_one, x)

# Run the computation
for i in range(5):
    print(plus_one(i))

# What `x + 1` really builds: the number becomes a constant op
x_plus_one = ng.add(x, ng.constant(1))
print(transformer.computation(x_plus_one, x)(41))

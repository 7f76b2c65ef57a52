#!/usr/bin/env python
"""MNIST MLP, written as Nervana Graph v0.4's examples/mnist/mnist_mlp.py was.

    python -m examples.ngraph_v04.mnist_mlp --data_dir ~/nervana/data -t 2000 -o out.hdf5

Without mnist.pkl.gz in the data directory it trains on stand-in data (see
examples/ngraph_v04/data.py), a short run unless -t is given.

A 100-unit rectified-linear layer and a logistic output layer over the ten
classes, trained with SGD and momentum on binary cross entropy.
"""
from __future__ import division, print_function

import numpy as np

import axgraph as ng
import axgraph.transformers as ngt
from axgraph.frontends.neon import (Affine, ArrayIterator, GaussianInit,
                                    GradientDescentMomentum, Logistic, NgraphArgparser,
                                    Preprocess, Rectlin, Sequential, ax, loop_train,
                                    make_bound_computation, make_default_callbacks)
from examples.ngraph_v04.data import MNIST, short_run_on_stand_ins

parser = NgraphArgparser(description='Train simple mlp on mnist dataset')
args = parser.parse_args()

np.random.seed(args.rng_seed)

# Create the dataloader (stand-in data, and a short default run, when the data set is absent)
mnist = MNIST(args.data_dir)
train_data, valid_data = mnist.load_data()
short_run_on_stand_ins(mnist, parser, args, iterations=200)
train_set = ArrayIterator(train_data, args.batch_size, total_iterations=args.num_iterations)
valid_set = ArrayIterator(valid_data, args.batch_size)

######################
# Model specification
seq1 = Sequential([Preprocess(functor=lambda x: x / 255.),
                   Affine(nout=100, weight_init=GaussianInit(), activation=Rectlin()),
                   Affine(axes=ax.Y, weight_init=GaussianInit(), activation=Logistic())])

######################
# Input specification
ax.C.length, ax.H.length, ax.W.length = train_set.shapes['image']
ax.N.length = args.batch_size
ax.Y.length = 10

# placeholders with descriptive names
inputs = dict(image=ng.placeholder([ax.C, ax.H, ax.W, ax.N]),
              label=ng.placeholder([ax.N]))

optimizer = GradientDescentMomentum(0.1, 0.9)

output_prob = seq1.train_outputs(inputs['image'])
errors = ng.not_equal(ng.argmax(output_prob, out_axes=[ax.N]), inputs['label'])
loss = ng.cross_entropy_binary(output_prob, ng.one_hot(inputs['label'], axis=ax.Y))
mean_cost = ng.mean(loss, out_axes=())
updates = optimizer(loss)

train_outputs = dict(batch_cost=mean_cost, updates=updates)
loss_outputs = dict(cross_ent_loss=loss, misclass_pct=errors)

# Now bind the computations we are interested in
transformer = ngt.make_transformer()
train_computation = make_bound_computation(transformer, train_outputs, inputs)
loss_computation = make_bound_computation(transformer, loss_outputs, inputs)

cbs = make_default_callbacks(output_file=args.output_file,
                             frequency=args.iter_interval,
                             train_computation=train_computation,
                             total_iterations=args.num_iterations,
                             eval_set=valid_set,
                             loss_computation=loss_computation,
                             use_progress_bar=args.progress_bar)

loop_train(train_set, train_computation, cbs)

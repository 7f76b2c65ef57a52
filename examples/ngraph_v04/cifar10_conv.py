#!/usr/bin/env python
"""CIFAR-10 convnet, written as Nervana Graph v0.4's examples/cifar10/cifar10_conv.py was.

    python -m examples.ngraph_v04.cifar10_conv --data_dir ~/nervana/data -t 2000

Without cifar-10-batches-py/ in the data directory it trains on stand-in data (see
examples/ngraph_v04/data.py), a short run unless -t is given.

Two 5x5 convolutions (16 and 32 filters), each followed by 2x2 max pooling,
a 500-unit layer and a softmax, trained with SGD and momentum on cross
entropy. As in v0.4, the images get a depth axis of length 1 (ng.expand_dims),
and the 2-d filter and pool shapes apply to each depth slice.
"""
from __future__ import division, print_function

import numpy as np

import axgraph as ng
import axgraph.transformers as ngt
from axgraph.frontends.neon import (Affine, ArrayIterator, Convolution, GradientDescentMomentum,
                                    NgraphArgparser, Pool2D, Preprocess, Rectlin, Sequential,
                                    Softmax, UniformInit, ax, loop_train, make_bound_computation,
                                    make_default_callbacks)
from examples.ngraph_v04.data import CIFAR10, short_run_on_stand_ins

parser = NgraphArgparser(description='Train simple CNN on cifar10 dataset')
args = parser.parse_args()

np.random.seed(args.rng_seed)

# Create the dataloader (stand-in data, and a short default run, when the data set is absent)
cifar10 = CIFAR10(args.data_dir)
train_data, valid_data = cifar10.load_data()
short_run_on_stand_ins(cifar10, parser, args, iterations=60)
train_set = ArrayIterator(train_data, args.batch_size, total_iterations=args.num_iterations)
valid_set = ArrayIterator(valid_data, args.batch_size)

######################
# Model specification


def cifar_mean_subtract(x):
    bgr_mean = ng.persistent_tensor(axes=x.axes[0], initial_value=np.array([[104., 119., 127.]]))
    y = ng.expand_dims((x - bgr_mean) / 255., ax.D, 1)
    return y


init_uni = UniformInit(-0.1, 0.1)

seq1 = Sequential([Preprocess(functor=cifar_mean_subtract),
                   Convolution((5, 5, 16), filter_init=init_uni, activation=Rectlin()),
                   Pool2D(2, strides=2),
                   Convolution((5, 5, 32), filter_init=init_uni, activation=Rectlin()),
                   Pool2D(2, strides=2),
                   Affine(nout=500, weight_init=init_uni, activation=Rectlin()),
                   Affine(axes=ax.Y, weight_init=init_uni, activation=Softmax())])

######################
# Input specification
ax.C.length, ax.H.length, ax.W.length = train_set.shapes['image']
ax.D.length = 1
ax.N.length = args.batch_size
ax.Y.length = 10


# placeholders with descriptive names
inputs = dict(image=ng.placeholder([ax.C, ax.H, ax.W, ax.N]),
              label=ng.placeholder([ax.N]))

optimizer = GradientDescentMomentum(0.01, 0.9)
output_prob = seq1.train_outputs(inputs['image'])
errors = ng.not_equal(ng.argmax(output_prob, out_axes=[ax.N]), inputs['label'])
loss = ng.cross_entropy_multi(output_prob, ng.one_hot(inputs['label'], axis=ax.Y))
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

#!/usr/bin/env python
"""Character-level RNN language model on the Penn Treebank, in Nervana Graph v0.4's style.

    python -m examples.ngraph_v04.char_rnn --data_dir ~/nervana/data -t 2000

Without ptb.train.txt and ptb.valid.txt in the data directory it trains on stand-in data (see
examples/ngraph_v04/data.py), a short run unless -t is given.

One-hot characters, a simple tanh recurrent layer and a softmax over the
alphabet at every time step, predicting the next character; RMSProp with
v0.4's positional arguments (decay rate, learning rate).
"""
from __future__ import division, print_function

import numpy as np

import axgraph as ng
import axgraph.transformers as ngt
from axgraph.frontends.neon import (Affine, NgraphArgparser, Preprocess, Recurrent, RMSProp,
                                    Sequential, SequentialArrayIterator, Softmax, Tanh,
                                    UniformInit, ax, loop_train, make_bound_computation,
                                    make_default_callbacks)
from examples.ngraph_v04.data import PTB, short_run_on_stand_ins

# parse the command line arguments
parser = NgraphArgparser(description=__doc__)
parser.set_defaults(batch_size=50)
args = parser.parse_args()

np.random.seed(args.rng_seed)

# these hyperparameters are from the paper
time_steps = 5
hidden_size = 256
gradient_clip_value = 15

# the penn treebank, as characters (stand-in text, and a short default run, when it is absent)
tree_bank_data = PTB(path=args.data_dir)
ptb_data = tree_bank_data.load_data()
short_run_on_stand_ins(tree_bank_data, parser, args, iterations=200)
train_set = SequentialArrayIterator(ptb_data['train'], batch_size=args.batch_size,
                                    time_steps=time_steps, total_iterations=args.num_iterations)
valid_set = SequentialArrayIterator(ptb_data['valid'], batch_size=args.batch_size,
                                    time_steps=time_steps)

# weight initialization
init = UniformInit(low=-0.08, high=0.08)

# model initialization
seq1 = Sequential([Preprocess(functor=lambda x: ng.one_hot(x, axis=ax.Y)),
                   Recurrent(hidden_size, init, activation=Tanh()),
                   Affine(init, activation=Softmax(), bias_init=init, axes=(ax.Y, ax.REC))])

# Bind axes lengths:
ax.Y.length = len(tree_bank_data.vocab)
ax.REC.length = time_steps
ax.N.length = args.batch_size

# placeholders with descriptive names
inputs = dict(inp_txt=ng.placeholder([ax.REC, ax.N]),
              tgt_txt=ng.placeholder([ax.REC, ax.N]))

optimizer = RMSProp(0.95, 2e-3, epsilon=1e-6, gradient_clip_value=gradient_clip_value)
output_prob = seq1.train_outputs(inputs['inp_txt'])
loss = ng.cross_entropy_multi(output_prob, ng.one_hot(inputs['tgt_txt'], axis=ax.Y),
                              usebits=True)
mean_cost = ng.mean(loss, out_axes=())
updates = optimizer(loss)

train_outputs = dict(batch_cost=mean_cost, updates=updates)
loss_outputs = dict(cross_ent_loss=loss)

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

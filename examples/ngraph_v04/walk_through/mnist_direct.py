"""Walk-through: the MNIST MLP written with graph ops only (Nervana Graph v0.4's
MNIST_Direct notebook): placeholders, variables, ng.deriv and a hand-made
momentum optimizer; neon supplies only the data (MNIST, ArrayIterator).

    python -m examples.ngraph_v04.walk_through.mnist_direct [-w ~/nervana/data] [-t 2000]

The notebook fixed its settings in code (~/nervana/data, 128 per batch, 2000
iterations); here they are the standard options of v0.4's example programs,
with those defaults. Without mnist.pkl.gz in the data directory it trains on
stand-in digits (see examples/ngraph_v04/data.py), a short run unless -t is given.
"""
from __future__ import division, print_function

import numpy as np

import axgraph as ng
import axgraph.transformers as ngt
from axgraph.frontends.neon import ArrayIterator, NgraphArgparser
from examples.ngraph_v04.data import MNIST, short_run_on_stand_ins

parser = NgraphArgparser(description=__doc__)
args = parser.parse_args()

np.random.seed(0)

# Create the dataloader (stand-in data, and a short default run, when mnist.pkl.gz is absent)
mnist = MNIST(args.data_dir)
train_data, valid_data = mnist.load_data()
short_run_on_stand_ins(mnist, parser, args, iterations=200)
batch_size = args.batch_size
num_iterations = args.num_iterations

train_set = ArrayIterator(train_data, batch_size, total_iterations=num_iterations)
valid_set = ArrayIterator(valid_data, batch_size)

num_batches = np.floor(train_set.ndata / batch_size)

N = ng.make_axis(name='N', docstring="minibatch size")
C = ng.make_axis(docstring="channels")
H = ng.make_axis(docstring="image height")
W = ng.make_axis(docstring="image width")
Y = ng.make_axis(docstring="target shape")

M = ng.make_axis(100, docstring="hidden layer nodes")

C.length, H.length, W.length = train_set.shapes['image']
N.length = batch_size
Y.length = 10

x = ng.placeholder([C, H, W, N])
t = ng.placeholder([N])

w1_axes = ng.make_axes([M, C, H, W])
w1 = ng.variable(initial_value=np.random.normal(0.0, 0.01, w1_axes.lengths), axes=w1_axes)

w2_axes = ng.make_axes([Y, M])
w2 = ng.variable(initial_value=np.random.normal(0.0, 0.01, w2_axes.lengths), axes=w2_axes)

h1 = ng.maximum(ng.dot(w1, x / 255.), 0)
h2 = ng.sigmoid(ng.dot(w2, h1))

loss = ng.cross_entropy_binary(h2, ng.one_hot(t, axis=Y))

# useful model operations
total_loss = ng.sum(loss, out_axes=())
mean_cost = ng.mean(loss, out_axes=())
predictions = ng.argmax(h2)
errors = ng.not_equal(predictions, t)

variables = list(total_loss.variables())
grads = [ng.deriv(total_loss, variable) / N.length for variable in variables]

learning_rate = 0.1
momentum = 0.9

with ng.Op.saved_user_deps():
    velocities = [ng.persistent_tensor(axes=variable.axes, initial_value=0.)
                  for variable in variables]
    velocity_updates = [ng.assign(velocity,
                                  velocity * momentum - learning_rate * grad)
                        for velocity, grad in zip(velocities, grads)]
    param_updates = [ng.assign(variable, variable + velocity)
                     for variable, velocity in zip(variables, velocities)]

updates = ng.doall(velocity_updates + param_updates)

transformer = ngt.make_transformer()
train_comp = transformer.computation([mean_cost, updates], x, t)
error_comp = transformer.computation(errors, x, t)
transformer.initialize()

total_cost = []
for mb_idx, npbufs in enumerate(train_set):
    batch_cost, _ = train_comp(npbufs['image'], npbufs['label'])
    total_cost.append(float(batch_cost))

    if len(total_cost) == num_batches:
        print("[Epoch %s] Cost = %s" % ((mb_idx + 1) // num_batches, np.mean(total_cost)))
        total_cost = []

running_error = 0.
all_errors = []
valid_set.reset()

for npbufs in valid_set:
    error_val = error_comp(npbufs['image'], npbufs['label'])
    all_errors.extend(list(error_val))

all_errors = all_errors[:valid_set.ndata]  # Truncate to remove any leftovers

print('Validation Error = %s%%' % (np.mean(all_errors) * 100.,))

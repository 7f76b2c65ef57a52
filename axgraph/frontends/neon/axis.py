"""The standard neon axes (``ax``) and axis roles (``ar``), as Nervana Graph v0.4 named them.

`ax.N` is the minibatch axis and `ax.REC` the recurrent one; the image,
filter and output axes carry roles so that convolution can find them:

* ``ax.C`` (input feature maps), ``ax.J`` (channels pooled together):
  role ``ar.Channel``;
* ``ax.D``, ``ax.H``, ``ax.W`` (input depth, height, width), ``ax.T``,
  ``ax.R``, ``ax.S`` (filter) and ``ax.M``, ``ax.P``, ``ax.Q`` (output):
  roles ``ar.Depth``, ``ar.Height``, ``ar.Width``;
* ``ax.K`` (output feature maps): role ``ar.Channelout``;
* ``ax.REC`` (time): role ``ar.Time``; ``ax.Y`` (targets): no role.

Lengths start unset: set them (`ax.N.length = 32`) or let fed data bind them.
These axes are shared by everything that imports them, so a program that
needs other lengths side by side makes its own axes with the same roles:
``ng.make_axis(28, name="H", roles=[ar.Height])``.
"""
from ...axes import make_axis, make_axis_role, make_name_scope

ar = make_name_scope(name="ar")
ar.Height = make_axis_role()
ar.Width = make_axis_role()
ar.Depth = make_axis_role()
ar.Channel = make_axis_role()
ar.Channelout = make_axis_role()
ar.Time = make_axis_role()

ax = make_name_scope(name="ax")
ax.N = make_axis(batch=True, docstring="minibatch size")
ax.C = make_axis(roles=[ar.Channel], docstring="number of input feature maps")
ax.D = make_axis(roles=[ar.Depth], docstring="input image depth")
ax.H = make_axis(roles=[ar.Height], docstring="input image height")
ax.W = make_axis(roles=[ar.Width], docstring="input image width")

ax.R = make_axis(roles=[ar.Height], docstring="filter height")
ax.S = make_axis(roles=[ar.Width], docstring="filter width")
ax.T = make_axis(roles=[ar.Depth], docstring="filter depth")
ax.J = make_axis(roles=[ar.Channel], docstring="filter channel size (for crossmap pooling)")
ax.K = make_axis(roles=[ar.Channelout], docstring="number of output feature maps")

ax.M = make_axis(roles=[ar.Depth], docstring="output image depth")
ax.P = make_axis(roles=[ar.Height], docstring="output image height")
ax.Q = make_axis(roles=[ar.Width], docstring="output image width")

ax.REC = make_axis(roles=[ar.Time], recurrent=True, docstring="recurrent axis")

ax.Y = make_axis(docstring="target")

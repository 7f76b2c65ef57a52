"""Axon programs: an MLP, a convolution layer, an RNN as a fold, attention over a symbolic
sequence length, and training the MLP on digits. Each infers every shape from its
inputs' annotations alone, then runs (`python -m examples.axon.mlp`, ...)."""

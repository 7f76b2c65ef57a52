"""The JAX transformer's package (sharding by axis identity lives in `sharding`)."""

"""Helpers the tests and the benchmarks use beside the stack (extra clusters, a paused sensor): kept out of the
product packages, which never import them."""

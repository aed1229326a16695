"""Profiling: measuring modes (the profiler, the user script under the probe), the session store,
and the planners that choose which modes to measure."""

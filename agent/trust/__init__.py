"""Outside content as data: the wrapper that marks it (untrusted) and the run's taint once it came in."""

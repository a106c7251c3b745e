"""Where drift and "done" are decided: drift control and restore, the completeness check, open task steps, structured model answers and the run view they read."""

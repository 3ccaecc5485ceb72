"""Speed measurements of the testbed (`mrc-testbed bench`, or `python -m benchmarks.run`)."""

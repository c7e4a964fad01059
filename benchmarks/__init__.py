"""Benchmarks: `make bench`. They print measurements and ratios against a baseline taken
in the same run; nothing here asserts a time."""

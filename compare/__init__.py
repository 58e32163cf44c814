"""The harness: check every kernel against the reference and each other, time them, plot, inspect."""

"""What every room uses: one-line errors, atomic file writes, a run directory's lock, progress lines, peak memory, a
run's provenance."""

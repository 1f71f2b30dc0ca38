"""What every room uses: one-line errors, atomic file writes, progress lines, peak memory, a run's provenance."""

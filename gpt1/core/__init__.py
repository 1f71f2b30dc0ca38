"""What every package uses: one-line errors, atomic file writes, a run directory's lock, progress lines, peak memory, a
run's provenance and its record of the command that made it, two metrics.json compared figure by figure."""
